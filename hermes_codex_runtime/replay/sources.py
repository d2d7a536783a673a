"""What a replay replays: a recorded session as a :class:`Transcript` — the user turns in order,
each with the original final answer and the tool calls made before it — and the readers that
are no host's own: Claude Code transcripts (:func:`load_claude`).

The host's own recorded sessions (its session database and export files, read by its
adapter) come in through a :class:`SessionSource`, which
the host puts in the replay's context; the helpers here (:func:`text_of`,
:func:`join_segments`, …) are shared with such readers.

* **Claude Code** (``~/.claude/projects/**/SESSION.jsonl``): a ``user`` event whose content is
  text (not only tool results, not a sidechain, not meta) starts a turn; ``assistant`` events'
  text blocks and ``tool_use`` blocks up to the next such user event are its answer and tools.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

MAX_TOOL_ARGUMENTS = 2_000  # characters of a tool call's arguments kept in the transcript


class SourceError(ValueError):
    """A source that cannot be replayed, with what to do about it."""


@dataclass(slots=True)
class RecordedTurn:
    """One user turn of the original session and what the original agent did with it."""

    index: int  # 1-based, in the rejoined session
    user_text: str
    original_text: str = ""
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    timestamp: float | None = None


@dataclass(slots=True)
class Transcript:
    """A recorded session, ready to replay."""

    kind: str  # the reader's name: "claude", or one of the host's own
    ref: str  # what the user named: a session id, or a file path (with "#id")
    session_id: str
    title: str | None
    cwd: str | None
    model: str | None
    started_at: float | None
    turns: list[RecordedTurn]
    lineage: list[str] = field(default_factory=list)
    #: The original's token buckets where the source records them (the host's session columns).
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    tools_used: list[str] = field(default_factory=list)
    #: Who recorded the session, for the report's words (the host's name, "Claude Code").
    recorder: str = "the original agent"
    #: The recorder's own tools that codex has a counterpart for (``None``: nothing comparable
    #: but known); any other tool the original used is one codex does not have.
    comparable_tools: dict[str, str | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready copy (saved in the run directory as ``source.json``)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transcript:
        """The inverse of :meth:`to_json`."""
        values = dict(data)
        values["turns"] = [RecordedTurn(**turn) for turn in data.get("turns") or []]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One line of ``replay list``."""

    kind: str
    ref: str
    title: str | None
    started_at: float | None
    model: str | None
    cwd: str | None
    user_turns: int
    preview: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)


class SessionSource(Protocol):
    """The recorded sessions a host can replay (what ``replay list`` and ``replay run`` see)."""

    def open(self, ref: str) -> Transcript:
        """The transcript ``ref`` names (a session id, or a file); raises
        :class:`SourceError` with what to do about it."""
        ...

    def list(self, search: str | None = None, limit: int = 20,
             offset: int = 0) -> dict[str, Any]:
        """One page of replayable sessions: ``{sessions, total, offset, limit, has_more}``."""
        ...


# --------------------------------------------------------------------------- shared helpers


def text_of(content: Any) -> str:
    """Plain text of a message's content: a string, a JSON-encoded list of parts, or parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        stripped = content.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            with contextlib.suppress(ValueError):
                parsed = json.loads(stripped)
                if isinstance(parsed, list) and all(isinstance(p, Mapping) for p in parsed):
                    return text_of(parsed)
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") in ("text", "input_text",
                                                                  "output_text"):
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(p for p in parts if p)
    return str(content)


def short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_TOOL_ARGUMENTS else text[:MAX_TOOL_ARGUMENTS] + "…"


def join_segments(segments: Sequence[Sequence[RecordedTurn]]) -> list[RecordedTurn]:
    """Concatenate the turns of a compression lineage. A child segment opens with the tail its
    parent kept; the longest run of leading child turns equal to the parent's last turns is
    dropped (the original answers stay with the parent's copies)."""
    joined: list[RecordedTurn] = []
    for segment in segments:
        overlap = 0
        for size in range(min(len(joined), len(segment)), 0, -1):
            tail = [t.user_text for t in joined[-size:]]
            if tail == [t.user_text for t in segment[:size]]:
                overlap = size
                break
        for turn in segment[overlap:]:
            joined.append(RecordedTurn(len(joined) + 1, turn.user_text, turn.original_text,
                                       list(turn.tool_calls), turn.timestamp))
    return joined


def tools_used(turns: Sequence[RecordedTurn]) -> list[str]:
    return sorted({call["name"] for turn in turns for call in turn.tool_calls})


def read_json_records(path: Path) -> list[dict[str, Any]]:
    """The session dicts of an export: one JSON object, or JSON Lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot read {path}: {exc}") from exc
    stripped = text.strip()
    if not stripped:
        raise SourceError(f"{path} is empty")
    with contextlib.suppress(ValueError):
        whole = json.loads(stripped)
        if isinstance(whole, dict):
            return [whole]
        if isinstance(whole, list) and all(isinstance(x, dict) for x in whole):
            return list(whole)
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError(f"{path}:{number} is not JSON ({exc.msg})") from exc
        if isinstance(record, dict):
            records.append(record)
    return records


# --------------------------------------------------------------------------- Claude Code


def _claude_user_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content):
            return ""
        return "\n".join(str(b.get("text") or "") for b in content
                         if isinstance(b, Mapping) and b.get("type") == "text")
    return ""


def load_claude(path: Path) -> Transcript:
    """A Claude Code transcript (``.jsonl``)."""
    records = read_json_records(path)
    turns: list[RecordedTurn] = []
    cwd = model = session_id = None
    started: float | None = None
    for event in records:
        if event.get("isSidechain") or event.get("isMeta"):
            continue
        cwd = cwd or event.get("cwd")
        session_id = session_id or event.get("sessionId")
        message = event.get("message") if isinstance(event.get("message"), Mapping) else None
        if message is None:
            continue
        if event.get("type") == "user":
            text = _claude_user_text(message)
            if text.strip() and not text.lstrip().startswith(("<command-", "<local-command")):
                turns.append(RecordedTurn(len(turns) + 1, text))
                if started is None:
                    started = _iso_seconds(event.get("timestamp"))
        elif event.get("type") == "assistant" and turns:
            model = message.get("model") or model
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text",
                                                                 "text": content}]
            texts = []
            for block in blocks:
                if not isinstance(block, Mapping):
                    continue
                if block.get("type") == "text" and str(block.get("text") or "").strip():
                    texts.append(str(block["text"]))
                elif block.get("type") == "tool_use" and block.get("name"):
                    turns[-1].tool_calls.append({"name": str(block["name"]),
                                                 "arguments": short(block.get("input") or {})})
            if texts:
                turns[-1].original_text = "\n".join(texts)
    if not turns:
        raise SourceError(f"{path} has no user turns (is it a Claude Code transcript?)")
    return Transcript(kind="claude", recorder="Claude Code",
                      ref=str(path), session_id=str(session_id or path.stem),
                      title=" ".join(turns[0].user_text.split())[:80], cwd=cwd,
                      model=str(model) if model else None, started_at=started, turns=turns,
                      lineage=[str(session_id or path.stem)], tools_used=tools_used(turns))


def _iso_seconds(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
