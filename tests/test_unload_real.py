"""A codex thread is loaded only while something needs it, on the REAL codex binary and the mock
provider: an idle session's thread is unloaded and resumed on its next turn, a parked or
finished session's thread leaves codex at once (another process may resume it), and a session's
connection is spared the notifications the runtime never reads."""

from __future__ import annotations

import json
import threading
import time

from support import Agent, alive, wait_for

from hermes_codex_runtime.continuity import Binding
from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.pool import SHARED, Placement, PoolLimits
from hermes_codex_runtime.protocol import UNUSED_NOTIFICATIONS
from hermes_codex_runtime.session import SessionSettings


def settings_for(make_runtime, limits: PoolLimits) -> SessionSettings:
    return SessionSettings(**make_runtime.settings_defaults, cwd=str(make_runtime.workdir),
                           turn_timeout=60.0, app_server=Placement(SHARED, limits=limits))


def loaded_threads(conn) -> list[str]:
    return conn.request("thread/loaded/list", {}, timeout=10)["data"]


def echo(body):
    last = body.get("input", [])[-1] if body.get("input") else {}
    text = next((p["text"] for p in last.get("content") or () if isinstance(p, dict)
                 and isinstance(p.get("text"), str)), "")
    return mp.text(f"echo: {text}", delay=1.5 if "slow" in text else 0.0)


def test_an_idle_sessions_thread_is_unloaded_and_its_next_turn_resumes_it(make_runtime,
                                                                        mock_provider):
    mock_provider.set_default(echo)
    runtime, _host = make_runtime(settings_for(make_runtime, PoolLimits(idle_thread=0.3)),
                                  per_agent=True)
    agent = Agent("idle")
    first = runtime.run_turn(agent, "hello one")
    assert first.ok
    [conn] = make_runtime.connections
    assert wait_for(lambda: loaded_threads(conn) == [], timeout=10)
    assert alive(conn.pid)  # the session keeps its seat on the process
    second = runtime.run_turn(agent, "hello two")
    assert second.ok and second.final_text == "echo: hello two"
    assert second.thread_origin == "resumed" and second.thread_id == first.thread_id
    assert "hello one" in json.dumps(mock_provider.requests[-1]["input"])  # its history
    # the resume replays the previous turn's usage: it is not counted for this turn
    assert second.usage is not None and first.usage is not None
    assert second.usage.responses == 1 and second.usage.turn == first.usage.turn
    assert len(make_runtime.connections) == 1


def test_a_parked_session_unloads_its_thread_while_the_process_serves_others(make_runtime,
                                                                           mock_provider):
    mock_provider.set_default(echo)
    limits = PoolLimits(idle_session=0.5, idle_thread=0)  # parking only
    runtime, _host = make_runtime(settings_for(make_runtime, limits), per_agent=True)
    sleepy, busy = Agent("sleepy"), Agent("busy")
    parked = runtime.run_turn(sleepy, "hello sleepy")
    assert parked.ok
    [conn] = make_runtime.connections
    outcome: dict[str, object] = {}

    def keep_busy() -> None:
        for n in range(6):  # slow turns back to back: never idle long enough to be parked
            outcome[f"busy {n}"] = runtime.run_turn(busy, f"slow {n}")

    worker = threading.Thread(target=keep_busy)
    worker.start()
    try:
        assert wait_for(lambda: parked.thread_id not in loaded_threads(conn), timeout=10)
        assert alive(conn.pid)
    finally:
        worker.join(60)
    assert all(turn.ok for turn in outcome.values())  # type: ignore[attr-defined]
    back = runtime.run_turn(sleepy, "hello again")
    assert back.ok and back.thread_origin == "resumed" and back.thread_id == parked.thread_id


def test_a_finished_sessions_thread_leaves_codex_so_another_process_can_resume_it(
        make_runtime, mock_provider):
    """codex allows one writer per thread: while a gateway's app-server kept a finished
    session's thread loaded, another Hermes process could not resume that conversation."""
    mock_provider.set_default(echo)
    runtime, _host = make_runtime(settings_for(make_runtime, PoolLimits()), per_agent=True)
    done, staying = Agent("done"), Agent("staying")
    one = runtime.run_turn(done, "hello done")
    two = runtime.run_turn(staying, "hello staying")
    assert one.ok and two.ok
    [conn] = make_runtime.connections
    runtime.close(done)
    assert wait_for(lambda: loaded_threads(conn) == [two.thread_id], timeout=10)
    other, _other_host = make_runtime(settings_for(make_runtime, PoolLimits()),
                                      stored=Binding(one.thread_id))
    taken = other.run_turn(Agent("another process"), "hello from elsewhere")
    assert taken.ok and taken.thread_origin == "resumed" and taken.thread_id == one.thread_id
    assert len(make_runtime.connections) == 2 and alive(conn.pid)


def test_a_sessions_connection_gets_none_of_the_notifications_the_runtime_never_reads(
        make_runtime, mock_provider, app_server):
    mock_provider.set_default(mp.text("ok"))
    runtime, _host = make_runtime()
    assert runtime.run_turn(Agent(), "hello").ok
    [conn] = make_runtime.connections
    assert conn.notifications["turn/completed"] == 1
    assert not {m for m in UNUSED_NOTIFICATIONS if conn.notifications[m]}
    # ... which codex does send to a connection that does not opt out
    raw = app_server()
    thread_id = raw.request("thread/start", {"cwd": str(make_runtime.workdir)})["thread"]["id"]
    raw.request("turn/start", {"threadId": thread_id,
                               "input": [{"type": "text", "text": "hello"}]})
    seen: set[str] = set()
    deadline = time.monotonic() + 30
    while "turn/completed" not in seen and time.monotonic() < deadline:
        message = raw.next_inbound(timeout=1.0)
        if message is not None:
            seen.add(message.method)
    assert {"account/rateLimits/updated", "thread/started"} <= seen
