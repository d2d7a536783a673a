"""What a session reports while a turn runs, for the host's display: one small frozen value per
kind of progress, united in :data:`CodexEvent`.

Every event has ``kind`` (one of :data:`EventKind`, fixed by its class) and ``text`` (a line a
plain host can show as it is; empty where the kind has nothing to say in words); the rest of an
event is what its kind carries, typed. A host tells the kinds apart by ``kind`` or by class —
``if event.kind == "tool_started": event.tool`` and ``isinstance(event, ToolStarted)`` both
narrow the union for a type checker, so reading a field the kind does not carry is an error
before it runs. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hermes_codex_runtime.projector import ToolCall
from hermes_codex_runtime.protocol import Decision, Failure
from hermes_codex_runtime.values import ApprovalRequest

#: Every event's ``kind``, one per class of :data:`CodexEvent`.
EventKind = Literal[
    "text_delta", "reasoning_delta", "reasoning", "message_started", "interim_message",
    "tool_started", "tool_output", "tool_completed", "plan", "diff", "approval_requested",
    "approval_answered", "working", "retrying", "quiet", "config_warning", "notice",
]

# ---------------------------------------------------------------------- the model's words


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A chunk of the answer as it streams (a burst of codex's deltas, joined)."""

    text: str
    kind: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A chunk of a reasoning summary as it streams (``"\\n\\n"`` between its sections);
    ``item_id`` is the reasoning item's."""

    text: str
    item_id: str
    kind: Literal["reasoning_delta"] = field(default="reasoning_delta", init=False)


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A reasoning item completed: ``text`` is its whole summary, also when none of it was
    streamed (then no :class:`ReasoningDelta` had its ``item_id``)."""

    text: str
    item_id: str
    kind: Literal["reasoning"] = field(default="reasoning", init=False)


@dataclass(frozen=True, slots=True)
class MessageStarted:
    """Another agent message begins: text streamed before it is a segment of its own."""

    text: str = ""
    kind: Literal["message_started"] = field(default="message_started", init=False)


@dataclass(frozen=True, slots=True)
class InterimMessage:
    """A completed message a later item showed was not the answer (sent once)."""

    text: str
    kind: Literal["interim_message"] = field(default="interim_message", init=False)


# ---------------------------------------------------------------------- tools


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool item started: ``text`` is the tool's name, ``item`` codex's item as it sent it (a
    file change carries its proposed diffs in ``item["changes"]``)."""

    text: str
    tool: ToolCall
    item: Mapping[str, Any]
    kind: Literal["tool_started"] = field(default="tool_started", init=False)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A command's live output: ``text`` is the delta, ``item_id`` the command item's."""

    text: str
    item_id: str
    kind: Literal["tool_output"] = field(default="tool_output", init=False)


@dataclass(frozen=True, slots=True)
class ToolCompleted:
    """A tool item completed: ``text`` is the tool's name, ``item`` codex's completed item (its
    output, exit code, status, duration)."""

    text: str
    tool: ToolCall
    item: Mapping[str, Any]
    kind: Literal["tool_completed"] = field(default="tool_completed", init=False)


# ---------------------------------------------------------------------- the turn's plan and diff


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One step of codex's plan; ``status`` is codex's word (``pending``, ``inProgress``,
    ``completed``)."""

    step: str
    status: str


@dataclass(frozen=True, slots=True)
class Plan:
    """codex's plan changed: ``text`` is ``2/5 done; now: <step>``."""

    text: str
    steps: tuple[PlanStep, ...]
    explanation: str | None
    kind: Literal["plan"] = field(default="plan", init=False)


@dataclass(frozen=True, slots=True)
class Diff:
    """The turn's file changes so far, as one unified diff."""

    diff: str
    text: str = ""
    kind: Literal["diff"] = field(default="diff", init=False)


# ---------------------------------------------------------------------- approvals


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """codex asked a question (the host answers it in its ``codex_approval`` hook): ``text`` is
    the request's summary."""

    text: str
    request: ApprovalRequest
    kind: Literal["approval_requested"] = field(default="approval_requested", init=False)


@dataclass(frozen=True, slots=True)
class ApprovalAnswered:
    """The answer went to codex: ``text`` is the decision's value."""

    text: str
    request: ApprovalRequest
    decision: Decision
    kind: Literal["approval_answered"] = field(default="approval_answered", init=False)


# ---------------------------------------------------------------------- status lines


@dataclass(frozen=True, slots=True)
class Working:
    """A heartbeat while codex works."""

    text: str
    kind: Literal["working"] = field(default="working", init=False)


@dataclass(frozen=True, slots=True)
class Quiet:
    """Nothing has come from codex for a while after a tool finished."""

    text: str
    kind: Literal["quiet"] = field(default="quiet", init=False)


@dataclass(frozen=True, slots=True)
class Retrying:
    """codex hit an error it retries on its own: ``text`` is the failure's message."""

    text: str
    failure: Failure
    kind: Literal["retrying"] = field(default="retrying", init=False)


@dataclass(frozen=True, slots=True)
class ConfigWarning:
    """codex ignored its ``config.toml`` and runs on its defaults (once per session)."""

    text: str
    kind: Literal["config_warning"] = field(default="config_warning", init=False)


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should know (e.g. the thread had to start fresh on another
    app-server)."""

    text: str
    kind: Literal["notice"] = field(default="notice", init=False)


#: Progress for the host's display: any one of the kinds above.
CodexEvent = (TextDelta | ReasoningDelta | Reasoning | MessageStarted | InterimMessage
              | ToolStarted | ToolOutput | ToolCompleted | Plan | Diff | ApprovalRequested
              | ApprovalAnswered | Working | Quiet | Retrying | ConfigWarning | Notice)
