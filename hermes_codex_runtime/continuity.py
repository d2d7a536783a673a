"""Whether a conversation may go on in the codex thread it is bound to, or must start a fresh
thread seeded with the conversation as the host has it now.

codex keeps two things of a thread that the host can change under it: the developer
instructions it started with (``thread/resume`` keeps them), and the turns it has seen. So a
binding carries the digest of the instructions (:func:`instructions_digest`) and how many user
turns the conversation had once its last turn ran (:func:`user_turns`). A conversation that
arrives with other instructions, or with fewer user turns than the thread has seen — the user
undid or retried a turn, a client regenerated or edited a message, the host compressed its
transcript — no longer matches the thread. More turns than the thread saw (messages the host
observed between turns, a turn a fallback provider answered) do not: the thread goes on. A count
from an older binding may lag (the host rewrites some stores only now and then); a lagging count
can only keep a thread, never drop one wrongly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def instructions_digest(instructions: str | None) -> str:
    """What a binding keeps of the developer instructions its thread started with."""
    return hashlib.sha256((instructions or "").encode("utf-8", "replace")).hexdigest()[:32]


def user_turns(history: Sequence[Any]) -> int:
    """The user turns in ``history`` (the conversation before the turn now starting)."""
    return sum(1 for message in history
               if isinstance(message, Mapping) and message.get("role") == "user")


@dataclass(frozen=True)
class Binding:
    """The thread a conversation lives on: what a host's ``codex_stored_thread`` answers, from
    what it persisted when ``codex_thread_bound`` told it."""

    thread_id: str
    endpoint: str | None = None
    instructions: str | None = None  # the digest; None from a binding that predates it
    turns: int | None = None  # user turns once its last turn ran; None: not recorded


def mismatch(*, bound_instructions: str | None, bound_turns: int | None,
             instructions: str | None, turns: int | None) -> str | None:
    """Why a thread bound with ``bound_*`` cannot carry a conversation that now has
    ``instructions`` and ``turns`` user turns before its new one; ``None`` when it can. What a
    side did not record (``None``) is not compared."""
    if bound_instructions is not None and bound_instructions != instructions_digest(instructions):
        return "the host's system prompt differs from the one the thread started with"
    if bound_turns is not None and turns is not None and turns < bound_turns:
        return (f"the conversation has {turns} earlier user turn(s), the thread has seen "
                f"{bound_turns} (a turn was undone, retried or edited)")
    return None
