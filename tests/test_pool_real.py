"""One app-server shared by many sessions, on the REAL codex binary and the mock provider:
routing by thread, faults contained to the turns they hit, caps, and the process's life.
Each test ends with the wire checked clean (schema-valid, nothing codex would ignore)."""

from __future__ import annotations

import gc
import os
import signal
import statistics
import threading
import time
import weakref
from pathlib import Path

from support import Agent, alive, shut_down, total_rss, wait_for

from hermes_codex_runtime.hookspecs import hookimpl
from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.pool import PER_SESSION, SHARED, Placement, PoolLimits
from hermes_codex_runtime.protocol import Decision, FailureKind
from hermes_codex_runtime.session import SessionSettings


def settings_for(make_runtime, placement: Placement) -> SessionSettings:
    return SessionSettings(**make_runtime.settings_defaults, cwd=str(make_runtime.workdir),
                           turn_timeout=60.0, app_server=placement)


def last_user_text(body) -> str:
    last = body.get("input", [])[-1] if body.get("input") else {}
    for part in last.get("content") or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            return part["text"]
    return ""


class PerAgent:
    """Records, per agent name, what the hooks were told (one runtime serves them all)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bound: dict[str, list[str]] = {}
        self.approvals: dict[str, list[str]] = {}

    @hookimpl(tryfirst=True)
    def codex_approval(self, agent, request):
        with self.lock:
            self.approvals.setdefault(agent.name, []).append(request.command or "")
        return None  # the host decides

    @hookimpl
    def codex_thread_bound(self, agent, thread_id):
        with self.lock:
            self.bound.setdefault(agent.name, []).append(thread_id)


def echo_model(slow_marker: str | None = None, delay: float = 0.0):
    """Answers each session with its own words (cross-talk is visible); ``run X`` runs a
    command; a message containing ``slow_marker`` is answered after ``delay`` s."""
    def reply(body):
        last = body.get("input", [])[-1] if body.get("input") else {}
        if last.get("type") == "function_call_output":
            lines = [line for line in str(last.get("output")).splitlines() if line.strip()]
            return mp.text(f"ran: {lines[-1] if lines else ''}")
        text = last_user_text(body)
        if text.startswith("run "):
            return mp.exec_command(f"echo {text[4:]}", escalated=True)
        if slow_marker and slow_marker in text:
            return mp.text(f"echo: {text}", delay=delay)
        return mp.text(f"echo: {text}")
    return reply


def test_sessions_on_one_app_server_keep_to_their_threads_through_a_kill_of_it(make_runtime,
                                                                              mock_provider):
    """Six agents, four turns each (approvals in them), all on ONE shared codex process. The
    process is SIGKILLed while several third turns are in flight: only those turns fail (each a
    classified transport failure), every agent's next turn runs on ONE new process and resumes
    its own thread, and no answer, approval or binding ever reaches another agent."""
    mock_provider.set_default(echo_model(slow_marker="t2", delay=2.0))
    runtime, _host = make_runtime(settings_for(make_runtime, Placement(SHARED)), per_agent=True,
                                  decide=lambda request: Decision.ACCEPT)
    per_agent = PerAgent()
    runtime.pm.register(per_agent)
    agents = [Agent(f"a{i}") for i in range(6)]
    results: dict[str, list] = {a.name: [] for a in agents}
    killed = threading.Event()

    def chat(agent: Agent) -> None:
        for turn_no in range(4):
            marker = f"{agent.name}t{turn_no}"
            text = f"run {marker}" if turn_no == 1 else f"hello {marker}"
            results[agent.name].append((text, runtime.run_turn(agent, text)))

    def killer() -> None:
        # once at least three slow third turns reached the provider, kill the shared process
        if wait_for(lambda: sum("t2" in last_user_text(r) for r in mock_provider.requests) >= 3,
                    timeout=90):
            [conn] = make_runtime.connections
            os.kill(conn.pid, signal.SIGKILL)
            killed.set()

    workers = [threading.Thread(target=chat, args=(a,)) for a in agents]
    watcher = threading.Thread(target=killer)
    watcher.start()
    for worker in workers:
        worker.start()
    for worker in [*workers, watcher]:
        worker.join(timeout=180)
    assert not any(t.is_alive() for t in [*workers, watcher])
    assert killed.is_set()
    failed_in_kill = 0
    for agent in agents:
        name = agent.name
        turns = results[name]
        assert len(turns) == 4
        for turn_no, (text, turn) in enumerate(turns):
            if not turn.ok and turn_no in (1, 2):  # in flight when the process died
                assert turn.failure.kind is FailureKind.TRANSPORT, turn.error
                failed_in_kill += 1
                continue
            expected = f"ran: {name}t1" if turn_no == 1 else f"echo: {text}"
            assert turn.ok and turn.final_text == expected, (name, turn_no, turn.error,
                                                             turn.final_text)
        assert turns[3][1].thread_origin == "resumed"  # its own thread, on the new process
        assert len(set(per_agent.bound[name])) == 1, per_agent.bound[name]
        assert all(c.endswith(f"echo {name}t1'") for c in per_agent.approvals.get(name, []))
    assert failed_in_kill >= 3
    assert len({per_agent.bound[a.name][0] for a in agents}) == 6
    assert len(make_runtime.connections) == 2  # the killed process, and ONE replacement


def test_one_sessions_pending_approval_never_delays_another_sessions_turn(make_runtime,
                                                                        mock_provider):
    mock_provider.set_default(echo_model())
    release = threading.Event()
    asked = threading.Event()

    def decide(request):
        asked.set()
        release.wait(30)  # a person who takes their time
        return Decision.ACCEPT

    runtime, _host = make_runtime(settings_for(make_runtime, Placement(SHARED)), decide=decide,
                                  per_agent=True)
    slow, quick = Agent("slow"), Agent("quick")
    runtime.run_turn(quick, "hello warm-up")  # the process is up
    outcome = {}
    waiting = threading.Thread(target=lambda: outcome.setdefault(
        "slow", runtime.run_turn(slow, "run slowpoke")))
    waiting.start()
    assert asked.wait(30)
    latencies = []
    for n in range(5):
        started = time.monotonic()
        turn = runtime.run_turn(quick, f"hello q{n}")
        latencies.append(time.monotonic() - started)
        assert turn.ok and turn.final_text == f"echo: hello q{n}"
    release.set()
    waiting.join(60)
    assert outcome["slow"].ok and outcome["slow"].final_text == "ran: slowpoke"
    assert len(make_runtime.connections) == 1
    print(f"\nquick turns while another session waits on approval: median "
          f"{1000 * statistics.median(latencies):.0f} ms, max {1000 * max(latencies):.0f} ms")
    assert max(latencies) < 10.0  # they never waited for the 30 s approval


def test_a_failed_turn_of_one_session_leaves_the_shared_app_server_to_the_others(
        make_runtime, mock_provider):
    def model(body):
        text = last_user_text(body)
        return mp.failed("the model broke") if "break" in text else mp.text(f"echo: {text}")

    mock_provider.set_default(model)
    runtime, _host = make_runtime(settings_for(make_runtime, Placement(SHARED)), per_agent=True)
    broken, fine = Agent("broken"), Agent("fine")
    assert runtime.run_turn(fine, "hello one").ok
    failed = runtime.run_turn(broken, "break please")
    assert not failed.ok and failed.failure is not None
    assert failed.failure.kind is not FailureKind.TRANSPORT
    assert runtime.run_turn(fine, "hello two").final_text == "echo: hello two"
    again = runtime.run_turn(broken, "hello again")
    assert again.ok and again.final_text == "echo: hello again"
    assert len(make_runtime.connections) == 1


def test_closing_sessions_ends_their_threads_and_the_last_one_ends_the_process(make_runtime,
                                                                             mock_provider):
    mock_provider.set_default(echo_model())
    placement = Placement(SHARED, limits=PoolLimits(idle_grace=0.5))
    runtime, _host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
    first, second = Agent("first"), Agent("second")
    one = runtime.run_turn(first, "hello 1")
    two = runtime.run_turn(second, "hello 2")
    assert one.ok and two.ok and one.thread_id != two.thread_id
    [conn] = make_runtime.connections
    [server] = runtime.pool.servers()
    assert sorted(server.thread_ids) == sorted([one.thread_id, two.thread_id])
    runtime.close(first)
    assert wait_for(lambda: server.thread_ids == [two.thread_id], timeout=5)
    sent = [m.get("params") for m in conn.sent if m.get("method") == "thread/unsubscribe"]
    assert sent == [{"threadId": one.thread_id}]
    time.sleep(1.0)  # longer than the grace: the process still serves the other session
    assert alive(conn.pid)
    assert runtime.run_turn(second, "hello 3").final_text == "echo: hello 3"
    runtime.close(second)
    assert wait_for(lambda: not alive(conn.pid), timeout=10)
    assert runtime.pool.servers() == []


def loaded_threads(conn) -> list[str]:
    return conn.request("thread/loaded/list", {}, timeout=10)["data"]


def test_a_full_app_server_seats_a_newcomer_by_unloading_the_thread_idle_longest(
        make_runtime, mock_provider):
    """Sessions one after another on a process that holds two threads: each newcomer's seat is
    the thread of the session idle the longest, unloaded from codex (not a process more); that
    session's next turn resumes its own thread."""
    mock_provider.set_default(echo_model())
    placement = Placement(SHARED, limits=PoolLimits(threads_per_process=2))
    runtime, _host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
    agents = [Agent(f"a{i}") for i in range(5)]
    first = {a.name: runtime.run_turn(a, f"hello {a.name}") for a in agents}
    assert all(turn.ok for turn in first.values())
    [conn] = make_runtime.connections
    assert wait_for(lambda: len(loaded_threads(conn)) == 2, timeout=10)
    assert sorted(loaded_threads(conn)) == sorted(first[n].thread_id for n in ("a3", "a4"))
    back = runtime.run_turn(agents[0], "hello again")
    assert back.ok and back.final_text == "echo: hello again"
    assert back.thread_origin == "resumed" and back.thread_id == first["a0"].thread_id
    assert len(make_runtime.connections) == 1


def test_a_full_app_server_spreads_busy_sessions_to_another_process(make_runtime,
                                                                    mock_provider):
    mock_provider.set_default(echo_model(slow_marker="slow", delay=1.5))
    placement = Placement(SHARED, limits=PoolLimits(threads_per_process=2))
    runtime, _host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
    agents = [Agent(f"a{i}") for i in range(3)]
    outcome: dict[str, object] = {}
    workers = []
    for agent in agents:  # each one's turn is with the model before the next one comes
        workers.append(threading.Thread(target=lambda a=agent: outcome.setdefault(
            a.name, runtime.run_turn(a, f"slow {a.name}"))))
        workers[-1].start()
        assert wait_for(lambda a=agent: any(last_user_text(r) == f"slow {a.name}"
                                            for r in mock_provider.requests), timeout=30)
    for worker in workers:
        worker.join(60)
    assert all(outcome[a.name].ok for a in agents)
    assert len(make_runtime.connections) == 2  # every seat of the first was in a turn


def test_per_session_mode_gives_every_session_a_process_of_its_own(make_runtime,
                                                                   mock_provider):
    mock_provider.set_default(echo_model())
    runtime, _host = make_runtime(settings_for(make_runtime, Placement(PER_SESSION)),
                                  per_agent=True)
    agents = [Agent(f"a{i}") for i in range(3)]
    for agent in agents:
        assert runtime.run_turn(agent, f"hello {agent.name}").ok
    pids = [conn.pid for conn in make_runtime.connections]
    assert len(set(pids)) == 3
    runtime.close(agents[0])
    assert wait_for(lambda: not alive(pids[0]), timeout=10)
    assert all(alive(pid) for pid in pids[1:])


def test_shared_memory_is_a_fraction_of_a_process_per_session(make_runtime, mock_provider):
    """Eight concurrent sessions on one process vs one process each: what the process costs."""
    mock_provider.set_default(echo_model())

    def run(placement: Placement) -> int:
        runtime, _host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
        before = len(make_runtime.connections)
        agents = [Agent(f"m{i}") for i in range(8)]
        workers = [threading.Thread(target=runtime.run_turn, args=(a, f"hello {a.name}"))
                   for a in agents]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        conns = make_runtime.connections[before:]
        rss = total_rss(c.pid for c in conns)
        shut_down(runtime)
        return rss

    shared = run(Placement(SHARED))
    separate = run(Placement(PER_SESSION))
    print(f"\n8 sessions: shared {shared / 2**20:.0f} MiB, per-session "
          f"{separate / 2**20:.0f} MiB")
    assert shared * 3 < separate


def keep_threads_loaded(make_runtime) -> None:
    """The user's own ``thread_unload_delay_secs`` in config.toml: codex keeps a thread loaded
    (its writer lock held) long after its session unsubscribed, and the runtime leaves it so."""
    config = Path(make_runtime.settings_defaults["codex_home"]) / "config.toml"
    config.write_text("thread_unload_delay_secs = 1800\n" + config.read_text())


def test_a_session_resuming_a_thread_goes_back_to_the_process_that_still_holds_it(
        make_runtime, mock_provider):
    """Where codex keeps a thread loaded after its session leaves, resuming it on another
    process would fail ("active writer"). A full process still takes its own thread back."""
    keep_threads_loaded(make_runtime)
    mock_provider.set_default(echo_model())
    placement = Placement(SHARED, limits=PoolLimits(threads_per_process=2))
    runtime, host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
    first, second, third = Agent("first"), Agent("second"), Agent("third")
    one = runtime.run_turn(first, "hello 1")
    assert runtime.run_turn(second, "hello 2").ok
    stored = host.by_agent[id(first)]
    runtime.close(first)
    assert runtime.run_turn(third, "hello 3").ok  # the process is full again
    returning = Agent("first, later")
    host.by_agent[id(returning)] = stored
    again = runtime.run_turn(returning, "hello again")
    assert again.ok and again.thread_origin == "resumed" and again.thread_id == one.thread_id
    assert len(make_runtime.connections) == 1


def test_a_process_that_holds_many_left_threads_is_recycled(make_runtime, mock_provider):
    keep_threads_loaded(make_runtime)
    mock_provider.set_default(echo_model())
    placement = Placement(SHARED, limits=PoolLimits(recycle_after=2))
    runtime, _host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
    agents = [Agent(f"a{i}") for i in range(3)]
    for agent in agents:
        assert runtime.run_turn(agent, f"hello {agent.name}").ok
    [old] = make_runtime.connections
    runtime.close(agents[0])
    runtime.close(agents[1])  # two threads left loaded: time to recycle
    fresh = Agent("fresh")
    assert runtime.run_turn(fresh, "hello fresh").ok
    assert len(make_runtime.connections) == 2  # the fresh session started a new process
    assert runtime.run_turn(agents[2], "still here").final_text == "echo: still here"
    runtime.close(agents[2])  # the recycled process ends with its last session
    assert wait_for(lambda: not alive(old.pid), timeout=10)
    assert runtime.run_turn(fresh, "and on").ok


def test_an_interrupt_stops_only_its_own_turn_on_a_shared_app_server(make_runtime,
                                                                    mock_provider):
    mock_provider.set_default(echo_model(slow_marker="slow", delay=3.0))
    runtime, _host = make_runtime(settings_for(make_runtime, Placement(SHARED)), per_agent=True)
    stopped, going = Agent("stopped"), Agent("going")
    outcome: dict[str, object] = {}
    workers = [threading.Thread(target=lambda a=a: outcome.setdefault(
        a.name, runtime.run_turn(a, f"slow {a.name}"))) for a in (stopped, going)]
    for worker in workers:
        worker.start()
    assert wait_for(lambda: sum("slow" in last_user_text(r)
                                for r in mock_provider.requests) >= 2, timeout=30)
    started = time.monotonic()
    runtime.interrupt(stopped)
    for worker in workers:
        worker.join(60)
    halted, finished = outcome["stopped"], outcome["going"]
    assert halted.interrupted and not halted.final_text
    assert finished.ok and finished.final_text == "echo: slow going"
    assert len(make_runtime.connections) == 1
    assert time.monotonic() - started < 10


def test_an_idle_session_is_parked_and_its_next_turn_resumes_its_thread(make_runtime,
                                                                        mock_provider):
    """The idle reaper closes a session's channel after ``idle_session`` seconds between turns
    (its process ends with its last session); the next turn reconnects and resumes."""
    mock_provider.set_default(echo_model(slow_marker="slow", delay=1.5))
    placement = Placement(SHARED, limits=PoolLimits(idle_session=0.4))
    runtime, _host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
    agent = Agent("sleepy")
    first = runtime.run_turn(agent, "slow one")  # longer than the idle limit: never parked
    assert first.ok and first.final_text == "echo: slow one"
    [conn] = make_runtime.connections
    assert wait_for(lambda: not alive(conn.pid), timeout=10)  # parked, and the process ended
    second = runtime.run_turn(agent, "hello two")
    assert second.ok and second.thread_origin == "resumed"
    assert second.thread_id == first.thread_id
    assert len(make_runtime.connections) == 2


def test_the_process_cap_parks_the_session_idle_longest(make_runtime, mock_provider):
    mock_provider.set_default(echo_model())
    placement = Placement(PER_SESSION, limits=PoolLimits(max_processes=2, idle_session=0))
    runtime, _host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
    agents = [Agent(f"a{i}") for i in range(3)]
    first = {a.name: runtime.run_turn(a, f"hello {a.name}") for a in agents}
    pids = [c.pid for c in make_runtime.connections]
    assert wait_for(lambda: not alive(pids[0]), timeout=10)  # a0 made room for a2
    assert sum(alive(pid) for pid in pids) == 2
    back = runtime.run_turn(agents[0], "hello again")
    assert back.ok and back.thread_origin == "resumed"
    assert back.thread_id == first["a0"].thread_id
    assert wait_for(lambda: not alive(pids[1]), timeout=10)  # now a1 was idle longest


def test_a_hung_turn_and_a_flood_on_the_shared_app_server_never_hold_up_another_session(
        make_runtime, mock_provider):
    """While one session's turn hangs (the model does not answer for 20 s) and another's
    streams 50,000 deltas, a third session's turns on the same process complete promptly."""
    flood_text = "".join(f"w{i} " for i in range(50_000))

    def model(body):
        text = last_user_text(body)
        if "hang" in text:
            return mp.text("woke up", delay=20.0)
        if "flood" in text:
            return mp.text(flood_text, deltas=50_000)
        return mp.text(f"echo: {text}")

    mock_provider.set_default(model)
    runtime, _host = make_runtime(settings_for(make_runtime, Placement(SHARED)), per_agent=True)
    hung, flooder, quick = Agent("hung"), Agent("flooder"), Agent("quick")
    assert runtime.run_turn(quick, "hello warm-up").ok
    outcome: dict[str, object] = {}
    workers = [threading.Thread(target=lambda a=a, t=t: outcome.setdefault(
        a.name, runtime.run_turn(a, t))) for a, t in ((hung, "hang on"), (flooder, "flood me"))]
    for worker in workers:
        worker.start()
    assert wait_for(lambda: sum(("hang" in last_user_text(r)) or ("flood" in last_user_text(r))
                                for r in mock_provider.requests) >= 2, timeout=30)
    latencies = []
    for n in range(5):
        started = time.monotonic()
        turn = runtime.run_turn(quick, f"hello q{n}")
        latencies.append(time.monotonic() - started)
        assert turn.ok and turn.final_text == f"echo: hello q{n}"
    hung_still_running = "hung" not in outcome
    runtime.interrupt(hung)
    for worker in workers:
        worker.join(60)
    assert hung_still_running  # the quick turns did not wait for it
    assert outcome["flooder"].ok and outcome["flooder"].final_text == flood_text
    assert len(make_runtime.connections) == 1
    print(f"\nquick turns beside a hung turn and a 50,000-delta flood: median "
          f"{1000 * statistics.median(latencies):.0f} ms, max {1000 * max(latencies):.0f} ms")
    assert max(latencies) < 10.0


def test_a_replaced_session_ends_even_if_its_successor_never_starts(make_runtime, mock_provider):
    """Changed settings replace a session; the old one hands its thread over when the new one
    starts — or ends with the runtime if the new one never does (bad input, say)."""
    import dataclasses

    mock_provider.set_default(echo_model())
    placement = Placement(SHARED)
    runtime, host = make_runtime(settings_for(make_runtime, placement), per_agent=True)
    agent = Agent("changer")
    assert runtime.run_turn(agent, "hello 1").ok
    [conn] = make_runtime.connections
    host.settings = dataclasses.replace(host.settings, turn_timeout=61.0)
    bad = runtime.run_turn(agent, {"not": "input"})  # fails before any connection is made
    assert not bad.ok
    runtime.close(agent)  # the agent is done: nothing of it may keep the process alive
    assert wait_for(lambda: not alive(conn.pid), timeout=10)


def test_the_next_agent_at_a_collected_agents_address_gets_a_session_of_its_own(make_runtime,
                                                                               mock_provider):
    """A gateway drops each run's agent; the next run's agent is often allocated at the very
    address the dropped one had (the same ``id()``). It must not inherit the dropped agent's
    session — nor lose its own to the dropped one's clean-up."""
    runtime, host = make_runtime()
    successor = None
    for attempt in range(5):  # another thread may take the freed block first: try again
        mock_provider.enqueue(mp.text("first"))
        first = Agent(f"first-{attempt}")
        assert runtime.run_turn(first, "hello").final_text == "first"
        host.agents.clear()  # the host keeps no reference (as the gateway's API server)
        address, dropped, gone = id(first), runtime.session_for(first), weakref.ref(first)
        del first
        # freed once nothing holds it (a worker thread may still, for a moment): then its block
        # is among the next ones handed out
        assert wait_for(lambda gone=gone: gc.collect() >= 0 and gone() is None,
                        timeout=15)
        held = []
        for _ in range(50_000):  # bounded: the freed block is among the next free ones
            candidate = Agent("next")
            if id(candidate) == address:
                successor = candidate
                break
            held.append(candidate)  # kept, so the next candidate takes another free block
        del held
        if successor is not None:
            break
    assert successor is not None, "no object took a dropped agent's address in 5 tries"
    assert wait_for(lambda: dropped.retired, timeout=15)  # the dropped agent's session closed
    assert runtime.session_for(successor) is None  # nothing inherited
    mock_provider.enqueue(mp.text("second"))
    result = runtime.run_turn(successor, "hello again")
    assert result.ok and result.final_text == "second", result.error
    assert runtime.session_for(successor) is not dropped
    assert not runtime.session_for(successor).retired


def test_a_first_session_joins_the_app_server_started_ahead_of_it(make_runtime, mock_provider):
    """``prewarm`` while the host composes the first turn: the turn runs on that process, and
    a later agent's prewarm starts nothing."""
    mock_provider.set_default(echo_model())
    runtime, _host = make_runtime(settings_for(make_runtime, Placement(SHARED)), per_agent=True)
    first = Agent("first")
    thread = runtime.prewarm(first)
    assert thread is not None
    thread.join(60)
    [conn] = make_runtime.connections
    assert alive(conn.pid) and len(runtime.pool.servers()) == 1
    assert runtime.run_turn(first, "hello").final_text == "echo: hello"
    assert make_runtime.connections == [conn]
    assert runtime.prewarm(Agent("second")) is None  # a session exists: nothing ahead


def test_a_first_per_session_session_takes_the_process_started_ahead_as_its_own(
        make_runtime, mock_provider):
    """Per-session placement: the process started ahead becomes the first session's own; the
    next session gets a process of its own, and each ends with its session."""
    mock_provider.set_default(echo_model())
    runtime, _host = make_runtime(settings_for(make_runtime, Placement(PER_SESSION)),
                                  per_agent=True)
    first, second = Agent("first"), Agent("second")
    thread = runtime.prewarm(first)
    assert thread is not None
    thread.join(60)
    [ahead] = make_runtime.connections
    assert runtime.run_turn(first, "one").final_text == "echo: one"
    assert runtime.session_for(first).connection.pid == ahead.pid
    assert runtime.run_turn(second, "two").final_text == "echo: two"
    [_, own] = make_runtime.connections
    assert runtime.session_for(second).connection.pid == own.pid != ahead.pid
    runtime.close(first)
    assert wait_for(lambda: not alive(ahead.pid), timeout=15) and alive(own.pid)


def test_an_app_server_started_ahead_that_no_session_joins_ends(make_runtime):
    from hermes_codex_runtime.session.spawn import spawn_options

    runtime, _host = make_runtime(settings_for(make_runtime, Placement(SHARED)))
    options = spawn_options(settings_for(make_runtime, Placement(SHARED)))
    assert runtime.pool.prewarm(options, Placement(SHARED), hold=0.5)
    [conn] = make_runtime.connections
    assert not runtime.pool.prewarm(options, Placement(SHARED))  # one is up: not a second
    assert wait_for(lambda: not alive(conn.pid), timeout=15)
    assert runtime.pool.servers() == []
