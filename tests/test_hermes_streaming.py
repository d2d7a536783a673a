"""What a Hermes user sees while codex works: every streamed character reaches the display, even
when the display lags far behind codex."""

from __future__ import annotations

import threading
import time

from hermes_codex_runtime.offline import provider as mp


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
        from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

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


def test_codex_progress_reaches_hermes_display(hermes):
    """Interim messages go through Hermes' interim-message path, file changes become a status
    line (once per file set), and a command's live output is the agent's current activity while
    it runs."""
    statuses: list[str] = []
    interim: list[str] = []
    activity: list[str] = []
    patch = mp.add_file_patch("notes.txt", ["one", "two"])
    hermes.provider.enqueue(
        mp.said_before("Let me look around first.", mp.exec_command(
            "echo tick-one; sleep 1.5; echo tick-two; sleep 1.5", escalated=True)),
        mp.apply_patch(patch),
        mp.text("All done."))
    agent = hermes.agent(
        status_callback=lambda kind, message: statuses.append(message),
        interim_assistant_callback=lambda text, **_: interim.append(text))
    hermes.configure(approvals={"mode": "off"})
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            activity.append(agent.get_activity_summary()["last_activity_desc"])
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = agent.run_conversation("do the work")
    finally:
        done.set()
        sampler.join(5)
    assert result["final_response"] == "All done."
    assert interim == ["Let me look around first."]
    diff = [s for s in statuses if "codex diff" in s]
    assert diff == ["codex diff: 1 file changed (+2 −0)"]
    assert any("output: tick-" in a for a in activity if a), sorted(set(activity))


def test_plan_updates_become_one_checklist_per_change(hermes):
    """codex's plan tool is on for every thread where Hermes' todo is not offered (it replaces
    it): each real change of the model's plan is a checklist in Hermes' status (one chat
    bubble, keyed ``codex-plan``); a repeat is not."""
    def plan(*statuses):
        steps = [{"step": name, "status": status}
                 for name, status in zip(("look", "write"), statuses, strict=True)]
        return mp.tool_call("update_plan", {"plan": steps})

    hermes.provider.enqueue(plan("in_progress", "pending"), plan("in_progress", "pending"),
                            plan("completed", "in_progress"), mp.text("planned"))
    statuses: list[tuple[str, str]] = []
    agent = hermes.agent(status_callback=lambda kind, message: statuses.append((kind, message)),
                         disabled_toolsets=["todo"])
    assert agent.run_conversation("plan it")["final_response"] == "planned"
    assert [message for kind, message in statuses if kind == "codex-plan"] == [
        "📋 plan 0/2 done\n  ▸ look\n  ○ write", "📋 plan 1/2 done\n  ✓ look\n  ▸ write"]
