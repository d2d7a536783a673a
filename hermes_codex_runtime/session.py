"""One codex thread for one host session: start or resume, the turn loop, approvals, interrupt,
steer, compaction, and the result of every turn.

Owns:

* **Start/resume.** A stored thread id is resumed with ``thread/resume`` carrying the current
  developer instructions, cwd and model/provider. If codex cannot resume it ("no rollout found",
  another id answered, another process still writing it) a fresh thread is started in the same
  call, seeded with the host's history — never surfaced as an error. The host's system prompt goes
  once per thread as ``developerInstructions``; the history seed is appended only on a fresh thread.
* **The turn loop.** It blocks on the connection's ordered inbound stream (no polling interval),
  ignores other threads' and turns' notifications, projects items into host messages
  (:mod:`.projector`), folds token usage (:mod:`.usage`), and ends on THIS turn's
  ``turn/completed`` — or at once when the process dies, or at the elapsed deadline.
* **Approvals.** Each server request is answered with a schema-valid reply. Decisions are asked
  of the host per request, on a worker thread, so a person deciding never blocks the stream; if the
  turn ends (or codex resolves the request) first, the prompt is cancelled and nothing is answered
  late. Unknown methods get ``-32601``.
* **Failures.** Everything codex or the process does ends as a :class:`TurnResult` with a
  classified :class:`~hermes_codex_runtime.protocol.failures.Failure`; no exception escapes.

It knows nothing about any particular host: the runtime passes callables in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import queue
import random
import re
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from hermes_codex_runtime.pool import SHARED, Channel, ServerPool, launch_key
from hermes_codex_runtime.pool.launch import launch
from hermes_codex_runtime.projector import Projector
from hermes_codex_runtime.protocol import (
    APPROVAL_METHODS,
    METHOD_NOT_FOUND,
    Decision,
    Failure,
    FailureKind,
    HostToolCall,
    HostToolOutput,
    InputError,
    answer_for,
    approval_kind,
    classify,
    classify_error_notification,
    compact_start_params,
    invalid_configuration,
    is_known,
    plain_text,
    safe_answer,
    scope_of,
    thread_resume_params,
    thread_start_params,
    to_user_input,
    turn_interrupt_params,
    turn_start_params,
    turn_steer_params,
)
from hermes_codex_runtime.protocol.answers import DYNAMIC_TOOL_CALL
from hermes_codex_runtime.usage import UsageAccumulator
from hermes_codex_runtime.values import (
    MAX_TIMEOUT,
    ApprovalRequest,
    Cancellation,
    CodexEvent,
    SessionSettings,
    TurnResult,
)
from hermes_codex_runtime.wire import (
    AppServerConnection,
    CodexBinaryError,
    CodexConfigError,
    CodexHomeError,
    Inbound,
    RequestTimeout,
    ServerError,
    SpawnOptions,
    TransportClosed,
    WireError,
    command_env_policy,
    provider_credential_names,
    redact,
)
from hermes_codex_runtime.wire.codex_config import (
    DEFAULT_PROVIDER,
    chosen_provider,
    codex_home_path,
)
from hermes_codex_runtime.wire.websocket import EndpointError

log = logging.getLogger(__name__)

TURN_ABORTED_MARKERS = ("<turn_aborted>", "<turn_aborted/>")
SERVER_OVERLOADED = -32001
DECIDER_EXIT_WAIT = 0.1
#: While a turn runs and codex is silent (the model is thinking, a provider is slow), a
#: ``working`` event this often tells the host the turn is alive (its inactivity watchdogs).
HEARTBEAT = 2.0
OVERLOAD_RETRIES = 4  # then the overload is the turn's error; waits 0.1, 0.2, 0.4, 0.8 s (+jitter)
_DELTA = "item/agentMessage/delta"
_INTERRUPT_RETRY_WINDOW = 1.0


class _Pending:
    __slots__ = ("dropped", "method", "params", "request", "request_id")

    def __init__(self, request_id: Any, method: str, params: Mapping[str, Any],
                 request: ApprovalRequest) -> None:
        self.request_id = request_id
        self.method = method
        self.params = params
        self.request = request
        self.dropped = False


# codex's JSON-RPC error for a thread it will not make because config.toml cannot be loaded
_CONFIG_REFUSED = re.compile(r"\s*(failed to load config|invalid configuration)", re.IGNORECASE)

#: What a session talks to: its own connection, or its channel on a shared one.
Connection = AppServerConnection | Channel

Approver = Callable[[ApprovalRequest], Any]
EventSink = Callable[[CodexEvent], None]
SeedProvider = Callable[[], str | None]
ToolRunner = Callable[[HostToolCall], Any]
ConnectionFactory = Callable[[SpawnOptions], AppServerConnection]


class CodexSession:
    """One codex thread (and its app-server process) for one host session.

    ``run_turn``/``compact`` are called by one thread at a time; ``interrupt``, ``steer`` and
    ``close`` may be called from any thread.
    """

    def __init__(
        self,
        settings: SessionSettings | None = None,
        *,
        developer_instructions: str | None = None,
        stored_thread_id: str | None = None,
        approve: Approver | None = None,
        on_event: EventSink | None = None,
        connection_factory: ConnectionFactory | None = None,
        call_tool: ToolRunner | None = None,
        pool: ServerPool | None = None,
        stored_endpoint: str | None = None,
        predecessor: CodexSession | None = None,
    ) -> None:
        self.settings = settings or SessionSettings()
        self.developer_instructions = developer_instructions
        self._stored_thread_id = stored_thread_id
        self._approve = approve
        self._on_event = on_event
        self._call_tool = call_tool
        self._connect = connection_factory or AppServerConnection.spawn
        self._pool = pool
        self._stored_endpoint = stored_endpoint
        #: The session this one replaces (same conversation, changed settings): closed once this
        #: one has its connection — after it, when both share a process, so the thread and the
        #: process carry over; before it otherwise (codex allows one writer per thread).
        self._predecessor = predecessor
        #: The remote app-server this session's thread lives on (``None``: a local process).
        self.endpoint: str | None = None
        self._conn: Connection | None = None
        self.thread_id: str | None = None
        self.thread_origin: str | None = None
        self.model: str | None = None  # what codex said it runs the thread on
        self._interrupt = threading.Event()
        self._lock = threading.RLock()
        self._active_turn: str | None = None
        self._pending: dict[Any, _Pending] = {}
        self._file_changes: dict[str, tuple[Mapping[str, Any], ...]] = {}
        self._decisions: queue.SimpleQueue[_Pending | None] | None = None  # this turn's
        self._decider: threading.Thread | None = None
        self._leftover: list[Inbound] = []  # what arrived after turn/completed in its burst
        self._closed = False
        self.retired = False
        self._suspect = False  # a turn retired the session: its app-server may be wedged
        #: "Invalid configuration" warnings codex gave at the last start (shown at turn start).
        self.config_warnings: list[str] = []
        self._warned_config = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def cwd(self) -> str:
        """The working directory codex runs in."""
        return self.settings.cwd or os.getcwd()

    @property
    def connection(self) -> Connection | None:
        """The live connection, if started."""
        return self._conn

    def _emit(self, event: CodexEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:
            log.exception("the host's codex event handler raised; continuing")

    def _spawn(self) -> Connection:
        s = self.settings
        if s.codex_home and not os.path.isdir(s.codex_home):
            # codex app-server panics at start-up on a missing CODEX_HOME (0.163). A home the
            # user named is never created behind their back: a typo would log them out.
            raise CodexHomeError(
                f"The codex home {s.codex_home} does not exist (codex cannot start without it).",
                f"Run `codex login` with CODEX_HOME={s.codex_home} to create it and log in, or "
                "point the codex home setting at your existing codex home.")
        options = SpawnOptions(
            codex_bin=s.codex_bin, codex_home=s.codex_home, env=s.env, extra_env=s.extra_env,
            extra_args=s.extra_args, cwd=s.cwd, initialize_timeout=s.startup_timeout,
            client_version=s.client_version, registry_path=s.registry_path,
            provider_keys=provider_credential_names(s.codex_home, s.model_provider),
            # a name commands may inherit must first reach the process they inherit from
            env_passthrough=(*s.env_passthrough, *s.command_env_passthrough),
            experimental_api=bool(s.host_tools))
        predecessor, self._predecessor = self._predecessor, None
        if predecessor is not None and not self._shares_process(predecessor, options):
            predecessor.close()
            predecessor = None
        try:
            if self._pool is None:
                conn: Connection = launch(self._connect, options)
            else:
                conn = self._place(options)
        finally:
            if predecessor is not None:
                predecessor.close()
        try:
            self._check_config(conn)
        except BaseException:
            conn.close()
            raise
        self.endpoint = conn.endpoint
        return conn

    def _shares_process(self, other: CodexSession, options: SpawnOptions) -> bool:
        """True when this session will land on ``other``'s shared process (same launch key)."""
        conn = other.connection
        placement = self.settings.app_server
        return (self._pool is not None and isinstance(conn, Channel) and conn.is_alive()
                and (placement is None or placement.mode == SHARED)
                and conn.shared.key == ("shared", *launch_key(options)))

    def _place(self, options: SpawnOptions) -> Connection:
        """A channel from the pool. A thread stored on a remote app-server goes back to it; if
        that server is unreachable (and others are configured), or is no longer configured at
        all, the session starts a fresh thread seeded with the history — and says so."""
        assert self._pool is not None
        wanted = self._stored_endpoint
        conn = self._pool.channel(options, self.settings.app_server, spawn=self._connect,
                                  endpoint=wanted, thread_id=self._stored_thread_id)
        if wanted is not None and conn.endpoint != wanted and self._stored_thread_id:
            self._stored_thread_id = None  # its rollout is on the server we could not reach
            where = conn.endpoint or "a local app-server"
            self._emit(CodexEvent(
                "notice", f"the codex app-server {wanted} that held this conversation's thread "
                f"is unreachable or no longer configured; continuing on {where} with a fresh "
                "thread that carries the conversation so far"))
        return conn

    def _check_config(self, conn: Connection) -> None:
        """codex reports a ``config.toml`` it could not use ("Invalid configuration; using
        defaults") right at start-up, before ``initialize`` is answered. On its defaults it would
        talk to OpenAI — so when the user chose another provider (or the file cannot be read at
        all) nothing is sent and the turn fails with the reason; otherwise the turn runs and the
        warning is shown (``config_warning`` event) at its start."""
        problems: list[str] = []
        for message in conn.drain():  # before any thread exists: connection-level notes only
            text = invalid_configuration(message.params) \
                if message.method == "configWarning" else None
            if text:
                problems.append(redact(text))
        self.config_warnings = problems
        if not problems:
            return
        if conn.endpoint is not None:
            # a remote server's config.toml is its operator's: shown, not judged from here
            log.warning("the codex app-server at %s ignored its config.toml: %s", conn.endpoint,
                        "; ".join(problems))
            return
        home = codex_home_path(self.settings.codex_home)
        provider = chosen_provider(self.settings.codex_home, self.settings.model_provider)
        if provider is None or provider != DEFAULT_PROVIDER:
            chosen = f"the provider {provider!r}" if provider else "the provider you configured"
            raise CodexConfigError(
                f"codex ignored {home}/config.toml ({'; '.join(problems)}). On its defaults it "
                f"would send this conversation to OpenAI instead of {chosen}, so nothing was "
                "sent.",
                f"Fix {home}/config.toml; `codex` run in a terminal shows the same warning.")
        log.warning("codex ignored %s/config.toml and uses its defaults: %s", home,
                    "; ".join(problems))

    def _config_refused(self, conn: Connection, exc: ServerError) -> NoReturn:
        """codex refused a thread because it cannot load ``config.toml``. Its "Invalid
        configuration" warning can arrive after ``initialize`` is answered, so it is looked for
        again; either way the turn fails with the file named, and nothing was sent."""
        self._check_config(conn)  # raises when the warning says the chosen provider is lost
        home = codex_home_path(self.settings.codex_home)
        provider = chosen_provider(self.settings.codex_home, self.settings.model_provider)
        to = f" to the provider {provider!r}" if provider else ""
        raise CodexConfigError(
            f"codex could not load {home}/config.toml ({redact(exc.message)}), so nothing was "
            f"sent{to}.",
            f"Fix {home}/config.toml; `codex` run in a terminal shows the same error.")

    def _thread_overrides(self) -> dict[str, Any]:
        s = self.settings
        return {"cwd": self.cwd, "model": s.model, "model_provider": s.model_provider,
                "approval_policy": s.approval_policy, "approvals_reviewer": s.approvals_reviewer,
                "sandbox": s.sandbox, "personality": "none",
                "config": {"shell_environment_policy":
                           command_env_policy(s.command_env_passthrough)}}

    def ensure_started(self, seed: SeedProvider | None = None) -> str:
        """Spawn codex and start (or resume) the thread; returns its id. Raises :class:`WireError`
        (and ``ValueError`` for bad settings); :meth:`run_turn` turns those into results."""
        with self._lock:
            if self._closed:
                raise TransportClosed("the codex session is closed")
            if self._conn is not None and self.thread_id is not None:
                return self.thread_id
            if self._conn is None:
                self._conn = self._spawn()
            conn = self._conn
        overrides = self._thread_overrides()
        instructions = self.developer_instructions or None
        stored, self._stored_thread_id = self._stored_thread_id, None  # one attempt per id
        if stored:
            try:
                result = self._request(conn, "thread/resume", thread_resume_params(
                    stored, developer_instructions=instructions, **overrides))
                answered = (result.get("thread") or {}).get("id")
                self._note_model(result)
                if answered == stored:
                    self.thread_id, self.thread_origin = stored, "resumed"
                    log.info("codex thread %s resumed", stored)
                    return stored
                log.warning("codex answered thread/resume for %s with thread %r; starting fresh",
                            stored, answered)
            except ServerError as exc:
                if _CONFIG_REFUSED.match(exc.message):
                    self._stored_thread_id = stored  # the thread is fine; the config is not
                    self._config_refused(conn, exc)
                log.warning("codex could not resume thread %s (%s); starting a fresh thread",
                            stored, exc.message)
            except WireError:
                # No answer is not "no such thread": keep it for the next attempt.
                self._stored_thread_id = stored
                raise
        seed_text = seed() if seed is not None else None
        combined = "\n\n".join(p for p in (instructions, seed_text) if p) or None
        tools = [tool.spec() for tool in self.settings.host_tools] or None
        try:
            result = self._request(conn, "thread/start", thread_start_params(
                developer_instructions=combined, dynamic_tools=tools, **overrides))
        except ServerError as exc:
            if _CONFIG_REFUSED.match(exc.message):
                self._config_refused(conn, exc)
            raise
        thread_id = (result.get("thread") or {}).get("id")
        if not isinstance(thread_id, str) or not thread_id:
            raise ServerError("thread/start", -32603, "codex returned no thread id")
        self._note_model(result)
        self.thread_id = thread_id
        self.thread_origin = "seeded" if seed_text else "started"
        log.info("codex thread %s started (%s)", thread_id, self.thread_origin)
        return thread_id

    def _note_model(self, response: Mapping[str, Any]) -> None:
        model = response.get("model")
        if isinstance(model, str) and model:
            self.model = model

    def close(self) -> None:
        """Cancel pending approvals and close the app-server (its whole process tree)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.retired = True
            conn, self._conn = self._conn, None
            pending = self._take_pending()
            decisions, self._decisions = self._decisions, None
        _withdraw(pending)
        if decisions is not None:
            decisions.put(None)
        if conn is not None:
            self._let_go(conn)

    def _respawn(self) -> None:
        """After a turn that retired the process (it died, wedged, or its login went stale):
        reap it, and let the next start resume the same thread in a fresh process."""
        with self._lock:
            conn, self._conn = self._conn, None
            if self.thread_id:
                self._stored_thread_id = self.thread_id
                self._stored_endpoint = self.endpoint  # the server that holds its rollout
            self.thread_id = None
            self.retired = False
            pending = self._take_pending()
        _withdraw(pending)
        if conn is not None:
            self._let_go(conn)

    def _let_go(self, conn: Connection) -> None:
        """Close our connection or channel. After a turn that retired the session (codex died,
        wedged, timed out), a shared app-server takes no new sessions and ends with its last
        one: the next start gets a fresh process, the other sessions are not cut off."""
        if self._suspect and isinstance(conn, Channel):
            conn.shared.drain_out()
        self._suspect = False
        conn.close()

    def retire(self) -> None:
        """Mark the session unusable; the runtime replaces it before the next turn."""
        self.close()

    # ------------------------------------------------------------------ controls

    def interrupt(self) -> None:
        """Stop the active turn (from any thread). Before a turn starts, the next one is not
        launched at all."""
        self._interrupt.set()
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.wake("interrupt")

    def steer(self, text: str) -> bool:
        """Add guidance to the active turn (``turn/steer`` with ``expectedTurnId``). Returns True
        only when codex accepted it for that very turn."""
        cleaned = (text or "").strip()
        with self._lock:
            turn_id, thread_id, conn = self._active_turn, self.thread_id, self._conn
        if not cleaned or not turn_id or not thread_id or conn is None:
            return False
        try:
            items = to_user_input(cleaned)
            reply = conn.request("turn/steer", turn_steer_params(thread_id, turn_id, items),
                                 timeout=self.settings.control_timeout)
        except (WireError, InputError) as exc:
            log.info("turn/steer was not accepted: %s", exc)
            return False
        return reply.get("turnId") == turn_id

    @property
    def active_turn_id(self) -> str | None:
        """The id of the turn in flight, if any."""
        return self._active_turn

    # ------------------------------------------------------------------ turns

    def _start_or_fail(self, result: TurnResult, seed: SeedProvider | None) -> bool:
        try:
            self.ensure_started(seed)
        except CodexBinaryError as exc:
            source = "codex_config" if isinstance(exc, CodexConfigError) else \
                "codex_home" if isinstance(exc, CodexHomeError) else "codex_binary"
            result.fail(Failure(FailureKind.SETUP, str(exc), source=source), retire=True)
            return False
        except TransportClosed as exc:
            result.fail(self._transport_failure(f"codex app-server failed to start: {exc}"))
            return False
        except RequestTimeout as exc:
            result.fail(Failure(FailureKind.TRANSPORT, str(exc)), retire=True)
            return False
        except ServerError as exc:
            result.fail(classify(None, exc.message), retire=True)
            return False
        except EndpointError as exc:
            text = str(exc) if not exc.hint or exc.hint in str(exc) else f"{exc} {exc.hint}"
            result.fail(Failure(FailureKind.SETUP, redact(text), source="app_server"),
                        retire=True)
            return False
        except (WireError, ValueError, OSError) as exc:
            result.fail(Failure(FailureKind.SETUP, redact(str(exc))), retire=True)
            return False
        result.thread_id = self.thread_id
        result.thread_origin = self.thread_origin
        result.model = self.model
        result.endpoint = self.endpoint
        return True

    def run_turn(self, user_input: Any, *, images: Sequence[str] = (),
                 history_seed: SeedProvider | None = None) -> TurnResult:
        """Send one user message and drive the turn to its end. Never raises for anything codex
        or the process does."""
        result = TurnResult(submitted_user_text=plain_text(user_input))
        self._replace_if_gone()
        try:
            items = to_user_input(user_input, base_dir=self.cwd, images=images)
        except InputError as exc:
            result.fail(Failure(FailureKind.INPUT, str(exc)), retire=False)
            return result
        try:
            if not self._start_or_fail(result, history_seed):
                return result
            if self.config_warnings and not self._warned_config:
                self._warned_config = True  # once per session
                self._emit(CodexEvent("config_warning", "; ".join(self.config_warnings)))
            if self._interrupt.is_set():  # a hard stop during start-up is honoured here
                result.interrupted = True
                result.status = "interrupted"
                return result
            conn, thread_id = self._conn, self.thread_id
            assert conn is not None and thread_id is not None
            self._begin_turn(conn)
            try:
                self._start_and_drive(result, conn, thread_id, items)
            finally:
                self._end_turn(conn)
            return result
        finally:
            self._interrupt.clear()
            if result.should_retire:
                self.retired = True
                self._suspect = True

    def _start_and_drive(self, result: TurnResult, conn: Connection, thread_id: str,
                         items: list[dict[str, Any]]) -> None:
        try:
            reply = self._request(conn, "turn/start", turn_start_params(
                thread_id, items, model=self.settings.model, effort=self.settings.effort))
        except ServerError as exc:
            result.fail(classify(exc.data if isinstance(exc.data, dict | str) else None,
                                 exc.message), retire=False)
            return
        except RequestTimeout as exc:
            result.fail(Failure(FailureKind.TRANSPORT, str(exc)), retire=True)
            return
        except TransportClosed as exc:
            result.fail(self._transport_failure(str(exc)))
            return
        turn_id = (reply.get("turn") or {}).get("id")
        if not isinstance(turn_id, str):
            result.fail(Failure(FailureKind.OTHER, "codex returned no turn id"), retire=True)
            return
        result.turn_id = turn_id
        if self.settings.model:
            self.model = result.model = self.settings.model  # a turn override sticks
        self._drive(result, conn, thread_id, turn_id, learn_turn=False)

    def _replace_if_gone(self) -> None:
        """Before a turn: a session a turn retired, or whose app-server went away between turns
        (the process died, the remote server vanished), gets a fresh connection that resumes
        its thread — the turn is not sent into a dead connection first."""
        conn = self._conn
        if not self._closed and (self.retired or (conn is not None and not conn.is_alive())):
            if conn is not None and not conn.is_alive():
                log.info("the codex app-server of thread %s went away between turns (%s); "
                         "reconnecting", self.thread_id, conn.transport_error)
            self._respawn()

    def compact(self) -> TurnResult:
        """Native compaction (``thread/compact/start``), waiting for its own turn to complete."""
        result = TurnResult()
        self._replace_if_gone()
        try:
            if not self._start_or_fail(result, None):
                return result
            conn, thread_id = self._conn, self.thread_id
            assert conn is not None and thread_id is not None
            self._begin_turn(conn)
            try:
                conn.request("thread/compact/start", compact_start_params(thread_id),
                             timeout=self.settings.request_timeout)
            except ServerError as exc:
                result.fail(classify(None, exc.message), retire=False)
                return result
            except WireError as exc:
                result.fail(self._transport_failure(str(exc)))
                return result
            else:
                self._drive(result, conn, thread_id, None, learn_turn=True)
            finally:
                self._end_turn(conn)
            return result
        finally:
            self._interrupt.clear()
            if result.should_retire:
                self.retired = True
                self._suspect = True

    # ------------------------------------------------------------------ the loop

    def _request(self, conn: Connection, method: str,
                 params: dict[str, Any]) -> dict[str, Any]:
        """A request, retried with bounded backoff and jitter while codex answers "Server
        overloaded; retry later." (-32001)."""
        for attempt in range(OVERLOAD_RETRIES + 1):
            try:
                return conn.request(method, params, timeout=self.settings.request_timeout)
            except ServerError as exc:
                if exc.code != SERVER_OVERLOADED or attempt == OVERLOAD_RETRIES:
                    raise
                delay = 0.1 * 2 ** attempt * (1 + random.random() / 2)
                log.info("codex is overloaded (%s); retrying %s in %.2fs", exc.message, method,
                         delay)
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _transport_failure(self, message: str) -> Failure:
        conn = self._conn
        tail = conn.stderr_tail(12) if conn is not None else []
        primary = classify(None, "", stderr=tail)
        kind = FailureKind.AUTH if primary.kind is FailureKind.AUTH else FailureKind.TRANSPORT
        detail = redact(message)
        if tail:
            detail += "\ncodex stderr (last lines):\n" + "\n".join(tail)
        return Failure(kind, detail)

    def _send_interrupt(self, conn: Connection, thread_id: str, turn_id: str) -> bool:
        """``turn/interrupt``, bounded. codex briefly answers "no active turn" right after a
        steer, so a refusal is retried for a short while. True when codex took it."""
        deadline = time.monotonic() + _INTERRUPT_RETRY_WINDOW
        while True:
            try:
                conn.request("turn/interrupt", turn_interrupt_params(thread_id, turn_id),
                             timeout=self.settings.control_timeout)
                return True
            except ServerError as exc:
                if time.monotonic() >= deadline:
                    log.info("turn/interrupt refused: %s", exc.message)
                    return False
                time.sleep(0.05)
            except WireError as exc:
                log.warning("turn/interrupt failed: %s", exc)
                return False

    def _drive(self, result: TurnResult, conn: Connection, thread_id: str,
               turn_id: str | None, *, learn_turn: bool) -> None:
        settings = self.settings
        projector = Projector()
        usage = UsageAccumulator()
        with self._lock:
            self._active_turn = turn_id
        deadline = time.monotonic() + settings.turn_timeout
        interrupt_sent_at: float | None = None
        last_tool_done: float | None = None
        last_beat = time.monotonic()
        finished = False
        aborted = False
        try:
            while True:
                now = time.monotonic()
                if self._interrupt.is_set() and interrupt_sent_at is None and turn_id:
                    result.interrupted = True
                    interrupt_sent_at = now
                    if not self._send_interrupt(conn, thread_id, turn_id) and not conn.is_alive():
                        result.fail(self._transport_failure("codex exited during an interrupt"))
                        break
                limit = deadline
                if interrupt_sent_at is not None:
                    limit = min(limit, interrupt_sent_at + max(settings.control_timeout, 2.0))
                if now >= limit:
                    break
                wait = min(limit - now, max(0.0, last_beat + HEARTBEAT - now))
                if last_tool_done is not None:
                    wait = min(wait, max(0.0, last_tool_done + settings.post_tool_quiet_warning
                                         - now))
                try:
                    message = conn.next_inbound(timeout=max(wait, 0.001))
                except TransportClosed as exc:
                    result.fail(self._transport_failure(
                        f"the codex app-server process exited during the turn ({exc})"))
                    break
                if message is None or time.monotonic() - last_beat >= HEARTBEAT:
                    last_beat = time.monotonic()
                    if conn.is_alive():
                        self._emit(CodexEvent("working", "codex is working"))
                if message is None:
                    if last_tool_done is not None and time.monotonic() >= (
                            last_tool_done + settings.post_tool_quiet_warning):
                        log.warning("codex has been quiet for %.0fs after a tool result; still "
                                    "waiting (the turn deadline is %.0fs)",
                                    settings.post_tool_quiet_warning, settings.turn_timeout)
                        self._emit(CodexEvent("quiet", "codex is still working…"))
                        last_tool_done = None
                    continue
                burst = [message]
                burst.extend(conn.drain())
                stream: list[str] = []
                for index, message in enumerate(burst):
                    if message.is_local:
                        continue
                    if message.is_request:
                        self._on_server_request(message, thread_id)
                        continue
                    params = message.params
                    outcome: str | None
                    if message.method == _DELTA and turn_id is not None:
                        # The hot path: one streamed chunk of the answer.
                        if params.get("turnId") != turn_id or params.get(
                                "threadId", thread_id) != thread_id:
                            continue
                        outcome = self._on_delta(params, result, projector, stream)
                    else:
                        if stream:
                            self._flush_stream(stream)
                        scope = scope_of(params)
                        if learn_turn and turn_id is None:
                            if message.method == "turn/started" and \
                                    scope.thread_id == thread_id and scope.turn_id:
                                turn_id = scope.turn_id
                                result.turn_id = turn_id
                                with self._lock:
                                    self._active_turn = turn_id
                            continue
                        if not scope.belongs_to(thread_id, turn_id):
                            continue
                        outcome = self._on_notification(message, result, projector, usage)
                    if outcome == "tool_done":
                        last_tool_done = time.monotonic()
                    elif outcome == "activity":
                        last_tool_done = None
                    elif outcome in ("completed", "aborted"):
                        aborted = outcome == "aborted"
                        finished = True
                        self._leftover = burst[index + 1:]  # answered after the turn
                        break
                if stream:
                    self._flush_stream(stream)
                if finished:
                    break
            if not finished and result.failure is None:
                self._at_deadline(result, conn, thread_id, turn_id, projector,
                                  interrupted=interrupt_sent_at is not None)
        finally:
            result.messages = projector.finish()
            result.final_text = projector.final_text
            if aborted:
                result.final_text = ""
                result.messages = [m for m in result.messages
                                   if not _has_abort_marker(m.get("content"))]
            result.tool_iterations = projector.tool_iterations
            report = usage.report()
            result.usage = dataclasses.replace(report, model=self.model) if report else None
            result.thread_id = thread_id
            if result.should_retire:
                self.retired = True
                self._suspect = True

    def _at_deadline(self, result: TurnResult, conn: Connection, thread_id: str,
                     turn_id: str | None, projector: Projector, *, interrupted: bool) -> None:
        if interrupted:
            # codex took (or refused) the interrupt but never completed the turn.
            result.interrupted = True
            result.status = result.status or "interrupted"
            result.should_retire = True
            return
        if projector.has_completed_answer() and turn_id:
            log.warning("codex sent its final answer but no turn/completed before the deadline "
                        "(%.0fs); accepting the answer", self.settings.turn_timeout)
            if not self._send_interrupt(conn, thread_id, turn_id):
                result.should_retire = True
            result.status = "completed"
            return
        if turn_id:
            self._send_interrupt(conn, thread_id, turn_id)
        result.interrupted = True
        result.timed_out = True
        result.status = "interrupted"
        result.fail(Failure(FailureKind.TIMEOUT,
                            f"the codex turn did not finish within "
                            f"{self.settings.turn_timeout:g}s"),
                    retire=True)

    def _flush_stream(self, stream: list[str]) -> None:
        """One display event for the deltas of a burst: the host's stream callbacks (and their
        per-call work) run once per burst instead of once per token."""
        text = "".join(stream)
        stream.clear()
        if self._on_event is not None and text:
            self._emit(CodexEvent("text_delta", text, method=_DELTA))

    def _on_delta(self, params: Mapping[str, Any], result: TurnResult,
                  projector: Projector, stream: list[str]) -> str:
        projector.feed(_DELTA, params)
        delta = params.get("delta")
        if isinstance(delta, str):
            stream.append(delta)  # shown once per burst (see _flush_stream)
            if "<turn_aborted" in delta:
                result.interrupted = True
                result.status = "interrupted"
                result.fail(Failure(FailureKind.OTHER, "codex reported turn_aborted"),
                            retire=False)
                return "aborted"
        return "activity"

    def _on_notification(self, message: Inbound, result: TurnResult, projector: Projector,
                         usage: UsageAccumulator) -> str | None:
        method, params = message.method, message.params
        if method == "item/agentMessage/delta":
            delta = params.get("delta")
            projector.feed(method, params)
            if isinstance(delta, str):
                self._emit(CodexEvent("text_delta", delta, method=method, params=params))
                if _has_abort_marker(delta):
                    result.interrupted = True
                    result.status = "interrupted"
                    result.fail(Failure(FailureKind.OTHER, "codex reported turn_aborted"),
                                retire=False)
                    return "aborted"
            return "activity"
        if method in ("item/reasoning/summaryTextDelta", "item/reasoning/textDelta"):
            delta = params.get("delta")
            if isinstance(delta, str):
                self._emit(CodexEvent("reasoning_delta", delta, method=method, params=params))
            return "activity"
        if method == "item/commandExecution/outputDelta":
            projector.feed(method, params)
            delta = params.get("delta")
            if isinstance(delta, str) and delta:
                self._emit(CodexEvent("tool_output", delta, method=method, params=params))
            return "activity"
        if method == "turn/plan/updated":
            self._emit(CodexEvent("plan", _plan_text(params), method=method, params=params))
            return "activity"
        if method == "turn/diff/updated":
            self._emit(CodexEvent("diff", "", method=method, params=params))
            return "activity"
        if method == "item/started":
            item = params.get("item")
            if isinstance(item, Mapping) and item.get("type") == "fileChange" \
                    and isinstance(item.get("id"), str):
                changes = tuple(c for c in item.get("changes") or () if isinstance(c, Mapping))
                self._file_changes[item["id"]] = changes
            call = projector.feed(method, params)
            if call is not None:
                for text in projector.take_interim():
                    self._emit(CodexEvent("interim_message", text, method=method))
                self._emit(CodexEvent("tool_started", call.name, tool=call, method=method,
                                      params=params))
            if isinstance(item, Mapping) and item.get("type") == "contextCompaction":
                result.compacted = True
            return "activity"
        if method == "item/completed":
            item = params.get("item")
            call = projector.feed(method, params)
            if isinstance(item, Mapping):
                if item.get("type") == "contextCompaction":
                    result.compacted = True
                if item.get("type") == "agentMessage" and _has_abort_marker(item.get("text")):
                    result.interrupted = True
                    result.status = "interrupted"
                    result.fail(Failure(FailureKind.OTHER, "codex reported turn_aborted"),
                                retire=False)
                    return "aborted"
                if item.get("type") == "agentMessage" and item.get("phase") == "commentary":
                    for text in projector.take_interim():  # commentary is never the answer
                        self._emit(CodexEvent("interim_message", text, method=method))
            if call is not None:
                self._emit(CodexEvent("tool_completed", call.name, tool=call, method=method,
                                      params=params))
                return "tool_done"
            return "activity"
        if method == "thread/tokenUsage/updated":
            usage.add(params)
            return None
        if method == "model/rerouted":
            to_model = params.get("toModel")
            if isinstance(to_model, str) and to_model:
                log.info("codex rerouted the turn from %s to %s (%s)", params.get("fromModel"),
                         to_model, params.get("reason"))
                self.model = result.model = to_model
            return None
        if method == "thread/compacted":
            result.compacted = True
            return None
        if method == "error":
            failure, will_retry = classify_error_notification(params)
            if will_retry:
                self._emit(CodexEvent("retrying", failure.message, method=method, params=params))
            else:
                result.fail(failure)
            return None
        if method == "serverRequest/resolved":
            with self._lock:
                pending = self._pending.pop(params.get("requestId"), None)
                if pending is not None:
                    pending.dropped = True
            if pending is not None:
                pending.request.cancelled.set()
            return None
        if method == "turn/completed":
            raw_turn = params.get("turn")
            turn: Mapping[str, Any] = raw_turn if isinstance(raw_turn, Mapping) else {}
            status = turn.get("status")
            result.status = status if isinstance(status, str) else None
            if status == "interrupted":
                result.interrupted = True
            elif status == "failed":
                raw_error = turn.get("error")
                error: Mapping[str, Any] = raw_error if isinstance(raw_error, Mapping) else {}
                if result.failure is None:
                    result.fail(classify(error.get("codexErrorInfo"),
                                         str(error.get("message") or "the codex turn failed")))
            return "completed"
        return None

    # ------------------------------------------------------------------ approvals

    def _answer_directly(self, conn: Connection, message: Inbound, *,
                         in_turn: bool) -> bool:
        """Answer what needs no decision: unknown methods (``-32601``), requests with a fixed
        safe answer, and — outside a turn — approvals (declined: nobody is there to ask). True
        when ``message`` was answered here."""
        method, request_id = message.method, message.id
        assert request_id is not None
        try:
            if not is_known(method):
                log.warning("codex sent an unknown request %r; answering -32601", method)
                conn.respond_error(request_id, METHOD_NOT_FOUND, f"method not found: {method}")
                return True
            if method not in APPROVAL_METHODS:
                answer = safe_answer(method)
                assert answer is not None
                conn.respond(request_id, answer)
                return True
            if not in_turn:
                log.info("codex asked %s outside a turn; declining", method)
                declined = answer_for(method, Decision.DECLINE, dict(message.params))
                if declined is not None:
                    conn.respond(request_id, declined)
                return True
        except TransportClosed:
            return True
        return False

    def _idle_message(self, conn: Connection, message: Inbound) -> None:
        """A message that arrived while no turn runs (on the reader thread): requests are
        answered at once; notifications have no turn to belong to."""
        if message.is_request:
            self._answer_directly(conn, message, in_turn=False)
        elif not message.is_local:
            log.debug("codex notification between turns: %s", message.method)

    def _on_server_request(self, message: Inbound, thread_id: str) -> None:
        conn = self._conn
        if conn is None:
            return
        with self._lock:
            decisions = self._decisions
        if message.method == DYNAMIC_TOOL_CALL and decisions is not None \
                and self.settings.host_tools:
            self._run_host_tool(conn, message)
            return
        if self._answer_directly(conn, message, in_turn=decisions is not None):
            return
        assert decisions is not None
        method, params, request_id = message.method, message.params, message.id
        item_id = params.get("itemId") if isinstance(params.get("itemId"), str) else None
        request = ApprovalRequest(
            method=method,
            kind=approval_kind(method, params),
            params=params,
            thread_id=params.get("threadId") or thread_id,
            turn_id=params.get("turnId") or self._active_turn,
            item_id=item_id,
            command=_command_text(params.get("command")),
            cwd=_str_or_none(params.get("cwd")),
            reason=_str_or_none(params.get("reason")),
            changes=self._file_changes.get(item_id or "", ()),
        )
        pending = _Pending(request_id, method, params, request)
        with self._lock:
            self._pending[request_id] = pending
        self._emit(CodexEvent("approval_requested", request.summary(), method=method,
                              params=params))
        decisions.put(pending)

    def _run_host_tool(self, conn: Connection, message: Inbound) -> None:
        """Run one of the host's tools for codex, on the turn's thread (the host's own tool
        context — thread-local allow-lists, approval callbacks — is the caller's), and answer.
        A tool this session did not declare, or a host that raised, is a failed call."""
        call = HostToolCall.from_params(message.params)
        declared = {tool.name for tool in self.settings.host_tools}
        output = HostToolOutput(f"Unknown tool {call.tool!r}.", success=False)
        if call.tool in declared and self._call_tool is not None:
            try:
                answer = self._call_tool(call)
                if isinstance(answer, HostToolOutput):
                    output = answer
                elif isinstance(answer, str):
                    output = HostToolOutput(answer)
                else:
                    output = HostToolOutput(f"The tool {call.tool!r} returned nothing.",
                                            success=False)
            except Exception as exc:
                reason = redact(f"{type(exc).__name__}: {exc}")
                log.warning("the host's tool %s raised: %s", call.tool, reason)
                output = HostToolOutput(f"The tool {call.tool!r} failed: {reason}",
                                        success=False)
        elif call.tool not in declared:
            log.warning("codex called tool %r, which this session did not declare", call.tool)
        assert message.id is not None
        with contextlib.suppress(TransportClosed):
            conn.respond(message.id, output.answer())

    def _begin_turn(self, conn: Connection) -> None:
        """Before a turn (or compaction) is requested: the turn loop consumes the stream again,
        and the turn gets its OWN approval thread — decisions (possibly a person at a prompt)
        run there, one at a time, so neither the reader nor the turn loop waits for them, and a
        prompt left over from an earlier turn can't hold this turn's first approval up."""
        decisions: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        decider = threading.Thread(target=self._decide_loop, args=(decisions,),
                                   name="codex-approvals", daemon=True)
        decider.start()
        with self._lock:
            self._decisions, self._decider = decisions, decider
            self._leftover = []
        conn.set_idle_handler(None)

    def _end_turn(self, conn: Connection) -> None:
        """After a turn: withdraw every prompt still open for it, end its approval thread,
        answer the requests that arrived after ``turn/completed``, and answer anything that
        arrives before the next turn as it comes."""
        with self._lock:
            self._active_turn = None
            pending = self._take_pending()
            decisions, self._decisions = self._decisions, None
            decider, self._decider = self._decider, None
            leftover, self._leftover = self._leftover, []
        _withdraw(pending)
        if decisions is not None:
            decisions.put(None)
        if decider is not None:
            decider.join(DECIDER_EXIT_WAIT)  # at once, unless a host prompt still blocks it
        for message in leftover:
            self._idle_message(conn, message)
        with contextlib.suppress(Exception):
            conn.set_idle_handler(functools.partial(self._idle_message, conn))

    def _decide_loop(self, decisions: queue.SimpleQueue[_Pending | None]) -> None:
        while True:
            pending = decisions.get()
            if pending is None:
                return
            self._decide(pending)

    def _decide(self, pending: _Pending) -> None:
        decision = Decision.DECLINE
        if self._approve is not None and not pending.request.cancelled.is_set():
            try:
                decision = Decision.coerce(self._approve(pending.request))
            except Exception:
                log.exception("the host's approval decision raised; declining")
                decision = Decision.DECLINE
        answer = answer_for(pending.method, decision, dict(pending.params))
        with self._lock:
            if pending.dropped or self._pending.get(pending.request_id) is not pending:
                log.info("dropping a late approval decision for request %s",
                         pending.request_id)
                return
            del self._pending[pending.request_id]
            conn = self._conn
        if conn is None or answer is None:
            return
        try:
            conn.respond(pending.request_id, answer)
        except TransportClosed:
            return
        self._emit(CodexEvent("approval_answered", decision.value, method=pending.method,
                              params=pending.params))

    def _take_pending(self) -> list[_Pending]:
        """Every open approval, marked dropped (call with the lock held; withdraw after)."""
        pending = list(self._pending.values())
        for item in pending:
            item.dropped = True
        self._pending.clear()
        return pending


def _withdraw(pending: Sequence[_Pending]) -> None:
    for item in pending:
        item.request.cancelled.set()


def _plan_text(params: Mapping[str, Any]) -> str:
    """``2/5 done; now: <step>`` for a ``turn/plan/updated``."""
    steps = [s for s in params.get("plan") or () if isinstance(s, Mapping)]
    done = sum(1 for s in steps if s.get("status") == "completed")
    current = next((str(s.get("step")) for s in steps if s.get("status") == "inProgress"), "")
    text = f"{done}/{len(steps)} done"
    return f"{text}; now: {current}" if current else text


def _command_text(value: Any) -> str | None:
    """The command of an approval: a string (v2), or an argv list (the legacy v1 method)."""
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        return shlex.join(value)
    return _str_or_none(value)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _has_abort_marker(text: Any) -> bool:
    return isinstance(text, str) and any(marker in text for marker in TURN_ABORTED_MARKERS)


__all__ = [
    "MAX_TIMEOUT",
    "ApprovalRequest",
    "Cancellation",
    "CodexEvent",
    "CodexSession",
    "SessionSettings",
    "TurnResult",
]
