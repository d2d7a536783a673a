"""Usage limits, dead processes, auth failures and settings, on real AIAgents."""

from __future__ import annotations

import os

import pytest
from support import descendants

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.offline.chat import ChatCompletionsServer


@pytest.fixture
def fallback_server():
    with ChatCompletionsServer() as server:
        yield server


def test_a_usage_limit_completes_the_same_turn_on_the_fallback_provider(hermes,
                                                                        fallback_server):
    hermes.provider.enqueue(mp.usage_limit())
    agent = hermes.agent(fallback_model=[{"provider": "custom", "model": "fake-fb",
                                          "api_key": "fb-key",
                                          "base_url": fallback_server.base_url}])
    result = agent.run_conversation("hello")
    assert result["final_response"] == "fallback answered"
    assert result["completed"] is True
    def turns_on_fallback():  # not the host's own side calls (0.22 titles the session there)
        return [c for c in fallback_server.calls if c["path"] == "/v1/chat/completions"
                and "response_format" not in c["body"]]

    chats = turns_on_fallback()
    assert len(chats) == 1
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]
    stored = [row["role"] for row in agent._session_db.get_messages(agent.session_id)]
    assert stored == ["user", "assistant"]  # the user message is not written twice
    sent = chats[0]["body"]["messages"]
    assert [m["role"] for m in sent if m["role"] == "user"] == ["user"]
    # Counted once, by the provider that answered: codex's refused attempt adds nothing.
    assert (agent.session_api_calls, agent.session_prompt_tokens) == (1, 7)
    codex_asked = len(hermes.provider.requests)
    # The next turn, inside Hermes' rate-limit cooldown, goes straight to the fallback: codex is
    # not asked (and refused) a second time first.
    second = agent.run_conversation("and again", conversation_history=result["messages"])
    assert second["final_response"] == "fallback answered" and second["completed"] is True
    assert len(hermes.provider.requests) == codex_asked
    assert len(turns_on_fallback()) == 2
    # Once the cooldown has passed (Hermes' own clock), the turn is back on codex.
    agent._rate_limited_until = 0
    hermes.provider.enqueue(mp.text("codex again"))
    again = agent.run_conversation("third", conversation_history=second["messages"])
    assert again["final_response"] == "codex again"
    assert agent.api_mode == "codex_app_server"


def test_a_usage_limit_without_fallback_says_how_to_switch(hermes):
    hermes.provider.enqueue(mp.usage_limit())
    result = hermes.agent().run_conversation("hello")
    assert result["completed"] is False and result["partial"] is True
    assert "usage limit" in result["final_response"]
    assert "/codex-runtime auto" in result["final_response"]
    assert "fallback_providers" in result["final_response"]


def test_configured_codex_bin_is_used_and_a_dead_process_is_respawned(hermes, fake_codex):
    hermes.configure(codex_bin=fake_codex.path)
    fake_codex.set_scenario({"turns": [
        [{"message": "partial work"}, {"crash": 7, "crash_stderr": ["boom: segfault"]}],
        [{"message": "back on my feet"}],
    ]})
    agent = hermes.agent()
    first = agent.run_conversation("one")
    assert first["completed"] is False and first["partial"] is True
    assert "/codex-runtime auto" in first["final_response"]
    assert "boom: segfault" in first["error"]
    second = agent.run_conversation("two", conversation_history=first["messages"])
    assert second["completed"] and second["final_response"] == "back on my feet"
    starts = [e for e in fake_codex.log() if e.get("dir") == "start"]
    assert len(starts) == 2  # retired, then respawned
    assert fake_codex.requests("thread/resume")  # the new process resumed the same thread
    fake_codex.assert_wire_clean()


def test_an_auth_failure_asks_for_codex_login(hermes, fake_codex):
    hermes.configure(codex_bin=fake_codex.path)
    fake_codex.set_scenario({"turns": [[{"fail": {"info": "unauthorized",
                                                  "message": "refresh token was already used"}}]]})
    result = hermes.agent().run_conversation("hi")
    assert result["completed"] is False
    assert "codex login" in result["final_response"]


def test_cwd_comes_from_terminal_cwd_in_a_gateway(hermes, fake_codex, tmp_path, monkeypatch):
    gateway_dir = tmp_path / "gateway-cwd"
    gateway_dir.mkdir()
    monkeypatch.setenv("TERMINAL_CWD", str(gateway_dir))
    hermes.configure(codex_bin=fake_codex.path)
    agent = hermes.agent(platform="telegram")
    agent.session_cwd = None
    agent.run_conversation("where am I?")
    [start] = fake_codex.requests("thread/start")
    assert start["params"]["cwd"] == str(gateway_dir)
    assert start["params"]["developerInstructions"] == agent._cached_system_prompt
    assert start["params"]["personality"] == "none"
    fake_codex.assert_wire_clean()


def test_a_bad_setting_is_a_clear_error(hermes):
    hermes.configure(codex_turn_timeout=-3)
    result = hermes.agent().run_conversation("hi")
    assert result["completed"] is False
    assert "model.codex_turn_timeout must be a positive number" in result["final_response"]


def test_a_missing_binary_names_the_setting(hermes, tmp_path):
    hermes.configure(codex_bin=str(tmp_path / "no" / "codex"))
    result = hermes.agent().run_conversation("hi")
    assert result["completed"] is False
    assert "model.codex_bin" in result["final_response"]


def test_the_turn_seam_never_raises_even_when_set_up_fails(hermes, monkeypatch):
    from hermes_codex_runtime.hermes.turn import runtime as runtime_module

    def broken_manager(*args, **kwargs):
        raise RuntimeError("a plugin manager that cannot be built")

    monkeypatch.setattr(runtime_module, "_runtime", None)
    monkeypatch.setattr(runtime_module, "make_plugin_manager", broken_manager)
    result = hermes.agent().run_conversation("hello")
    assert result["failed"] is True and result["completed"] is False
    assert "cannot be built" in result["final_response"]
    assert "/codex-runtime auto" in result["final_response"]


def test_codex_ignoring_its_config_never_sends_to_another_provider(hermes):
    """codex that cannot use config.toml falls back to its defaults — OpenAI, not the provider
    the user chose. Nothing is sent; the user is told which file to fix; no process is left."""
    config = hermes.codex_home / "config.toml"
    config.write_text(config.read_text().replace('wire_api = "responses"', 'wire_api = "chat"'))
    result = hermes.agent().run_conversation("hello")
    assert result["completed"] is False
    answer = result["final_response"]
    assert "config.toml" in answer and "nothing was sent" in answer and "mock" in answer
    assert "wire_api" in answer  # codex's own words about what is wrong
    assert "Install codex" not in answer and "codex_bin" not in answer
    assert hermes.provider.requests == []
    assert descendants(os.getpid(), "app-server") == []


@pytest.mark.parametrize("late", [False, True], ids=["warning-first", "warning-late"])
def test_codex_refusing_a_thread_for_its_config_names_the_file(hermes, fake_codex, late):
    """codex's "Invalid configuration" warning may come after ``initialize`` is answered, and
    then ``thread/start`` fails with "failed to load configuration". Either order gives the same
    answer: the file, codex's words, the provider nothing was sent to."""
    hermes.configure(codex_bin=fake_codex.path)
    refusal = f"failed to load configuration: {hermes.codex_home}/config.toml:11:12: " \
              "`wire_api = \"chat\"` is no longer supported"
    fake_codex.set_scenario({
        "config_warnings": [{"summary": "Invalid configuration; using defaults.",
                             "details": "config.toml:11:12: `wire_api = \"chat\"` is no longer "
                                        "supported"}],
        "config_warnings_late": late, "thread_start": {"error": refusal}})
    result = hermes.agent().run_conversation("hello")
    answer = result["final_response"]
    assert result["completed"] is False
    assert "config.toml" in answer and "nothing was sent" in answer and "'mock'" in answer
    assert "wire_api" in answer and "Install codex" not in answer
    assert fake_codex.requests("turn/start") == []
    fake_codex.assert_wire_clean()


def test_a_codex_config_warning_is_shown_once_per_conversation(hermes, fake_codex, tmp_path):
    """On codex's default provider the turn runs on its defaults, and the user is told once."""
    from hermes_env import write_config

    config = hermes.configure(codex_bin=fake_codex.path)
    home = tmp_path / "codex-home-without-config"  # no config.toml: codex's default provider
    home.mkdir()
    config["model"]["codex_home"] = str(home)
    write_config(hermes.home, config)
    fake_codex.set_scenario({
        "config_warnings": [{"summary": "Invalid configuration; using defaults.",
                             "details": "config.toml:3:1: unknown field `modle`"},
                            {"summary": "Codex could not find bubblewrap on PATH."}],
        "turns": [[{"message": "one"}], [{"message": "two"}]]})
    shown: list[str] = []
    agent = hermes.agent(status_callback=lambda kind, message: shown.append(message))
    first = agent.run_conversation("one")
    agent.run_conversation("two", conversation_history=first["messages"])
    warnings = [m for m in shown if "config.toml" in m]
    assert len(warnings) == 1 and "unknown field `modle`" in warnings[0]
    assert not [m for m in shown if "bubblewrap" in m]  # advice, not a broken config
    fake_codex.assert_wire_clean()


def test_a_config_yaml_broken_mid_session_keeps_codex_turns_on_the_last_good_config(hermes,
                                                                                    capfd):
    """A config.yaml edited into invalid YAML while a gateway runs: the plugin reads config
    through Hermes' loader, so its turns keep the last good settings (codex, its home, its
    approvals) and the user gets Hermes' own warning, instead of silently losing codex."""
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("before"), mp.text("after"))
    first = agent.run_conversation("one")
    (hermes.home / "config.yaml").write_text("model: [unclosed\n  openai_runtime: codex\n")
    capfd.readouterr()
    second = agent.run_conversation("two", conversation_history=first["messages"])
    assert second["final_response"] == "after" and second["completed"] is True
    assert second["codex_thread_id"] == first["codex_thread_id"]
    assert "config.yaml" in capfd.readouterr().err
