"""The host contract: every question the runtime asks its host, as pluggy hooks.

The runtime (and nothing else) calls these; a host adapter implements them. ``firstresult`` hooks
take the first non-``None`` answer, so a plugin marked ``tryfirst`` answers before the host, and
the defaults (:mod:`hermes_codex_runtime.defaults`, ``trylast``) answer only when nobody else did.
``agent`` is whatever object the host uses for one conversation; the runtime never looks inside.
A ``firstresult`` hook answers with the type its spec names, or ``None``: any other answer is the
implementation's bug, logged naming the hook and the type it must return, and taken as no answer
(a settings answer fails the turn; an approval declines).
Every hook also gets ``context``, the :class:`~hermes_codex_runtime.values.TurnContext` of the
turn it is asked for; pluggy passes only the arguments an implementation names, so an
implementation may leave ``context`` (or any other argument) out.

``docs/host-contract.md`` describes these hooks for host authors; a test holds it to this file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from hermes_codex_runtime.continuity import Binding
    from hermes_codex_runtime.events import CodexEvent
    from hermes_codex_runtime.protocol import Decision, Failure, HostToolCall, HostToolOutput
    from hermes_codex_runtime.usage import UsageReport
    from hermes_codex_runtime.values import (
        ApprovalRequest,
        SessionSettings,
        TurnContext,
        TurnResult,
    )

PROJECT = "codex_runtime"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: A chat message of the host's transcript (``{"role": ..., "content": ...}``).
Message = Mapping[str, Any]


@hookspec(firstresult=True)
def codex_session_settings(agent: Any, context: TurnContext[Any]) -> SessionSettings | None:
    """How to run codex for this agent."""


@hookspec(firstresult=True)
def codex_developer_instructions(agent: Any, context: TurnContext[Any]) -> str | None:
    """The host's composed system prompt, sent once per thread. A change retires the thread."""


@hookspec(firstresult=True)
def codex_history_seed(agent: Any, messages: Sequence[Message],
                       context: TurnContext[Any]) -> str | None:
    """The prior transcript as text, asked only when a FRESH thread starts (never on resume)."""


@hookspec(firstresult=True)
def codex_stored_thread(agent: Any, context: TurnContext[Any]) -> Binding | None:
    """The codex thread bound to this agent's session by an earlier process, if any: a
    ``Binding`` of its id, the remote app-server that holds it, and the digest and the
    conversation ``codex_thread_bound`` was given (``Ledger.decode`` of it; ``None`` for what
    the host did not store). codex keeps a thread's developer instructions and turns on
    ``thread/resume``: a conversation with other instructions starts a fresh thread, seeded; one
    that lost or gained turns has the thread mended first (:mod:`.continuity`)."""


@hookspec
def codex_thread_bound(agent: Any, thread_id: str, endpoint: str | None, instructions: str,
                       conversation: str | None, context: TurnContext[Any]) -> None:
    """The session now lives on ``thread_id`` (on the remote app-server ``endpoint``, or
    ``None`` for a local one), started with the developer instructions whose digest is
    ``instructions``, holding the conversation ``conversation`` describes (an opaque text;
    ``None``: the host told no history), and this turn's transcript is committed: persist all
    four, and give them back from ``codex_stored_thread``."""


@hookspec(firstresult=True)
def codex_approval(agent: Any, request: ApprovalRequest,
                   context: TurnContext[Any]) -> Decision | None:
    """Decide one ``ApprovalRequest``. Asked per request, off the stream's thread. ``None``
    passes to the next implementation; the default declines (fail closed). A raised exception
    or an answer that is not a ``Decision`` is a decline."""


@hookspec(firstresult=True)
def codex_tool_call(agent: Any, call: HostToolCall,
                    context: TurnContext[Any]) -> HostToolOutput | None:
    """Run one of the host's own tools (declared in ``SessionSettings.host_tools``) that codex
    called, on the turn's thread. ``None`` passes on; nobody answering (or an exception, or
    another answer) is a failed call."""


@hookspec
def codex_event(agent: Any, event: CodexEvent, context: TurnContext[Any]) -> None:
    """Progress for display — streamed text, reasoning, tools, the plan, approvals, status lines:
    one value per kind (:mod:`hermes_codex_runtime.events`), told apart by ``event.kind``."""


@hookspec
def codex_record_usage(agent: Any, usage: UsageReport, context: TurnContext[Any]) -> None:
    """The turn's token usage (input INCLUDES cached tokens)."""


@hookspec
def codex_record_compaction(agent: Any, turn: TurnResult, context: TurnContext[Any]) -> None:
    """codex compacted the thread's context during ``turn``."""


@hookspec
def codex_turn_finished(agent: Any, turn: TurnResult, messages: Sequence[Message],
                        context: TurnContext[Any]) -> None:
    """A turn ended with its projected chat ``messages``: memory, nudges, hooks."""


@hookspec(firstresult=True)
def codex_fallback(agent: Any, turn: TurnResult, failure: Failure,
                   context: TurnContext[Any]) -> dict[str, Any] | None:
    """A failover-class failure (usage limit): run this same turn elsewhere and return the
    host's own result of it, which the host returns instead (kept as ``turn.fallback``);
    ``None`` keeps the codex result."""
