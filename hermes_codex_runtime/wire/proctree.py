"""Cleaning up a process tree we own.

codex starts MCP servers and shell commands; MCP servers may ``setsid`` into their own sessions,
so killing the root or its process group misses them, and once the root exits they are reparented
and no parent walk can find them. The rule here: snapshot descendants (as psutil handles, which
carry PID + create time) BEFORE the root is retired, and re-check each identity before any signal,
so a recycled PID is never signalled. What no snapshot saw — a helper codex started after the
last look, or the sandbox's file-system helper orphaned when its own parent ended — is found
once codex is gone: :class:`Descendants` keeps both nets for one codex process.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MAX_DESCENDANTS = 4096  # a snapshot's bound: a fork bomb under codex must not stall its reader
SEEN_MAX = 512  # the descendants :class:`Descendants` keeps (the newest)


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


class Descendants:
    """What one codex process (``pid``, running ``binary``) started, kept so that none of it
    outlives codex.

    Two nets, as each misses some: the descendants seen while codex ran (:meth:`note`: MCP
    servers and shells that left for sessions of their own), and what is left behind once codex
    is gone (:func:`left_behind`: what stays in the process group codex leads — ``process_group=0``
    at spawn — and the sandbox's helpers orphaned after any look)."""

    def __init__(self, pid: int, binary: str | None = None) -> None:
        self.pid = pid
        self.binary = binary
        self.since = started(pid)
        try:
            self.grouped = os.getpgid(pid) == pid
        except OSError:
            self.grouped = False
        self._seen: list[psutil.Process] = []

    def note(self) -> bool:
        """Add codex's current descendants to those seen; True when any was new."""
        now = snapshot_descendants(self.pid)
        if not now:
            return False
        before = len(self._seen)
        self._seen = merge_snapshots(self._seen, now)[-SEEN_MAX:]
        return len(self._seen) != before

    def running(self) -> list[psutil.Process]:
        """Those seen that still run (for the registry, should the host die with codex)."""
        return [proc for proc in self._seen if running(proc)]

    def current(self) -> list[psutil.Process]:
        """Codex's descendants now, and those seen before (while codex still runs)."""
        return merge_snapshots(snapshot_descendants(self.pid), self._seen)

    def left(self, *also: Iterable[psutil.Process]) -> list[psutil.Process]:
        """Everything to reap once codex has exited, parents before children: ``also``, those
        seen, what it left behind, and what any of them started since."""
        return left_behind(self.pid if self.grouped else None, self.since, self.binary,
                           known=merge_snapshots(*also, self._seen))


def left_behind(group: int | None, since: float | None, binary: str | None = None, *,
                known: Iterable[psutil.Process] = ()) -> list[psutil.Process]:
    """What a codex process that has exited left running, parents before children: ``known``
    (what it was seen to start) and, started no earlier than codex (``since``, :func:`started`'s
    clock), the processes still in the process ``group`` it led (the kernel gives no process a
    group's number while that group has members, so these are its own unless the number came
    round again after they had all gone) and orphans — reparented to init — that wrap its
    ``binary``: the sandbox (``codex-linux-sandbox``/``bwrap … -- codex
    --codex-run-as-fs-helper``, ``… -- codex … -- COMMAND``) whose launcher ended before it. A
    codex that is itself an orphan (an app-server a service manager runs) is not one: nothing
    wraps it. Each with its descendants now: a launcher's ``bwrap`` runs in a group of its own,
    and would be orphaned the moment the launcher is reaped."""
    stats = list(_stats())
    found = []
    # codex starts its helpers as the file it runs (links resolved)
    wanted = {os.fsencode(binary), os.fsencode(os.path.realpath(binary))} if binary else set()
    for pid, parent, pgrp, start in stats:
        if since is None or start < since - 0.005:
            continue
        if (group is not None and pgrp == group and pid != group) or (
                wanted and parent == 1 and _wraps(_argv(pid), wanted)):
            found.append((start, pid))
    roots = list(known)
    for _start, pid in sorted(found)[:MAX_DESCENDANTS]:
        with contextlib.suppress(psutil.Error):
            roots.append(psutil.Process(pid))
    roots = merge_snapshots(roots)
    by_parent = _children(stats)
    return merge_snapshots(roots, *(_walk(by_parent, proc.pid) for proc in roots
                                    if running(proc)))


def _wraps(argv: list[bytes], binary: set[bytes]) -> bool:
    """Whether ``argv`` is a sandbox's that runs one of ``binary`` (``… -- BINARY …``)."""
    return any(arg == b"--" and following in binary
               for arg, following in itertools.pairwise(argv))


def _argv(pid: int) -> list[bytes]:
    """``pid``'s command line (``[]`` when it is gone or unreadable)."""
    if sys.platform.startswith("linux"):
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return []
    try:
        return [os.fsencode(arg) for arg in psutil.Process(pid).cmdline()]
    except psutil.Error:
        return []


def snapshot_descendants(pid: int) -> list[psutil.Process]:
    """psutil handles for every current descendant of ``pid`` (``[]`` when it is gone),
    parents before their children."""
    if not sys.platform.startswith("linux"):
        try:
            children: list[psutil.Process] = psutil.Process(pid).children(recursive=True)
            return children
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return []
    return _walk(_children(_stats()), pid)


def _children(stats: Iterable[tuple[int, int, int, float]]) -> dict[int, list[int]]:
    by_parent: dict[int, list[int]] = {}
    for child, parent, _group, _start in stats:
        by_parent.setdefault(parent, []).append(child)
    return by_parent


def _walk(by_parent: dict[int, list[int]], pid: int) -> list[psutil.Process]:
    """Handles for ``pid``'s descendants in ``by_parent``, parents first (bounded)."""
    handles: list[psutil.Process] = []
    pending = list(by_parent.get(pid, ()))
    while pending and len(handles) < MAX_DESCENDANTS:
        child = pending.pop(0)
        pending.extend(by_parent.get(child, ()))
        with contextlib.suppress(psutil.Error):
            handles.append(psutil.Process(child))  # gone since the scan: not a descendant now
    return handles


def _stats() -> Iterable[tuple[int, int, int, float]]:
    """(pid, parent pid, process group, :func:`started`) of every process, from
    ``/proc/PID/stat`` — read with plain system calls: half psutil's cost for the same scan,
    which a reader runs while a turn waits. Elsewhere from psutil."""
    if not sys.platform.startswith("linux"):
        for proc in psutil.process_iter(["ppid", "create_time"]):
            with contextlib.suppress(psutil.Error, OSError):
                yield (proc.pid, proc.info["ppid"] or 0, os.getpgid(proc.pid),
                       float(proc.info["create_time"]))
        return
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                raw = os.read(fd, 1024)
            finally:
                os.close(fd)
            # the command name may hold spaces and parentheses: the fields follow its last ")"
            fields = raw[raw.rfind(b")") + 2:].split(maxsplit=20)
            yield int(name), int(fields[1]), int(fields[2]), int(fields[19]) / _TICKS
        except (OSError, ValueError, IndexError):
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
