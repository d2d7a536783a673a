"""The session and the runtime on the REAL codex binary with the mock provider, driven end to end
by a test host through the pluggy hooks. Each test ends with the wire checked clean."""

from __future__ import annotations

import json
import threading
import time

import pytest
from support import SHARED, Agent, shut_down, wait_for

from hermes_codex_runtime.continuity import Binding
from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.protocol import Decision, FailureKind
from hermes_codex_runtime.session import SessionSettings


def test_a_text_turn_projects_the_answer_and_counts_cached_tokens_once(make_runtime,
                                                                      mock_provider):
    mock_provider.enqueue(mp.text("Hello there.", deltas=3, usage=mp.Usage(
        input=80, cached=20, output=25, reasoning=5, reported_total=130)))
    runtime, host = make_runtime()
    turn = runtime.run_turn(Agent(), "hi")
    assert turn.ok, turn.error
    assert turn.final_text == "Hello there."
    assert turn.messages == [{"role": "assistant", "content": "Hello there."}]
    assert turn.submitted_user_text == "hi"
    streamed = [e.text for e in host.events if e.kind == "text_delta"]
    assert "".join(streamed) == "Hello there."  # bursts arrive as one display event each
    usage = turn.usage
    assert usage is not None and usage.responses == 1
    last = usage.last
    assert (last.prompt_tokens, last.uncached_input_tokens, last.cached_tokens) == (80, 60, 20)
    assert (last.output_tokens, last.reasoning_tokens, last.total_tokens) == (25, 5, 130)
    assert usage.context_window and usage.context_window > 0
    assert host.usage == [usage]
    assert host.bound == [turn.thread_id]
    assert host.finished[0][0] is turn


@pytest.mark.parametrize(("decision", "status", "interrupted"), [
    (Decision.ACCEPT, "completed", False),
    (Decision.DECLINE, "declined", False),
    (Decision.CANCEL, None, True),
])
def test_command_approval_is_decided_by_the_host(make_runtime, mock_provider, decision, status,
                                                 interrupted):
    mock_provider.enqueue(mp.exec_command("echo from-the-shell", escalated=True,
                                          justification="to show the user"), mp.text("ok"))
    runtime, host = make_runtime(decide=lambda request: decision)
    turn = runtime.run_turn(Agent(), "run it")
    [request] = host.approvals
    assert request.kind == "command" and "echo from-the-shell" in (request.command or "")
    assert request.reason == "to show the user"
    assert turn.interrupted is interrupted
    call, result = turn.messages[0], turn.messages[1]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == \
        "exec_command"
    assert result["role"] == "tool" and result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert turn.tool_iterations == 1
    if status == "completed":
        assert "from-the-shell" in result["content"]
        assert turn.final_text == "ok"
    elif status == "declined":
        assert "declined" in result["content"]
    else:  # cancel declines and ends the turn
        assert turn.status == "interrupted"
        assert "declined" in result["content"] or "interrupted" in result["content"]


def test_file_change_approval_shows_the_changeset(make_runtime, mock_provider):
    patch = mp.add_file_patch("notes.txt", ["first line", "second line"])
    mock_provider.enqueue(mp.apply_patch(patch), mp.text("created"))
    runtime, host = make_runtime()
    turn = runtime.run_turn(Agent(), "make notes")
    [request] = host.approvals
    assert request.kind == "file_change"
    [change] = request.changes
    assert change["path"].endswith("notes.txt") and "first line" in change["diff"]
    assert "notes.txt" in request.summary()
    assert (make_runtime.workdir / "notes.txt").read_text() == "first line\nsecond line\n"
    assert turn.messages[0]["tool_calls"][0]["function"]["name"] == "apply_patch"
    assert turn.final_text == "created"


def test_permissions_and_mcp_elicitations_get_valid_answers(codex_binary, mock_provider,
                                                            tmp_path, make_runtime):
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home
    from hermes_codex_runtime.testing.mock_mcp_server import server_table

    home = prepare_codex_home(tmp_path / "mcp-home", mock_provider.base_url,
                              codex_bin=codex_binary.path,
                              features={"request_permissions_tool": True},
                              mcp_servers={"mock": server_table()})
    mock_provider.enqueue(
        mp.tool_call("request_permissions", {"permissions": {"network": {"enabled": True}},
                                             "reason": "needs the network"}),
        mp.tool_call("confirm", {"question": "Deploy now?"}, namespace="mcp__mock"),
        mp.text("all answered"))
    settings = SessionSettings(codex_bin=codex_binary.path, codex_home=str(home),
                               cwd=str(make_runtime.workdir), turn_timeout=60.0)
    runtime, host = make_runtime(settings)
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok, turn.error
    kinds = [r.kind for r in host.approvals]
    assert kinds == ["permissions", "mcp_tool_call", "elicitation"]
    granted = json.dumps(mock_provider.requests[1]["input"][-1])
    assert "enabled" in granted and "true" in granted  # the grant reached the model
    mcp_result = [m for m in turn.messages if m.get("role") == "tool"
                  and m.get("name") == "mcp.mock.confirm"]
    assert mcp_result and '"action": "accept"' in mcp_result[0]["content"]


def test_interrupt_mid_stream_ends_the_turn_and_keeps_the_partial_text(make_runtime,
                                                                       mock_provider):
    mock_provider.enqueue(mp.text("word " * 200, deltas=200, delta_delay=0.02))
    runtime, host = make_runtime()
    agent = Agent()
    stopper = threading.Thread(target=lambda: wait_for(
        lambda: "text_delta" in host.event_kinds()) and runtime.interrupt(agent))
    stopper.start()
    started = time.monotonic()
    turn = runtime.run_turn(agent, "talk a lot")
    stopper.join(timeout=10)
    assert time.monotonic() - started < 10
    assert turn.interrupted and turn.status == "interrupted"
    assert turn.messages and turn.messages[-1]["content"].startswith("word")
    assert len(turn.messages[-1]["content"]) < len("word " * 200)
    follow_up = runtime.run_turn(agent, "still there?")  # the session survives an interrupt
    assert follow_up.ok and follow_up.final_text == "ok"


def test_an_interrupt_during_startup_prevents_the_turn(make_runtime, mock_provider):
    runtime, _host = make_runtime()
    agent = Agent()
    runtime.run_turn(agent, "first")
    session = runtime.session_for(agent)
    session.interrupt()  # e.g. Ctrl-C while the next turn is being prepared
    requests_before = len(mock_provider.requests)
    turn = runtime.run_turn(agent, "second")
    assert turn.interrupted and turn.turn_id is None
    assert len(mock_provider.requests) == requests_before
    assert runtime.run_turn(agent, "third").ok  # the flag does not stick


def test_steer_reaches_the_active_turn(make_runtime, mock_provider):
    slow = mp.text("slow " * 60, deltas=60, delta_delay=0.02)
    mock_provider.enqueue(slow, mp.text("steered answer"))
    runtime, _host = make_runtime()
    agent = Agent()
    outcome: list[bool] = []
    steerer = threading.Thread(target=lambda: wait_for(
        lambda: runtime.session_for(agent) is not None
        and runtime.session_for(agent).active_turn_id is not None)
        and outcome.append(runtime.steer(agent, "be brief")))
    steerer.start()
    turn = runtime.run_turn(agent, "explain")
    steerer.join(timeout=10)
    assert outcome == [True]
    assert mock_provider.saw_text("be brief", role="user")
    assert turn.ok
    assert not runtime.steer(agent, "too late")  # no active turn: refused, not misrouted


def test_native_compaction_waits_for_its_own_turn(make_runtime, mock_provider):
    runtime, host = make_runtime()
    agent = Agent()
    runtime.run_turn(agent, "some history")
    mock_provider.enqueue(mp.text("SUMMARY OF THE CONVERSATION"))
    compaction = runtime.compact(agent)
    assert compaction.compacted and compaction.turn_id and compaction.error is None
    assert host.compactions == [compaction]
    assert runtime.run_turn(agent, "after compaction").ok


def test_history_seed_rides_on_a_fresh_thread_and_never_on_resume(make_runtime, mock_provider):
    history = [
        {"role": "system", "content": "host system prompt"},
        {"role": "user", "content": "My favourite colour is TEAL-42."},
        {"role": "assistant", "content": "Noted: TEAL-42."},
        {"role": "user", "content": "what is my favourite colour?"},
    ]
    runtime, _host = make_runtime(instructions="HOST-PROMPT-9")
    agent = Agent()
    turn = runtime.run_turn(agent, history[-1]["content"], history)
    assert turn.thread_origin == "seeded"
    developer = [t for r, t in mock_provider.request_texts(0) if r == "developer"]
    seeded = [t for t in developer if "HOST-PROMPT-9" in t]
    assert seeded and "TEAL-42" in seeded[0] and "already happened" in seeded[0]
    assert "what is my favourite colour?" not in seeded[0]  # the trailing user row is dropped
    assert "host system prompt" not in seeded[0]

    # A second process resumes the same thread: codex holds the history; no seed rides along.
    shut_down(runtime)
    other_runtime, other_host = make_runtime(instructions="HOST-PROMPT-9",
                                             stored=Binding(turn.thread_id))
    mock_provider.clear()
    resumed = other_runtime.run_turn(Agent(), "and again?", history)
    assert resumed.ok and resumed.thread_origin == "resumed"
    assert resumed.thread_id == turn.thread_id
    assert other_host.seed_requests == 0
    [resume] = [m for conn in make_runtime.connections for m in conn.sent
                if m.get("method") == "thread/resume"]
    assert resume["params"]["developerInstructions"] == "HOST-PROMPT-9"  # no seed on resume
    texts = [t for _, t in mock_provider.request_texts(0)]
    # codex replays its own thread history: the seed of the first start is there once, not twice.
    assert sum(t.count("already happened") for t in texts) == 1
    assert any("what is my favourite colour?" in t for t in texts)


def test_a_stored_thread_of_other_instructions_is_not_resumed(make_runtime, mock_provider):
    """codex's thread/resume keeps the thread's own developer instructions: a process whose
    host prompt changed since the binding (an API client's new system message) starts a fresh
    thread seeded with the conversation — the new prompt once, the old one nowhere."""
    history = [{"role": "user", "content": "remember MANGO-3"},
               {"role": "assistant", "content": "ok"}]
    runtime, host = make_runtime(instructions="SYSTEM-A")
    first = runtime.run_turn(Agent(), "remember MANGO-3", [])
    assert first.ok, first.error
    stored = host.stored
    shut_down(runtime)

    same, _ = make_runtime(instructions="SYSTEM-A", stored=stored)
    assert same.run_turn(Agent(), "again?", history).thread_origin == "resumed"
    shut_down(same)

    changed, changed_host = make_runtime(instructions="SYSTEM-B", stored=stored)
    mock_provider.clear()
    turn = changed.run_turn(Agent(), "what did I ask?", history)
    assert turn.ok and turn.thread_origin == "seeded" and turn.thread_id != first.thread_id
    developer = " ".join(t for r, t in mock_provider.request_texts(0) if r == "developer")
    assert developer.count("SYSTEM-B") == 1 and "SYSTEM-A" not in developer
    assert "MANGO-3" in developer  # the conversation carried over in the seed
    assert changed_host.stored.thread_id == turn.thread_id


def test_an_unresumable_thread_starts_fresh_and_seeded(make_runtime, mock_provider):
    history = [{"role": "user", "content": "remember PINEAPPLE-7"},
               {"role": "assistant", "content": "ok"}]
    runtime, host = make_runtime(stored=Binding("00000000-0000-0000-0000-000000000000"))
    turn = runtime.run_turn(Agent(), "what did I ask?", [*history,
                                                        {"role": "user",
                                                         "content": "what did I ask?"}])
    assert turn.ok, turn.error
    assert turn.thread_origin == "seeded"
    assert turn.thread_id != "00000000-0000-0000-0000-000000000000"
    assert mock_provider.saw_text("PINEAPPLE-7", role="developer")
    assert host.bound == [turn.thread_id]


def test_a_changed_system_prompt_retires_the_thread(make_runtime, mock_provider):
    runtime, host = make_runtime(instructions="PROMPT-A")
    agent = Agent()
    first = runtime.run_turn(agent, "one", [{"role": "user", "content": "one"}])
    host.instructions = "PROMPT-B"
    history = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "two"}]
    second = runtime.run_turn(agent, "two", history)
    assert second.thread_id != first.thread_id
    assert second.thread_origin == "seeded"
    last_developer = [t for r, t in mock_provider.request_texts(-1) if r == "developer"]
    assert any("PROMPT-B" in t for t in last_developer)
    assert not any("PROMPT-A" in t for t in last_developer)


def test_a_usage_limit_is_failover_class_and_the_host_completes_the_turn(make_runtime,
                                                                          mock_provider):
    mock_provider.enqueue(mp.usage_limit())
    runtime, host = make_runtime(fallback=lambda turn, failure: {
        "final_response": f"fallback answered: {turn.submitted_user_text}"})
    turn = runtime.run_turn(Agent(), "please answer")
    assert turn.failure is not None and turn.failure.kind is FailureKind.USAGE_LIMIT
    assert turn.failure.failover and not turn.should_retire
    assert host.fallbacks and host.fallbacks[0][0] is turn
    assert turn.fallback == {"final_response": "fallback answered: please answer"}


def test_approvals_are_decided_per_request(make_runtime, mock_provider):
    """A /yolo switched on between two approvals of one turn counts for the second."""
    yolo = threading.Event()

    def decide(request):
        if yolo.is_set():
            return Decision.ACCEPT
        yolo.set()  # the user turns yolo on after declining the first one
        return Decision.DECLINE

    mock_provider.enqueue(mp.exec_command("echo one", escalated=True),
                          mp.exec_command("echo two", escalated=True), mp.text("done"))
    runtime, _host = make_runtime(decide=decide)
    turn = runtime.run_turn(Agent(), "two commands")
    results = [m["content"] for m in turn.messages if m["role"] == "tool"]
    assert "declined" in results[0]
    assert "two" in results[1] and "declined" not in results[1]


def test_a_new_agent_for_the_same_conversation_resumes_the_thread_an_idle_old_one_held(
        make_runtime, mock_provider):
    runtime, host = make_runtime()
    mock_provider.enqueue(mp.text("first"))
    old = Agent("old")
    first = runtime.run_turn(old, "hello")
    assert first.ok and host.stored.thread_id == first.thread_id
    # the host drops `old` without closing it and builds a new agent for the same conversation
    mock_provider.enqueue(mp.text("second"))
    second = runtime.run_turn(Agent("new"), "again")
    assert second.ok and second.thread_origin == "resumed"
    assert second.thread_id == first.thread_id
    assert runtime.session_for(old) is None  # the idle holder was closed, not leaked


def test_two_concurrent_first_turns_of_one_agent_share_one_codex_process(make_runtime,
                                                                         mock_provider):
    runtime, _host = make_runtime()
    mock_provider.set_default(mp.text("ok"))
    agent = Agent("one")
    results = []
    threads = [threading.Thread(target=lambda: results.append(runtime.run_turn(agent, "hi")))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 2 and all(r.ok for r in results)
    assert len(make_runtime.connections) == 1  # one process, one thread, turns in turn
    assert results[0].thread_id == results[1].thread_id


def test_host_tools_are_offered_to_codex_and_run_by_the_host(make_runtime, mock_provider,
                                                             caplog):
    """Declared host tools become codex dynamic tools; each call runs on the turn's own thread
    and its text and success reach codex's model. An undeclared tool, a host that raises and a
    host that answers with something other than a ``HostToolOutput`` (named in the result) are
    failed calls, not a hung or broken turn."""
    from hermes_codex_runtime.protocol import HostTool, HostToolOutput

    schema = {"type": "object", "properties": {"note": {"type": "string"}},
              "required": ["note"]}
    settings = SessionSettings(
        codex_bin=make_runtime.settings_defaults["codex_bin"],
        codex_home=make_runtime.settings_defaults["codex_home"], cwd=str(make_runtime.workdir),
        turn_timeout=60.0,
        host_tools=(HostTool("remember", "Save a note.", schema),
                    HostTool("explode", "Always fails.", schema),
                    HostTool("scribble", "Answers with the wrong type.", schema)))
    threads: list[str] = []

    def run(call):
        threads.append(threading.current_thread().name)
        if call.tool == "explode":
            raise RuntimeError("kaboom sk-live-123456789012345678901234")
        if call.tool == "scribble":
            return "scribbled"  # a host author's bug: the text, not a HostToolOutput
        return HostToolOutput(f"saved {call.arguments['note']}", success=True)

    mock_provider.enqueue(
        mp.tool_call("remember", {"note": "tea"}, call_id="c1"),
        mp.tool_call("explode", {"note": "x"}, call_id="c2"),
        mp.tool_call("rm_rf", {"note": "y"}, call_id="c3"),  # never declared
        mp.tool_call("scribble", {"note": "z"}, call_id="c4"),
        mp.text("all done"))
    runtime, host = make_runtime(settings, tools=run)
    caller = threading.current_thread().name
    turn = runtime.run_turn(Agent(), "use your tools")
    assert turn.ok and turn.final_text == "all done", turn.error
    offered = {t.get("name") for t in mock_provider.requests[0]["tools"]}
    assert {"remember", "explode", "scribble"} <= offered and "rm_rf" not in offered
    # rm_rf never asked
    assert [c.tool for c in host.tool_calls] == ["remember", "explode", "scribble"]
    assert threads == [caller, caller, caller]
    outputs = {}
    for item in mock_provider.requests[-1]["input"]:
        if item.get("type") == "function_call_output":
            outputs[item["call_id"]] = item["output"]
    assert outputs["c1"] == "saved tea"
    assert "kaboom" in outputs["c2"] and "sk-live-1234" not in outputs["c2"]
    assert "kaboom" in caplog.text and "sk-live-1234" not in caplog.text
    assert "rm_rf" in outputs["c3"]  # codex refused it itself
    assert outputs["c4"] == ("The tool 'scribble' failed: TypeError: the host's codex_tool_call "
                             "hook returned a str; it must return a HostToolOutput or None")
    # the transcript shows each call and its result, as for any tool
    tool_messages = [m for m in turn.messages if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "saved tea"


def test_a_model_or_effort_change_rides_on_the_next_turn_without_a_new_process(make_runtime,
                                                                               mock_provider):
    import dataclasses

    mock_provider.enqueue(mp.text("one"), mp.text("two"), mp.text("three"))
    runtime, host = make_runtime()
    agent = Agent()
    first = runtime.run_turn(agent, "one")
    host.settings = dataclasses.replace(host.settings, model="other-model", effort="high")
    second = runtime.run_turn(agent, "two")
    assert second.ok and second.thread_id == first.thread_id
    assert len(make_runtime.connections) == 1  # same process, same thread
    body = mock_provider.requests[-1]
    assert body["model"] == "other-model" and body["reasoning"]["effort"] == "high"
    assert second.model == "other-model" and second.usage.model == "other-model"
    # anything else (here the turn deadline) is a new session resuming the same thread: on the
    # shared app-server, or in a new process of its own
    host.settings = dataclasses.replace(host.settings, turn_timeout=61.0)
    third = runtime.run_turn(agent, "three")
    assert third.ok and third.thread_id == first.thread_id and third.thread_origin == "resumed"
    assert len(make_runtime.connections) == (1 if SHARED else 2)


def test_several_agents_through_one_runtime_at_once_keep_to_themselves(make_runtime,
                                                                       mock_provider):
    """Four agents run three turns each concurrently through ONE CodexRuntime (the hooks are
    shared): every answer, approval, usage report and thread binding reaches the agent it
    belongs to."""
    from test_reliability import _echo_model

    mock_provider.set_default(_echo_model)
    by_agent: dict[str, dict[str, list]] = {}
    lock = threading.Lock()

    def record(kind, agent, value):
        with lock:
            by_agent.setdefault(agent.name, {}).setdefault(kind, []).append(value)

    from hermes_codex_runtime.hookspecs import hookimpl

    class PerAgent:
        """Records what each hook was told, per agent (alongside the ordinary test host)."""

        @hookimpl(tryfirst=True)
        def codex_approval(self, agent, request):
            record("approval", agent, request.command)

        @hookimpl
        def codex_record_usage(self, agent, usage):
            record("usage", agent, usage.turn)

        @hookimpl
        def codex_thread_bound(self, agent, thread_id):
            record("bound", agent, thread_id)

    runtime, _host = make_runtime()
    runtime.pm.register(PerAgent())
    agents = [Agent(f"a{i}") for i in range(4)]
    answers: dict[str, list[str]] = {a.name: [] for a in agents}

    def chat(agent: Agent) -> None:
        for turn_no in range(3):
            marker = f"{agent.name}t{turn_no}"
            text = f"run {marker}" if turn_no == 1 else f"hello {marker}"
            turn = runtime.run_turn(agent, text)
            answers[agent.name].append(turn.final_text if turn.ok else f"ERR {turn.error}")

    workers = [threading.Thread(target=chat, args=(a,)) for a in agents]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=180)
    assert not any(worker.is_alive() for worker in workers)
    for agent in agents:
        name = agent.name
        assert answers[name] == [f"echo: hello {name}t0", f"ran: {name}t1",
                                 f"echo: hello {name}t2"], answers[name]
        mine = by_agent[name]
        [command] = mine["approval"]  # asked once, about its own command
        assert command.endswith(f"echo {name}t1'"), command
        assert len(mine["usage"]) == 3
        assert len(set(mine["bound"])) == 1  # one thread, its own
    threads = {by_agent[a.name]["bound"][0] for a in agents}
    assert len(threads) == 4
    # one shared codex process for all four, or one per agent — never more
    assert len(make_runtime.connections) == (1 if SHARED else 4)


def test_a_command_the_sandbox_denies_at_once_is_in_the_turns_messages_once(make_runtime,
                                                                           mock_provider):
    """codex #47433: ``touch`` in a read-only sandbox is denied before codex announces the
    command (no item notification at all), yet the model is shown its output. The turn's messages
    get it from codex's record of the turn, in order and once; a command codex did announce is
    not added again."""
    home = make_runtime.workdir.parent / "home"  # an empty HOME: codex denies at once there
    home.mkdir()
    settings = SessionSettings(**make_runtime.settings_defaults, cwd=str(make_runtime.workdir),
                               sandbox="read-only", turn_timeout=60.0,
                               extra_env={"HOME": str(home)})
    mock_provider.enqueue(mp.exec_command("echo announced"), mp.exec_command("touch notes.txt"),
                          mp.text("Done."))
    runtime, host = make_runtime(settings)
    turn = runtime.run_turn(Agent(), "write notes")
    assert turn.ok, turn.error
    calls = [m["tool_calls"][0] for m in turn.messages if m.get("tool_calls")]
    commands = [json.loads(c["function"]["arguments"])["command"] for c in calls]
    assert len(commands) == 2 and "echo announced" in commands[0], commands
    assert "touch notes.txt" in commands[1], commands
    results = [m for m in turn.messages if m["role"] == "tool"]
    assert "Read-only file system" in results[1]["content"]
    assert results[1]["tool_call_id"] == calls[1]["id"]
    assert turn.messages[-1] == {"role": "assistant", "content": "Done."}
    assert turn.tool_iterations == 2
    started = [e.tool.item_id for e in host.events if e.kind == "tool_started"]
    print(f"\ncommands announced by codex: {started}")
