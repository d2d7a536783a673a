"""``model.openai_runtime: codex_app_server`` takes effect on Hermes' real resolver (the one
every AIAgent construction site calls), for every provider spelling and credential path."""

from __future__ import annotations

import pytest


@pytest.fixture
def resolve(hermes_base):
    import hermes_cli.runtime_provider as runtime_provider

    from hermes_codex_runtime.hermes.symbols.patch import is_ours

    assert is_ours(runtime_provider.resolve_runtime_provider)
    return runtime_provider.resolve_runtime_provider


def configure(home, **model):
    from hermes_env import base_config, write_config

    config = base_config(**model)
    write_config(home, config)


@pytest.mark.parametrize("provider", ["openai-codex", "openai", "openai-api"])
def test_the_runtime_takes_effect_without_a_hermes_side_codex_login(hermes_base, resolve,
                                                                     monkeypatch, provider):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    configure(hermes_base, provider=provider)
    runtime = resolve(requested=provider)
    assert runtime["api_mode"] == "codex_app_server"
    assert runtime["api_key"]  # AIAgent needs one; codex authenticates on its own


def test_api_mode_set_directly_is_honoured(hermes_base, resolve):
    configure(hermes_base, provider="custom", base_url="http://127.0.0.1:9/v1",
              api_key="dummy-key", openai_runtime="auto", api_mode="codex_app_server")
    assert resolve()["api_mode"] == "codex_app_server"


def test_auto_leaves_hermes_alone(hermes_base, resolve):
    configure(hermes_base, provider="custom", base_url="http://127.0.0.1:9/v1",
              api_key="dummy-key", openai_runtime="auto")
    assert resolve()["api_mode"] != "codex_app_server"


def test_fallback_entries_keep_their_own_api_mode(hermes_base, resolve):
    configure(hermes_base, provider="openai-codex")
    runtime = resolve(requested="custom", explicit_base_url="http://127.0.0.1:9/v1",
                      explicit_api_key="fb-key")
    assert runtime["api_mode"] != "codex_app_server"


def test_a_malformed_setting_keeps_the_runtime_off_with_a_message(hermes_base, resolve, caplog,
                                                                   capfd):
    configure(hermes_base, provider="custom", base_url="http://127.0.0.1:9/v1",
              api_key="dummy-key", openai_runtime=5)
    capfd.readouterr()
    with caplog.at_level("WARNING", logger="hermes_codex_runtime.hermes"):
        runtime = resolve()
        resolve()  # every AIAgent construction resolves: the user is told once
    assert runtime["api_mode"] != "codex_app_server"
    assert "model.openai_runtime must be a string" in caplog.text
    shown = capfd.readouterr().err  # where a CLI user (or a service's journal) sees it
    assert shown.count("model.openai_runtime must be a string") == 1
    assert "stays off" in shown


def test_an_agent_built_like_the_cli_builds_it_runs_on_codex(hermes, monkeypatch):
    """The CLI's own construction path: resolve the runtime, then AIAgent(**runtime)."""
    import run_agent
    from hermes_cli.runtime_provider import resolve_runtime_provider

    from hermes_codex_runtime.offline import provider as mp

    runtime = resolve_runtime_provider(requested="openai-codex")
    hermes.provider.enqueue(mp.text("activated"))
    agent = run_agent.AIAgent(model="mock-model", provider=runtime["provider"],
                              api_mode=runtime["api_mode"], api_key=runtime["api_key"],
                              base_url=runtime["base_url"], quiet_mode=True, skip_memory=True,
                              skip_context_files=True, session_db=hermes.session_db())
    hermes.agents.append(agent)
    result = agent.run_conversation("are you codex?")
    assert result["final_response"] == "activated" and result["codex_thread_id"]


@pytest.mark.parametrize(("provider", "route"),
                         [("openai-codex", "https://chatgpt.com/backend-api/codex"),
                          ("openai-api", "https://api.openai.com/v1")])
def test_the_runtime_reports_the_providers_own_route_so_context_length_holds(
        hermes, monkeypatch, provider, route):
    """Hermes (the 0.22 line) honours ``model.context_length`` only on the configured
    provider's own default route: the runtime reports that route as its base URL."""
    import run_agent
    from hermes_cli.runtime_provider import resolve_runtime_provider

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    hermes.configure(provider=provider, context_length=123456)
    runtime = resolve_runtime_provider(requested=provider)
    assert runtime["base_url"] == route
    agent = run_agent.AIAgent(model="mock-model", provider=runtime["provider"],
                              api_mode=runtime["api_mode"], api_key=runtime["api_key"],
                              base_url=runtime["base_url"], quiet_mode=True, skip_memory=True,
                              skip_context_files=True, session_db=hermes.session_db())
    hermes.agents.append(agent)
    assert agent.context_compressor.context_length == 123456


def _hermes_codex_login(home):
    """A Hermes-side codex login (auth.json) with an unexpired, unsigned token."""
    import base64
    import json
    import time

    def b64(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    token = b64({"alg": "none"}) + "." + b64({
        "exp": int(time.time()) + 10 * 86400,
        "https://api.openai.com/auth": {"chatgpt_account_id": "acct"}}) + ".sig"
    (home / "auth.json").write_text(json.dumps({
        "version": 1, "active_provider": "openai-codex",
        "providers": {"openai-codex": {"tokens": {"access_token": token,
                                                  "refresh_token": "rt-dummy"},
                                       "last_refresh": "2026-01-01T00:00:00Z",
                                       "auth_mode": "chatgpt"}}}))


@pytest.mark.parametrize("runtime_setting", ["codex_app_server", "auto"])
def test_with_a_hermes_codex_login_the_setting_decides(hermes_base, resolve, runtime_setting):
    """The credential-pool path (a Hermes-side login): codex only when asked for."""
    _hermes_codex_login(hermes_base)
    try:
        configure(hermes_base, provider="openai-codex", openai_runtime=runtime_setting)
        runtime = resolve(requested="openai-codex")
    finally:
        (hermes_base / "auth.json").unlink()
    expected = "codex_app_server" if runtime_setting == "codex_app_server" else "codex_responses"
    assert runtime["api_mode"] == expected
