"""The wire layer against the REAL codex binary, offline on the mock provider."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.protocol import (
    compact_start_params,
    sandbox_policy,
    thread_fork_params,
    thread_resume_params,
    thread_start_params,
    to_user_input,
    turn_interrupt_params,
    turn_start_params,
    turn_steer_params,
)
from hermes_codex_runtime.wire import (
    MIN_CODEX_VERSION,
    AppServerConnection,
    Inbound,
    ServerError,
    TransportClosed,
    probe_version,
)

TURN_BUDGET = 30.0


def run_turn(conn: AppServerConnection, thread_id: str, text: str, *,
             decide=lambda request: {"decision": "accept"}, **turn_fields) -> list[Inbound]:
    """Start a turn and consume the stream until ITS turn/completed (bounded)."""
    turn = conn.request("turn/start", turn_start_params(thread_id, to_user_input(text),
                                                        **turn_fields))["turn"]
    seen: list[Inbound] = []
    deadline = time.monotonic() + TURN_BUDGET
    while time.monotonic() < deadline:
        message = conn.next_inbound(timeout=deadline - time.monotonic())
        if message is None:
            break
        seen.append(message)
        if message.is_request:
            conn.respond(message.id, decide(message))
        if message.method == "turn/completed" and message.params["turn"]["id"] == turn["id"]:
            return seen
    raise AssertionError(f"turn {turn['id']} did not complete within {TURN_BUDGET}s")


def start_thread(conn: AppServerConnection, tmp_path, **fields) -> str:
    result = conn.request("thread/start", thread_start_params(cwd=str(tmp_path), **fields))
    return result["thread"]["id"]


def completed_items(messages: list[Inbound], kind: str) -> list[dict]:
    return [m.params["item"] for m in messages
            if m.method == "item/completed" and m.params["item"]["type"] == kind]


def test_handshake_reports_a_supported_version(app_server, codex_binary):
    conn = app_server()
    assert conn.server is not None
    assert conn.server.version == probe_version(codex_binary) >= MIN_CODEX_VERSION
    assert conn.server.user_agent.startswith("hermes-codex-runtime/")
    assert conn.is_alive()


def test_a_text_turn_streams_deltas_that_add_up_to_the_answer(app_server, mock_provider,
                                                              tmp_path):
    mock_provider.enqueue(mp.text("The answer is forty-two.", deltas=6))
    conn = app_server()
    thread_id = start_thread(conn, tmp_path)
    messages = run_turn(conn, thread_id, "What is the answer?")
    deltas = [m.params["delta"] for m in messages if m.method == "item/agentMessage/delta"]
    assert len(deltas) == 6
    assert "".join(deltas) == "The answer is forty-two."
    assert completed_items(messages, "agentMessage")[-1]["text"] == "The answer is forty-two."
    assert messages[-1].params["turn"]["status"] == "completed"
    assert mock_provider.saw_text("What is the answer?", role="user")


@pytest.mark.parametrize(("decision", "status"), [("accept", "completed"),
                                                  ("decline", "declined")])
def test_command_approval_round_trip(app_server, mock_provider, tmp_path, decision, status):
    mock_provider.enqueue(mp.exec_command("echo approved-$((6*7))", escalated=True),
                          mp.text("done"))
    conn = app_server()
    thread_id = start_thread(conn, tmp_path, approval_policy="on-request",
                             approvals_reviewer="user")
    requests: list[Inbound] = []

    def decide(request: Inbound) -> dict:
        requests.append(request)
        return {"decision": decision}

    messages = run_turn(conn, thread_id, "run it", decide=decide)
    assert [r.method for r in requests] == ["item/commandExecution/requestApproval"]
    assert requests[0].id == 0  # server request ids start at 0: never "no id"
    command = completed_items(messages, "commandExecution")[0]
    assert command["status"] == status
    follow_up = json.dumps(mock_provider.requests[-1]["input"])
    if decision == "accept":
        assert "approved-42" in command["aggregatedOutput"]
        assert "approved-42" in follow_up
    else:
        assert "approved-42" not in follow_up


def test_every_request_the_package_builds_is_schema_clean(protocol_schema, tmp_path):
    picture = tmp_path / "p.png"
    picture.write_bytes(b"\x89PNG")
    settings = dict(cwd=str(tmp_path), model="mock-model", model_provider="mock",
                    approval_policy="on-request", approvals_reviewer="user", sandbox="read-only",
                    developer_instructions="host prompt", base_instructions="base",
                    personality="none", config={"model_verbosity": "low"},
                    service_tier="flex")
    items = to_user_input([{"type": "text", "text": "hi"},
                           {"type": "image_url", "image_url": {"url": "https://x.test/a.png",
                                                               "detail": "low"}},
                           {"type": "input_image", "image_url": str(picture)}])
    built = {
        "thread/start": thread_start_params(ephemeral=False, service_name="hermes", **settings),
        "thread/resume": thread_resume_params("thr_1", **settings),
        "thread/fork": thread_fork_params("thr_1", "turn_1", **settings),
        "turn/start": turn_start_params(
            "thr_1", items, cwd=str(tmp_path), model="mock-model", effort="low",
            approval_policy="never", approvals_reviewer="user",
            sandbox_policy=sandbox_policy("workspace-write", writable_roots=[str(tmp_path)]),
            output_schema={"type": "object"}, summary="auto", client_user_message_id="m1"),
        "turn/steer": turn_steer_params("thr_1", "turn_1", items),
        "turn/interrupt": turn_interrupt_params("thr_1", "turn_1"),
        "thread/compact/start": compact_start_params("thr_1"),
    }
    for policy in ("read-only", "danger-full-access"):
        verdict = protocol_schema.check_client_request(
            "turn/start", turn_start_params("t", items, sandbox_policy=sandbox_policy(policy)))
        assert verdict.clean, (policy, verdict)
    for method, params in built.items():
        verdict = protocol_schema.check_client_request(method, params)
        assert verdict.clean, (method, verdict)
    # The validator is not vacuous: a typo is caught as a silently-ignored field.
    typo = dict(built["thread/start"], developerInstruction="lost")
    assert protocol_schema.check_client_request("thread/start", typo).ignored == [
        "params.developerInstruction"]


def test_the_real_binary_accepts_every_built_request(app_server, mock_provider, tmp_path):
    conn = app_server()
    thread_id = start_thread(conn, tmp_path, approval_policy="on-request",
                             approvals_reviewer="user", sandbox="read-only",
                             developer_instructions="HOST-PROMPT-7", model="mock-model",
                             model_provider="mock")
    # A slow stream keeps the turn open long enough to steer it, then interrupt it.
    slow = mp.text("slow " * 40, deltas=40, delta_delay=0.05)
    mock_provider.enqueue(slow, slow, slow)
    turn = conn.request("turn/start", turn_start_params(
        thread_id, to_user_input("go"), effort="low", summary="auto",
        sandbox_policy=sandbox_policy("read-only")))["turn"]
    first = conn.next_inbound(timeout=10)
    assert first is not None
    steer = conn.request("turn/steer", turn_steer_params(thread_id, turn["id"],
                                                         to_user_input("shorter please")))
    assert steer["turnId"] == turn["id"]
    with pytest.raises(ServerError):  # a steer into another turn is refused, not misrouted
        conn.request("turn/steer", turn_steer_params(thread_id, "not-this-turn",
                                                     to_user_input("x")))
    # Right after a steer codex briefly answers "no active turn" to an interrupt (0.163):
    # interrupt once the steered request is streaming.
    deadline = time.monotonic() + TURN_BUDGET
    while time.monotonic() < deadline:
        message = conn.next_inbound(timeout=1)
        if message is not None and message.method == "item/agentMessage/delta":
            break
    assert conn.request("turn/interrupt", turn_interrupt_params(thread_id, turn["id"])) == {}
    status = None
    while time.monotonic() < deadline and status is None:
        message = conn.next_inbound(timeout=1)
        if message is not None and message.method == "turn/completed":
            status = message.params["turn"]["status"]
    assert status == "interrupted"
    assert mock_provider.saw_text("HOST-PROMPT-7", role="developer")
    assert conn.request("thread/compact/start", compact_start_params(thread_id)) == {}
    compacted = False
    deadline = time.monotonic() + TURN_BUDGET
    while time.monotonic() < deadline:
        message = conn.next_inbound(timeout=1)
        if message is None:
            continue
        if message.method == "item/completed":
            compacted |= message.params["item"]["type"] == "contextCompaction"
        if message.method == "turn/completed":
            break
    assert compacted
    # And from another process, resume with the same overrides (a thread has one writer:
    # codex refuses a resume while another process still holds it).
    conn.close()
    other = app_server()
    resumed = other.request("thread/resume", thread_resume_params(
        thread_id, cwd=str(tmp_path), developer_instructions="HOST-PROMPT-7"))
    assert resumed["thread"]["id"] == thread_id


def test_a_pending_request_fails_at_once_when_codex_dies(app_server, tmp_path):
    conn = app_server()
    os.kill(conn.pid, signal.SIGSTOP)  # it can no longer answer anything
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            conn.request("thread/start", thread_start_params(cwd=str(tmp_path)), timeout=30)
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.3)
    assert caller.is_alive()
    killed_at = time.monotonic()
    os.kill(conn.pid, signal.SIGKILL)
    caller.join(timeout=5)
    elapsed = time.monotonic() - killed_at
    assert not caller.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], TransportClosed)
    assert elapsed < 1.0, f"the pending request waited {elapsed:.2f}s after codex died"
    with pytest.raises(TransportClosed):
        while True:
            conn.next_inbound(timeout=1)


def test_close_reaps_descendants_in_their_own_session(app_server, mock_provider, tmp_path):
    # `setsid -w` stays the parent of a sleep that lives in a new session: the shape of an
    # MCP server that setsid'd away from codex's process group.
    mock_provider.enqueue(mp.tool_call("exec_command", {
        "cmd": "setsid -w sleep 300", "yield_time_ms": 500, "login": False,
        "sandbox_permissions": "require_escalated", "justification": "test"}), mp.text("ok"))
    conn = app_server()
    thread_id = start_thread(conn, tmp_path)
    run_turn(conn, thread_id, "start a daemon")
    descendants = psutil.Process(conn.pid).children(recursive=True)
    own_session = [p for p in descendants if os.getsid(p.pid) != os.getsid(conn.pid)]
    assert own_session, "the test needs a descendant in its own session"
    started = time.monotonic()
    closers = [threading.Thread(target=conn.close) for _ in range(3)]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join(timeout=10)
    assert time.monotonic() - started < 5
    assert not psutil.pid_exists(conn.pid) or psutil.Process(conn.pid).status() == "zombie"
    survivors = [p.pid for p in descendants if p.is_running() and p.status() != "zombie"]
    assert survivors == []
    conn.close()  # idempotent


def test_stderr_tail_is_redacted(app_server, mock_provider, tmp_path):
    secret = "sk-live-" + "abcdefghijklmnop1234"
    conn = app_server()
    # codex 0.163 logs "Unknown model <name> is used" to stderr: a real secret in real stderr.
    thread_id = start_thread(conn, tmp_path, model=secret)
    run_turn(conn, thread_id, "hi")
    tail = conn.stderr_tail(50)
    assert any("Unknown model [REDACTED]" in line for line in tail), tail
    assert not any(secret in line for line in tail)
    assert not any("\x1b[" in line for line in tail)  # ANSI colours stripped for people


def test_the_app_server_gets_an_allow_listed_environment(app_server, monkeypatch, codex_binary,
                                                         codex_home):
    unrelated = {
        "TELEGRAM_BOT_TOKEN": "123:tg", "ANTHROPIC_API_KEY": "ak", "OPENROUTER_API_KEY": "or",
        "OP_SERVICE_ACCOUNT_TOKEN": "op", "DATABASE_URL": "postgres://u:p@127.0.0.1/db",
        "HF_TOKEN": "hf", "NOTION_API_KEY": "notion", "SOME_HARMLESS_LOOKING_NAME": "x",
    }
    wanted = {"MOCK_PROVIDER_KEY": "sk-provider", "EXTRA_PASSED": "yes", "LC_TIME": "C",
              "HTTPS_PROXY": "http://127.0.0.1:3128", "CODEX_SOMETHING": "c"}
    for name, value in {**unrelated, **wanted}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RUST_LOG", raising=False)
    conn = app_server(provider_keys=("MOCK_PROVIDER_KEY",), env_passthrough=("EXTRA_*",))
    raw = Path(f"/proc/{conn.pid}/environ").read_bytes().decode()
    environ = dict(entry.split("=", 1) for entry in raw.split("\0") if "=" in entry)
    assert sorted(set(unrelated) & set(environ)) == []
    for name, value in wanted.items():
        assert environ[name] == value
    assert environ["RUST_LOG"] == "warn"
    assert environ["CODEX_HOME"] == str(codex_home)
    assert environ["HOME"] == os.environ["HOME"]
    if codex_binary.path_prepend:
        assert environ["PATH"].split(os.pathsep)[0] == codex_binary.path_prepend


def test_a_20mb_line_from_codex_is_read(app_server, tmp_path):
    payload = tmp_path / "big.bin"
    payload.write_bytes(os.urandom(15 * 1024 * 1024))
    conn = app_server()
    # fs/readFile answers with the whole file base64-encoded: one ~20 MB line on stdout.
    result = conn.request("fs/readFile", {"path": str(payload)}, timeout=60)
    assert len(result["dataBase64"]) >= 20 * 1024 * 1024
    assert conn.is_alive()
    assert conn.request("thread/start", thread_start_params(cwd=str(tmp_path)))["thread"]["id"]


def test_an_invalid_codex_config_is_refused(codex_binary, mock_provider, tmp_path):
    from hermes_codex_runtime.offline.codex_home import (
        CodexConfigError,
        prepare_codex_home,
        verify_codex_home,
    )

    home = prepare_codex_home(tmp_path / "home", mock_provider.base_url,
                              codex_bin=codex_binary.path)
    config = home / "config.toml"
    config.write_text(config.read_text().replace('wire_api = "responses"', 'wire_api = "chat"'))
    with pytest.raises(CodexConfigError, match="wire_api"):
        verify_codex_home(codex_binary.path, home)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (mp.usage_limit(), "usage_limit"),
        (mp.rate_limit(), "rate_limit"),
        (mp.server_error(), "service"),
        (mp.unauthorized(), "auth"),
        (mp.failed(), "other"),
    ],
)
def test_provider_failures_reach_the_client_classified(app_server, mock_provider, tmp_path,
                                                       reply, kind):
    from hermes_codex_runtime.protocol import classify, classify_error_notification

    mock_provider.enqueue(reply)
    conn = app_server()
    thread_id = start_thread(conn, tmp_path)
    messages = run_turn(conn, thread_id, "hi")
    final = messages[-1].params["turn"]
    assert final["status"] == "failed"
    terminal = [classify_error_notification(m.params) for m in messages if m.method == "error"]
    terminal = [failure for failure, will_retry in terminal if not will_retry]
    assert terminal, [m.method for m in messages]
    assert terminal[-1].kind == kind, terminal[-1]
    error = final.get("error") or {}
    assert classify(error.get("codexErrorInfo"), error.get("message", "")).kind == kind


def test_every_codex_error_info_of_the_installed_binary_is_classified(protocol_schema):
    """A codexErrorInfo the binary can send but the classifier does not know would fall to
    OTHER (a vague error, no fallback, no `codex login` hint): none may be unknown."""
    import json

    from hermes_codex_runtime.protocol.failures import known_error_infos

    schema = json.loads((protocol_schema.directory / "v2" / "ErrorNotification.json").read_text())
    info = schema["definitions"]["CodexErrorInfo"]
    tags: set[str] = set()
    for branch in info.get("anyOf") or info.get("oneOf") or ():
        tags.update(branch.get("enum") or ())
        tags.update(branch.get("required") or ())
    assert len(tags) > 15
    assert tags <= known_error_infos(), sorted(tags - known_error_infos())
