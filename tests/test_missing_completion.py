"""A turn whose ``turn/completed`` never comes (codex #35810, #28495) is completed from codex's
record of it, well before the turn budget: against the fake app-server (the real binary will
not drop it on demand), and on the real binary, whose normal turns are unchanged."""

from __future__ import annotations

import time

import pytest
from support import Agent, RecordingHost, shut_down

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.plugins import make_plugin_manager
from hermes_codex_runtime.runtime import CodexRuntime
from hermes_codex_runtime.session import SessionSettings, recovery

#: The turn budget of these tests: a turn that waited for its turn/completed would fail at it.
BUDGET = 60.0
USAGE = {"usage": {"input": 120, "cached": 20, "output": 30}}


@pytest.fixture
def fake_runtime(fake_codex, tmp_path):
    runtimes = []

    def make(scenario):
        fake_codex.set_scenario(scenario)
        settings = SessionSettings(codex_bin=fake_codex.path, cwd=str(tmp_path),
                                   turn_timeout=BUDGET, control_timeout=2.0)
        runtime = CodexRuntime(make_plugin_manager([RecordingHost(settings)]))
        runtimes.append(runtime)
        return runtime

    yield make
    for runtime in runtimes:
        shut_down(runtime)


def timed_turn(runtime, agent, text="go"):
    started = time.monotonic()
    turn = runtime.run_turn(agent, text)
    return turn, time.monotonic() - started


def test_a_turn_completed_that_never_comes_is_completed_from_codexs_record(fake_runtime,
                                                                         fake_codex):
    runtime = fake_runtime({"turns": [[
        {"command": "ls", "approval": False}, USAGE, {"message": "Here it is."},
        {"lost_completion": {}},
    ], [{"message": "and on"}]]})
    agent = Agent()
    turn, seconds = timed_turn(runtime, agent)
    assert seconds < 10  # within 10 s of the thread going idle, not at the 60 s budget
    assert turn.ok, turn.error
    assert turn.status == "completed" and turn.final_text == "Here it is."
    assert [m["role"] for m in turn.messages] == ["assistant", "tool", "assistant"]
    assert turn.usage is not None and turn.usage.turn.prompt_tokens == 120
    assert turn.usage.turn.cached_tokens == 20 and turn.usage.turn.output_tokens == 30
    assert not turn.should_retire  # codex is fine: the session carries on
    after = runtime.run_turn(agent, "next")
    assert after.ok and after.final_text == "and on" and after.thread_id == turn.thread_id
    assert len(fake_codex.requests("thread/turns/list")) == 1
    fake_codex.assert_wire_clean()


def test_what_codex_recorded_but_never_streamed_is_the_answer(fake_runtime, fake_codex):
    runtime = fake_runtime({"turns": [[{"lost_completion": {"unsent": [
        {"type": "agentMessage", "id": "msg_unsent", "text": "Recorded, never streamed."}]}}]]})
    turn, seconds = timed_turn(runtime, Agent())
    assert seconds < 10 and turn.ok
    assert turn.final_text == "Recorded, never streamed."
    fake_codex.assert_wire_clean()


def test_a_late_turn_completed_never_ends_the_next_turn(fake_runtime, fake_codex):
    """The lost turn/completed arrives after all — during the next turn — and is ignored."""
    runtime = fake_runtime({"turns": [
        [{"message": "first"}, {"lost_completion": {"after": 4.0}}],
        [{"sleep": 5.0}, {"message": "second"}],
    ]})
    agent = Agent()
    first, seconds = timed_turn(runtime, agent)
    assert seconds < 4 and first.ok and first.final_text == "first"
    second, seconds = timed_turn(runtime, agent)
    assert second.ok and second.final_text == "second"
    assert seconds >= 5  # it ran to its own end, not to the first turn's late completion
    fake_codex.assert_wire_clean()


def test_a_turn_completed_right_behind_the_idle_thread_is_taken_as_it_comes(fake_runtime,
                                                                           fake_codex):
    runtime = fake_runtime({"turns": [[{"message": "done"},
                                       {"lost_completion": {"after": 0.5}}]]})
    turn, seconds = timed_turn(runtime, Agent())
    assert turn.ok and turn.final_text == "done" and seconds < recovery.IDLE_GRACE + 1
    assert fake_codex.requests("thread/turns/list") == []  # its own turn/completed ended it
    fake_codex.assert_wire_clean()


def test_a_turn_that_ends_without_a_word_is_found_ended_after_a_silence(fake_runtime,
                                                                       fake_codex,
                                                                       monkeypatch):
    monkeypatch.setattr(recovery, "QUIET_PROBE", 2.0)
    runtime = fake_runtime({"turns": [[{"message": "quietly"},
                                       {"lost_completion": {"idle": False}}]]})
    turn, seconds = timed_turn(runtime, Agent())
    assert turn.ok and turn.final_text == "quietly" and seconds < 10
    fake_codex.assert_wire_clean()


def test_a_turn_still_running_in_codexs_record_is_waited_for(fake_runtime, fake_codex,
                                                             monkeypatch):
    """Silence alone is no ending: a long quiet step (a slow model) outlasts several reads of
    the record and still ends on its own turn/completed."""
    monkeypatch.setattr(recovery, "QUIET_PROBE", 1.0)
    runtime = fake_runtime({"turns": [[{"sleep": 3.5}, {"message": "slow but sure"}]]})
    turn, _seconds = timed_turn(runtime, Agent())
    assert turn.ok and turn.final_text == "slow but sure"
    assert len(fake_codex.requests("thread/turns/list")) >= 2
    fake_codex.assert_wire_clean()


def test_the_real_binarys_turns_end_on_their_own_turn_completed(make_runtime, mock_provider):
    mock_provider.enqueue(mp.exec_command("echo hi", escalated=True), mp.text("ran it"),
                          mp.text("plain"))
    from hermes_codex_runtime.protocol import Decision

    runtime, _host = make_runtime(decide=lambda request: Decision.ACCEPT)
    agent = Agent()
    tool_turn = runtime.run_turn(agent, "run it")
    plain = runtime.run_turn(agent, "hello")
    assert tool_turn.ok and tool_turn.final_text == "ran it"
    assert plain.ok and plain.final_text == "plain"
    [conn] = make_runtime.connections
    assert conn.notifications["thread/status/changed"] >= 4  # active and idle per turn
    assert not [m for m in conn.sent if m.get("method") == "thread/turns/list"]
