"""One codex thread for one host session: :class:`CodexSession`.

Owns the session's connection and the order of things in a turn; the rooms beside it own the
rest:

* **Connection.** The session gets a channel from its pool (:mod:`hermes_codex_runtime.pool`: a
  shared app-server, a process of its own, or a remote endpoint — a placement, decided there).
  A session made without a pool gets a private one. A thread stored on an endpoint goes back to
  it; if that endpoint is gone the session starts a fresh, seeded thread elsewhere and says so.
* **Thread.** Start, resume, fork, seed and the config check are :mod:`.thread`'s.
* **Turn.** ``turn/start``, then a :class:`~.turn.TurnDriver` drives the turn to its end;
  server requests go to the session's :class:`~.broker.RequestBroker` (approvals decided off the
  stream, withdrawn when they lapse; host tools; safe answers).
* **Failures.** Everything codex or the connection does ends as a :class:`TurnResult` with a
  failure classified by :func:`~.failures.failure_from`; no exception escapes.
* **Controls.** ``interrupt``, ``steer`` and ``close`` may be called from any thread.

It knows nothing about any particular host: the runtime passes callables in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from hermes_codex_runtime.events import CodexEvent, ConfigWarning, Notice
from hermes_codex_runtime.pool import Channel, ServerPool
from hermes_codex_runtime.protocol import (
    Decision,
    Failure,
    FailureKind,
    HostToolCall,
    HostToolOutput,
    InputError,
    compact_start_params,
    plain_text,
    to_user_input,
    turn_start_params,
    turn_steer_params,
)
from hermes_codex_runtime.protocol.permissions import Watched
from hermes_codex_runtime.protocol.schema_types import (
    ThreadReadParams,
    ThreadReadResponse,
    TurnStartResponse,
    TurnSteerResponse,
    UserInput,
)
from hermes_codex_runtime.session import rollout, thread
from hermes_codex_runtime.session.broker import RequestBroker
from hermes_codex_runtime.session.failures import (
    LoginMissing,
    Stage,
    failure_from,
    transport_failure,
)
from hermes_codex_runtime.session.spawn import spawn_options
from hermes_codex_runtime.session.turn import TurnDriver
from hermes_codex_runtime.values import ApprovalRequest, SessionSettings, TurnResult
from hermes_codex_runtime.walls import thread_walls
from hermes_codex_runtime.wire import (
    AppServerConnection,
    Inbound,
    SpawnOptions,
    TransportClosed,
    WireError,
)
from hermes_codex_runtime.wire.walls import outgrown

log = logging.getLogger(__name__)

#: Decides an approval; ``None`` (or anything but a ``Decision``) declines.
Approver = Callable[[ApprovalRequest], Decision | None]
EventSink = Callable[[CodexEvent], None]
SeedProvider = Callable[[], str | None]
#: Runs a host tool; ``None`` (or anything but a ``HostToolOutput``) is a failed call.
ToolRunner = Callable[[HostToolCall], HostToolOutput | None]
ConnectionFactory = Callable[[SpawnOptions], AppServerConnection]
#: The service tier codex takes as "the provider's default" (a ``turn/start`` with it clears
#: one given before; ``null`` would keep it).
DEFAULT_TIER = "default"


class CodexSession:
    """One codex thread (on a channel of its pool) for one host session.

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
        fork_from: tuple[str, str | None] | None = None,
    ) -> None:
        self.settings = settings or SessionSettings()
        self.developer_instructions = developer_instructions
        self._stored_thread_id = stored_thread_id
        self._on_event = on_event
        #: Where the session's thread runs; a session made without one owns a private pool.
        self._own_pool = pool is None
        self._pool = pool if pool is not None else ServerPool(spawn=connection_factory)
        self._stored_endpoint = stored_endpoint
        #: Start on a fork of this thread through this turn (``thread/fork``), instead.
        self._fork_from = fork_from
        #: The thread this session's thread is a fork of (``None``: not a fork).
        self.forked_from: str | None = None
        #: What the thread needs before the next turn (see :meth:`run_turn`).
        self._mend: thread.Mend | None = None
        #: The session this one replaces (same conversation, changed settings): closed once this
        #: one has its connection — after it, when both share a process, so the thread and the
        #: process carry over; before it otherwise (codex allows one writer per thread).
        self._predecessor = predecessor
        #: The remote app-server this session's thread lives on (``None``: a local process).
        self.endpoint: str | None = None
        self._conn: Channel | None = None
        self.thread_id: str | None = None
        self.thread_origin: str | None = None
        self.model: str | None = None  # what codex said it runs the thread on
        self.effort: str | None = None  # the reasoning effort it said it runs it with
        self._tier: str | None = None  # the service tier the thread runs with (None: unknown)
        self._rollout: str | None = None  # the thread's rollout file, on a local app-server
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
        self._walls_noted = False
        self._watched: tuple[Watched, ...] = ()  # what the thread's walls were shaped from

    # ------------------------------------------------------------------ lifecycle

    @property
    def cwd(self) -> str:
        """The working directory codex runs in."""
        return self.settings.cwd or os.getcwd()

    @property
    def connection(self) -> Channel | None:
        """The live channel, if started."""
        return self._conn

    @property
    def active_turn_id(self) -> str | None:
        """The id of the turn in flight, if any."""
        return self._active_turn

    def _emit(self, event: CodexEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:
            log.exception("the host's codex event handler raised; continuing")

    def _connect(self) -> Channel:
        options = spawn_options(self.settings)
        predecessor, self._predecessor = self._predecessor, None
        if predecessor is not None and not self._pool.shares_process(
                predecessor.connection, options, self.settings.app_server):
            predecessor.close()
            predecessor = None
        try:
            conn = self._place(options)
        finally:
            if predecessor is not None:
                predecessor.close()
        try:
            self.config_warnings = thread.check_config(conn, self.settings)
            thread.check_login(conn, self.settings)
        except LoginMissing:
            conn.close(suspect=True)  # it never sees a later login: no new sessions there
            raise
        except BaseException:
            conn.close()
            raise
        self.endpoint = conn.endpoint
        return conn

    def _place(self, options: SpawnOptions) -> Channel:
        """A channel from the pool. A thread stored on a remote app-server goes back to it; if
        that server is unreachable (and others are configured), or is no longer configured at
        all, the session starts a fresh thread seeded with the history — and says so."""
        wanted = self._stored_endpoint
        conn = self._pool.channel(options, self.settings.app_server, endpoint=wanted,
                                  thread_id=self._stored_thread_id)
        if wanted is not None and conn.endpoint != wanted and self._stored_thread_id:
            self._stored_thread_id = None  # its rollout is on the server we could not reach
            where = conn.endpoint or "a local app-server"
            self._emit(Notice(
                f"the codex app-server {wanted} that held this conversation's thread "
                f"is unreachable or no longer configured; continuing on {where} with a fresh "
                "thread that carries the conversation so far"))
        return conn

    def ensure_started(self, seed: SeedProvider | None = None) -> str:
        """Connect and start (or resume) the thread; returns its id. Raises :class:`WireError`
        (and ``ValueError`` for bad settings); :meth:`run_turn` turns those into results."""
        with self._lock:
            if self._closed:
                raise TransportClosed("the codex session is closed")
            if self._conn is not None and self.thread_id is not None:
                change = outgrown(self._watched)
                if change and self._conn.unload():  # walls that no longer fit: renewed below
                    log.info("codex thread %s: %s since its walls were set; resuming it with "
                             "them renewed", self.thread_id, change)
                if not self._conn.thread_unloaded:
                    return self.thread_id
                # unloaded from codex while the session was idle: resumed on the same channel
                self._stored_thread_id, self.thread_id = self.thread_id, None
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
        instructions = self.developer_instructions or None
        walls = thread_walls(self.settings, endpoint=self.endpoint)
        self._watched = walls.watched
        if walls.note and not self._walls_noted:
            self._walls_noted = True  # once per session, not at every resume
            self._emit(Notice(walls.note))
        stored, self._stored_thread_id = self._stored_thread_id, None  # one attempt per id
        source, self._fork_from = self._fork_from, None
        opened = None
        if source:
            opened = thread.fork(conn, self.settings, self.cwd, source, instructions, walls)
            self.forked_from = source[0] if opened is not None else None
        elif stored:
            try:
                opened = thread.resume(conn, self.settings, self.cwd, stored, instructions,
                                       walls)
            except BaseException:
                self._stored_thread_id = stored  # not "no such thread": try it again next time
                raise
        if opened is None:
            opened = thread.start(conn, self.settings, self.cwd, instructions, seed, walls)
        return self._take(opened)

    def _take(self, opened: thread.Opened) -> str:
        """The thread codex now runs for the session, as it was opened."""
        self.thread_id, self.thread_origin = opened.thread_id, opened.origin
        self.model = opened.model or self.model
        self.effort = opened.effort or self.effort
        # a resumed thread may keep a tier from before (codex 0.171 does): not known
        self._tier = self.settings.service_tier or (
            DEFAULT_TIER if opened.origin in ("started", "seeded") else None)
        self._rollout = opened.path if self.endpoint is None else None
        return opened.thread_id

    def read_thread(self) -> dict[str, Any]:
        """codex's record of this session's thread with its turns and their items
        (``thread/read`` with ``includeTurns``). Raises :class:`WireError` when codex cannot
        answer; the thread must be started first."""
        conn, thread_id = self._conn, self.thread_id
        if conn is None or thread_id is None:
            raise TransportClosed("the codex thread is not started")
        params: ThreadReadParams = {"threadId": thread_id, "includeTurns": True}
        reply = cast(ThreadReadResponse, thread.request(conn, "thread/read", params,
                                                        self.settings.request_timeout))
        record = reply.get("thread")
        return dict(record) if isinstance(record, Mapping) else {}

    def close(self) -> None:
        """Withdraw pending approvals and let go of the channel (a process of its own ends with
        its whole tree), and close the session this one replaced if it never got to."""
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
        if self._own_pool:
            self._pool.close()

    def _respawn(self) -> None:
        """After a turn that retired the process (it died, wedged, or its login went stale):
        let go of it, and let the next start resume the same thread in a fresh process."""
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

    def _let_go(self, conn: Channel) -> None:
        """Close our channel. After a turn that retired the session (codex died, wedged, timed
        out) its app-server is suspect: the pool gives it no new sessions."""
        suspect, self._suspect = self._suspect, False
        conn.close(suspect=suspect)

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
            reply = cast(TurnSteerResponse, conn.request(
                "turn/steer", turn_steer_params(thread_id, turn_id, items),
                timeout=self.settings.control_timeout))
        except (WireError, InputError) as exc:
            log.info("turn/steer was not accepted: %s", exc)
            return False
        return reply.get("turnId") == turn_id

    # ------------------------------------------------------------------ turns

    def run_turn(self, user_input: Any, *, images: Sequence[str] = (),
                 history_seed: SeedProvider | None = None,
                 mend: thread.Mend | None = None) -> TurnResult:
        """Send one user message and drive the turn to its end — after ``mend`` is applied to
        the thread, if it is still the one the session runs (a codex that cannot: a fresh
        thread, seeded). Never raises for anything codex or the process does."""
        result = TurnResult(submitted_user_text=plain_text(user_input))
        self._mend = mend
        self._replace_if_gone()
        try:
            items = to_user_input(user_input, base_dir=self.cwd, images=images)
        except InputError as exc:
            result.fail(Failure(FailureKind.INPUT, str(exc)), retire=False)
            return result
        return self._held_turn(result, history_seed, lambda conn, thread_id: self._start_turn(
            result, conn, thread_id, items))

    def compact(self) -> TurnResult:
        """Native compaction (``thread/compact/start``), waiting for its own turn to complete."""
        result = TurnResult()
        self._replace_if_gone()
        return self._held_turn(result, None, lambda conn, thread_id: self._start_compaction(
            result, conn, thread_id))

    def _held_turn(self, result: TurnResult, seed: SeedProvider | None,
                   start: Callable[[Channel, str], TurnDriver | None]) -> TurnResult:
        """The frame of a turn or a compaction: started and held, its driver run, its open
        questions withdrawn afterwards, whatever happens."""
        try:
            if self._interrupt.is_set() and self._conn is None:
                result.interrupted = True  # stopped before it began: codex is not even started
                result.status = "interrupted"
                return result
            if not self._start_held(result, seed):
                return result
            if self.config_warnings and not self._warned_config:
                self._warned_config = True  # once per session
                self._emit(ConfigWarning("; ".join(self.config_warnings)))
            if self._interrupt.is_set():  # a hard stop during start-up is honoured here
                result.interrupted = True
                result.status = "interrupted"
                return result
            conn, thread_id = self._conn, self.thread_id
            assert conn is not None and thread_id is not None
            self._begin_turn(conn)
            try:
                driver = start(conn, thread_id)
                if driver is not None:
                    driver.run()
                    self._leftover = driver.leftover
                    self.model = result.model or self.model
            finally:
                self._end_turn(conn)
            return result
        finally:
            if self._conn is not None:
                self._conn.unhold()
            self._interrupt.clear()
            if result.should_retire:
                self.retired = True
                self._suspect = True

    def _start_or_fail(self, result: TurnResult, seed: SeedProvider | None) -> bool:
        try:
            self.ensure_started(seed)
            self._apply_mend(seed)
        except (WireError, ValueError, OSError) as exc:
            failure, retire = failure_from(exc, Stage.START, self._stderr_tail())
            result.fail(failure, retire=retire)
            return False
        result.thread_id = self.thread_id
        result.thread_origin = self.thread_origin
        result.model = self.model
        result.endpoint = self.endpoint
        return True

    def _apply_mend(self, seed: SeedProvider | None) -> None:
        """The pending mend, on the thread it was planned for (or its fork)."""
        wanted, self._mend = self._mend, None
        conn, thread_id = self._conn, self.thread_id
        if wanted is None or conn is None or thread_id is None or \
                wanted.thread_id not in (thread_id, self.forked_from):
            return  # nothing to do, or a thread started meanwhile holds the conversation

        def restart() -> thread.Opened:
            walls = thread_walls(self.settings, endpoint=self.endpoint)
            self._watched = walls.watched
            return thread.start(conn, self.settings, self.cwd,
                                self.developer_instructions or None, seed, walls)

        opened = thread.mend(conn, self.settings,
                             dataclasses.replace(wanted, thread_id=thread_id), restart)
        if opened is not None:
            self._take(opened)

    def _start_held(self, result: TurnResult, seed: SeedProvider | None) -> bool:
        """Start (or reuse) the channel and hold it for the turn, so the pool's idle reaper
        never parks it mid-turn. A channel parked just before is replaced (once)."""
        for _ in range(2):
            if not self._start_or_fail(result, seed):
                return False
            conn = self._conn
            if conn is not None and conn.hold():
                # its thread unloaded between the start and the hold: resumed, held
                return not conn.thread_unloaded or self._start_or_fail(result, seed)
            self._respawn()  # parked (or closed) between the check and now: reconnect
        result.fail(Failure(FailureKind.TRANSPORT, "the codex connection was closed while the "
                            "turn was starting"), retire=False)
        return False

    def _driver(self, result: TurnResult, conn: Channel, thread_id: str, turn_id: str | None,
                at: rollout.Mark | None = None) -> TurnDriver:
        return TurnDriver(conn, self.settings, result, thread_id, turn_id, broker=self._broker,
                          emit=self._emit, interrupted=self._interrupt, on_turn=self._set_turn,
                          transport_failure=self._transport_failure,
                          recorded=(lambda turn: rollout.read_turn(at, turn)) if at else None)

    def _start_turn(self, result: TurnResult, conn: Channel, thread_id: str,
                    items: list[UserInput]) -> TurnDriver | None:
        at = rollout.mark(self._rollout)  # what codex records of this turn is read from here
        model, effort = self.settings.model, self.settings.effort
        tier = self.settings.service_tier or DEFAULT_TIER
        try:
            # an override only where it changes the thread: codex sets its turn up anew for one
            reply = cast(TurnStartResponse, thread.request(conn, "turn/start", turn_start_params(
                thread_id, items, model=model if model != self.model else None,
                effort=effort if effort != self.effort else None,
                service_tier=tier if tier != self._tier else None),
                self.settings.request_timeout))
        except WireError as exc:
            failure, retire = failure_from(exc, Stage.TURN, self._stderr_tail())
            result.fail(failure, retire=retire)
            return None
        turn_id = (reply.get("turn") or {}).get("id")
        if not isinstance(turn_id, str):
            result.fail(Failure(FailureKind.OTHER, "codex returned no turn id"), retire=True)
            return None
        result.turn_id = turn_id
        if model:
            self.model = result.model = model  # a turn override sticks
        if effort:
            self.effort = effort
        self._tier = tier
        return self._driver(result, conn, thread_id, turn_id, at)

    def _start_compaction(self, result: TurnResult, conn: Channel,
                          thread_id: str) -> TurnDriver | None:
        try:
            conn.request("thread/compact/start", compact_start_params(thread_id),
                         timeout=self.settings.request_timeout)
        except WireError as exc:
            failure, retire = failure_from(exc, Stage.COMPACT, self._stderr_tail())
            result.fail(failure, retire=retire)
            return None
        return self._driver(result, conn, thread_id, None)  # its turn id comes with it

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

    def _set_turn(self, turn_id: str | None) -> None:
        with self._lock:
            self._active_turn = turn_id

    def _begin_turn(self, conn: Channel) -> None:
        """Before a turn (or compaction) is requested: the turn's own approval thread."""
        with self._lock:
            self._leftover = []
        self._broker.begin_turn(conn)

    def _end_turn(self, conn: Channel) -> None:
        """After a turn: its open questions are withdrawn, and what arrived after
        ``turn/completed`` is answered (see :class:`~.broker.RequestBroker`)."""
        with self._lock:
            self._active_turn = None
            leftover, self._leftover = self._leftover, []
        self._broker.end_turn(conn, leftover)

    def _stderr_tail(self) -> list[str]:
        conn = self._conn
        return conn.stderr_tail(12) if conn is not None else []

    def _transport_failure(self, message: str) -> Failure:
        return transport_failure(message, self._stderr_tail())
