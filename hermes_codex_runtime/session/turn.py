"""Driving one turn (or one compaction) to its end: :class:`TurnDriver`.

The driver blocks on its channel's ordered inbound stream (no polling interval) and handles
each burst in wire order: server requests go to the session's broker at once, this turn's
notifications to their handler (:mod:`.notes`), streamed text is shown once per burst, and
other threads' or turns' notifications are skipped. It ends on THIS turn's ``turn/completed``
— or at once when the connection ends, or at the elapsed deadline — and sends
``turn/interrupt`` (once, bounded) when the session was interrupted. While codex is silent a
``working`` event tells the host every :data:`HEARTBEAT` seconds that the turn is alive.
A turn whose thread went idle without its ``turn/completed`` (a codex bug), or that has been
silent a long while, is completed from codex's record of it (:mod:`.recovery`). At the
end, the projected messages are reconciled with what codex recorded of the turn (a tool call it
ran without item notifications is added, see :mod:`.rollout`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from hermes_codex_runtime.events import CodexEvent, Quiet, TextDelta, Working
from hermes_codex_runtime.pool import Channel
from hermes_codex_runtime.projector import Projector
from hermes_codex_runtime.protocol import Failure, FailureKind, scope_of, turn_interrupt_params
from hermes_codex_runtime.session import notes, recovery
from hermes_codex_runtime.session.broker import RequestBroker
from hermes_codex_runtime.session.rollout import RecordedTurn
from hermes_codex_runtime.usage import UsageAccumulator
from hermes_codex_runtime.values import SessionSettings, TurnResult
from hermes_codex_runtime.wire import Inbound, ServerError, TransportClosed, WireError

log = logging.getLogger(__name__)

#: While a turn runs and codex is silent (the model is thinking, a provider is slow), a
#: ``working`` event this often tells the host the turn is alive (its inactivity watchdogs).
HEARTBEAT = 2.0
#: codex briefly answers "no active turn" right after a steer: an interrupt is retried this long.
INTERRUPT_RETRY_WINDOW = 1.0


class TurnDriver:
    """One turn's loop and its state; built by the session for each turn, used once."""

    def __init__(self, conn: Channel, settings: SessionSettings, result: TurnResult,
                 thread_id: str, turn_id: str | None, *, broker: RequestBroker,
                 emit: Callable[[CodexEvent], None], interrupted: threading.Event,
                 on_turn: Callable[[str | None], None],
                 transport_failure: Callable[[str], Failure],
                 recorded: Callable[[str], RecordedTurn | None] | None = None) -> None:
        self.conn = conn
        self.settings = settings
        self.result = result
        self.thread_id = thread_id
        #: ``None`` for a compaction: learnt from its ``turn/started``.
        self.turn_id = turn_id
        self._learn_turn = turn_id is None
        self._broker = broker
        self._emit = emit
        self._interrupted = interrupted
        self._on_turn = on_turn
        self._transport_failure = transport_failure
        self._recorded = recorded  # what codex recorded of a turn, by its id
        self.projector = Projector({tool.name: tool.host_name for tool in settings.host_tools
                                    if tool.host_name})
        self.usage = UsageAccumulator()
        self._view = notes.TurnView(result, self.projector, self.usage, broker, emit)
        self.deadline = time.monotonic() + settings.turn_timeout
        self.interrupt_sent_at: float | None = None
        self.last_tool_done: float | None = None
        self.last_beat = time.monotonic()
        #: The turn has begun on codex (its thread went active, or its turn/started came):
        #: from now a thread going idle means the turn ended.
        self.began = False
        self.idle_since: float | None = None  # the thread went idle, no turn/completed yet
        self.next_probe = time.monotonic() + recovery.QUIET_PROBE  # silence: read the record
        self.finished = False  # this turn's turn/completed (or codex's abort) arrived
        self.aborted = False
        #: the model has said something this turn (a delta, a response's usage): a turn that
        #: runs out of time without it was waiting on a provider codex may not reach
        self.heard = False
        self._stopped = False  # the loop ends without it: the deadline, or the connection
        #: What arrived after ``turn/completed`` in its burst (answered after the turn).
        self.leftover: list[Inbound] = []

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        """Drive the turn to its end; the result carries everything, nothing raises."""
        self._on_turn(self.turn_id)
        try:
            while not (self.finished or self._stopped):
                message = self._next()
                if message is not None:
                    self._handle([message, *self.conn.drain()])
            if not self.finished and self.result.failure is None:
                self._at_deadline()
        finally:
            self._finish()

    def _limit(self) -> float:
        """The deadline, brought forward once an interrupt was sent."""
        if self.interrupt_sent_at is None:
            return self.deadline
        return min(self.deadline,
                   self.interrupt_sent_at + max(self.settings.control_timeout, 2.0))

    def _next(self) -> Inbound | None:
        """The next message, after sending an interrupt that was asked for; ``None`` when the
        wait ended without one (a heartbeat or a quiet warning is due), or the loop must stop
        (the deadline passed, the connection ended)."""
        now = time.monotonic()
        if self._interrupted.is_set() and self.interrupt_sent_at is None and self.turn_id:
            self.result.interrupted = True
            self.interrupt_sent_at = now
            if not self._send_interrupt() and not self.conn.is_alive():
                self.result.fail(self._transport_failure("codex exited during an interrupt"))
                self._stopped = True
                return None
        limit = self._limit()
        if now >= limit:
            self._stopped = True
            return None
        wait = min(limit - now, max(0.0, self.last_beat + HEARTBEAT - now),
                   max(0.0, self._probe_at() - now))
        if self.last_tool_done is not None:
            wait = min(wait, max(0.0, self.last_tool_done + self.settings.post_tool_quiet_warning
                                 - now))
        try:
            message = self.conn.next_inbound(timeout=max(wait, 0.001))
        except TransportClosed as exc:
            self.result.fail(self._transport_failure(
                f"the codex app-server process exited during the turn ({exc})"))
            self._stopped = True
            return None
        if message is None or time.monotonic() - self.last_beat >= HEARTBEAT:
            self.last_beat = time.monotonic()
            if self.conn.is_alive():
                self._emit(Working("codex is working"))
        if message is None:
            self._quiet_warning()
            if time.monotonic() >= self._probe_at():
                self._recover()
        return message

    def _probe_at(self) -> float:
        """When codex's record of the turn is read next (see :mod:`.recovery`)."""
        if self.idle_since is not None:
            return min(self.next_probe, self.idle_since + recovery.IDLE_GRACE)
        return self.next_probe

    def _recover(self) -> None:
        """Read codex's record of the turn; an ended turn is completed from it."""
        went_idle, self.idle_since = self.idle_since, None
        self.next_probe = time.monotonic() + recovery.QUIET_PROBE
        if self.turn_id is None:
            return
        turn = recovery.recorded_turn(self.conn, self.thread_id, self.turn_id,
                                      self.settings.control_timeout)
        if turn is None or not recovery.is_over(turn):
            return
        log.warning("codex sent no turn/completed for turn %s (%s); completing it from codex's "
                    "record of the thread", self.turn_id, "its thread went idle"
                    if went_idle is not None else "codex went silent")
        self.aborted = recovery.complete_from(self._view, self.thread_id, turn) == notes.ABORTED
        self.finished = True

    def _quiet_warning(self) -> None:
        if self.last_tool_done is not None and time.monotonic() >= (
                self.last_tool_done + self.settings.post_tool_quiet_warning):
            log.warning("codex has been quiet for %.0fs after a tool result; still waiting (the "
                        "turn deadline is %.0fs)", self.settings.post_tool_quiet_warning,
                        self.settings.turn_timeout)
            self._emit(Quiet("codex is still working…"))
            self.last_tool_done = None

    def _handle(self, burst: list[Inbound]) -> None:
        stream: list[str] = []
        for index, message in enumerate(burst):
            if message.is_local:
                continue
            if message.is_request:
                self._broker.on_request(self.conn, message, self.thread_id, self.turn_id)
                continue
            outcome = self._outcome(message, stream)
            self.next_probe = time.monotonic() + recovery.QUIET_PROBE
            if outcome == notes.TOOL_DONE:
                self.last_tool_done = time.monotonic()
            elif outcome == notes.ACTIVITY:
                self.last_tool_done = None
            elif outcome == notes.THREAD_ACTIVE:
                self.began, self.idle_since = True, None
            elif outcome == notes.THREAD_IDLE and self.began and self.idle_since is None:
                self.idle_since = time.monotonic()
            elif outcome in (notes.COMPLETED, notes.ABORTED):
                self.aborted = outcome == notes.ABORTED
                self.finished = True
                self.leftover = burst[index + 1:]
                break
        self._flush(stream)

    def _outcome(self, message: Inbound, stream: list[str]) -> str | None:
        params = message.params
        if message.method == notes.DELTA and self.turn_id is not None:
            # The hot path: one streamed chunk of the answer.
            if params.get("turnId") != self.turn_id or params.get(
                    "threadId", self.thread_id) != self.thread_id:
                return None
            self.heard = True
            return notes.on_delta(self._view, params, stream)
        self._flush(stream)
        scope = scope_of(params)
        if self._learn_turn and self.turn_id is None:
            if message.method == "turn/started" and scope.thread_id == self.thread_id \
                    and scope.turn_id:
                self.turn_id = self.result.turn_id = scope.turn_id
                self._on_turn(self.turn_id)
                self.began = True
            return None
        if not scope.belongs_to(self.thread_id, self.turn_id):
            return None
        if message.method == "turn/started":
            self.began = True
        elif message.method in notes.MODEL_SPOKE:
            self.heard = True
        handler = notes.HANDLERS.get(message.method)
        return handler(self._view, params) if handler is not None else None

    def _flush(self, stream: list[str]) -> None:
        """One display event for the deltas of a burst: the host's stream callbacks (and their
        per-call work) run once per burst instead of once per token."""
        text = "".join(stream)
        stream.clear()
        if text:
            self._emit(TextDelta(text))

    # ------------------------------------------------------------------ endings

    def _send_interrupt(self) -> bool:
        """``turn/interrupt``, bounded; a refusal is retried for a short while. True when codex
        took it."""
        assert self.turn_id is not None
        deadline = time.monotonic() + INTERRUPT_RETRY_WINDOW
        while True:
            try:
                self.conn.request("turn/interrupt",
                                  turn_interrupt_params(self.thread_id, self.turn_id),
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

    def _at_deadline(self) -> None:
        result = self.result
        if self.interrupt_sent_at is not None:
            # codex took (or refused) the interrupt but never completed the turn.
            result.interrupted = True
            result.status = result.status or "interrupted"
            result.should_retire = True
            return
        if self.projector.has_completed_answer() and self.turn_id:
            log.warning("codex sent its final answer but no turn/completed before the deadline "
                        "(%.0fs); accepting the answer", self.settings.turn_timeout)
            if not self._send_interrupt():
                result.should_retire = True
            result.status = "completed"
            return
        if self.turn_id:
            self._send_interrupt()
        result.interrupted = True
        result.timed_out = True
        result.status = "interrupted"
        if result.retrying is not None:
            # codex spent the time retrying a provider it could not reach: that is the failure
            # to report (and its fix), not the time budget
            waited = result.retrying
            result.fail(Failure(waited.kind, f"{waited.message} (codex was still retrying when "
                                "the turn's time ran out)", info=waited.info,
                                http_status=waited.http_status), retire=True)
            return
        said = (f"the codex turn did not finish within {self.settings.turn_timeout:g}s"
                if self.heard else "the model provider sent nothing back before the turn's "
                "time ran out: check the network and the provider's status")
        result.fail(Failure(FailureKind.TIMEOUT, said), retire=True)

    def _finish(self) -> None:
        result = self.result
        result.messages = self.projector.finish()
        self._reconcile()
        result.final_text = self.projector.final_text
        if self.aborted:
            result.final_text = ""
            result.messages = [m for m in result.messages
                               if not notes.has_abort_marker(m.get("content"))]
        result.tool_iterations = self.projector.tool_iterations
        report = self.usage.report()
        result.usage = dataclasses.replace(report, model=result.model) if report else None
        result.thread_id = self.thread_id

    def _reconcile(self) -> None:
        """Add what codex ran without telling (see :mod:`.rollout`); never raises."""
        if self._recorded is None or not self.turn_id:
            return
        try:
            record = self._recorded(self.turn_id)
            added = self.projector.reconcile(record.calls, record.order) if record else 0
        except Exception:
            log.exception("reconciling turn %s with codex's record of it failed", self.turn_id)
            return
        if added:
            log.info("turn %s: %d tool call(s) codex ran without item notifications were added "
                     "from its record of the turn", self.turn_id, added)
