"""What a Hermes user sees while codex works: every streamed character reaches the display, even
when the display lags far behind codex."""

from __future__ import annotations

import time

from hermes_codex_runtime.testing import mock_provider as mp


def test_a_50000_delta_flood_reaches_the_stream_callback_whole(hermes):
    agent = hermes.agent()
    text = "".join(f"w{i} " for i in range(50_000))
    hermes.provider.enqueue(mp.text(text, deltas=50_000))
    shown: list[str] = []

    def lagging_display(delta):
        if not shown:
            time.sleep(2.0)  # a slow terminal or chat edit: codex runs far ahead meanwhile
        shown.append(delta)

    result = agent.run_conversation("flood me", stream_callback=lagging_display)
    assert result["final_response"] == text
    delivered = "".join(shown)
    assert len(delivered) == len(text) and delivered == text
    print(f"\n{len(text):,} characters in 50,000 deltas: {len(shown)} display calls, "
          f"{len(delivered):,} characters delivered")


def test_a_long_quiet_codex_turn_keeps_the_agents_activity_clock_ticking(hermes):
    """The gateway's inactivity watchdog reads ``get_activity_summary()``: a codex turn whose
    model thinks for 8 s (no output at all) must never look idle for more than a few seconds."""
    import threading

    agent = hermes.agent()
    hermes.provider.enqueue(mp.exec_command("echo step"), mp.text("done", delay=8.0))
    idle: list[float] = []
    stop = threading.Event()

    def watchdog():
        from hermes_codex_runtime.hermes.turn import shared_runtime

        while not stop.wait(0.2):
            session = shared_runtime().session_for(agent)
            if session is not None and session.active_turn_id is not None:  # codex is working
                idle.append(agent.get_activity_summary()["seconds_since_activity"])

    watcher = threading.Thread(target=watchdog, daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        result = agent.run_conversation("work quietly")
    finally:
        stop.set()
        watcher.join(5)
    assert result["final_response"] == "done"
    assert time.monotonic() - started >= 8.0 and len(idle) >= 10  # it watched a long turn
    assert max(idle) < 5.0, idle  # heartbeats every 2 s
