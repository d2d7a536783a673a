"""A turn whose ``turn/completed`` never came, completed from what codex recorded.

codex sometimes never sends a turn's ``turn/completed`` although the turn is over (upstream
openai/codex#35810; #28495 after a compaction): its thread reported ``thread/status/changed``
idle (or a system error), and codex's own record of the thread has the turn with its final
status and items. Without help such a turn would wait out the whole turn budget and fail.

The driver (:mod:`.turn`) asks here when the thread went idle and no ``turn/completed`` followed
within :data:`IDLE_GRACE` seconds — or, for a codex that says nothing at all, after
:data:`QUIET_PROBE` seconds of silence, and again after each such stretch: :func:`recorded_turn`
reads the thread's newest turn (``thread/turns/list``, every item), and when it is this turn and
over, :func:`complete_from` folds it in through the same handlers as the stream (:mod:`.notes`):
the items the stream missed, then the turn's status. The token usage is what the stream's
``thread/tokenUsage/updated`` reported (codex records no usage per turn).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

from hermes_codex_runtime.pool import Channel
from hermes_codex_runtime.protocol.schema_types import (
    ThreadTurnsListParams,
    ThreadTurnsListResponse,
)
from hermes_codex_runtime.session import notes
from hermes_codex_runtime.wire import WireError

log = logging.getLogger(__name__)

#: The thread went idle: its ``turn/completed`` (normally a millisecond behind) is awaited this
#: long before codex's record is read.
IDLE_GRACE = 2.0
#: Nothing at all from codex for this long during a turn: its record is read (then again after
#: each such stretch), in case the turn ended without a word.
QUIET_PROBE = 30.0


def recorded_turn(conn: Channel, thread_id: str, turn_id: str,
                  timeout: float) -> Mapping[str, Any] | None:
    """codex's record of turn ``turn_id`` — when it is the thread's newest turn — or ``None``
    (another turn, no record, or no answer)."""
    params: ThreadTurnsListParams = {"threadId": thread_id, "limit": 1, "itemsView": "full"}
    try:
        reply = cast(ThreadTurnsListResponse,
                     conn.request("thread/turns/list", params, timeout=timeout))
    except WireError as exc:
        log.info("codex's record of thread %s could not be read: %s", thread_id, exc)
        return None
    for turn in reply.get("data") or ():
        if isinstance(turn, Mapping) and turn.get("id") == turn_id:
            return turn
    return None


def is_over(turn: Mapping[str, Any]) -> bool:
    """True when codex recorded ``turn`` as ended (completed, interrupted or failed)."""
    return turn.get("status") in ("completed", "interrupted", "failed")


def complete_from(view: notes.TurnView, thread_id: str, turn: Mapping[str, Any]) -> str:
    """Fold codex's record of an ended turn into the turn in flight: each item the stream did
    not complete, then the status. Answers :data:`~.notes.COMPLETED` or
    :data:`~.notes.ABORTED`, as the stream would have."""
    turn_id = turn.get("id")
    for item in turn.get("items") or ():
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            continue
        params = {"threadId": thread_id, "turnId": turn_id, "item": dict(item)}
        if not view.projector.knows(item["id"]):
            notes.HANDLERS["item/started"](view, params)
        if notes.HANDLERS["item/completed"](view, params) == notes.ABORTED:
            return notes.ABORTED
    return notes.HANDLERS["turn/completed"](view, {"threadId": thread_id,
                                                  "turn": dict(turn)}) or notes.COMPLETED
