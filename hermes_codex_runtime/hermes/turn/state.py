"""What one Hermes turn knows that the runtime's hooks need: :class:`TurnState`, carried as
the ``host`` of the turn's :class:`~hermes_codex_runtime.values.TurnContext` — never stored on
the agent. :mod:`.run` creates it; the hooks (:mod:`.hooks`) read it through :func:`state_of`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hermes_codex_runtime.hermes.approvals.prompts import ApprovalScope
from hermes_codex_runtime.hermes.turn.live_output import LiveOutput
from hermes_codex_runtime.hermes.turn.surfaces import Surfaces
from hermes_codex_runtime.values import TurnContext


@dataclass(slots=True)
class TurnState:
    """One Hermes turn: what ``run_conversation`` handed over, and what the hooks keep while it
    runs (the display's surfaces, tool clocks, live outputs and last status lines, what was
    streamed since the last segment break, whether usage was recorded)."""

    messages: list[dict[str, Any]]
    user_message: Any
    original_user_message: Any
    effective_task_id: str
    should_review_memory: bool
    scope: ApprovalScope
    started: float = field(default_factory=time.monotonic)
    tool_started: dict[str, float] = field(default_factory=dict)
    usage_recorded: bool = False
    epilogue_done: bool = False
    last_touch: float = 0.0
    shown: dict[str, str] = field(default_factory=dict)  # the last plan/diff status shown
    surfaces: Surfaces | None = None  # found on the turn's first event
    live: dict[str, LiveOutput] = field(default_factory=dict)  # running commands, by item id
    text_streamed: bool = False  # answer text streamed since the last segment break
    reasoning_open: bool = False  # reasoning shown since then (the CLI's box is open)
    reasoning_streamed: set[str] = field(default_factory=set)  # reasoning items with deltas


#: The context of a Hermes turn.
HermesContext = TurnContext[TurnState]


def state_of(context: TurnContext[Any] | None) -> TurnState | None:
    """The Hermes turn behind ``context`` (``None`` outside a turn, e.g. a ``/compress``)."""
    state = context.host if context is not None else None
    return state if isinstance(state, TurnState) else None
