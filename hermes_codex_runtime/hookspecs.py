"""The host contract: every question the runtime asks its host, as pluggy hooks.

The runtime (and nothing else) calls these; a host adapter implements them. ``firstresult`` hooks
take the first non-``None`` answer, so a plugin marked ``tryfirst`` answers before the host, and
the defaults (:mod:`hermes_codex_runtime.defaults`, ``trylast``) answer only when nobody else did.
``agent`` is whatever object the host uses for one conversation; the runtime never looks inside.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "codex_runtime"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(firstresult=True)
def codex_session_settings(agent: Any) -> Any:
    """How to run codex for this agent: a ``SessionSettings`` (or a mapping of its fields)."""


@hookspec(firstresult=True)
def codex_developer_instructions(agent: Any) -> str | None:
    """The host's composed system prompt, sent once per thread. A change retires the thread."""


@hookspec(firstresult=True)
def codex_history_seed(agent: Any, messages: Any) -> str | None:
    """The prior transcript as text, asked only when a FRESH thread starts (never on resume)."""


@hookspec(firstresult=True)
def codex_stored_thread(agent: Any) -> Any:
    """The codex thread bound to this agent's session by an earlier process, if any: its id, or
    ``{"thread_id": ..., "endpoint": ...}`` when it lives on a remote app-server."""


@hookspec
def codex_thread_bound(agent: Any, thread_id: str, endpoint: str | None) -> None:
    """The session now lives on ``thread_id`` (on the remote app-server ``endpoint``, or
    ``None`` for a local one) and this turn's transcript is committed: persist both."""


@hookspec(firstresult=True)
def codex_approval(agent: Any, request: Any) -> Any:
    """Decide one ``ApprovalRequest``: a ``Decision`` (or "accept"/"decline"/... ). Asked per
    request, off the stream's thread. ``None`` passes to the next implementation; the default
    declines (fail closed). A raised exception or an unknown answer is a decline."""


@hookspec(firstresult=True)
def codex_tool_call(agent: Any, call: Any) -> Any:
    """Run one of the host's own tools (declared in ``SessionSettings.host_tools``) that codex
    called (``HostToolCall``), on the turn's thread: a ``HostToolOutput`` or the result text.
    ``None`` passes on; nobody answering is a failed call."""


@hookspec
def codex_event(agent: Any, event: Any) -> None:
    """Progress for display (``CodexEvent``): streamed text, reasoning, tools, approvals."""


@hookspec
def codex_record_usage(agent: Any, usage: Any) -> None:
    """The turn's token usage (``UsageReport``; input INCLUDES cached tokens)."""


@hookspec
def codex_record_compaction(agent: Any, turn: Any) -> None:
    """codex compacted the thread's context during ``turn`` (a ``TurnResult``)."""


@hookspec
def codex_turn_finished(agent: Any, turn: Any, messages: Any) -> None:
    """A turn ended (``TurnResult``) with its projected chat ``messages``: memory, nudges, hooks."""


@hookspec(firstresult=True)
def codex_fallback(agent: Any, turn: Any, failure: Any) -> Any:
    """A failover-class failure (usage limit): run this same turn elsewhere and return what the
    host should return instead; ``None`` keeps the codex result."""
