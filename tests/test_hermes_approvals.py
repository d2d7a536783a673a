"""codex approvals decided the way Hermes decides its own, per request, on real AIAgents."""

from __future__ import annotations

import pytest
from hermes_env import bind_session_key, unbind_session_key

from hermes_codex_runtime.offline import provider as mp


def run_command_turn(hermes, agent, command="echo approved-output", history=None):
    hermes.provider.enqueue(mp.exec_command(command, escalated=True, justification="needed"),
                            mp.text("finished"))
    result = agent.run_conversation(f"run {command}", conversation_history=history)
    tool = [m for m in result["messages"] if m["role"] == "tool"][-1]  # this turn's
    return result, tool["content"]


@pytest.mark.parametrize("mode", ["off", False])
def test_approvals_off_accepts(hermes, mode):
    hermes.configure(approvals={"mode": mode})
    _, output = run_command_turn(hermes, hermes.agent())
    assert "approved-output" in output


def test_frozen_yolo_accepts(hermes, monkeypatch):
    import tools.approval as approval

    hermes.configure(approvals={"mode": "manual"})
    monkeypatch.setattr(approval, "_YOLO_MODE_FROZEN", True)  # what --yolo sets at import
    _, output = run_command_turn(hermes, hermes.agent())
    assert "approved-output" in output


def test_session_yolo_toggled_mid_session_counts_for_the_next_request(hermes):
    import tools.approval as approval

    hermes.configure(approvals={"mode": "manual"})
    agent = hermes.agent()
    token = bind_session_key(agent.session_id)  # as the CLI binds it
    try:
        first, output = run_command_turn(hermes, agent)
        assert "declined" in output  # manual, and nobody to ask in this context
        approval.enable_session_yolo(agent.session_id)  # the user types /yolo
        try:
            _, output = run_command_turn(hermes, agent, history=first["messages"])
            assert "approved-output" in output
        finally:
            approval.disable_session_yolo(agent.session_id)
    finally:
        unbind_session_key(token)


def test_no_one_to_ask_declines(hermes):
    hermes.configure(approvals={"mode": "manual"})
    _, output = run_command_turn(hermes, hermes.agent())
    assert "declined" in output and "approved-output" not in output


@pytest.mark.parametrize(("choice", "ran"), [("once", True), ("session", True), ("deny", False)])
def test_the_cli_callback_is_asked_and_its_choice_decides(hermes, choice, ran, monkeypatch):
    monkeypatch.setenv("HERMES_INTERACTIVE", "1")  # as Hermes' CLI sets it
    from tools.terminal_tool import set_approval_callback

    hermes.configure(approvals={"mode": "manual"})
    asked = []

    def prompt(command, description, **kwargs):
        asked.append((command, description, kwargs))
        return choice

    set_approval_callback(prompt)
    try:
        _, output = run_command_turn(hermes, hermes.agent())
    finally:
        set_approval_callback(None)
    [(command, description, _kwargs)] = asked
    assert "echo approved-output" in command and "needed" in description
    assert ("approved-output" in output) is ran
    hooks = [h for h in hermes.hooks() if h["hook"].endswith("approval_request")
             or h["hook"] == "post_approval_response"]
    assert [h["hook"] for h in hooks] == ["pre_approval_request", "post_approval_response"]
    assert hooks[1]["choice"] == choice and hooks[0]["surface"] == "cli"


def test_a_file_change_prompt_shows_the_changeset(hermes, monkeypatch):
    monkeypatch.setenv("HERMES_INTERACTIVE", "1")  # as Hermes' CLI sets it
    from tools.terminal_tool import set_approval_callback

    hermes.configure(approvals={"mode": "manual"})
    asked = []
    set_approval_callback(lambda command, description, **kw: asked.append(description) or "once")
    try:
        hermes.provider.enqueue(mp.apply_patch(mp.add_file_patch("plan.md", ["# Plan", "step"])),
                                mp.text("written"))
        result = hermes.agent().run_conversation("write the plan")
    finally:
        set_approval_callback(None)
    assert result["completed"]
    [description] = asked
    assert "plan.md" in description and "# Plan" in description
    assert (hermes.workdir / "plan.md").exists()


@pytest.mark.parametrize(("cron_mode", "ran"), [("approve", True), ("deny", False)])
def test_cron_follows_cron_mode(hermes, cron_mode, ran):
    hermes.configure(approvals={"mode": "manual", "cron_mode": cron_mode})
    _, output = run_command_turn(hermes, hermes.agent(platform="cron"))
    assert ("approved-output" in output) is ran


def test_commands_hermes_never_runs_are_declined_even_with_approvals_off(hermes):
    hermes.configure(approvals={"mode": "off"})
    _, output = run_command_turn(hermes, hermes.agent(), command="rm -rf /")
    assert "declined" in output


def test_user_deny_rules_win_even_with_approvals_off(hermes):
    hermes.configure(approvals={"mode": "off", "deny": ["*echo forbidden*"]})
    _, output = run_command_turn(hermes, hermes.agent(), command="echo forbidden-thing")
    assert "declined" in output and "forbidden-thing\n" not in output


def test_a_gateway_session_without_an_approval_channel_declines(hermes, monkeypatch):
    hermes.configure(approvals={"mode": "manual"})
    monkeypatch.setenv("HERMES_GATEWAY_SESSION", "1")  # a gateway context, no channel registered
    _, output = run_command_turn(hermes, hermes.agent(platform="telegram"))
    assert "declined" in output


def test_a_gateway_prompt_nobody_answers_times_out_to_a_decline(hermes, monkeypatch):
    import tools.approval as approval

    hermes.configure(approvals={"mode": "manual", "timeout": 1})
    monkeypatch.setenv("HERMES_GATEWAY_SESSION", "1")
    agent = hermes.agent(platform="telegram")
    notified = []
    token = bind_session_key(agent.session_id)
    approval.register_gateway_notify(agent.session_id, notified.append)
    try:
        _, output = run_command_turn(hermes, agent)
    finally:
        approval.unregister_gateway_notify(agent.session_id)
        unbind_session_key(token)
    assert notified and "echo approved-output" in notified[0]["command"]  # it was asked
    assert "declined" in output  # ...and nobody answered within approvals.timeout
