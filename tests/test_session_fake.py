"""The session and runtime against the fake app-server: what the real binary won't do on demand.
The fake validates every message against the installed binary's schema; each test ends with the
wire clean."""

from __future__ import annotations

import threading
import time

import pytest
from support import Agent, RecordingHost, shut_down

from hermes_codex_runtime.continuity import Binding
from hermes_codex_runtime.hookspecs import hookimpl
from hermes_codex_runtime.plugins import make_plugin_manager
from hermes_codex_runtime.protocol import Decision, FailureKind
from hermes_codex_runtime.runtime import CodexRuntime
from hermes_codex_runtime.session import SessionSettings


@pytest.fixture
def fake_runtime(fake_codex, tmp_path):
    runtimes = []

    def make(scenario, *, turn_timeout=20.0, **host_options):
        fake_codex.set_scenario(scenario)
        settings = SessionSettings(codex_bin=fake_codex.path, cwd=str(tmp_path),
                                   turn_timeout=turn_timeout, control_timeout=2.0)
        host = RecordingHost(settings, **host_options)
        runtime = CodexRuntime(make_plugin_manager([host]))
        runtimes.append(runtime)
        return runtime, host

    yield make
    for runtime in runtimes:
        shut_down(runtime)


def test_codex_dying_mid_turn_ends_the_turn_at_once_and_retires(fake_runtime, fake_codex):
    secret = "sk-live-" + "q" * 24
    runtime, _host = fake_runtime({"turns": [[
        {"message": "working on it"},
        {"crash": 9, "crash_stderr": ["fatal: lost the model connection",
                                      f"while sending api_key={secret}"]},
    ], [{"message": "back again"}]]})
    agent = Agent()
    started = time.monotonic()
    turn = runtime.run_turn(agent, "go")
    assert time.monotonic() - started < 3  # at once, not at the 20 s deadline
    assert turn.failure is not None and turn.failure.kind is FailureKind.TRANSPORT
    assert turn.should_retire
    assert "fatal: lost the model connection" in turn.error
    assert secret not in turn.error and "[REDACTED]" in turn.error
    assert turn.final_text == "working on it"  # what arrived before the crash is kept
    again = runtime.run_turn(agent, "again")  # a new process; the stored thread is resumed
    assert again.ok and again.final_text == "back again"
    assert again.thread_origin == "resumed" and again.thread_id == turn.thread_id
    fake_codex.assert_wire_clean()


def interrupt_when_streaming(runtime, host, agent) -> list[float]:
    """Interrupt ``agent``'s turn once codex streams text (not on a timer: a slow start-up
    would make the interrupt arrive before the turn). Returns when it was sent (filled later)."""
    sent: list[float] = []

    def interrupt():
        deadline = time.monotonic() + 20
        while "text_delta" not in host.event_kinds() and time.monotonic() < deadline:
            time.sleep(0.02)
        sent.append(time.monotonic())
        runtime.interrupt(agent)

    threading.Thread(target=interrupt, daemon=True).start()
    return sent


def test_a_partial_message_and_open_tool_items_are_closed_not_lost(fake_runtime, fake_codex):
    runtime, host = fake_runtime({"turns": [[
        {"partial": "half an answ", "deltas": 3},
        {"sleep": 0.2},
        {"hang": True},
    ]]})
    agent = Agent()
    interrupt_when_streaming(runtime, host, agent)
    turn = runtime.run_turn(agent, "go")
    assert turn.interrupted and turn.status == "interrupted"
    assert turn.messages == [{"role": "assistant", "content": "half an answ"}]
    fake_codex.assert_wire_clean()


def test_turn_aborted_marker_ends_the_turn(fake_runtime, fake_codex):
    runtime, _host = fake_runtime({"turns": [[{"message": "partial work"},
                                             {"turn_aborted": True}]]}, turn_timeout=10.0)
    started = time.monotonic()
    turn = runtime.run_turn(Agent(), "go")
    assert time.monotonic() - started < 3
    assert turn.interrupted and "turn_aborted" in turn.error
    assert not any("<turn_aborted>" in (m.get("content") or "") for m in turn.messages)
    fake_codex.assert_wire_clean()


def test_a_final_message_without_turn_completed_is_accepted_at_the_deadline(fake_runtime,
                                                                            fake_codex):
    runtime, _host = fake_runtime({"turns": [[{"message": "the real answer"},
                                             {"no_complete": True}]]}, turn_timeout=1.5)
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok, turn.error
    assert turn.final_text == "the real answer" and not turn.timed_out
    fake_codex.assert_wire_clean()


def test_a_turn_that_hangs_times_out_is_interrupted_and_retired(fake_runtime, fake_codex):
    runtime, _host = fake_runtime({"turns": [[{"reasoning": "thinking"}, {"hang": True}]]},
                                 turn_timeout=1.5)
    started = time.monotonic()
    turn = runtime.run_turn(Agent(), "go")
    assert 1.4 < time.monotonic() - started < 6
    assert turn.timed_out and turn.interrupted and turn.should_retire
    assert turn.failure is not None and turn.failure.kind is FailureKind.TIMEOUT
    assert fake_codex.requests("turn/interrupt")
    fake_codex.assert_wire_clean()


def test_wire_silence_after_a_tool_result_is_a_warning_not_a_failure(fake_runtime, fake_codex):
    runtime, host = fake_runtime({"turns": [[
        {"command": "make build", "output": "built\n"},
        {"sleep": 1.2},
        {"message": "finished after a long think"},
    ]]})
    runtime_settings = host.settings
    runtime_settings.post_tool_quiet_warning = 0.3
    turn = runtime.run_turn(Agent(), "build it")
    assert turn.ok and turn.final_text == "finished after a long think"
    assert "quiet" in host.event_kinds()
    fake_codex.assert_wire_clean()


def test_other_threads_and_turns_are_ignored(fake_runtime, fake_codex):
    runtime, host = fake_runtime({"turns": [[{"foreign": True}, {"message": "mine"}]]})
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok and turn.final_text == "mine"
    texts = [e.text for e in host.events if e.kind == "text_delta"]
    assert texts == ["mine"]
    assert turn.messages == [{"role": "assistant", "content": "mine"}]
    fake_codex.assert_wire_clean()


def test_unknown_server_requests_get_method_not_found(fake_runtime, fake_codex):
    runtime, host = fake_runtime({"turns": [[
        {"request": {"method": "account/chatgptAuthTokens/refresh",
                     "params": {"reason": "unauthorized"}}},
        {"request": {"method": "item/tool/call", "params": {
            "threadId": "t", "turnId": "u", "callId": "c", "tool": "x", "arguments": {}}}},
        {"message": "ok"},
    ]]})
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok
    [refresh] = fake_codex.replies("account/chatgptAuthTokens/refresh")
    assert refresh["error"]["code"] == -32601
    [tool_call] = fake_codex.replies("item/tool/call")
    assert tool_call["result"] == {"contentItems": [], "success": False}
    assert host.approvals == []  # not approvals: answered safely without asking anyone
    fake_codex.assert_wire_clean()


def test_a_decision_still_pending_when_the_turn_ends_is_dropped(fake_runtime, fake_codex):
    release = threading.Event()
    asked = threading.Event()

    def slow_person(request):
        asked.set()
        release.wait(10)  # the person is still thinking when the turn ends
        return Decision.ACCEPT

    runtime, host = fake_runtime({"turns": [[{"command": "rm -rf build", "approval": True}]]},
                                 decide=slow_person)
    agent = Agent()
    threading.Thread(target=lambda: asked.wait(10) and runtime.interrupt(agent)).start()
    turn = runtime.run_turn(agent, "clean up")
    assert turn.interrupted
    [request] = host.approvals
    assert request.cancelled.is_set()  # an interactive host can drop its prompt
    # The command item never completed: the projection closes it instead of losing it.
    [call, result] = turn.messages
    assert call["tool_calls"][0]["function"]["name"] == "exec_command"
    assert "interrupted before the command finished" in result["content"]
    release.set()
    time.sleep(0.3)  # give the late decision every chance to be (wrongly) sent
    assert fake_codex.replies("item/commandExecution/requestApproval") == []
    fake_codex.assert_wire_clean()  # includes "no reply to an abandoned request"


def test_a_raising_or_malformed_decision_declines(fake_runtime, fake_codex, caplog):
    """Fail closed: a host that raises, or answers anything but a ``Decision`` — even the
    string "accept" — declines, and the wrong answer is logged naming the hook."""
    answers = iter([RuntimeError("prompt crashed"), {"weird": True}, "accept"])

    def decide(request):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    runtime, _host = fake_runtime({"turns": [[
        {"command": "one", "approval": True}, {"command": "two", "approval": True},
        {"command": "three", "approval": True}, {"message": "done"}]]}, decide=decide)
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok
    decisions = [r["result"]["decision"]
                 for r in fake_codex.replies("item/commandExecution/requestApproval")]
    assert decisions == ["decline", "decline", "decline"]
    wrong = [r.getMessage() for r in caplog.records if "must return" in r.getMessage()]
    assert wrong == [
        "the host's codex_approval hook returned a dict; it must return a Decision or None; "
        "using no answer",
        "the host's codex_approval hook returned a str; it must return a Decision or None; "
        "using no answer"]
    fake_codex.assert_wire_clean()


def test_the_fallback_is_not_asked_for_ordinary_failures(fake_runtime, fake_codex):
    runtime, host = fake_runtime({"turns": [[{"fail": {"info": "contextWindowExceeded",
                                                       "message": "too long"}}]]})
    turn = runtime.run_turn(Agent(), "go")
    assert turn.failure is not None and turn.failure.kind is FailureKind.CONTEXT_WINDOW
    assert host.fallbacks == [] and turn.fallback is None
    fake_codex.assert_wire_clean()


def test_an_expired_login_asks_for_codex_login_and_retires(fake_runtime, fake_codex):
    runtime, _host = fake_runtime({"stderr_at_start": ["WARN plugin prewarm: 401 Unauthorized"],
                                  "turns": [[{"fail": {
                                      "info": "unauthorized",
                                      "message": "Your access token could not be refreshed"}}]]})
    turn = runtime.run_turn(Agent(), "go")
    assert turn.failure is not None and turn.failure.kind is FailureKind.AUTH
    assert "codex login" in turn.error and turn.should_retire
    fake_codex.assert_wire_clean()


def test_will_retry_errors_are_not_terminal(fake_runtime, fake_codex):
    runtime, host = fake_runtime({"turns": [[
        {"error": {"info": {"responseStreamDisconnected": {"httpStatusCode": 502}},
                   "message": "Reconnecting... 1/5", "will_retry": True}},
        {"message": "recovered"}]]})
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok and turn.final_text == "recovered"
    assert "retrying" in host.event_kinds()
    fake_codex.assert_wire_clean()



def test_a_turn_still_retrying_at_its_deadline_fails_as_what_codex_was_retrying(fake_runtime,
                                                                              fake_codex):
    """The network down: codex retries the provider on its own until the turn's time is up.
    The failure is the provider codex could not reach (and its fix), not a time budget."""
    runtime, _host = fake_runtime({"turns": [[
        {"error": {"info": {"responseStreamConnectionFailed": {"httpStatusCode": None}},
                   "message": "Reconnecting... 2/5", "will_retry": True}},
        {"hang": True}]]}, turn_timeout=1.5)
    turn = runtime.run_turn(Agent(), "go")
    assert turn.timed_out and turn.failure is not None
    assert turn.failure.kind is FailureKind.SERVICE, turn.failure
    assert "still retrying" in turn.failure.describe()
    assert "check the network" in turn.failure.describe()
    fake_codex.assert_wire_clean()

def test_a_missing_binary_is_a_setup_failure_with_the_fix(tmp_path):
    settings = SessionSettings(codex_bin=str(tmp_path / "no-such-codex"), cwd=str(tmp_path))
    host = RecordingHost(settings)
    runtime = CodexRuntime(make_plugin_manager([host]))
    turn = runtime.run_turn(Agent(), "go")
    assert turn.failure is not None and turn.failure.kind is FailureKind.SETUP
    assert turn.failure.source == "codex_binary"
    assert "codex binary setting" in turn.error and "$CODEX_BIN" in turn.error
    # another host gets no Hermes advice: no Hermes config keys, files or commands
    for hermes_word in ("model.codex_bin", "config.yaml", "/codex-runtime", "hermes"):
        assert hermes_word not in turn.error.lower()
    assert host.finished and host.bound == []


def test_bad_settings_from_the_host_are_a_clear_error(tmp_path):
    """A setting the values refuse, or an answer that is not a ``SessionSettings`` (a host
    author's bug), fails the turn with a setup error that says what is wrong — codex never
    runs on settings the host did not give."""
    answers = iter([lambda: SessionSettings(turn_timeout=-5), lambda: {"turn_timeout": 60}])

    class Settings:
        @hookimpl(tryfirst=True)
        def codex_session_settings(self, agent):
            return next(answers)()

    host = RecordingHost(SessionSettings())
    runtime = CodexRuntime(make_plugin_manager([host, Settings()]))
    turn = runtime.run_turn(Agent(), "go")
    assert turn.failure is not None and turn.failure.kind is FailureKind.SETUP
    assert "turn_timeout must be a positive number" in turn.error
    turn = runtime.run_turn(Agent(), "go")
    assert turn.failure is not None and turn.failure.kind is FailureKind.SETUP
    assert ("the host's codex_session_settings hook returned a dict; it must return a "
            "SessionSettings or None") in turn.error
    assert host.seed_requests == 0 and host.bound == []


def test_a_stored_thread_that_is_not_a_binding_is_named_and_not_resumed(fake_runtime,
                                                                         fake_codex, caplog):
    """A host author's bug (the bare thread id, not a ``Binding``) is no stored thread: a fresh
    thread starts, and the log names the hook and the type it must return."""
    runtime, _host = fake_runtime({"turns": [[{"message": "ok"}]]}, stored="a-thread-id")
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok and turn.thread_origin == "started"
    assert fake_codex.requests("thread/resume") == []
    assert "the host's codex_stored_thread hook returned a str; it must return a Binding or " \
        "None" in caplog.text
    fake_codex.assert_wire_clean()


def test_a_resume_answered_with_another_thread_starts_fresh_and_seeded(fake_runtime, fake_codex):
    runtime, _host = fake_runtime({"resume": "other_id", "turns": [[{"message": "hello"}]]},
                                 stored=Binding("stored-thread-id"))
    history = [{"role": "user", "content": "earlier question"},
               {"role": "assistant", "content": "earlier answer"},
               {"role": "user", "content": "now"}]
    turn = runtime.run_turn(Agent(), "now", history)
    assert turn.ok and turn.thread_origin == "seeded"
    [start] = fake_codex.requests("thread/start")
    assert "earlier answer" in start["params"]["developerInstructions"]
    assert fake_codex.requests("thread/resume")[0]["params"]["threadId"] == "stored-thread-id"
    fake_codex.assert_wire_clean()


def test_a_silent_thread_start_is_bounded(fake_codex, tmp_path):
    fake_codex.set_scenario({"thread_start": "hang"})
    settings = SessionSettings(codex_bin=fake_codex.path, cwd=str(tmp_path), request_timeout=1.0)
    runtime = CodexRuntime(make_plugin_manager([RecordingHost(settings)]))
    started = time.monotonic()
    turn = runtime.run_turn(Agent(), "go")
    shut_down(runtime)
    assert time.monotonic() - started < 5
    assert turn.failure is not None and turn.failure.kind is FailureKind.TRANSPORT
    assert turn.should_retire


def test_an_interrupt_codex_never_answers_is_bounded(fake_runtime, fake_codex):
    runtime, host = fake_runtime({"interrupt": "hang", "turns": [[{"message": "busy"},
                                                                  {"hang": True}]]})
    agent = Agent()
    interrupted_at = interrupt_when_streaming(runtime, host, agent)
    turn = runtime.run_turn(agent, "go")
    assert turn.turn_id is not None  # the interrupt reached a running turn
    assert time.monotonic() - interrupted_at[0] < 10  # control_timeout 2 s, then the grace
    assert turn.interrupted and turn.should_retire
    fake_codex.assert_wire_clean()


def test_codex_killed_while_an_approval_is_pending(fake_runtime, fake_codex):
    import os
    import signal

    asked = threading.Event()

    def slow_person(request):
        asked.set()
        request.cancelled.wait(10)
        return Decision.ACCEPT

    runtime, host = fake_runtime({"turns": [[{"command": "deploy", "approval": True}]]},
                                 decide=slow_person)
    agent = Agent()

    def kill_codex():
        asked.wait(10)
        os.kill(runtime.session_for(agent).connection.pid, signal.SIGKILL)

    threading.Thread(target=kill_codex).start()
    started = time.monotonic()
    turn = runtime.run_turn(agent, "deploy it")
    assert time.monotonic() - started < 5
    assert turn.failure is not None and turn.failure.kind is FailureKind.TRANSPORT
    [request] = host.approvals
    assert request.cancelled.is_set()  # the person's prompt is dropped


def test_codex_killed_during_compaction_ends_it_at_once(fake_runtime, fake_codex):
    import os
    import signal

    runtime, _host = fake_runtime({"turns": [[{"message": "history"}]],
                                  "compaction_turn": [{"sleep": 0.2}, {"hang": True}]})
    agent = Agent()
    runtime.run_turn(agent, "make history")
    threading.Timer(0.6, lambda: os.kill(runtime.session_for(agent).connection.pid,
                                         signal.SIGKILL)).start()
    started = time.monotonic()
    result = runtime.compact(agent)
    assert time.monotonic() - started < 5
    assert result.failure is not None and result.failure.kind is FailureKind.TRANSPORT
    assert not result.compacted


def test_a_duplicated_turn_completed_does_not_leak_into_the_next_turn(fake_runtime, fake_codex):
    runtime, _host = fake_runtime({"turns": [[{"message": "first"}, {"complete_twice": True}],
                                            [{"message": "second"}]]})
    agent = Agent()
    assert runtime.run_turn(agent, "one").final_text == "first"
    second = runtime.run_turn(agent, "two")
    assert second.ok and second.final_text == "second"
    fake_codex.assert_wire_clean()


def test_a_stderr_flood_of_hundreds_of_megabytes_keeps_memory_bounded(fake_runtime, fake_codex):
    import psutil

    runtime, _host = fake_runtime({"turns": [[{"stderr_flood_mb": 300}, {"message": "done"}]]})
    before = psutil.Process().memory_info().rss
    turn = runtime.run_turn(Agent(), "log a lot")
    grown = (psutil.Process().memory_info().rss - before) / 2**20
    print(f"\nstderr flood: 300 MiB, client RSS grew {grown:.1f} MiB")
    assert turn.ok and turn.final_text == "done"
    assert grown < 50, f"client memory grew by {grown:.0f} MiB on a 300 MiB stderr flood"


def test_the_binary_removed_between_two_turns_is_a_setup_failure(fake_codex, tmp_path):
    import os
    import shutil
    import signal

    fake_codex.set_scenario({"turns": [[{"message": "first"}]]})
    binary = tmp_path / "bin" / "codex"
    binary.parent.mkdir()
    shutil.copy(fake_codex.path, binary)
    settings = SessionSettings(codex_bin=str(binary), cwd=str(tmp_path))
    host = RecordingHost(settings)
    runtime = CodexRuntime(make_plugin_manager([host]))
    agent = Agent()
    try:
        assert runtime.run_turn(agent, "one").final_text == "first"
        binary.unlink()  # an upgrade removed it, or a cleanup ran
        connection = runtime.session_for(agent).connection
        os.kill(connection.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while connection.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        # the dead process is noticed before the turn is sent: reconnecting finds no binary
        second = runtime.run_turn(agent, "two")
        third = runtime.run_turn(agent, "three")  # and again, with the same clear message
    finally:
        shut_down(runtime)
    for turn in (second, third):
        assert turn.failure is not None and turn.failure.kind is FailureKind.SETUP
        assert "does not exist" in turn.error and "codex binary setting" in turn.error


def test_requests_after_turn_completed_and_between_turns_are_answered(fake_runtime, fake_codex):
    def approval(thread="t", turn="u"):
        return {"method": "item/commandExecution/requestApproval",
                "params": {"threadId": thread, "turnId": turn, "itemId": "cmd-late",
                           "startedAtMs": 1, "command": "rm -rf build"}}

    user_input = {"method": "item/tool/requestUserInput",
                  "params": {"threadId": "t", "turnId": "u", "itemId": "ask-1",
                             "isBlocking": True,
                             "questions": [{"header": "h", "id": "q", "question": "?"}]}}
    refresh = {"method": "account/chatgptAuthTokens/refresh",
               "params": {"reason": "unauthorized", "previousAccountId": None}}
    runtime, host = fake_runtime({"turns": [[
        {"message": "done"},
        {"complete_then_requests": {"now": [user_input, approval()],
                                    "later": [refresh, approval()], "after": 0.3}},
    ]]})
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok and turn.final_text == "done"
    deadline = time.monotonic() + 10
    while len(fake_codex.replies()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)  # no further turn: the between-turns requests are answered anyway
    answers = [(r["method"], r.get("result"), (r.get("error") or {}).get("code"))
               for r in fake_codex.replies()]
    assert answers == [
        ("item/tool/requestUserInput", {"answers": {}}, None),
        ("item/commandExecution/requestApproval", {"decision": "decline"}, None),
        ("account/chatgptAuthTokens/refresh", None, -32601),
        ("item/commandExecution/requestApproval", {"decision": "decline"}, None),
    ]
    assert host.approvals == []  # nobody was asked about a turn that had ended
    fake_codex.assert_wire_clean()


def test_a_stale_prompt_never_holds_up_the_next_turns_first_approval(fake_runtime, fake_codex):
    release = threading.Event()
    withdrawn = []

    def person(request):
        if request.command == "echo first":
            request.cancelled.add_callback(lambda: withdrawn.append(request.command))
            release.wait(15)  # a prompt nobody answers (and that ignores the withdrawal)
            return Decision.ACCEPT
        return Decision.ACCEPT

    runtime, host = fake_runtime({"turns": [
        [{"command": "echo first", "approval": True, "output": "first"}],
        [{"command": "echo second", "approval": True, "output": "second"},
         {"message": "second ran"}],
    ]}, decide=person)
    agent = Agent()

    def interrupt_when_asked():
        deadline = time.monotonic() + 20
        while not host.approvals and time.monotonic() < deadline:
            time.sleep(0.02)
        runtime.interrupt(agent)

    threading.Thread(target=interrupt_when_asked, daemon=True).start()
    try:
        first = runtime.run_turn(agent, "one")
        assert first.interrupted
        assert withdrawn == ["echo first"]  # the host was told to drop its prompt
        started = time.monotonic()
        second = runtime.run_turn(agent, "two")
        assert second.ok and second.final_text == "second ran"
        assert time.monotonic() - started < 5  # not queued behind the stale prompt
    finally:
        release.set()
    fake_codex.assert_wire_clean()


def test_server_overloaded_is_retried_with_bounded_backoff(fake_runtime, fake_codex):
    runtime, _host = fake_runtime({"overload": {"thread/start": 1, "turn/start": 2},
                                   "turns": [[{"message": "made it"}]]})
    started = time.monotonic()
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok and turn.final_text == "made it"
    assert time.monotonic() - started < 10
    refused = [r for r in fake_codex.log() if r.get("kind") == "request"
               and r.get("method") in ("thread/start", "turn/start")]
    assert [r["method"] for r in refused] == ["thread/start", "thread/start", "turn/start",
                                              "turn/start", "turn/start"]


def test_endless_overload_ends_as_a_classified_failure(fake_runtime, fake_codex):
    runtime, _host = fake_runtime({"overload": {"turn/start": 99}})
    turn = runtime.run_turn(Agent(), "go")
    assert turn.failure is not None and "overloaded" in turn.error.lower()


def test_a_resume_that_times_out_keeps_the_thread_for_the_next_attempt(fake_codex, tmp_path):
    settings = SessionSettings(codex_bin=fake_codex.path, cwd=str(tmp_path), request_timeout=1.0)
    fake_codex.set_scenario({"turns": [[{"message": "one"}]]})
    host = RecordingHost(settings)
    runtime = CodexRuntime(make_plugin_manager([host]))
    first = runtime.run_turn(Agent(), "one")
    shut_down(runtime)
    assert first.ok and host.bound == [first.thread_id]

    fake_codex.set_scenario({"resume": "hang"})
    host.seed_requests = 0
    runtime = CodexRuntime(make_plugin_manager([host]))
    agent = Agent()
    failed = runtime.run_turn(agent, "two")
    assert failed.failure is not None and failed.failure.kind is FailureKind.TRANSPORT
    fake_codex.set_scenario({"turns": [[{"message": "three"}]]})
    again = runtime.run_turn(agent, "three")
    shut_down(runtime)
    assert again.ok and again.thread_origin == "resumed" and again.thread_id == first.thread_id
    assert host.seed_requests == 0  # never started fresh


def test_a_named_codex_home_that_does_not_exist_is_never_created(fake_codex, tmp_path):
    missing = tmp_path / "typo-codex-home"
    settings = SessionSettings(codex_bin=fake_codex.path, codex_home=str(missing),
                               cwd=str(tmp_path))
    runtime = CodexRuntime(make_plugin_manager([RecordingHost(settings)]))
    turn = runtime.run_turn(Agent(), "go")
    shut_down(runtime)
    assert turn.failure is not None and turn.failure.kind is FailureKind.SETUP
    assert "does not exist" in turn.error and "Create it" in turn.error
    assert not missing.exists()
    assert fake_codex.log() == []  # codex was not even started


@pytest.mark.parametrize(("decision", "exec_answer", "patch_answer"), [
    (Decision.ACCEPT, "approved", "approved"),
    (Decision.ACCEPT_FOR_SESSION, "approved_for_session", "approved_for_session"),
    (Decision.DECLINE, {"denied": {"rejection": "Declined."}},
     {"denied": {"rejection": "Declined."}}),
])
def test_legacy_v1_approvals_are_asked_and_answered_in_their_own_shape(
        fake_runtime, fake_codex, decision, exec_answer, patch_answer):
    runtime, host = fake_runtime({"turns": [[
        {"request": {"method": "execCommandApproval", "params": {
            "callId": "c1", "conversationId": "00000000-0000-0000-0000-000000000001",
            "command": ["rm", "-rf", "build dir"], "cwd": "/tmp", "parsedCmd": [],
            "reason": "cleanup"}}},
        {"request": {"method": "applyPatchApproval", "params": {
            "callId": "c2", "conversationId": "00000000-0000-0000-0000-000000000001",
            "fileChanges": {}, "reason": None}}},
        {"message": "ok"},
    ]]}, decide=lambda request: decision)
    turn = runtime.run_turn(Agent(), "go")
    assert turn.ok
    asked = {request.method: request for request in host.approvals}
    assert asked["execCommandApproval"].command == "rm -rf 'build dir'"  # argv shown as a line
    assert asked["execCommandApproval"].kind == "command"
    [exec_reply] = fake_codex.replies("execCommandApproval")
    [patch_reply] = fake_codex.replies("applyPatchApproval")
    assert exec_reply["result"] == {"decision": exec_answer}
    assert patch_reply["result"] == {"decision": patch_answer}
    fake_codex.assert_wire_clean()  # each answer valid against the binary's own schema
