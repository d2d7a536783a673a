"""One route per control: an interrupt or a steer a Hermes user gives during a codex turn
reaches codex exactly once — counted on the wire, against the real binary and the real host —
and leaves nothing behind that touches the next turn."""

from __future__ import annotations

import threading
import time

import pytest

from hermes_codex_runtime.offline import provider as mp


@pytest.fixture
def wire(hermes, monkeypatch):
    """The Hermes turns of this test run on a runtime of their own whose app-servers record
    every message the plugin sends (``sent``)."""
    from hermes_codex_runtime.hermes.turn import runtime as runtime_module
    from hermes_codex_runtime.hermes.turn.hooks import HermesHost
    from hermes_codex_runtime.plugins import make_plugin_manager
    from hermes_codex_runtime.pool import ServerPool
    from hermes_codex_runtime.runtime import CodexRuntime
    from hermes_codex_runtime.testing.wire_recorder import RecordingConnection

    connections: list[RecordingConnection] = []

    def spawn(options):
        conn = RecordingConnection.spawn(options)
        connections.append(conn)
        return conn

    runtime = CodexRuntime(make_plugin_manager([HermesHost()], load_entry_points=False),
                           pool=ServerPool(spawn=spawn))
    monkeypatch.setattr(runtime_module, "_runtime", runtime)

    def sent(method):
        return [m for conn in connections for m in conn.sent if m.get("method") == method]

    yield sent
    hermes.close()
    runtime.pool.close()


def wait_for_streaming(hermes, agent, timeout=20.0):
    """True once the agent's codex turn is running and codex has started answering."""
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session = shared_runtime().session_for(agent)
        if session is not None and session.active_turn_id is not None and \
                hermes.provider.requests:
            return True
        time.sleep(0.02)
    return False


def in_the_background(action):
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(action()), daemon=True)
    thread.start()
    return thread, outcome


def test_an_interrupt_during_a_codex_turn_reaches_codex_once(hermes, wire):
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("word " * 300, deltas=300, delta_delay=0.02),
                            mp.text("still here"))
    helper, _ = in_the_background(
        lambda: wait_for_streaming(hermes, agent) and agent.interrupt())
    result = agent.run_conversation("go on and on")
    helper.join(10)
    assert result["interrupted"] is True
    assert len(wire("turn/interrupt")) == 1
    # nothing of the interrupt is left over: the next turn runs, and is not interrupted
    follow_up = agent.run_conversation("still there?", conversation_history=result["messages"])
    assert follow_up["completed"] is True and follow_up["final_response"] == "still here"
    assert len(wire("turn/interrupt")) == 1 and len(wire("turn/start")) == 2


def test_a_steer_during_a_codex_turn_reaches_codex_once(hermes, wire):
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("slow " * 200, deltas=200, delta_delay=0.03),
                            mp.text("Using the blue one, as you said."), mp.text("next"))
    helper, steered = in_the_background(
        lambda: wait_for_streaming(hermes, agent) and agent.steer("use the blue one"))
    result = agent.run_conversation("pick a colour")
    helper.join(10)
    assert steered == [True]
    assert [m["params"]["input"][0]["text"] for m in wire("turn/steer")] == ["use the blue one"]
    follow_up = agent.run_conversation("and now?", conversation_history=result["messages"])
    assert follow_up["completed"] is True
    [second] = [m for m in wire("turn/start")][1:]
    assert "use the blue one" not in str(second["params"]["input"])  # never delivered twice
    assert len(wire("turn/steer")) == 1


def test_a_late_interrupt_the_host_cleared_does_not_stop_the_next_turn(hermes, wire):
    """Hermes' CLI clears an interrupt that landed after the turn had finished (its stale flag
    would abort the next turn): on codex that clears it too — nothing of ours kept a copy."""
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("first"), mp.text("second"))
    first = agent.run_conversation("hello")
    agent.interrupt()  # too late for the first turn
    agent.clear_interrupt()
    second = agent.run_conversation("again", conversation_history=first["messages"])
    assert second["interrupted"] is False and second["final_response"] == "second"
    assert len(wire("turn/start")) == 2 and wire("turn/interrupt") == []
