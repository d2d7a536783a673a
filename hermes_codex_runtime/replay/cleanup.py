"""``replay gc``: removing finished runs — their state, records, reports and working copies.

A run is removable when it is not live: ``completed``, ``failed``, ``cancelled``, or
``interrupted`` (its runner is gone; removing it gives up resuming it). A ``pending`` or
``running`` run is never removed — runs whose runner died are first marked ``interrupted`` by the
reconciliation every ``replay`` command does, and the state is checked again under the run's lock
just before its directory goes, so a run resumed meanwhile stays.

Which removable runs go: all of them, or those that ended more than ``older_than`` seconds ago,
minus the ``keep`` newest. What is freed is the disk space of the files removed (blocks, not
apparent size; a working copy shares the user's repository objects, which are not touched).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_codex_runtime.replay.store import ACTIVE, Run, RunStore, StoreError

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "": 86400}


def parse_age(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w`` (a bare number is days) → seconds."""
    found = _AGE.match(text or "")
    if not found:
        raise ValueError(f"--older-than takes an age such as 7d, 12h, 30m, 90s or 2w, got "
                         f"{text!r}")
    return float(found.group(1)) * _UNITS[found.group(2)]


@dataclass(slots=True)
class Collected:
    """What a collection removed (or, in a dry run, would remove) and what it kept."""

    dry_run: bool
    removed: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)

    @property
    def freed(self) -> int:
        """Bytes on disk of the runs removed."""
        return sum(int(r["bytes"]) for r in self.removed)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {"dry_run": self.dry_run, "removed": self.removed, "kept": self.kept,
                "freed_bytes": self.freed}


def disk_usage(path: Path) -> int:
    """Bytes on disk under ``path`` (symlinks not followed)."""
    total = 0
    for folder, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _ended_at(state: dict[str, Any]) -> float:
    for key in ("finished_at", "interrupted_at", "updated_at", "created_at"):
        value = state.get(key)
        if isinstance(value, int | float):
            return float(value)
    return 0.0


def collect(store: RunStore, *, older_than: float | None = None, keep: int | None = None,
            dry_run: bool = False, now: float | None = None) -> Collected:
    """Remove the runs the rules pick (none in a dry run); newest first in both lists."""
    if keep is not None and keep < 0:
        raise ValueError("--keep is a number of runs, 0 or more")
    now = time.time() if now is None else now
    out = Collected(dry_run=dry_run)
    if not dry_run and store.root.is_dir():
        for left in store.root.glob(".removing-*"):  # what an earlier gc could not finish
            _delete(left)
    finished = 0
    states: list[tuple[Run, dict[str, Any]]] = []
    for run in store.runs():
        try:
            states.append((run, run.state()))
        except StoreError as exc:
            out.kept.append({"run_id": run.id, "status": None, "why": f"unreadable: {exc}"})
    states.sort(key=lambda pair: float(pair[1].get("created_at") or 0), reverse=True)
    for run, state in states:  # newest first
        status, ended = state.get("status"), _ended_at(state)
        entry = {"run_id": run.id, "status": status, "ended_at": ended}
        if status in ACTIVE:
            out.kept.append({**entry, "why": "live"})
            continue
        finished += 1
        if keep is not None and finished <= keep:
            out.kept.append({**entry, "why": f"among the {keep} newest"})
            continue
        if older_than is not None and now - ended < older_than:
            out.kept.append({**entry, "why": "too recent"})
            continue
        size = disk_usage(run.dir)
        if dry_run or _remove(run):
            out.removed.append({**entry, "bytes": size})
        else:
            out.kept.append({**entry, "why": "live"})
    return out


def _remove(run: Run) -> bool:
    """Delete the run's directory unless it became live meanwhile (checked under its lock)."""
    trash = run.dir.with_name(f".removing-{run.id}")
    _delete(trash)
    if not run.move_out(trash, lambda state: state.get("status") not in ACTIVE):
        return False
    _delete(trash)
    return True


def _delete(path: Path) -> None:
    """Remove a tree, read-only folders (a command may have left some) included."""
    for folder, dirs, _files in os.walk(path):
        for name in dirs:
            child = os.path.join(folder, name)
            mode = os.lstat(child).st_mode
            if stat.S_ISDIR(mode) and not mode & stat.S_IWUSR:
                os.chmod(child, stat.S_IMODE(mode) | stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)


def describe(collected: Collected) -> str:
    """What a collection did, as a person reads it."""
    verb = "would remove" if collected.dry_run else "removed"
    lines = [f"{verb} {r['run_id']}  {r['status']!s:<11} {_size(r['bytes'])}"
             for r in collected.removed]
    live = sum(1 for k in collected.kept if k.get("why") == "live")
    lines.append(f"{'would free' if collected.dry_run else 'freed'} {_size(collected.freed)} "
                 f"in {len(collected.removed)} run(s); kept {len(collected.kept)}"
                 + (f" ({live} live)" if live else ""))
    return "\n".join(lines)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
