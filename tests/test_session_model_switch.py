"""``/model`` in a running session, on Hermes' real CLI object (``HermesCLI``): its
``_handle_model_switch``, then its next message through ``chat`` — which re-resolves the runtime
from what the switch left (explicit base URL and key), rebuilds the agent when the route changed,
and runs the turn. A switch to a codex model or provider keeps the session on codex; a switch to
a provider codex does not run sends the turn to that provider."""

from __future__ import annotations

import json
import time

import pytest

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.offline.provider import MockResponsesProvider


@pytest.fixture
def other_provider():
    """Another provider of the user's — a named custom endpoint Hermes itself talks to (the
    Responses API, on 127.0.0.1)."""
    with MockResponsesProvider(default=mp.text("the other provider answers")) as provider:
        yield provider


@pytest.fixture
def session(hermes, other_provider, monkeypatch):
    """Hermes' interactive CLI object on the plugin's home, the other provider configured."""
    # cli imported before config.yaml changes: it keeps the config it was first imported with
    # (``cli.CLI_CONFIG``), and other tests' CLIs stay on the base one
    import cli
    from hermes_env import base_config, write_config

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = base_config(codex_home=str(hermes.codex_home), codex_turn_timeout=60)
    config["custom_providers"] = [{"name": "local", "base_url": other_provider.base_url,
                                   "model": "local-model", "api_key": "other-key",
                                   "api_mode": "codex_responses"}]
    # a turn that goes the wrong way fails after one attempt, not three with back-off
    config["agent"] = {"api_max_retries": 1}
    write_config(hermes.home, config)
    monkeypatch.chdir(hermes.workdir)
    app = Session(cli.HermesCLI(), hermes.provider, other_provider)
    yield app
    app.close()


class Session:
    """The CLI, and what each of its messages reached: codex (its mock provider) or the other
    provider."""

    def __init__(self, cli, codex, other):
        self.cli = cli
        self.codex = codex
        self.other = other
        self.agents = []

    def say(self, message: str) -> dict:
        seen = len(self.codex.requests), len(self.other.requests)
        answer = self.cli.chat(message)
        agent = self.cli.agent
        if agent is not None and agent not in self.agents:
            self.agents.append(agent)
        return {"answer": answer,
                "api_mode": getattr(agent, "api_mode", None),
                "codex": self.codex.requests[seen[0]:],
                "other": self.other.requests[seen[1]:]}

    def switch(self, command: str) -> None:
        self.cli._handle_model_switch(command)

    def close(self) -> None:
        for agent in self.agents:
            agent.close()


def _on_codex(turn: dict, model: str, answer: str) -> None:
    assert turn["api_mode"] == "codex_app_server", turn["answer"]
    assert [r["model"] for r in turn["codex"]] == [model], turn["answer"]
    assert turn["other"] == []
    assert turn["answer"] == answer


def test_the_turn_after_switching_to_another_codex_model_runs_on_codex(session, hermes):
    hermes.provider.enqueue(mp.text("first answer"), mp.text("answered by gpt-5.5"))
    _on_codex(session.say("hello"), "mock-model", "first answer")

    session.switch("/model gpt-5.5")
    turn = session.say("and now?")

    _on_codex(turn, "gpt-5.5", "answered by gpt-5.5")
    # the same conversation: what codex answered before the switch is in what it sees now
    assert "first answer" in json.dumps(turn["codex"][0]["input"])


def test_a_switch_to_another_provider_goes_there_and_back_returns_to_codex(session, hermes):
    hermes.provider.enqueue(mp.text("codex before"), mp.text("codex again"))
    _on_codex(session.say("hello"), "mock-model", "codex before")

    session.switch("/model local-model --provider custom:local")
    away = session.say("over there?")
    assert away["codex"] == [], away["answer"]
    assert [r["model"] for r in away["other"]] == ["local-model"]
    assert away["api_mode"] != "codex_app_server"
    assert away["answer"] == "the other provider answers"

    session.switch("/model mock-model --provider openai-codex")
    back = session.say("back on codex?")
    _on_codex(back, "mock-model", "codex again")
    # the turn the other provider answered reaches codex, once, in its place
    seen = json.dumps(back["codex"][0]["input"])
    assert seen.count("over there?") == 1 and seen.count("the other provider answers") == 1
    assert seen.index("codex before") < seen.index("over there?") < seen.index("back on codex?")


def test_new_after_a_session_only_switch_runs_the_configured_model_on_codex(session, hermes):
    """``/new`` drops a session-only switch by switching back to config.yaml's model."""
    hermes.provider.enqueue(mp.text("on gpt-5.5"), mp.text("on the configured model"))
    session.switch("/model gpt-5.5")
    _on_codex(session.say("hello"), "gpt-5.5", "on gpt-5.5")

    session.cli.new_session(silent=True)
    _on_codex(session.say("a new session"), "mock-model", "on the configured model")


def test_a_switch_on_an_api_openai_com_route_stays_on_codex(hermes, monkeypatch):
    """With a Hermes-side OpenAI key, ``/model`` on ``openai-api`` resolves to api.openai.com,
    whose wire protocol 0.19.0 mandates over the resolver's answer. The gateway applies the
    switch's api_mode as it is, and ``--global`` saves it: it must stay the codex runtime."""
    from hermes_cli.model_switch import switch_model

    monkeypatch.setenv("OPENAI_API_KEY", "sk-hermes-side-key")
    hermes.configure(provider="openai-api")
    result = switch_model(raw_input="gpt-5.5", current_provider="openai-api",
                          current_model="mock-model")
    assert result.success, result.error_message
    assert result.api_mode == "codex_app_server"
    assert result.target_provider == "openai-api"


def test_only_the_runtime_a_switch_was_given_comes_back_on_codex(hermes, monkeypatch):
    """The CLI resolves the runtime of a switch again for every message, as explicit
    credentials: recognised by its route and key — a fallback entry on the same route with a
    key of its own stays Hermes' own."""
    from hermes_cli.model_switch import switch_model
    from hermes_cli.runtime_provider import resolve_runtime_provider

    monkeypatch.setenv("OPENAI_API_KEY", "sk-hermes-side-key")
    hermes.configure(provider="openai-codex")
    switched = switch_model(raw_input="gpt-5.5", current_provider="openai-codex",
                            current_model="mock-model", explicit_provider="openai-api")
    assert switched.api_mode == "codex_app_server"
    again = resolve_runtime_provider(requested="openai-api", explicit_api_key=switched.api_key,
                                     explicit_base_url=switched.base_url)
    assert again["api_mode"] == "codex_app_server"
    fallback = resolve_runtime_provider(requested="openai-api",
                                        explicit_api_key="sk-fallback-key",
                                        explicit_base_url=switched.base_url)
    assert fallback["api_mode"] != "codex_app_server"


@pytest.mark.real_hermes
def test_in_the_interactive_cli_the_message_after_model_reaches_codex(tmp_path, codex_binary,
                                                                       mock_provider):
    """As the issue was seen: ``hermes chat`` in a terminal, a message, ``/model gpt-5.5``, and
    the next message answered by codex."""
    from hermes_env import HERMES, base_config, hermes_env, write_hermes_home
    from tmux import Tmux

    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    home = tmp_path / "hermes-home"
    config = base_config(codex_home=str(codex_home), codex_turn_timeout=60)
    config["agent"] = {"api_max_retries": 1}
    write_hermes_home(home, config)
    mock_provider.enqueue(mp.text("ANSWER-ONE"), mp.text("ANSWER-TWO"))
    tmux = Tmux([HERMES, "chat"], hermes_env(home, CODEX_BIN=str(codex_binary.path)), tmp_path)
    try:
        tmux.wait_for("Type your message")
        tmux.say("hello")
        tmux.wait_for("ANSWER-ONE")
        tmux.say("/model gpt-5.5")
        # the confirmation: its words on 0.19.0, its bare message key on the 0.22 line
        _shown(tmux, "Model switched", "model.switched")
        tmux.say("and now?")
        screen = _shown(tmux, "ANSWER-TWO", "API call failed")
        tmux.keys("/exit", "Enter")
    finally:
        tmux.close()
    assert "ANSWER-TWO" in screen and "API call failed" not in screen, screen
    assert [r["model"] for r in mock_provider.requests] == ["mock-model", "gpt-5.5"]


def _shown(tmux, *needles: str, timeout: float = 60.0) -> str:
    """The screen once any of ``needles`` is on it."""
    deadline = time.monotonic() + timeout
    while True:
        screen = tmux.screen()
        if any(needle in screen for needle in needles):
            return screen
        assert time.monotonic() < deadline, f"none of {needles} appeared:\n{screen}"
        time.sleep(0.2)
