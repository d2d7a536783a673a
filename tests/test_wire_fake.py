"""The wire layer against the fake app-server: faults the real binary cannot be made to produce.

Every fake run validates what the client sent (and what the fake sent) against the schema that
the installed codex binary generates; each test ends with the wire clean.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time

import psutil
import pytest
from support import wait_for

from hermes_codex_runtime.protocol import thread_start_params, to_user_input, turn_start_params
from hermes_codex_runtime.wire import (
    AppServerConnection,
    CodexBinaryError,
    Inbound,
    RequestTimeout,
    SpawnOptions,
    TransportClosed,
    probe_version,
    resolve_codex_binary,
)
from hermes_codex_runtime.wire.connection import STDERR_TAIL_LINES
from hermes_codex_runtime.wire.inbound import may_start_process
from hermes_codex_runtime.wire.proctree import snapshot_descendants

BUDGET = 15.0


def spawn(fake, **options) -> AppServerConnection:
    return AppServerConnection.spawn(SpawnOptions(codex_bin=fake.path, **options))


def start_turn(conn: AppServerConnection, text: str = "go") -> tuple[str, str]:
    thread_id = conn.request("thread/start", thread_start_params(cwd=os.getcwd()))["thread"]["id"]
    turn = conn.request("turn/start", turn_start_params(thread_id, to_user_input(text)))["turn"]
    return thread_id, turn["id"]


def drain(conn: AppServerConnection, until: str = "turn/completed",
          answer=None) -> list[Inbound]:
    seen: list[Inbound] = []
    deadline = time.monotonic() + BUDGET
    while time.monotonic() < deadline:
        message = conn.next_inbound(timeout=deadline - time.monotonic())
        if message is None:
            break
        seen.append(message)
        if message.is_request and answer is not None:
            answer(message)
        if message.method == until:
            return seen
    raise AssertionError(f"{until} did not arrive within {BUDGET}s: {[m.method for m in seen]}")


def test_garbage_and_partial_lines_are_kept_as_diagnostics_not_fatal(fake_codex):
    fake_codex.set_scenario({"turns": [[
        {"garbage": "this is not json"},
        {"partial_json": True},
        {"garbage": "[1, 2, 3]"},
        {"message": "still here", "deltas": 2},
    ]]})
    with spawn(fake_codex) as conn:
        start_turn(conn)
        messages = drain(conn)
        deltas = "".join(m.params["delta"] for m in messages
                         if m.method == "item/agentMessage/delta")
        assert deltas == "still here"
        diagnostics = conn.diagnostics()
        assert any("non-JSON" in line and "this is not json" in line for line in diagnostics)
        assert any("non-object JSON" in line for line in diagnostics)
        assert len(diagnostics) == 3
        assert conn.is_alive()
    fake_codex.assert_wire_clean()


def test_server_request_id_zero_is_answered(fake_codex):
    fake_codex.set_scenario({"turns": [[{"command": "ls", "approval": True, "output": "a\n"}]]})
    with spawn(fake_codex) as conn:
        start_turn(conn)
        requests: list[Inbound] = []

        def answer(message: Inbound) -> None:
            requests.append(message)
            conn.respond(message.id, {"decision": "accept"})

        messages = drain(conn, answer=answer)
        assert [r.id for r in requests] == [0]
        done = [m.params["item"] for m in messages if m.method == "item/completed"]
        assert done[-1]["status"] == "completed"
    assert fake_codex.replies("item/commandExecution/requestApproval")[0]["result"] == {
        "decision": "accept"}
    fake_codex.assert_wire_clean()


def test_the_fake_rejects_what_codex_would_and_records_ignored_fields(fake_codex):
    with spawn(fake_codex) as conn:
        conn.request("thread/start", {"cwd": "/", "developerInstruction": "typo"})
        with pytest.raises(Exception, match="missing field `threadId`"):
            conn.request("turn/start", {"input": []})
    problems = fake_codex.wire_problems()
    assert any("params.developerInstruction" in p for p in problems)
    assert any("missing field `threadId`" in p for p in problems)


def test_codex_crashing_mid_turn_ends_the_stream_at_once_with_a_redacted_tail(fake_codex):
    fake_codex.set_scenario({"turns": [[
        {"message": "working", "deltas": 1},
        {"crash": 3, "crash_stderr": [
            "thread 'main' panicked: token refresh failed",
            "request had Authorization: Bearer sk-proj-abcdefghijklmnopqrstuv"]},
    ]]})
    conn = spawn(fake_codex)
    try:
        start_turn(conn)
        started = time.monotonic()
        with pytest.raises(TransportClosed):
            drain(conn)
        assert time.monotonic() - started < 2.0
        assert not conn.is_alive()
        with pytest.raises(TransportClosed):  # pending requests now fail at once too
            conn.request("thread/start", {}, timeout=30)
        deadline = time.monotonic() + 2
        while len(conn.stderr_tail()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # stderr is drained by its own thread
        tail = "\n".join(conn.stderr_tail())
        assert "panicked" in tail
        assert "sk-proj-" not in tail and "Bearer [REDACTED]" in tail
    finally:
        conn.close()
    fake_codex.assert_wire_clean()


def test_initialize_that_never_answers_times_out_and_leaves_no_process(fake_codex):
    fake_codex.set_scenario({"initialize": "hang"})
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    started = time.monotonic()
    with pytest.raises(RequestTimeout, match="initialize"):
        spawn(fake_codex, initialize_timeout=0.5)
    assert time.monotonic() - started < 5
    after = {p.pid for p in psutil.Process().children(recursive=True)
             if p.status() != psutil.STATUS_ZOMBIE}
    assert after <= before


def test_exit_at_startup_is_a_transport_error_with_the_redacted_reason(fake_codex):
    fake_codex.set_scenario({"initialize": "exit"})
    with pytest.raises(TransportClosed, match=r"exited during start-up \(exit code 1\)") as info:
        spawn(fake_codex)
    assert "invalid configuration" in str(info.value)


def test_a_too_old_codex_is_refused_with_an_install_hint(fake_codex):
    fake_codex.set_scenario({"version": "0.100.0"})
    binary = resolve_codex_binary(fake_codex.path)
    with pytest.raises(CodexBinaryError, match=r"older than the 0\.125\.0") as info:
        probe_version(binary)
    assert "pip install openai-codex-cli-bin" in str(info.value)
    with pytest.raises(CodexBinaryError, match=r"0\.100\.0"):  # via userAgent at initialize
        spawn(fake_codex)


def test_close_reaps_a_grandchild_in_its_own_session_even_when_codex_ignores_eof(fake_codex):
    fake_codex.set_scenario({"ignore_eof": True, "turns": [[{"grandchild": True},
                                                          {"message": "spawned"}]]})
    conn = spawn(fake_codex)
    start_turn(conn)
    drain(conn)
    [(pid, _created)] = fake_codex.grandchildren()
    assert os.getsid(pid) == pid  # its own session: killing codex's group would miss it
    started = time.monotonic()
    conn.close(grace=0.5)
    assert time.monotonic() - started < 4
    assert fake_codex.live_grandchildren() == []
    assert conn.returncode is not None
    fake_codex.assert_wire_clean()


def test_close_reaps_a_helper_codex_starts_after_the_last_look(fake_codex):
    """codex may start a helper while it shuts down (the sandbox's file-system helper): no
    snapshot saw it, and it is reparented to init the moment codex exits — it is found in the
    process group codex leads."""
    fake_codex.set_scenario({"helper_at_eof": True})
    conn = spawn(fake_codex)
    assert os.getpgid(conn.pid) == conn.pid  # codex leads a group of its own
    try:
        conn.close(grace=0.5)
        assert len(fake_codex.grandchildren()) == 1
        assert fake_codex.live_grandchildren() == []
    finally:
        fake_codex.kill_leftovers()


@pytest.mark.parametrize(("helper", "ending"), [
    ("helper", "died"), ("sandboxed", "closed"), ("sandboxed", "died"),
    ("sandboxed-launcher-stays", "closed"), ("sandboxed-launcher-stays", "died")])
def test_a_helper_no_look_saw_is_reaped_when_codex_ends(fake_codex, helper, ending):
    """What no look at codex's tree finds once codex is gone: a helper in codex's process group
    started between two looks, and codex's sandbox helper (``bwrap … -- codex
    --codex-run-as-fs-helper``, in a session of its own) — an orphan of init that wraps this
    very binary once the launcher codex started it from has ended, or the child of a launcher
    that is still there, which reaping the launcher would orphan. All are reaped, whether codex
    was closed or died by itself mid-turn."""
    fake_codex.set_scenario({"ignore_eof": ending == "closed", "turns": [[
        {"grandchild": helper}, {"message": "spawned"},
        *([{"crash": 3}] if ending == "died" else [])]]})
    conn = spawn(fake_codex)
    try:
        with contextlib.suppress(TransportClosed):  # it may die before turn/start's reply
            start_turn(conn)
            drain(conn)
        [(pid, _created)] = fake_codex.grandchildren()
        if helper == "sandboxed":
            assert psutil.Process(pid).ppid() == 1 and os.getpgid(pid) != conn.pid
        if helper == "sandboxed-launcher-stays" and ending == "closed":
            assert psutil.Process(pid).ppid() != 1 and os.getpgid(pid) != conn.pid
        if ending == "closed":
            conn.close(grace=0.5)
        assert wait_for(lambda: fake_codex.live_grandchildren() == [], timeout=10)
    finally:
        conn.close(grace=0.5)
        fake_codex.kill_leftovers()


def test_an_orphaned_app_server_of_the_same_binary_is_not_taken_for_a_helper(fake_codex):
    """A codex app-server a service manager runs is an orphan of init too, running the same
    binary — but not wrapped by a sandbox: closing our codex leaves it alone."""
    launcher = ("import os, subprocess, sys; os.setpgid(0, 0); print(subprocess.Popen("
                "[sys.argv[1], '600'], executable='sleep', stdin=subprocess.DEVNULL, "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")  # `BINARY 600`
    binary = os.path.realpath(fake_codex.path)
    conn = spawn(fake_codex)
    service = int(subprocess.run([sys.executable, "-c", launcher, binary], capture_output=True,
                                 text=True, timeout=30, check=True).stdout)
    try:
        assert psutil.Process(service).cmdline()[0] == binary
        assert psutil.Process(service).ppid() == 1
        conn.close(grace=0.5)
        assert psutil.Process(service).is_running()
    finally:
        with contextlib.suppress(psutil.Error):
            psutil.Process(service).kill()


def test_a_50mb_line_is_read(fake_codex):
    size = 50 * 1024 * 1024
    fake_codex.set_scenario({"turns": [[{"huge_delta": size}]]})
    with spawn(fake_codex) as conn:
        start_turn(conn)
        messages = drain(conn)
        [delta] = [m for m in messages if m.method == "item/agentMessage/delta"]
        assert len(delta.params["delta"]) == size
    fake_codex.assert_wire_clean()


def test_stderr_is_drained_and_bounded(fake_codex):
    flood = [f"log line {i} " + "x" * 100 for i in range(20_000)]
    fake_codex.set_scenario({"stderr_at_start": [*flood, "y" * 100_000, "last line"]})
    with spawn(fake_codex) as conn:
        deadline = time.monotonic() + 10
        while "last line" not in (conn.stderr_tail(1) or [""])[0]:
            assert time.monotonic() < deadline, "stderr was not drained"
            time.sleep(0.02)
        tail = conn.stderr_tail(10_000)
        assert len(tail) == STDERR_TAIL_LINES
        assert "<stderr line truncated>" in tail
        assert max(len(line) for line in tail) <= 4096
        assert conn.request("thread/start", {})["thread"]["id"]  # never blocked on stderr


def test_a_reply_to_an_unknown_request_id_is_a_diagnostic(fake_codex):
    fake_codex.set_scenario({"turns": [[{"garbage": '{"id": 999, "result": {}}'},
                                        {"message": "ok"}]]})
    with spawn(fake_codex) as conn:
        start_turn(conn)
        drain(conn)
        assert any("unknown request id" in line for line in conn.diagnostics())


def test_unknown_server_requests_can_be_refused_with_method_not_found(fake_codex):
    fake_codex.set_scenario({"turns": [[{"request": {"method": "account/chatgptAuthTokens/refresh",
                                                     "params": {"reason": "unauthorized"}}},
                                        {"message": "ok"}]]})
    with spawn(fake_codex) as conn:
        start_turn(conn)

        def answer(message: Inbound) -> None:
            conn.respond_error(message.id, -32601, f"method not found: {message.method}")

        drain(conn, answer=answer)
    [reply] = fake_codex.replies("account/chatgptAuthTokens/refresh")
    assert reply["error"]["code"] == -32601
    fake_codex.assert_wire_clean()


# ------------------------------------------------------------------ binary lookup


def test_binary_lookup_errors_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("CODEX_BIN", raising=False)
    with pytest.raises(CodexBinaryError, match="is a directory"):
        resolve_codex_binary(str(tmp_path))
    script = tmp_path / "codex"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(CodexBinaryError, match="chmod \\+x"):
        resolve_codex_binary(str(script))
    with pytest.raises(CodexBinaryError, match="does not exist"):
        resolve_codex_binary(str(tmp_path / "missing" / "codex"))
    with pytest.raises(CodexBinaryError, match="not on PATH"):
        resolve_codex_binary("codex-that-is-not-installed")
    with pytest.raises(CodexBinaryError, match="must be a path"):
        resolve_codex_binary(42)  # type: ignore[arg-type]
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(CodexBinaryError, match="does not look like codex"):
        probe_version(resolve_codex_binary(str(script)))
    monkeypatch.setenv("CODEX_BIN", str(tmp_path / "nope"))
    with pytest.raises(CodexBinaryError, match="CODEX_BIN"):
        resolve_codex_binary()


def test_a_codex_path_with_spaces_works(protocol_schema, tmp_path):
    from hermes_codex_runtime.testing.fake import FakeCodex

    fake = FakeCodex(tmp_path / "dir with spaces", protocol_schema.directory)
    binary = resolve_codex_binary(fake.path)
    assert binary.source == "setting" and " " in binary.path
    assert probe_version(binary) == (0, 163, 0)
    with spawn(fake) as conn:
        assert conn.server is not None and conn.server.version == (0, 163, 0)
    fake.assert_wire_clean()


def test_resume_across_fake_processes_and_no_rollout(fake_codex):
    with spawn(fake_codex) as first:
        thread_id = first.request("thread/start", thread_start_params(cwd="/"))["thread"]["id"]
    with spawn(fake_codex) as second:  # a new process knows the thread (state on disk)
        resumed = second.request("thread/resume", {"threadId": thread_id, "cwd": "/"})
        assert resumed["thread"]["id"] == thread_id
        with pytest.raises(Exception, match="no rollout found for thread id nope"):
            second.request("thread/resume", {"threadId": "nope"})
    fake_codex.assert_wire_clean()


def test_a_hung_turn_still_answers_an_interrupt(fake_codex):
    fake_codex.set_scenario({"turns": [[{"message": "thinking..."}, {"hang": True}]]})
    with spawn(fake_codex) as conn:
        thread_id, turn_id = start_turn(conn)
        time.sleep(0.2)
        assert conn.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
        messages = drain(conn)
        assert messages[-1].params["turn"]["status"] == "interrupted"
    fake_codex.assert_wire_clean()


def test_a_lagging_consumer_gets_every_delta_coalesced_never_dropped(fake_codex):
    """Backpressure joins queued deltas of the same item instead of dropping them: a consumer
    that falls 50,000 deltas behind still receives the whole text, in fewer pieces."""
    fake_codex.set_scenario({"turns": [[{"flood": 50_000, "flood_delta": "tok "}]]})
    with spawn(fake_codex) as conn:
        start_turn(conn)
        deadline = time.monotonic() + BUDGET
        while conn.stream._queue.qsize() < 5_000 and time.monotonic() < deadline:
            time.sleep(0.05)  # the consumer is busy elsewhere; codex keeps streaming
        time.sleep(0.5)
        messages = drain(conn)
    deltas = [m.params["delta"] for m in messages if m.method == "item/agentMessage/delta"]
    [completed] = [m.params["item"]["text"] for m in messages if m.method == "item/completed"]
    assert "".join(deltas) == completed == "tok " * 50_000
    assert len(deltas) < 50_000 and conn.coalesced_deltas > 0  # it did lag, and nothing was lost


def test_a_helper_codex_starts_for_a_running_item_is_reaped_when_codex_dies_mid_turn(
        fake_codex):
    """codex starts a command's helpers (the sandbox's file-system helper) after the item's
    item/started; killed before the turn ends, it leaves them: the item's item/completed is
    where the connection sees them."""
    command = {"type": "commandExecution", "id": "c1", "command": "true", "cwd": "/",
               "status": "inProgress", "commandActions": []}
    fake_codex.set_scenario({"turns": [[
        {"notify": {"method": "item/started", "params": {"item": command, "startedAtMs": 0}}},
        {"grandchild": True},
        {"notify": {"method": "item/completed", "params": {
            "item": {**command, "status": "completed", "exitCode": 0, "aggregatedOutput": ""},
            "completedAtMs": 0}}},
        {"hang": True}]]})
    conn = spawn(fake_codex)
    try:
        start_turn(conn)
        drain(conn, until="item/completed")
        assert len(fake_codex.live_grandchildren()) == 1  # started, in a session of its own
        os.kill(conn.pid, signal.SIGKILL)  # mid-turn; nobody calls close()
        deadline = time.monotonic() + 10
        while fake_codex.live_grandchildren() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake_codex.live_grandchildren() == []
    finally:
        conn.close(grace=0.5)
        fake_codex.kill_leftovers()


@pytest.mark.parametrize(("method", "kind", "may_start"), [
    ("thread/started", None, True),  # its MCP servers
    ("item/completed", "commandExecution", True),
    ("item/completed", "fileChange", True),
    ("item/completed", "mcpToolCall", True),
    ("item/completed", "hookPrompt", True),
    ("item/completed", "aKindCodexAddsLater", True),  # unknown: assume it runs something
    ("item/started", "commandExecution", False),  # what it runs starts after this
    ("item/completed", "agentMessage", False),
    ("item/completed", "reasoning", False),
    ("item/agentMessage/delta", None, False),
    ("turn/completed", None, False),  # the reader decides that one by what the turn ran
])
def test_the_reader_looks_for_codex_processes_only_where_codex_may_have_started_one(
        method, kind, may_start):
    """A look at codex's processes reads all of /proc: a text-only turn takes none."""
    params = {"item": {"type": kind, "id": "i1"}} if kind else {}
    assert may_start_process(Inbound(method, params)) is may_start


def _own_session(proc: psutil.Process) -> bool:
    with contextlib.suppress(OSError, psutil.Error):
        return os.getsid(proc.pid) == proc.pid and proc.name() == "sleep"
    return False


def test_a_snapshot_finds_every_descendant_also_in_a_session_of_its_own(tmp_path):
    """What a reaper relies on: children, grandchildren and a grandchild that left for its own
    session are all found (as psutil's own walk finds them); a process that is gone has none."""
    ready = tmp_path / "ready"
    tree = psutil.Popen(["sh", "-c", f"sleep 60 & setsid sleep 60 & : > {ready}; wait"])
    try:
        deadline = time.monotonic() + BUDGET
        def settled() -> bool:
            children = tree.children()
            return ready.exists() and len(children) >= 2 and any(map(_own_session, children))

        while not settled() and time.monotonic() < deadline:
            time.sleep(0.02)
        found = {proc.pid for proc in snapshot_descendants(tree.pid)}
        assert found == {proc.pid for proc in tree.children(recursive=True)}
        assert len(found) >= 2 and any(_own_session(psutil.Process(pid)) for pid in found)
    finally:
        for proc in [*tree.children(recursive=True), tree]:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        tree.wait(timeout=BUDGET)
    assert snapshot_descendants(tree.pid) == []


def test_what_a_codex_that_dies_by_itself_started_is_reaped_when_it_dies(fake_codex):
    """A codex killed (or crashed) mid-life leaves its own children — MCP servers, shells, the
    sandbox's helper — in sessions of their own, reparented to init the moment it is gone: no
    snapshot taken then finds them. The connection keeps what it saw codex start and ends it —
    here a thread's MCP server, started as the thread loads, seen by its (text-only) first
    turn's end although the client opted out of thread/started."""
    fake_codex.set_scenario({"turns": [[{"grandchild": True}, {"message": "spawned"}]]})
    conn = spawn(fake_codex, opt_out_notifications=("thread/started",))
    try:
        start_turn(conn)
        drain(conn)
        [(pid, _created)] = fake_codex.grandchildren()
        assert os.getsid(pid) == pid  # its own session
        os.kill(conn.pid, signal.SIGKILL)  # codex dies by itself; nobody calls close()
        deadline = time.monotonic() + 10
        while fake_codex.live_grandchildren() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake_codex.live_grandchildren() == []
        assert not conn.is_alive()
    finally:
        conn.close(grace=0.5)


@pytest.mark.parametrize("script", ["#!/bin/sh\nexit 127\n",
                                    "#!/bin/sh\necho 'sh: node: not found' >&2\nexit 127\n"],
                         ids=["silent", "not-found"])
def test_a_binary_that_cannot_run_codex_is_named_with_the_setting_to_fix(tmp_path, script):
    """A wrapper that prints nothing and exits 127 (or says what it could not find): the error
    names the binary, says what it printed, and is the binary's to fix — not codex's."""
    from hermes_codex_runtime.wire import AppServerConnection, CodexBinaryError, SpawnOptions

    wrapper = tmp_path / "codex"
    wrapper.write_text(script)
    wrapper.chmod(0o755)
    with pytest.raises(CodexBinaryError) as info:
        AppServerConnection.spawn(SpawnOptions(codex_bin=str(wrapper), codex_home=str(tmp_path)))
    message = str(info.value)
    assert str(wrapper) in message and "exit code 127" in message
    assert "$CODEX_BIN" in message and "--version" in message
    assert ("printed nothing" in message) == ("not found" not in script)
