"""``/steer`` on a codex turn means what it means on a Hermes turn: the guidance reaches the
running turn (``turn/steer``), or — when codex can't take it — the next turn. Never lost."""

from __future__ import annotations

import threading
import time

from hermes_codex_runtime.offline import provider as mp


def wait_for_active_turn(agent, timeout=20.0):
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session = shared_runtime().session_for(agent)
        if session is not None and session.active_turn_id is not None:
            return True
        time.sleep(0.02)
    return False


def test_a_steer_during_a_codex_turn_reaches_the_running_turn(hermes):
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("slow " * 200, deltas=200, delta_delay=0.03),
                            mp.text("Using the blue one, as you said."))
    steered = []

    def steer_mid_turn():
        if wait_for_active_turn(agent):
            time.sleep(0.3)  # codex is streaming its answer
            steered.append(agent.steer("use the blue one"))

    helper = threading.Thread(target=steer_mid_turn, daemon=True)
    helper.start()
    result = agent.run_conversation("pick a colour")
    helper.join(10)
    assert steered == [True]
    assert hermes.provider.saw_text("use the blue one", role="user")  # codex got it mid-turn
    assert result["final_response"] == "Using the blue one, as you said."
    assert agent._pending_steer is None  # delivered, not left for a later turn


def test_a_steer_no_turn_can_take_is_carried_by_the_next_turn(hermes):
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("first"), mp.text("second"))
    first = agent.run_conversation("hello")
    assert agent.steer("remember: blue")  # no codex turn is running now
    assert agent._pending_steer == "remember: blue"  # kept, as Hermes keeps it
    agent.run_conversation("next", conversation_history=first["messages"])
    last_user = [t for role, t in hermes.provider.request_texts(-1) if role == "user"][-1]
    assert "next" in last_user and "remember: blue" in last_user
    assert agent._pending_steer is None
