"""Cleaning up a process tree we own.

codex starts MCP servers and shell commands; MCP servers may ``setsid`` into their own sessions,
so killing the root or its process group misses them, and once the root exits they are reparented
and no parent walk can find them. The rule here: snapshot descendants (as psutil handles, which
carry PID + create time) BEFORE the root is retired, and re-check each identity before any signal,
so a recycled PID is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MAX_DESCENDANTS = 4096  # a snapshot's bound: a fork bomb under codex must not stall its reader


def started(pid: int) -> float | None:
    """When ``pid`` started, in a form that never moves: on Linux the kernel's start time in
    seconds since boot (``/proc/PID/stat`` field 22). psutil's ``create_time()`` adds the boot
    time from ``/proc/stat``, which is a whole second that flips when the wall clock is slewed
    across its rounding edge — two reads of one process, minutes apart, may differ by 1.0 s.
    Elsewhere psutil's value. ``None`` when the process is gone or a zombie."""
    if sys.platform.startswith("linux"):
        try:
            raw = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return None
        fields = raw[raw.rfind(b")") + 2:].split()
        if len(fields) < 20 or fields[0] == b"Z":
            return None
        return int(fields[19]) / _TICKS
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(proc.create_time())
    except psutil.Error:
        return None


def snapshot_descendants(pid: int) -> list[psutil.Process]:
    """psutil handles for every current descendant of ``pid`` (``[]`` when it is gone),
    parents before their children."""
    if not sys.platform.startswith("linux"):
        try:
            children: list[psutil.Process] = psutil.Process(pid).children(recursive=True)
            return children
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return []
    by_parent: dict[int, list[int]] = {}
    for child, parent in _parents():
        by_parent.setdefault(parent, []).append(child)
    handles: list[psutil.Process] = []
    pending = list(by_parent.get(pid, ()))
    while pending and len(handles) < MAX_DESCENDANTS:
        child = pending.pop(0)
        pending.extend(by_parent.get(child, ()))
        with contextlib.suppress(psutil.Error):
            handles.append(psutil.Process(child))  # gone since the scan: not a descendant now
    return handles


def _parents() -> Iterable[tuple[int, int]]:
    """(pid, parent pid) of every process, from ``/proc/PID/stat`` — read with plain system
    calls: half psutil's cost for the same scan, which a reader runs while a turn waits."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                raw = os.read(fd, 1024)
            finally:
                os.close(fd)
            end = raw.rfind(b")")  # the command name may hold spaces and parentheses
            yield int(name), int(raw[end + 4:raw.index(b" ", end + 4)])
        except (OSError, ValueError):
            continue  # exited meanwhile


def merge_snapshots(*snapshots: Iterable[psutil.Process]) -> list[psutil.Process]:
    """Union of snapshots, one handle per (pid, create time), first-seen order kept."""
    seen: set[tuple[int, float]] = set()
    merged: list[psutil.Process] = []
    for snapshot in snapshots:
        for proc in snapshot:
            try:
                key = (proc.pid, proc.create_time())
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if key not in seen:
                seen.add(key)
                merged.append(proc)
    return merged


def reap(processes: Iterable[psutil.Process], timeout: float = 1.0) -> list[int]:
    """SIGTERM every still-running process (deepest first), SIGKILL survivors after ``timeout``.

    ``is_running()`` compares the create time recorded in the handle, so a PID that was recycled
    since the snapshot is left alone. Returns the PIDs that could not be killed.
    """
    live: list[psutil.Process] = []
    for proc in reversed(list(processes)):
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                proc.terminate()
                live.append(proc)
    if not live:
        return []
    alive = _wait_gone(live, timeout)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            if proc.is_running():
                proc.kill()
    if not alive:
        return []
    return [proc.pid for proc in _wait_gone(alive, timeout)]


def _wait_gone(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited — a zombie counts as exited: an orphan's zombie waits
    for init to reap it, which is not ours to wait for. Returns those still running."""
    deadline = time.monotonic() + timeout
    pending = list(processes)
    delay = 0.002
    while pending:
        pending = [proc for proc in pending if running(proc)]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return pending


def running(proc: psutil.Process) -> bool:
    """Whether ``proc`` (the very process the handle was made for) still runs: not a zombie."""
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
