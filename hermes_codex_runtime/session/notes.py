"""What each notification of a turn does, as a table: ``HANDLERS[method](view, params)``.

A handler folds one notification into the turn — the host's messages (the projector), the token
usage, the result's flags — and emits what the host shows; it answers what the notification
meant for the loop (:data:`ACTIVITY`, :data:`TOOL_DONE`, :data:`COMPLETED`, :data:`ABORTED`,
:data:`THREAD_ACTIVE`, :data:`THREAD_IDLE`, or ``None``). Streamed answer text, the hot path,
is :func:`on_delta` (the driver joins a burst's deltas into one display event). The driver
(:mod:`.turn`) decides which notifications belong to the turn; nothing here waits or sends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hermes_codex_runtime.events import (
    CodexEvent,
    Diff,
    InterimMessage,
    MessageStarted,
    Plan,
    PlanStep,
    Reasoning,
    ReasoningDelta,
    Retrying,
    ToolCompleted,
    ToolOutput,
    ToolStarted,
)
from hermes_codex_runtime.projector import Projector
from hermes_codex_runtime.protocol import (
    Failure,
    FailureKind,
    classify,
    classify_error_notification,
)
from hermes_codex_runtime.session.broker import RequestBroker
from hermes_codex_runtime.usage import UsageAccumulator
from hermes_codex_runtime.values import TurnResult

log = logging.getLogger(__name__)

ACTIVITY = "activity"  # codex is doing something (a quiet-after-tool warning is reset)
TOOL_DONE = "tool_done"  # a tool finished: codex should go on soon
COMPLETED = "completed"  # this turn's turn/completed
ABORTED = "aborted"  # codex reported the turn aborted
THREAD_ACTIVE = "thread_active"  # the thread runs a turn
THREAD_IDLE = "thread_idle"  # the thread stopped (idle, or a system error): turn/completed is due

DELTA = "item/agentMessage/delta"
TURN_ABORTED_MARKERS = ("<turn_aborted>", "<turn_aborted/>")


@dataclass(slots=True)
class TurnView:
    """What a handler may touch of the turn in flight."""

    result: TurnResult
    projector: Projector
    usage: UsageAccumulator
    broker: RequestBroker
    emit: Callable[[CodexEvent], None]


Handler = Callable[[TurnView, Mapping[str, Any]], str | None]


#: Notifications that only come once the model has answered something (besides the answer's
#: own deltas).
MODEL_SPOKE = frozenset({"item/reasoning/summaryTextDelta", "item/reasoning/textDelta",
                         "thread/tokenUsage/updated"})


def has_abort_marker(text: Any) -> bool:
    """True when ``text`` carries codex's ``<turn_aborted>`` marker."""
    return isinstance(text, str) and any(marker in text for marker in TURN_ABORTED_MARKERS)


def _aborted(view: TurnView) -> str:
    view.result.interrupted = True
    view.result.status = "interrupted"
    view.result.fail(Failure(FailureKind.OTHER, "codex reported turn_aborted"), retire=False)
    return ABORTED


def on_delta(view: TurnView, params: Mapping[str, Any], stream: list[str]) -> str:
    """One streamed chunk of the answer: projected, and kept for the burst's display event."""
    view.projector.feed(DELTA, params)
    delta = params.get("delta")
    if isinstance(delta, str):
        stream.append(delta)
        if "<turn_aborted" in delta:
            return _aborted(view)
    return ACTIVITY


def _reasoning(view: TurnView, params: Mapping[str, Any]) -> str:
    delta = params.get("delta")
    if isinstance(delta, str):
        view.emit(ReasoningDelta(delta, str(params.get("itemId"))))
    return ACTIVITY


def _reasoning_part(view: TurnView, params: Mapping[str, Any]) -> str:
    """A further section of a reasoning summary starts: a paragraph break between sections."""
    index = params.get("summaryIndex")
    if isinstance(index, int) and index > 0:
        view.emit(ReasoningDelta("\n\n", str(params.get("itemId"))))
    return ACTIVITY


def reasoning_text(item: Mapping[str, Any]) -> str:
    """A reasoning item's text: its summary sections (else its raw reasoning), one paragraph
    each."""
    for key in ("summary", "content"):
        parts = [p for p in item.get(key) or () if isinstance(p, str) and p.strip()]
        if parts:
            return "\n\n".join(parts)
    return ""


def _command_output(view: TurnView, params: Mapping[str, Any]) -> str:
    method = "item/commandExecution/outputDelta"
    view.projector.feed(method, params)
    delta = params.get("delta")
    if isinstance(delta, str) and delta:
        view.emit(ToolOutput(delta, str(params.get("itemId"))))
    return ACTIVITY


def _plan(view: TurnView, params: Mapping[str, Any]) -> str:
    steps = tuple(PlanStep(str(s.get("step") or ""), str(s.get("status")))
                  for s in params.get("plan") or () if isinstance(s, Mapping))
    explanation = params.get("explanation")
    view.emit(Plan(plan_text(steps), steps,
                   explanation if isinstance(explanation, str) else None))
    return ACTIVITY


def _diff(view: TurnView, params: Mapping[str, Any]) -> str:
    diff = params.get("diff")
    view.emit(Diff(diff if isinstance(diff, str) else ""))
    return ACTIVITY


def _item_started(view: TurnView, params: Mapping[str, Any]) -> str:
    method = "item/started"
    item = params.get("item")
    if isinstance(item, Mapping):
        view.broker.note_item(item)
    call = view.projector.feed(method, params)
    if call is not None:
        for text in view.projector.take_interim():
            view.emit(InterimMessage(text))
        view.emit(ToolStarted(call.name, call, item if isinstance(item, Mapping) else {}))
    kind = item.get("type") if isinstance(item, Mapping) else None
    if kind == "contextCompaction":
        view.result.compacted = True
    elif kind == "agentMessage":
        view.emit(MessageStarted())
    return ACTIVITY


def _item_completed(view: TurnView, params: Mapping[str, Any]) -> str:
    method = "item/completed"
    item = params.get("item")
    call = view.projector.feed(method, params)
    if isinstance(item, Mapping):
        if item.get("type") == "contextCompaction":
            view.result.compacted = True
        if item.get("type") == "agentMessage" and has_abort_marker(item.get("text")):
            return _aborted(view)
        if item.get("type") == "agentMessage" and item.get("phase") == "commentary":
            for text in view.projector.take_interim():  # commentary is never the answer
                view.emit(InterimMessage(text))
        if item.get("type") == "reasoning" and (text := reasoning_text(item)):
            view.result.reasoning = text
            view.emit(Reasoning(text, str(item.get("id"))))
    if call is not None:
        view.emit(ToolCompleted(call.name, call, item if isinstance(item, Mapping) else {}))
        return TOOL_DONE
    return ACTIVITY


def _token_usage(view: TurnView, params: Mapping[str, Any]) -> None:
    view.usage.add(params)
    view.result.retrying = None  # a response came back: the provider was reached


def _rerouted(view: TurnView, params: Mapping[str, Any]) -> None:
    to_model = params.get("toModel")
    if isinstance(to_model, str) and to_model:
        log.info("codex rerouted the turn from %s to %s (%s)", params.get("fromModel"),
                 to_model, params.get("reason"))
        view.result.model = to_model


def _compacted(view: TurnView, params: Mapping[str, Any]) -> None:
    view.result.compacted = True


def _error(view: TurnView, params: Mapping[str, Any]) -> None:
    failure, will_retry = classify_error_notification(dict(params))
    if will_retry:
        view.result.retrying = failure
        view.emit(Retrying(failure.message, failure))
    else:
        view.result.fail(failure)


def _resolved(view: TurnView, params: Mapping[str, Any]) -> None:
    view.broker.resolved(params.get("requestId"))


def _thread_status(view: TurnView, params: Mapping[str, Any]) -> str | None:
    status = params.get("status")
    kind = status.get("type") if isinstance(status, Mapping) else None
    if kind in ("idle", "systemError"):
        return THREAD_IDLE
    return THREAD_ACTIVE if kind == "active" else None


def _turn_completed(view: TurnView, params: Mapping[str, Any]) -> str:
    result = view.result
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
    return COMPLETED


HANDLERS: dict[str, Handler] = {
    "item/reasoning/summaryTextDelta": _reasoning,
    "item/reasoning/textDelta": _reasoning,
    "item/reasoning/summaryPartAdded": _reasoning_part,
    "item/commandExecution/outputDelta": _command_output,
    "turn/plan/updated": _plan,
    "turn/diff/updated": _diff,
    "item/started": _item_started,
    "item/completed": _item_completed,
    "thread/tokenUsage/updated": _token_usage,
    "model/rerouted": _rerouted,
    "thread/compacted": _compacted,
    "error": _error,
    "serverRequest/resolved": _resolved,
    "thread/status/changed": _thread_status,
    "turn/completed": _turn_completed,
}


def plan_text(steps: tuple[PlanStep, ...]) -> str:
    """``2/5 done; now: <step>`` for codex's plan."""
    done = sum(1 for s in steps if s.status == "completed")
    current = next((s.step for s in steps if s.status == "inProgress"), "")
    text = f"{done}/{len(steps)} done"
    return f"{text}; now: {current}" if current else text
