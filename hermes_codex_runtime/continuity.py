"""Whether a conversation may go on in the codex thread it is bound to, what must be mended in
that thread first, or whether a fresh thread seeded with the conversation must start instead.

codex keeps two things of a thread that the host can change under it: the developer
instructions it started with (``thread/resume`` keeps them), and the turns it has seen. So a
binding carries the digest of the instructions (:func:`instructions_digest`) and a
:class:`Ledger`: per user turn of the conversation the thread holds, a fingerprint of the user's
message as the host keeps it, and the codex turn that ran it. Before a turn, :func:`plan`
holds the ledger against the conversation the host hands over (its messages before the new
one):

* the same user turns: the thread goes on (:attr:`Plan.KEEP`);
* fewer — the user undid or retried turns, a client regenerated or edited a message — or other
  ones after a common start: the thread drops what the host no longer has (``cut``: the first
  codex turn to drop) and is given what it never saw (``add``: the host's messages from the
  first user turn it lacks — turns another provider answered, a turn codex failed and a fallback
  answered) (:attr:`Plan.MEND`), where codex can;
* nothing in common, other instructions, or an empty conversation (a new session): a fresh
  thread, seeded with the conversation if there is one (:attr:`Plan.FRESH`).

The fingerprint of a turn's own message is learnt from the NEXT conversation the host hands
over (what the host stores may differ from what was sent: recalled memory, plugin context), so
the last entry of a ledger matches any message.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Entries a stored ledger keeps one by one; older ones are kept as a count (they still match
#: any message: they can only keep a thread, never mend one wrongly).
KEEP_ENTRIES = 256
#: The fingerprint of a turn codex did not answer (a usage limit: the host's fallback provider
#: answered it): it matches no message, so the turn is redone from the host's conversation.
UNANSWERED = "!"
#: How a compacted ledger is persisted.
COMPACTED = "compacted"


def instructions_digest(instructions: str | None) -> str:
    """What a binding keeps of the developer instructions its thread started with."""
    return hashlib.sha256((instructions or "").encode("utf-8", "replace")).hexdigest()[:32]


def user_positions(history: Sequence[Any]) -> list[int]:
    """The indices of the user messages in ``history``."""
    return [i for i, message in enumerate(history)
            if isinstance(message, Mapping) and message.get("role") == "user"]


def fingerprint(message: Mapping[str, Any]) -> str:
    """A short digest of a user message's content (text and image references)."""
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True,
                                                              default=str)
    return hashlib.sha256(" ".join(text.split()).encode("utf-8", "replace")).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Entry:
    """One user turn a thread holds: its message's fingerprint (``None``: not known yet — it
    matches any) and the codex turn that ran it (``None``: the thread got it in its seed or
    had it injected)."""

    fingerprint: str | None = None
    turn_id: str | None = None

    def matches(self, fingerprint: str) -> bool:
        return self.fingerprint is None or self.fingerprint == fingerprint


@dataclass(frozen=True, slots=True)
class Ledger:
    """The user turns a thread holds, in order (see the module docstring). A ``compacted`` one
    belongs to a thread codex just compacted: what it holds is a summary, which any conversation
    the host hands over next matches (the host compressed its own transcript alike); that
    conversation is learnt then."""

    entries: tuple[Entry, ...] = ()
    compacted: bool = False

    def __len__(self) -> int:
        return len(self.entries)

    def encode(self) -> str:
        """A compact text for the host to persist (:meth:`decode` reads it back)."""
        if self.compacted:
            return COMPACTED
        old = max(0, len(self.entries) - KEEP_ENTRIES)
        kept = [f"{e.fingerprint or '-'}:{e.turn_id or '-'}" for e in self.entries[old:]]
        return f"{old}|" + ";".join(kept)

    @classmethod
    def decode(cls, text: Any) -> Ledger | None:
        """The ledger ``text`` encodes; ``None`` for anything else (nothing is compared)."""
        if text == COMPACTED:
            return cls(compacted=True)
        if not isinstance(text, str) or "|" not in text:
            return None
        old, _, rest = text.partition("|")
        if not old.isdigit():
            return None
        entries = [Entry()] * int(old)
        for item in filter(None, rest.split(";")):
            fp, _, turn = item.partition(":")
            entries.append(Entry(None if fp in ("", "-") else fp,
                                 None if turn in ("", "-") else turn))
        return cls(tuple(entries))

    def after_turn(self, history: Sequence[Any], turn_id: str | None, *,
                   answered: bool, kept: int | None = None) -> Ledger:
        """The ledger once a turn ran on a thread that held ``history`` (the messages before
        the turn): the first ``kept`` entries (``None``: all) remain as they are, the history's
        user turns after them are learnt (or added), and the turn itself joins at the end."""
        fingerprints = [fingerprint(history[i]) for i in user_positions(history)]
        base = () if self.compacted else self.entries if kept is None else self.entries[:kept]
        entries = [Entry(fp, base[i].turn_id if i < len(base) else None)
                   for i, fp in enumerate(fingerprints)]
        entries.append(Entry(None if answered else UNANSWERED, turn_id))
        return Ledger(tuple(entries))


class Plan(enum.Enum):
    """What the thread needs before the host's next turn runs on it."""

    KEEP = "keep"
    MEND = "mend"
    FRESH = "fresh"


@dataclass(frozen=True, slots=True)
class Verdict:
    """:func:`plan`'s answer: the plan, why, and for :attr:`Plan.MEND` what to change."""

    plan: Plan
    why: str | None = None
    #: The first codex turn to drop, with every later one (``None``: drop nothing).
    cut: str | None = None
    #: The host's messages the thread must be given, in order (after the cut).
    add: tuple[Mapping[str, Any], ...] = field(default=())
    #: How many of the ledger's entries stay.
    kept: int = 0


def plan(ledger: Ledger | None, history: Sequence[Any] | None) -> Verdict:
    """What a thread whose ledger is ``ledger`` needs to carry a conversation that had
    ``history`` before its new turn (``None`` for either: not known, the thread goes on)."""
    if ledger is None or history is None or ledger.compacted:
        return Verdict(Plan.KEEP)
    positions = user_positions(history)
    if not positions:
        return Verdict(Plan.FRESH, "the conversation starts anew" if len(ledger) else None)
    common = 0
    for entry, index in zip(ledger.entries, positions, strict=False):
        if not entry.matches(fingerprint(history[index])):
            break
        common += 1
    if common == len(ledger) == len(positions):
        return Verdict(Plan.KEEP, kept=common)
    if common == 0 and len(ledger):
        return Verdict(Plan.FRESH, "the conversation shares no turn with the thread")
    cut = None
    if common < len(ledger):
        cut = ledger.entries[common].turn_id
        if cut is None:  # that turn came with the seed or was injected: no codex turn to cut at
            return Verdict(Plan.FRESH, f"the conversation changed at user turn {common + 1}, "
                           "which the thread holds only in its seed")
    add = tuple(history[positions[common]:]) if common < len(positions) else ()
    dropped = len(ledger) - common
    why = ", ".join(filter(None, (
        f"{dropped} user turn(s) the conversation no longer has" if dropped else None,
        f"{len(positions) - common} user turn(s) the thread never saw"
        if common < len(positions) else None)))
    return Verdict(Plan.MEND, why, cut=cut, add=add, kept=common)


@dataclass(frozen=True)
class Binding:
    """The thread a conversation lives on: what a host's ``codex_stored_thread`` answers, from
    what it persisted when ``codex_thread_bound`` told it."""

    thread_id: str
    endpoint: str | None = None
    instructions: str | None = None  # the digest; None from a binding that predates it
    ledger: Ledger | None = None  # None: not recorded (nothing is compared)


def instructions_changed(bound: str | None, instructions: str | None) -> str | None:
    """Why a thread started with instructions of digest ``bound`` cannot carry a conversation
    whose host prompt is now ``instructions`` (``None``: it can, or ``bound`` is unknown)."""
    if bound is not None and bound != instructions_digest(instructions):
        return "the host's system prompt differs from the one the thread started with"
    return None
