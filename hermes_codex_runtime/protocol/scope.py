"""Which thread and turn a notification belongs to.

The app-server multiplexes every loaded thread on one connection, so the turn loop must ignore what
is not its own. Notifications name their scope in different places (``threadId``/``turnId`` at the
top, ``turn.id`` in ``turn/*``, ``thread.id`` in ``thread/started``); this module reads them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Scope:
    """The thread and turn a message names (``None`` where it names none)."""

    thread_id: str | None
    turn_id: str | None

    def belongs_to(self, thread_id: str | None, turn_id: str | None = None) -> bool:
        """True unless the message names a different thread, or (when ``turn_id`` is given) a
        different turn. A message that names no scope belongs to everyone."""
        if self.thread_id is not None and thread_id is not None and self.thread_id != thread_id:
            return False
        return not (self.turn_id is not None and turn_id is not None and self.turn_id != turn_id)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def scope_of(params: dict[str, Any]) -> Scope:
    """Extract the scope from a notification's or server request's params."""
    thread_id = _str(params.get("threadId"))
    turn_id = _str(params.get("turnId"))
    turn = params.get("turn")
    if isinstance(turn, dict):
        turn_id = turn_id or _str(turn.get("id"))
        thread_id = thread_id or _str(turn.get("threadId"))
    thread = params.get("thread")
    if isinstance(thread, dict):
        thread_id = thread_id or _str(thread.get("id"))
    return Scope(thread_id, turn_id)
