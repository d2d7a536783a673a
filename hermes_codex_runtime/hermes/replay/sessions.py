"""Hermes' recorded sessions for Codex Replay: its session database (``state.db``) and
``hermes sessions export`` files, read into :class:`~hermes_codex_runtime.replay.sources.Transcript`
values. :class:`HermesSessions` is the replay's session source for a Hermes home: it opens a
session by id (or a unique prefix), an export file (``FILE#SESSION`` picks one), or — a file that
is no Hermes export — a Claude Code transcript.

What counts as a turn: a ``user`` row starts one; the assistant rows up to the next ``user`` row
are its answer (the last non-empty assistant text) and its tool calls. Rows taken back with
``/undo`` or ``/retry`` (``active = 0`` and not ``compacted``) are left out; rows summarised
away by compaction (``compacted = 1``) are kept — they happened. A session split by context
compression is rejoined along its parent chain (root to tip, as Hermes' own
``export_session_lineage`` does); the compression summary is not a turn, and the turns a child
repeats from its parent's tail are counted once. ``state.db`` is opened read-only
(``mode=ro``), so a running Hermes is never disturbed; nothing is written.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hermes_codex_runtime.replay.sources import (
    RecordedTurn,
    SessionSummary,
    SourceError,
    Transcript,
    join_segments,
    load_claude,
    read_json_records,
    short,
    text_of,
    tools_used,
)

#: Prefixes of the summary message Hermes' context compressor writes into the next segment.
SUMMARY_PREFIXES = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")
RECORDER = "Hermes"
#: Hermes tools and what codex has instead; ``None``: nothing comparable.
COMPARABLE_TOOLS: dict[str, str | None] = {
    "terminal": "shell", "process": "shell", "execute_code": "shell",
    "read_file": "shell", "write_file": "apply_patch", "patch": "apply_patch",
    "search_files": "shell", "todo": "update_plan",
    "web_search": "web search (network on only)", "web_extract": "web search (network on only)",
}


def _tool_calls(raw: Any) -> list[dict[str, str]]:
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
            calls.append({"name": name, "arguments": short(function.get("arguments") or "")})
    return calls


def _is_summary(text: str) -> bool:
    return text.lstrip().startswith(SUMMARY_PREFIXES)


def hermes_turns(messages: Sequence[Mapping[str, Any]]) -> list[RecordedTurn]:
    """Turns from one segment's message rows (Hermes' shape), in order."""
    turns: list[RecordedTurn] = []
    for message in messages:
        role = message.get("role")
        text = text_of(message.get("content"))
        if role == "user":
            if not text.strip() or _is_summary(text):
                continue
            stamp = message.get("timestamp")
            turns.append(RecordedTurn(len(turns) + 1, text,
                                      timestamp=float(stamp) if isinstance(stamp, int | float)
                                      else None))
        elif role == "assistant" and turns:
            turn = turns[-1]
            turn.tool_calls.extend(_tool_calls(message.get("tool_calls")))
            if text.strip() and not _is_summary(text):
                turn.original_text = text
    return turns


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
            kind="hermes", recorder=RECORDER, comparable_tools=dict(COMPARABLE_TOOLS),
            ref=session_id, session_id=str(root["id"]),
            title=str(tip.get("title") or root.get("title") or "") or None,
            cwd=str(tip.get("cwd") or root.get("cwd") or "") or None,
            model=str(tip.get("model") or "") or None,
            started_at=float(root["started_at"]) if isinstance(root.get("started_at"),
                                                               int | float) else None,
            turns=turns, lineage=[str(row["id"]) for row in chain], usage=usage,
            cost_usd=cost, tools_used=tools_used(turns))

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
                preview = " ".join(text_of(first[0]).split())
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


def _is_hermes_export(records: Sequence[Mapping[str, Any]]) -> bool:
    return bool(records) and all(isinstance(r.get("messages"), list) and "id" in r
                                 for r in records)


def load_export(path: Path, session: str | None = None) -> Transcript:
    """A session from a ``hermes sessions export`` file (JSONL of sessions with messages, or
    one ``export_session_lineage`` object). ``session`` picks one when the file has several."""
    records = read_json_records(path)
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
        kind="export", recorder=RECORDER, comparable_tools=dict(COMPARABLE_TOOLS),
        ref=f"{path}#{row['id']}", session_id=str(root.get("id") or row["id"]),
        title=str(tip.get("title") or root.get("title") or "") or None,
        cwd=str(tip.get("cwd") or root.get("cwd") or "") or None,
        model=str(tip.get("model") or "") or None,
        started_at=float(started) if isinstance(started, int | float) else None,
        turns=turns, lineage=[str(seg.get("id")) for seg in chain],
        usage={k: int(sum(int(seg.get(k) or 0) for seg in chain))
               for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                         "cache_write_tokens", "reasoning_tokens")
               if any(isinstance(seg.get(k), int) for seg in chain)},
        tools_used=tools_used(turns))


# --------------------------------------------------------------------------- the source


class HermesSessions:
    """The sessions of one Hermes home, as Codex Replay's session source."""

    def __init__(self, hermes_home: Path) -> None:
        self.db = StateDb(hermes_home / "state.db")

    def open(self, ref: str) -> Transcript:
        """The transcript ``ref`` names: a file (an export, or a Claude Code ``.jsonl``;
        ``FILE#SESSION`` picks one session of an export), else a session in ``state.db``."""
        if not isinstance(ref, str) or not ref.strip():
            raise SourceError("name a session id, an export file or a Claude Code transcript")
        path_part, _, session = ref.partition("#")
        path = Path(os.path.expanduser(path_part))
        if os.sep in path_part or path_part.endswith((".json", ".jsonl")) or path.is_file():
            if not path.is_file():
                raise SourceError(f"no such file: {path}")
            records = read_json_records(path)
            if _is_hermes_export(records):
                return load_export(path, session or None)
            if any(r.get("type") in ("user", "assistant") and "message" in r for r in records):
                return load_claude(path)
            raise SourceError(f"{path} is neither a Hermes session export nor a Claude Code "
                              f"transcript")
        return self.db.load(ref.strip())

    def list(self, search: str | None = None, limit: int = 20,
             offset: int = 0) -> dict[str, Any]:
        """One page of replayable sessions: ``{sessions, total, offset, limit, has_more}``."""
        if limit < 1 or offset < 0:
            raise SourceError("limit must be at least 1 and offset not negative")
        everything = self.db.sessions(search)
        page = everything[offset:offset + limit]
        return {"sessions": [s.to_json() for s in page], "total": len(everything),
                "offset": offset, "limit": limit, "has_more": offset + limit < len(everything)}
