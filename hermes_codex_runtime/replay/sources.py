"""Readers for recorded sessions: Hermes' ``state.db``, ``hermes sessions export`` files and
Claude Code transcripts. Plain readers — no Hermes import, nothing written.

Every reader yields a :class:`Transcript`: the user turns in order, each with the original final
answer and the tool calls made before it. What counts as a turn:

* **Hermes** (``state.db`` or an export): a ``user`` row starts a turn; the assistant rows up to
  the next ``user`` row are its answer (the last non-empty assistant text) and its tool calls.
  Rows taken back with ``/undo`` or ``/retry`` (``active = 0`` and not ``compacted``) are left
  out; rows summarised away by compaction (``compacted = 1``) are kept — they happened. A
  session split by context compression is rejoined along its parent chain (root to tip, as
  Hermes' own ``export_session_lineage`` does); the compression summary is not a turn, and the
  turns a child repeats from its parent's tail are counted once.
* **Claude Code** (``~/.claude/projects/**/SESSION.jsonl``): a ``user`` event whose content is
  text (not only tool results, not a sidechain, not meta) starts a turn; ``assistant`` events'
  text blocks and ``tool_use`` blocks up to the next such user event are its answer and tools.

``state.db`` is opened read-only (``mode=ro``), so a running Hermes is never disturbed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Prefixes of the summary message Hermes' context compressor writes into the next segment.
SUMMARY_PREFIXES = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")
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

    kind: str  # "hermes" | "export" | "claude"
    ref: str  # what the user named: a session id, or a file path (with "#id")
    session_id: str
    title: str | None
    cwd: str | None
    model: str | None
    started_at: float | None
    turns: list[RecordedTurn]
    lineage: list[str] = field(default_factory=list)
    #: The original's token buckets where the source records them (Hermes' session columns).
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    tools_used: list[str] = field(default_factory=list)

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


# --------------------------------------------------------------------------- message shapes


def _text_of(content: Any) -> str:
    """Plain text of a message's content: a string, a JSON-encoded list of parts, or parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        stripped = content.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            with contextlib.suppress(ValueError):
                parsed = json.loads(stripped)
                if isinstance(parsed, list) and all(isinstance(p, Mapping) for p in parsed):
                    return _text_of(parsed)
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


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_TOOL_ARGUMENTS else text[:MAX_TOOL_ARGUMENTS] + "…"


def _hermes_tool_calls(raw: Any) -> list[dict[str, str]]:
    """``[{name, arguments}]`` from an assistant row's ``tool_calls`` (JSON text or a list)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    calls = []
    for call in raw if isinstance(raw, list) else []:
        if not isinstance(call, Mapping):
            continue
        inner = call.get("function")
        function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
        name = function.get("name")
        if isinstance(name, str) and name:
            calls.append({"name": name, "arguments": _short(function.get("arguments") or "")})
    return calls


def _is_summary(text: str) -> bool:
    return text.lstrip().startswith(SUMMARY_PREFIXES)


def hermes_turns(messages: Sequence[Mapping[str, Any]]) -> list[RecordedTurn]:
    """Turns from one segment's message rows (Hermes' shape), in order."""
    turns: list[RecordedTurn] = []
    for message in messages:
        role = message.get("role")
        text = _text_of(message.get("content"))
        if role == "user":
            if not text.strip() or _is_summary(text):
                continue
            stamp = message.get("timestamp")
            turns.append(RecordedTurn(len(turns) + 1, text,
                                      timestamp=float(stamp) if isinstance(stamp, int | float)
                                      else None))
        elif role == "assistant" and turns:
            turn = turns[-1]
            turn.tool_calls.extend(_hermes_tool_calls(message.get("tool_calls")))
            if text.strip() and not _is_summary(text):
                turn.original_text = text
    return turns


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


def _tools_used(turns: Sequence[RecordedTurn]) -> list[str]:
    return sorted({call["name"] for turn in turns for call in turn.tool_calls})


# --------------------------------------------------------------------------- Hermes state.db


def _branch_child(row: Mapping[str, Any]) -> bool:
    raw = row.get("model_config")
    try:
        config = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return False
    return isinstance(config, Mapping) and config.get("_branched_from") is not None


class StateDb:
    """Hermes' session database, read-only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        if not self.path.is_file():
            raise SourceError(f"no Hermes session database at {self.path} (has Hermes run with "
                              f"this HERMES_HOME?)")
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5.0)
        except sqlite3.Error as exc:
            raise SourceError(f"cannot open {self.path}: {exc}") from exc
        db.row_factory = sqlite3.Row
        try:
            yield db
        except sqlite3.Error as exc:
            raise SourceError(f"cannot read {self.path}: {exc}") from exc
        finally:
            db.close()

    @staticmethod
    def _columns(db: sqlite3.Connection, table: str) -> set[str]:
        return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}

    def _session(self, db: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
        row = db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return dict(row) if row else None

    def _compression_child(self, db: sqlite3.Connection, row: Mapping[str, Any]) -> bool:
        parent_id = row.get("parent_session_id")
        if not parent_id or _branch_child(row):
            return False
        parent = self._session(db, str(parent_id))
        return bool(parent and parent.get("end_reason") == "compression")

    def lineage(self, db: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
        """The compression lineage containing ``session_id``, root to tip."""
        row = self._session(db, session_id)
        if row is None:
            return []
        if _branch_child(row):
            return [row]
        seen = {row["id"]}
        while self._compression_child(db, row):
            parent = self._session(db, str(row["parent_session_id"]))
            if parent is None or parent["id"] in seen:
                break
            row = parent
            seen.add(row["id"])
        chain = [row]
        seen = {row["id"]}
        while chain[-1].get("end_reason") == "compression" and len(chain) < 1000:
            children = [dict(r) for r in db.execute(
                "SELECT * FROM sessions WHERE parent_session_id = ? ORDER BY started_at ASC",
                (chain[-1]["id"],))]
            child = next((c for c in children if not _branch_child(c) and c["id"] not in seen),
                         None)
            if child is None:
                break
            seen.add(child["id"])
            chain.append(child)
        return chain

    def _messages(self, db: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
        columns = self._columns(db, "messages")
        where = "session_id = ?"
        if "active" in columns:
            where += " AND (active != 0" + (" OR compacted != 0)" if "compacted" in columns
                                            else ")")
        wanted = [c for c in ("role", "content", "tool_calls", "tool_name", "timestamp")
                  if c in columns]
        return [dict(r) for r in db.execute(
            f"SELECT {', '.join(wanted)} FROM messages WHERE {where} ORDER BY id", (session_id,))]

    def resolve(self, db: sqlite3.Connection, ref: str) -> str:
        """A full session id from an id or a unique prefix."""
        if self._session(db, ref):
            return ref
        matches = [r[0] for r in db.execute(
            "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' LIMIT 3",
            (ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",))]
        if len(matches) == 1:
            return str(matches[0])
        if matches:
            raise SourceError(f"session id prefix {ref!r} is ambiguous: {', '.join(matches)}…")
        raise SourceError(f"no Hermes session {ref!r} in {self.path} (see `hermes-codex-runtime "
                          f"replay list`)")

    def load(self, ref: str) -> Transcript:
        """The session ``ref`` (an id or unique prefix), its compression lineage rejoined."""
        with self._db() as db:
            session_id = self.resolve(db, ref)
            chain = self.lineage(db, session_id)
            segments = [hermes_turns(self._messages(db, str(row["id"]))) for row in chain]
            usage: dict[str, int] = {}
            cost: float | None = None
            for row in chain:
                for key in ("input_tokens", "output_tokens", "cache_read_tokens",
                            "cache_write_tokens", "reasoning_tokens"):
                    if isinstance(row.get(key), int):
                        usage[key] = usage.get(key, 0) + int(row[key])
                for key in ("actual_cost_usd", "estimated_cost_usd"):
                    if isinstance(row.get(key), int | float):
                        cost = (cost or 0.0) + float(row[key])
                        break
        turns = join_segments(segments)
        tip = chain[-1]
        root = chain[0]
        return Transcript(
            kind="hermes", ref=session_id, session_id=str(root["id"]),
            title=str(tip.get("title") or root.get("title") or "") or None,
            cwd=str(tip.get("cwd") or root.get("cwd") or "") or None,
            model=str(tip.get("model") or "") or None,
            started_at=float(root["started_at"]) if isinstance(root.get("started_at"),
                                                               int | float) else None,
            turns=turns, lineage=[str(row["id"]) for row in chain], usage=usage,
            cost_usd=cost, tools_used=_tools_used(turns))

    def sessions(self, search: str | None = None) -> list[SessionSummary]:
        """Every replayable session (lineage roots with at least one user turn), newest first,
        filtered by ``search`` (case-insensitive, over id, title and the first user message)."""
        with self._db() as db:
            columns = self._columns(db, "sessions")
            order = " ORDER BY started_at DESC" if "started_at" in columns else ""
            rows = [dict(r) for r in db.execute(f"SELECT * FROM sessions{order}")]
            by_id = {row["id"]: row for row in rows}
            needle = (search or "").strip().lower()
            out: list[SessionSummary] = []
            for row in rows:
                parent = by_id.get(row.get("parent_session_id"))
                if parent and parent.get("end_reason") == "compression" \
                        and not _branch_child(row):
                    continue  # listed through its lineage root
                first = db.execute(
                    "SELECT content FROM messages WHERE session_id = ? AND role = 'user' "
                    "ORDER BY id LIMIT 1", (row["id"],)).fetchone()
                if first is None:
                    continue
                preview = " ".join(_text_of(first[0]).split())
                title = row.get("title")
                if needle and not any(needle in str(v or "").lower()
                                      for v in (row["id"], title, preview)):
                    continue
                count = db.execute("SELECT COUNT(*) FROM messages WHERE session_id = ? "
                                   "AND role = 'user'", (row["id"],)).fetchone()[0]
                started = row.get("started_at")
                out.append(SessionSummary(
                    "hermes", str(row["id"]), str(title) if title else None,
                    float(started) if isinstance(started, int | float) else None,
                    row.get("model"), row.get("cwd"), int(count), preview[:120]))
            return out


# --------------------------------------------------------------------------- export files


def _read_json_records(path: Path) -> list[dict[str, Any]]:
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


def _is_hermes_export(records: Sequence[Mapping[str, Any]]) -> bool:
    return bool(records) and all(isinstance(r.get("messages"), list) and "id" in r
                                 for r in records)


def load_export(path: Path, session: str | None = None) -> Transcript:
    """A session from a ``hermes sessions export`` file (JSONL of sessions with messages, or
    one ``export_session_lineage`` object). ``session`` picks one when the file has several."""
    records = _read_json_records(path)
    if not _is_hermes_export(records):
        raise SourceError(f"{path} is not a Hermes session export (expected session objects "
                          f"with `id` and `messages`; `hermes sessions export FILE` writes one)")
    by_id = {str(r["id"]): r for r in records}
    if session is None:
        roots = [r for r in records if not (
            r.get("parent_session_id") in by_id
            and by_id[str(r["parent_session_id"])].get("end_reason") == "compression")]
        if len(roots) != 1:
            ids = ", ".join(str(r["id"]) for r in roots[:5])
            raise SourceError(f"{path} holds {len(roots)} sessions; name one as "
                              f"{path}#SESSION_ID (e.g. {ids})")
        row = roots[0]
    else:
        found = [r for sid, r in by_id.items() if sid == session or sid.startswith(session)]
        if len(found) != 1:
            raise SourceError(f"no single session {session!r} in {path}")
        row = found[0]
    if isinstance(row.get("segments"), list) and row["segments"]:
        chain = [seg for seg in row["segments"] if isinstance(seg, Mapping)]
    else:
        chain = [row]
        while chain[-1].get("end_reason") == "compression":
            child = next((r for r in records if r.get("parent_session_id") == chain[-1]["id"]
                          and not _branch_child(r) and r not in chain), None)
            if child is None:
                break
            chain.append(child)
    turns = join_segments([hermes_turns([m for m in seg.get("messages") or []
                                         if isinstance(m, Mapping)
                                         and (m.get("active", 1) or m.get("compacted"))])
                           for seg in chain])
    root, tip = chain[0], chain[-1]
    started = root.get("started_at")
    return Transcript(
        kind="export", ref=f"{path}#{row['id']}", session_id=str(root.get("id") or row["id"]),
        title=str(tip.get("title") or root.get("title") or "") or None,
        cwd=str(tip.get("cwd") or root.get("cwd") or "") or None,
        model=str(tip.get("model") or "") or None,
        started_at=float(started) if isinstance(started, int | float) else None,
        turns=turns, lineage=[str(seg.get("id")) for seg in chain],
        usage={k: int(sum(int(seg.get(k) or 0) for seg in chain))
               for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                         "cache_write_tokens", "reasoning_tokens")
               if any(isinstance(seg.get(k), int) for seg in chain)},
        tools_used=_tools_used(turns))


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
    records = _read_json_records(path)
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
                                                 "arguments": _short(block.get("input") or {})})
            if texts:
                turns[-1].original_text = "\n".join(texts)
    if not turns:
        raise SourceError(f"{path} has no user turns (is it a Claude Code transcript?)")
    return Transcript(kind="claude", ref=str(path), session_id=str(session_id or path.stem),
                      title=" ".join(turns[0].user_text.split())[:80], cwd=cwd,
                      model=str(model) if model else None, started_at=started, turns=turns,
                      lineage=[str(session_id or path.stem)], tools_used=_tools_used(turns))


def _iso_seconds(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# --------------------------------------------------------------------------- dispatch


def open_source(ref: str, hermes_home: Path) -> Transcript:
    """The transcript ``ref`` names: a file (an export, or a Claude Code ``.jsonl``;
    ``FILE#SESSION`` picks one session of an export), else a session in ``state.db``."""
    if not isinstance(ref, str) or not ref.strip():
        raise SourceError("name a session id, an export file or a Claude Code transcript")
    path_part, _, session = ref.partition("#")
    path = Path(os.path.expanduser(path_part))
    if os.sep in path_part or path_part.endswith((".json", ".jsonl")) or path.is_file():
        if not path.is_file():
            raise SourceError(f"no such file: {path}")
        records = _read_json_records(path)
        if _is_hermes_export(records):
            return load_export(path, session or None)
        if any(r.get("type") in ("user", "assistant") and "message" in r for r in records):
            return load_claude(path)
        raise SourceError(f"{path} is neither a Hermes session export nor a Claude Code "
                          f"transcript")
    return StateDb(hermes_home / "state.db").load(ref.strip())


def list_sessions(hermes_home: Path, search: str | None = None, limit: int = 20,
                  offset: int = 0) -> dict[str, Any]:
    """One page of replayable sessions: ``{sessions, total, offset, limit, has_more}``."""
    if limit < 1 or offset < 0:
        raise SourceError("limit must be at least 1 and offset not negative")
    everything = StateDb(hermes_home / "state.db").sessions(search)
    page = everything[offset:offset + limit]
    return {"sessions": [s.to_json() for s in page], "total": len(everything),
            "offset": offset, "limit": limit, "has_more": offset + limit < len(everything)}
