"""One codex thread for one host session: start or resume, the turn loop, interrupt, steer,
compaction, and the result of every turn.

Owns:

* **Start/resume.** The session gets its connection from the pool (:mod:`.pool`: a channel on a
  shared app-server, a process of its own, or a remote endpoint). A stored thread id is resumed
  with ``thread/resume`` carrying the current developer instructions, cwd and model/provider. If
  codex cannot resume it ("no rollout found", another id answered, another process still writing
  it, the endpoint that held it is gone) a fresh thread is started in the same call, seeded with
  the host's history — never surfaced as an error. The host's system prompt goes once per thread
  as ``developerInstructions``; the history seed is appended only on a fresh thread.
* **The turn loop.** It blocks on its connection's ordered inbound stream (no polling interval),
  ignores other threads' and turns' notifications, projects items into host messages
  (:mod:`.projector`), folds token usage (:mod:`.usage`), and ends on THIS turn's
  ``turn/completed`` — or at once when the connection ends, or at the elapsed deadline.
* **Server requests** go to the session's :class:`~.broker.RequestBroker` (approvals decided off
  the stream, withdrawn when they lapse; host tools; safe answers).
* **Failures.** Everything codex or the connection does ends as a :class:`TurnResult` with a
  classified :class:`~hermes_codex_runtime.protocol.failures.Failure`; no exception escapes.

It knows nothing about any particular host: the runtime passes callables in. The values it
exchanges with the host live in :mod:`.values`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from hermes_codex_runtime.broker import RequestBroker
from hermes_codex_runtime.pool import SHARED, Channel, ServerPool, launch_key
from hermes_codex_runtime.pool.launch import launch
from hermes_codex_runtime.projector import Projector
from hermes_codex_runtime.protocol import (
    Failure,
    FailureKind,
    HostToolCall,
    InputError,
    classify,
    classify_error_notification,
    compact_start_params,
    invalid_configuration,
    plain_text,
    scope_of,
    thread_resume_params,
    thread_start_params,
    to_user_input,
    turn_interrupt_params,
    turn_start_params,
    turn_steer_params,
)
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
        self._on_event = on_event
        self._connect = connection_factory or AppServerConnection.spawn
        self._spawner = connection_factory  # None: the pool's own
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
        self._broker = RequestBroker(approve=approve, emit=self._emit, call_tool=call_tool,
                                     host_tools=lambda: self.settings.host_tools,
                                     connection=lambda: self._conn)
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
            client_version=s.client_version, client_title=s.client_title,
            registry_path=s.registry_path,
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
        conn = self._pool.channel(options, self.settings.app_server, spawn=self._spawner,
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
                "config": {**(s.config_overrides or {}), "shell_environment_policy":
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

    def read_thread(self) -> dict[str, Any]:
        """codex's record of this session's thread with its turns and their items
        (``thread/read`` with ``includeTurns``). Raises :class:`WireError` when codex cannot
        answer; the thread must be started first."""
        conn, thread_id = self._conn, self.thread_id
        if conn is None or thread_id is None:
            raise TransportClosed("the codex thread is not started")
        reply = self._request(conn, "thread/read", {"threadId": thread_id, "includeTurns": True})
        thread = reply.get("thread")
        return dict(thread) if isinstance(thread, Mapping) else {}

    def _note_model(self, response: Mapping[str, Any]) -> None:
        model = response.get("model")
        if isinstance(model, str) and model:
            self.model = model

    def close(self) -> None:
        """Cancel pending approvals and close the app-server (its whole process tree), and the
        session this one replaced if it never got to (no turn started)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.retired = True
            conn, self._conn = self._conn, None
            predecessor, self._predecessor = self._predecessor, None
        self._broker.withdraw_all()
        if conn is not None:
            self._let_go(conn)
        if predecessor is not None:
            predecessor.close()

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
        self._broker.withdraw_all()
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
            if self._interrupt.is_set() and self._conn is None:
                result.interrupted = True  # stopped before it began: codex is not even started
                result.status = "interrupted"
                return result
            if not self._start_held(result, history_seed):
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
            self._unhold()
            self._interrupt.clear()
            if result.should_retire:
                self.retired = True
                self._suspect = True

    def _start_held(self, result: TurnResult, seed: SeedProvider | None) -> bool:
        """Start (or reuse) the connection and hold it for the turn, so the pool's idle reaper
        never parks it mid-turn. A channel parked just before is replaced (once)."""
        for _ in range(2):
            if not self._start_or_fail(result, seed):
                return False
            conn = self._conn
            if not isinstance(conn, Channel) or conn.hold():
                return True
            self._respawn()  # parked between the check and now: reconnect and resume
        result.fail(Failure(FailureKind.TRANSPORT, "the codex connection was closed while the "
                            "turn was starting"), retire=False)
        return False

    def _unhold(self) -> None:
        conn = self._conn
        if isinstance(conn, Channel):
            conn.unhold()

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
            if not self._start_held(result, None):
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
            self._unhold()
            self._interrupt.clear()
            if result.should_retire:
                self.retired = True
                self._suspect = True

    # ------------------------------------------------------------------ the loop

    def _begin_turn(self, conn: Connection) -> None:
        """Before a turn (or compaction) is requested: the turn's own approval thread."""
        with self._lock:
            self._leftover = []
        self._broker.begin_turn(conn)

    def _end_turn(self, conn: Connection) -> None:
        """After a turn: its open questions are withdrawn, and what arrived after
        ``turn/completed`` is answered (see :class:`~hermes_codex_runtime.broker.RequestBroker`)."""
        with self._lock:
            self._active_turn = None
            leftover, self._leftover = self._leftover, []
        self._broker.end_turn(conn, leftover)

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
                        self._broker.on_request(conn, message, thread_id, self._active_turn)
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
            if isinstance(item, Mapping):
                self._broker.note_item(item)
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
            self._broker.resolved(params.get("requestId"))
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


def _plan_text(params: Mapping[str, Any]) -> str:
    """``2/5 done; now: <step>`` for a ``turn/plan/updated``."""
    steps = [s for s in params.get("plan") or () if isinstance(s, Mapping)]
    done = sum(1 for s in steps if s.get("status") == "completed")
    current = next((str(s.get("step")) for s in steps if s.get("status") == "inProgress"), "")
    text = f"{done}/{len(steps)} done"
    return f"{text}; now: {current}" if current else text


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
