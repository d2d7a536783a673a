"""Gateway-grade safety on real AIAgents and the real codex binary: what approval prompts show,
protected places, lapsed prompts withdrawn in Hermes' own gateway queue and CLI, and
``/codex-status`` that never shows another user's session."""

from __future__ import annotations

import os
import threading
import time
import types

import pytest
from hermes_env import bind_session_key, unbind_session_key

from hermes_codex_runtime.offline import provider as mp


def tool_output(result):
    return [m for m in result["messages"] if m["role"] == "tool"][-1]["content"]


@pytest.fixture
def gateway(hermes, monkeypatch):
    """A gateway context for one chat: Hermes' own approval channel, whose prompts are recorded
    (what a chat platform would be sent)."""
    import tools.approval as approval

    monkeypatch.setenv("HERMES_GATEWAY_SESSION", "1")
    agent = hermes.agent(platform="telegram")
    sent = []
    token = bind_session_key(agent.session_id)
    approval.register_gateway_notify(agent.session_id, sent.append)
    yield agent, sent
    approval.unregister_gateway_notify(agent.session_id)
    unbind_session_key(token)


def test_gateway_prompts_are_redacted_and_credential_diffs_hidden(hermes, gateway):
    import tools.approval as approval

    agent, sent = gateway
    hermes.configure(approvals={"mode": "manual", "timeout": 20})
    dotenv_secret = "plainvalue" + os.urandom(6).hex()  # no secret-looking shape at all
    api_key = "sk-proj-" + os.urandom(12).hex()
    patch = ("*** Begin Patch\n*** Add File: .env\n"
             f"+SERVICE_A={dotenv_secret}\n+SERVICE_B=other{dotenv_secret}\n"
             "*** Add File: settings.py\n"
             f'+OPENAI_API_KEY = "{api_key}"\n+DEBUG = True\n*** End Patch\n')
    bearer = "tok" + os.urandom(10).hex()
    hermes.provider.enqueue(mp.apply_patch(patch), mp.text("patched"),
                            mp.exec_command(f"curl -H 'Authorization: Bearer {bearer}' "
                                            "http://127.0.0.1:9/", escalated=True),
                            mp.text("called"))

    def deny_in_chat(data):
        sent.append(dict(data))
        approval.resolve_gateway_approval(agent.session_id, "deny")  # the user says no

    approval.register_gateway_notify(agent.session_id, deny_in_chat)
    first = agent.run_conversation("write the settings")
    agent.run_conversation("call the service", conversation_history=first["messages"])
    assert len(sent) == 2
    shown = "\n".join(f"{p['command']}\n{p['description']}" for p in sent)
    for secret in (dotenv_secret, api_key, bearer):
        assert secret not in shown
    assert "contents hidden" in shown and "settings.py" in shown and "DEBUG = True" in shown
    assert "curl -H 'Authorization: Bearer " in shown  # the command itself is still shown


def test_protected_places_are_never_auto_approved(hermes, monkeypatch):
    """approvals off: a change to Hermes' .env through a symlink is declined; a command that reads
    it through `..` needs a person (and with nobody to ask, is declined)."""
    hermes.configure(approvals={"mode": "off"})
    link = hermes.workdir / "home-link"
    link.symlink_to(hermes.home, target_is_directory=True)
    env_file = hermes.home / ".env"
    before = env_file.read_text() if env_file.exists() else None
    hermes.provider.enqueue(
        mp.apply_patch(mp.add_file_patch("home-link/.env.new", ["X=1"])), mp.text("one"),
        mp.exec_command("cat sub/../home-link/config.yaml", escalated=True), mp.text("two"),
        mp.exec_command("echo fine-to-run", escalated=True), mp.text("three"))
    (hermes.workdir / "sub").mkdir()
    agent = hermes.agent()
    first = agent.run_conversation("change the env")
    second = agent.run_conversation("read the config", conversation_history=first["messages"])
    third = agent.run_conversation("run it", conversation_history=second["messages"])
    assert not (hermes.home / ".env.new").exists()
    assert "declined" in tool_output(second) and "openai_runtime" not in tool_output(second)
    assert "fine-to-run" in tool_output(third)  # approvals off still accepts the rest
    assert (env_file.read_text() if env_file.exists() else None) == before


def test_a_person_may_allow_a_protected_command_once_but_it_is_never_remembered(hermes,
                                                                               monkeypatch):
    monkeypatch.setenv("HERMES_INTERACTIVE", "1")  # as Hermes' CLI sets it
    from tools.terminal_tool import set_approval_callback

    hermes.configure(approvals={"mode": "off"})
    asked = []
    set_approval_callback(lambda command, description, **kw: asked.append(description)
                          or "session")
    command = f"cat {hermes.home}/config.yaml"
    try:
        hermes.provider.enqueue(mp.exec_command(command, escalated=True), mp.text("a"),
                                mp.exec_command(command, escalated=True), mp.text("b"))
        agent = hermes.agent()
        first = agent.run_conversation("read it")
        agent.run_conversation("again", conversation_history=first["messages"])
    finally:
        set_approval_callback(None)
    assert len(asked) == 2  # "session" did not stick for a protected place
    assert "approve only if you meant it" in asked[0]
    assert "openai_runtime" in tool_output(first)


def test_an_interrupted_turn_withdraws_its_gateway_prompt_and_the_next_approve_counts(
        hermes, gateway):
    import tools.approval as approval

    agent, sent = gateway
    hermes.configure(approvals={"mode": "manual", "timeout": 60})
    hermes.provider.enqueue(mp.exec_command("echo first-command", escalated=True))

    def stop_when_asked():
        deadline = time.monotonic() + 30
        while not sent and time.monotonic() < deadline:
            time.sleep(0.02)
        agent.interrupt("/stop")

    threading.Thread(target=stop_when_asked, daemon=True).start()
    started = time.monotonic()
    first = agent.run_conversation("run the first")
    assert time.monotonic() - started < 15
    assert first["interrupted"] or not first["completed"]
    assert not approval.has_blocking_approval(agent.session_id)  # nothing stale is pending
    assert "first-command" in sent[0]["command"]

    def approve_when_asked():
        deadline = time.monotonic() + 30
        while len(sent) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert approval.resolve_gateway_approval(agent.session_id, "once") == 1

    hermes.provider.clear()
    hermes.provider.enqueue(mp.exec_command("echo second-command", escalated=True),
                            mp.text("second done"))
    helper = threading.Thread(target=approve_when_asked, daemon=True)
    helper.start()
    second = agent.run_conversation("run the second", conversation_history=first["messages"])
    helper.join(10)
    assert "second-command" in sent[1]["command"]
    assert "second-command" in tool_output(second)  # ONE /approve answered the right question
    hooks = [h for h in hermes.hooks() if h["hook"] == "post_approval_response"]
    # the lapsed prompt ends as a denial (0.19.0) or, through the host's own withdrawal, as
    # "cancelled" — never as the user's answer
    assert [h["choice"] for h in hooks] in (["deny", "once"], ["cancelled", "once"])


def test_an_interrupted_turn_dismisses_its_cli_prompt(hermes, monkeypatch):
    monkeypatch.setenv("HERMES_INTERACTIVE", "1")  # as Hermes' CLI sets it
    import cli as hermes_cli_app
    from tools.terminal_tool import set_approval_callback

    hermes.configure(approvals={"mode": "manual", "timeout": 60})
    app = hermes_cli_app.HermesCLI()
    # its interactive application, running as in `hermes chat` (never under `-q`)
    app._app = types.SimpleNamespace(invalidate=lambda: None)
    set_approval_callback(app._approval_callback)  # what the interactive CLI installs
    agent = hermes.agent()
    hermes.provider.enqueue(mp.exec_command("echo never-run", escalated=True), mp.text("x"))

    def stop_when_prompted():
        deadline = time.monotonic() + 30
        while app._approval_state is None and time.monotonic() < deadline:
            time.sleep(0.02)
        agent.interrupt()

    threading.Thread(target=stop_when_prompted, daemon=True).start()
    try:
        started = time.monotonic()
        agent.run_conversation("run it")

        def answered():
            return [h["choice"] for h in hermes.hooks() if h["hook"] == "post_approval_response"]

        deadline = time.monotonic() + 5
        while (app._approval_state is not None or not answered()) and \
                time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        set_approval_callback(None)
    assert app._approval_state is None  # the prompt is gone, not waiting for the 60 s timeout
    assert answered() == ["deny"]
    assert time.monotonic() - started < 15


def test_codex_status_never_shows_another_users_session(hermes_base):

    from hermes_codex_runtime.hermes.commands.slash import _codex_status_command
    from hermes_codex_runtime.hermes.turn.runtime import remember_agent

    class Agent:
        api_mode = "codex_app_server"
        session_prompt_tokens = 12345

    alice, bob = Agent(), Agent()
    remember_agent(alice, "telegram:alice")
    remember_agent(bob, "telegram:bob")
    for key, expected in (("telegram:alice", True), ("telegram:carol", False), ("", False)):
        token = bind_session_key(key)
        try:
            text = _codex_status_command("")
        finally:
            unbind_session_key(token)
        assert ("12345" in text) is expected, (key, text)


def test_a_declined_command_is_logged_redacted(hermes, caplog):
    hermes.configure(approvals={"mode": "off"})
    secret = "sk-proj-" + os.urandom(12).hex()
    hermes.provider.enqueue(mp.exec_command(f"rm -rf / --api-key={secret}", escalated=True),
                            mp.text("no"))
    with caplog.at_level("WARNING", logger="hermes_codex_runtime.hermes"):
        result = hermes.agent().run_conversation("wipe it")
    assert "declined" in tool_output(result)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "declined a command Hermes never runs" in logged
    assert secret not in logged
