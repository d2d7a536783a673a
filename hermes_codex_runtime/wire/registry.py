"""A registry of the app-server processes this host spawned, to reap them after the host dies.

codex normally exits when its stdin closes — but a wedged codex, or MCP servers it started in
their own sessions, can outlive a host that was killed with SIGKILL. Every spawned app-server is
recorded (PID, create time, command line, and the owning host's PID + create time) in one JSON
file, with the descendants its connection saw it start (:meth:`ProcessRegistry.note_descendants`:
once codex is gone they are reparented to init, and only this record still knows them); on the
next start :meth:`ProcessRegistry.reap_orphans` kills the trees whose owner is gone, with what
codex left behind (:func:`.proctree.left_behind`: its process group, its sandbox's helpers).
Identities are re-checked (PID + start time) before any signal, so a recycled PID is never
signalled; the start time is the kernel's, counted from boot (:func:`proctree.started`), because
psutil's wall-clock ``create_time`` can move by a whole second between two reads. The command
line is not part of the identity: a launcher that execs codex (a shell wrapper as ``codex_bin``)
has another one by the time it is reaped; it is compared only for entries written before the
start stamp existed.
Writes are atomic and serialised across processes with ``flock``; a corrupt
file reads as empty (with a warning).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from hermes_codex_runtime.wire.files import atomic_write_json
from hermes_codex_runtime.wire.proctree import left_behind, reap, started

log = logging.getLogger(__name__)
NOTED_MAX = 64


def _identity(pid: int) -> tuple[float, float, list[str]] | None:
    """(start since boot, wall-clock create time, command line) of a running process."""
    start = started(pid)
    if start is None:
        return None
    try:
        proc = psutil.Process(pid)
        return start, proc.create_time(), proc.cmdline()
    except psutil.Error:
        return None


def _same(entry: dict[str, Any], prefix: str, current: tuple[float, float, list[str]] | None
          ) -> bool:
    """Whether ``current`` is the process an entry recorded (``prefix`` "" or "owner_").
    Entries written before the start stamp existed compare the wall-clock create time with a
    tolerance for its whole-second flips."""
    if current is None:
        return False
    recorded = entry.get(f"{prefix}start")
    if isinstance(recorded, (int, float)):
        return abs(current[0] - float(recorded)) < 0.005
    return abs(current[1] - float(entry[f"{prefix}create_time"])) < 1.5


class ProcessRegistry:
    """``path`` holds ``{"processes": {pid: {...}}}``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_suffix(self.path.suffix + ".lock")
        with open(lock_path, "a+") as lock:
            os.chmod(lock_path, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = self._read()
                before = json.dumps(data, sort_keys=True)
                yield data
                if json.dumps(data, sort_keys=True) != before:
                    self._write(data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"processes": {}}
        except (OSError, ValueError):
            log.warning("the codex process registry %s is unreadable; starting it afresh",
                        self.path)
            return {"processes": {}}
        if not isinstance(data, dict) or not isinstance(data.get("processes"), dict):
            return {"processes": {}}
        return data

    def _write(self, data: dict[str, Any]) -> None:
        # not durable: after a power cut no recorded process runs any more, so nothing is lost;
        # the write happens while codex's reader waits (see AppServerConnection)
        atomic_write_json(self.path, data, durable=False)

    def register(self, pid: int) -> None:
        """Record ``pid`` (an app-server this process just spawned)."""
        identity = _identity(pid)
        owner = _identity(os.getpid())
        if identity is None or owner is None:
            return
        with self._locked() as data:
            data["processes"][str(pid)] = {
                "start": identity[0], "create_time": identity[1], "cmdline": identity[2],
                "owner_pid": os.getpid(), "owner_start": owner[0],
                "owner_create_time": owner[1]}

    def note_descendants(self, pid: int, descendants: list[psutil.Process]) -> None:
        """Record what app-server ``pid`` started (PID + kernel start time each, the newest
        :data:`NOTED_MAX`), for :meth:`reap_orphans` to find after codex itself is gone."""
        noted = []
        for proc in descendants:
            start = started(proc.pid)
            if start is not None:
                noted.append([proc.pid, start])
        with self._locked() as data:
            entry = data["processes"].get(str(pid))
            if isinstance(entry, dict):
                entry["descendants"] = noted[-NOTED_MAX:]

    def unregister(self, pid: int) -> None:
        """Forget ``pid`` (it was closed properly)."""
        with self._locked() as data:
            data["processes"].pop(str(pid), None)

    def entries(self) -> dict[str, Any]:
        """What is recorded."""
        return dict(self._read()["processes"])

    def live(self) -> list[dict[str, Any]]:
        """The recorded app-servers that are still running (same PID, same start time): their
        pid, owner, whether the owner is alive, and resident memory in MiB."""
        out: list[dict[str, Any]] = []
        for key, entry in self.entries().items():
            try:
                pid, owner_pid = int(key), int(entry["owner_pid"])
                current = _identity(pid)
                if current is None or not _same(entry, "", current):
                    continue
                owner_alive = _same(entry, "owner_", _identity(owner_pid))
                rss = psutil.Process(pid).memory_info().rss
            except (KeyError, TypeError, ValueError, psutil.Error):
                continue
            out.append({"pid": pid, "owner_pid": owner_pid, "started": current[1],
                        "owner_alive": owner_alive, "rss_mib": round(rss / 2**20, 1)})
        return sorted(out, key=lambda item: item["started"])

    def reap_orphans(self) -> list[int]:
        """Kill the recorded app-server trees whose owner is gone; returns the PIDs reaped.
        Entries whose process is gone (or was replaced by another one) are dropped."""
        reaped: list[int] = []
        with self._locked() as data:
            for key, entry in list(data["processes"].items()):
                try:
                    pid, owner_pid = int(key), int(entry["owner_pid"])
                    cmdline = list(entry.get("cmdline") or [])
                    if _same(entry, "owner_", _identity(owner_pid)):
                        continue  # its host is alive: not an orphan
                    current = _identity(pid)
                    # The kernel's start time identifies a process for good; the command line
                    # is checked only for entries without it (a launcher that execs codex —
                    # a shell wrapper — changes its command line after it was recorded).
                    if not _same(entry, "", current) or (
                            current is not None and cmdline and "start" not in entry
                            and current[2] != cmdline):
                        data["processes"].pop(key, None)  # gone, or the PID was recycled
                        left = _reap_noted(entry, pid, current is None)  # may still run
                        if left:
                            reaped.extend(left)
                            log.warning("reaped %d process(es) left by codex app-server pid %s "
                                        "after its host died", len(left), pid)
                        else:
                            log.info("forgetting the orphan candidate pid %s: it is gone or "
                                     "the PID now belongs to another process", pid)
                        continue
                except (KeyError, TypeError, ValueError):
                    data["processes"].pop(key, None)
                    continue
                try:
                    root = psutil.Process(pid)
                except psutil.Error:
                    data["processes"].pop(key, None)
                    continue
                # its tree, what it was seen to start, and its group (codex leads one)
                tree = left_behind(pid, started(pid), known=[root, *_noted(entry)])
                survivors = reap(tree, timeout=2.0)
                if survivors:
                    log.warning("orphaned codex processes survived SIGKILL: %s", survivors)
                else:
                    data["processes"].pop(key, None)
                reaped.append(pid)
                log.warning("reaped an orphaned codex app-server (pid %s) left by a host that "
                            "died (pid %s)", pid, owner_pid)
        return reaped


def _noted(entry: dict[str, Any]) -> list[psutil.Process]:
    """The processes an entry noted that are still those very processes (PID + start time)."""
    found = []
    for item in entry.get("descendants") or []:
        try:
            pid, start = int(item[0]), float(item[1])
        except (TypeError, ValueError, IndexError):
            continue
        now = started(pid)
        if now is not None and abs(now - start) < 0.005:
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(pid))
    return found


def _reap_noted(entry: dict[str, Any], pid: int, leaderless: bool) -> list[int]:
    """Reap what an entry noted and still runs, and — when no process has the PID codex had
    (``leaderless``) — what codex left behind (:func:`.proctree.left_behind`); the PIDs reaped."""
    start, cmdline = entry.get("start"), entry.get("cmdline") or [None]
    if leaderless and isinstance(start, (int, float)):
        binary = cmdline[0] if isinstance(cmdline[0], str) else None
        noted = left_behind(pid, float(start), binary, known=_noted(entry))
    else:
        noted = left_behind(None, None, known=_noted(entry))
    if not noted:
        return []
    survivors = reap(noted, timeout=2.0)
    if survivors:
        log.warning("processes left by a dead codex app-server survived SIGKILL: %s", survivors)
    return [proc.pid for proc in noted]
