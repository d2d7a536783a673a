"""What one session answers when codex asks: approvals, the host's own tools, and everything else
codex may request — during a turn and between turns.

Owns :class:`RequestBroker`:

* **Decisions off the stream.** Each turn gets its own approval thread; the host's decision
  (possibly a person at a prompt) runs there, one request at a time, so neither the reader nor
  the turn loop waits, and a prompt left over from an earlier turn can't hold this turn's first
  approval up.
* **Nothing answered late.** When the turn ends, is interrupted, or codex resolves a request
  itself (``serverRequest/resolved``), the question is withdrawn (``request.cancelled``) and a
  decision that arrives afterwards is dropped.
* **Requests without a decision** get their answer at once: unknown methods ``-32601``, fixed
  safe answers, and — outside a turn — approvals declined (nobody is asked about a turn that has
  ended).
* **Host tools** (codex's dynamic tools) run on the turn's own thread and always get an answer.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from hermes_codex_runtime.events import ApprovalAnswered, ApprovalRequested, CodexEvent
from hermes_codex_runtime.protocol import (
    APPROVAL_METHODS,
    METHOD_NOT_FOUND,
    Decision,
    HostTool,
    HostToolCall,
    HostToolOutput,
    answer_for,
    approval_kind,
    default_answer,
)
from hermes_codex_runtime.protocol.answers import DYNAMIC_TOOL_CALL
from hermes_codex_runtime.values import ApprovalRequest
from hermes_codex_runtime.wire import Inbound, TransportClosed, redact

log = logging.getLogger(__name__)

DECIDER_EXIT_WAIT = 0.1


class Answering(Protocol):
    """What the broker needs of a connection (a process's, or a channel on a shared one)."""

    def respond(self, request_id: Any, result: Mapping[str, Any]) -> None: ...
    def respond_error(self, request_id: Any, code: int, message: str,
                      data: Any = None) -> None: ...
    def set_idle_handler(self, handler: Callable[[Inbound], None] | None) -> None: ...


class _Pending:
    __slots__ = ("dropped", "method", "params", "request", "request_id")

    def __init__(self, request_id: Any, method: str, params: Mapping[str, Any],
                 request: ApprovalRequest) -> None:
        self.request_id = request_id
        self.method = method
        self.params = params
        self.request = request
        self.dropped = False


class RequestBroker:
    """The server requests of one session."""

    def __init__(self, *, approve: Callable[[ApprovalRequest], Decision | None] | None,
                 emit: Callable[[CodexEvent], None],
                 call_tool: Callable[[HostToolCall], HostToolOutput | None] | None,
                 host_tools: Callable[[], Sequence[HostTool]],
                 connection: Callable[[], Answering | None]) -> None:
        self._approve = approve
        self._emit = emit
        self._call_tool = call_tool
        self._host_tools = host_tools
        self._connection = connection
        self._lock = threading.Lock()
        self._pending: dict[Any, _Pending] = {}
        self._file_changes: dict[str, tuple[Mapping[str, Any], ...]] = {}
        self._decisions: queue.SimpleQueue[_Pending | None] | None = None  # this turn's
        self._decider: threading.Thread | None = None

    # ------------------------------------------------------------------ turn boundaries

    def begin_turn(self, conn: Answering) -> None:
        """Before a turn (or compaction) is requested: its own approval thread, and the turn
        loop consumes the stream again."""
        decisions: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        decider = threading.Thread(target=self._decide_loop, args=(decisions,),
                                   name="codex-approvals", daemon=True)
        decider.start()
        with self._lock:
            self._decisions, self._decider = decisions, decider
        conn.set_idle_handler(None)

    def end_turn(self, conn: Answering, leftover: Sequence[Inbound]) -> None:
        """After a turn: withdraw every prompt still open for it, end its approval thread,
        answer ``leftover`` (requests that arrived after ``turn/completed``), and answer anything
        that arrives before the next turn as it comes."""
        decider = self.withdraw_all()
        if decider is not None:
            decider.join(DECIDER_EXIT_WAIT)  # at once, unless a host prompt still blocks it
        for message in leftover:
            self._idle_message(conn, message)
        with contextlib.suppress(Exception):
            conn.set_idle_handler(functools.partial(self._idle_message, conn))

    def withdraw_all(self) -> threading.Thread | None:
        """Withdraw every open question and stop the approval thread (returned, to join)."""
        with self._lock:
            pending = list(self._pending.values())
            for item in pending:
                item.dropped = True
            self._pending.clear()
            decisions, self._decisions = self._decisions, None
            decider, self._decider = self._decider, None
        for item in pending:
            item.request.cancelled.set()
        if decisions is not None:
            decisions.put(None)
        return decider

    # ------------------------------------------------------------------ during a turn

    def note_item(self, item: Mapping[str, Any]) -> None:
        """Remember a file change's changes: its approval shows them."""
        if item.get("type") == "fileChange" and isinstance(item.get("id"), str):
            changes = tuple(c for c in item.get("changes") or () if isinstance(c, Mapping))
            self._file_changes[item["id"]] = changes

    def resolved(self, request_id: Any) -> None:
        """codex resolved a request itself: withdraw its question; a late answer is dropped."""
        with self._lock:
            pending = self._pending.pop(request_id, None)
            if pending is not None:
                pending.dropped = True
        if pending is not None:
            pending.request.cancelled.set()

    def on_request(self, conn: Answering, message: Inbound, thread_id: str,
                   turn_id: str | None) -> None:
        """A server request that arrived during a turn."""
        with self._lock:
            decisions = self._decisions
        if message.method == DYNAMIC_TOOL_CALL and decisions is not None \
                and self._host_tools():
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
            turn_id=params.get("turnId") or turn_id,
            item_id=item_id,
            command=_command_text(params.get("command")),
            cwd=_str_or_none(params.get("cwd")),
            reason=_str_or_none(params.get("reason")),
            changes=self._file_changes.get(item_id or "", ()),
        )
        pending = _Pending(request_id, method, params, request)
        with self._lock:
            self._pending[request_id] = pending
        self._emit(ApprovalRequested(request.summary(), request))
        decisions.put(pending)

    def _answer_directly(self, conn: Answering, message: Inbound, *, in_turn: bool) -> bool:
        """Answer what needs no decision (and, outside a turn, every decision: nobody is asked
        about a turn that has ended); True when ``message`` was answered here."""
        method, request_id = message.method, message.id
        assert request_id is not None
        if in_turn and method in APPROVAL_METHODS:
            return False
        answer = default_answer(method, dict(message.params))
        try:
            if answer is None:
                log.warning("codex sent an unknown request %r; answering -32601", method)
                conn.respond_error(request_id, METHOD_NOT_FOUND, f"method not found: {method}")
            else:
                if method in APPROVAL_METHODS:
                    log.info("codex asked %s outside a turn; declining", method)
                conn.respond(request_id, answer)
        except TransportClosed:
            pass
        return True

    def _idle_message(self, conn: Answering, message: Inbound) -> None:
        """A message that arrived while no turn runs (on the reader thread): requests are
        answered at once; notifications have no turn to belong to."""
        if message.is_request:
            self._answer_directly(conn, message, in_turn=False)
        elif not message.is_local:
            log.debug("codex notification between turns: %s", message.method)

    def _run_host_tool(self, conn: Answering, message: Inbound) -> None:
        """Run one of the host's tools for codex, on the turn's thread (the host's own tool
        context — thread-local allow-lists, approval callbacks — is the caller's), and answer.
        A tool this session did not declare, or a host that raised, is a failed call."""
        call = HostToolCall.from_params(message.params)
        declared = {tool.name for tool in self._host_tools()}
        output = HostToolOutput(f"Unknown tool {call.tool!r}.", success=False)
        if call.tool in declared and self._call_tool is not None:
            try:
                answer = self._call_tool(call)
                output = answer if isinstance(answer, HostToolOutput) else HostToolOutput(
                    f"The tool {call.tool!r} returned nothing.", success=False)
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

    # ------------------------------------------------------------------ decisions

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
                decided = self._approve(pending.request)
                decision = decided if isinstance(decided, Decision) else Decision.DECLINE
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
        conn = self._connection()
        if conn is None or answer is None:
            return
        try:
            conn.respond(pending.request_id, answer)
        except TransportClosed:
            return
        self._emit(ApprovalAnswered(decision.value, pending.request, decision))


def _command_text(value: Any) -> str | None:
    """The command of an approval: a string (v2), or an argv list (the legacy v1 method)."""
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        return shlex.join(value)
    return _str_or_none(value)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
