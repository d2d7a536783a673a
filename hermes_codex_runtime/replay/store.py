"""The durable side of a replay run: one directory per run (``<run-id>/``) in the replays
directory the host names.

Layout::

    state.json             the run's state (atomic writes, 0600, updated under a file lock)
    source.json            the recorded session as it was read (the run never re-reads it)
    run.log                0600, appended live: controller lines and the runner's output
    variants/<name>/turns/NNN.json   one record per replayed turn, written as it completes
    workspaces/<name>/     the variant's working copy (failed attempts archived beside it)
    report.json, report.html

States: ``pending`` → ``running`` → ``completed`` | ``failed`` | ``cancelled`` (terminal: they
stick — an update after them raises :class:`RunClosed`), and ``interrupted`` for a run whose
runner died (found by :func:`reconcile`; ``replay resume`` continues it). A run that ends, or is
found interrupted, closes every variant that had not finished in the same write: such a variant
takes the run's state and the reason as its ``error`` (:func:`close_variants`), so no variant is
ever shown running in a run that is not.

Run ids are generated here and checked everywhere a user or a client names one: a name with a
path separator or ``..`` never reaches the file system. Artifacts are read only from inside the
run's own directory (:meth:`Run.artifact`), never through a symlink that leads out of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from hermes_codex_runtime.wire.files import atomic_write_json
from hermes_codex_runtime.wire.proctree import started

STATE_SCHEMA = "hermes-codex-runtime.replay.state/1"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
ACTIVE = frozenset({"pending", "running"})
#: A variant in one of these states has not finished (``None``: never started).
UNFINISHED = frozenset({None, "pending", "running"})
RUN_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")
VARIANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_STATE_BYTES = 16 * 2**20  # state/record files bigger than this are not shown
MAX_LOG_TAIL = 64 * 1024


class StoreError(ValueError):
    """A run that cannot be found or read, with what to do about it."""


class RunClosed(StoreError):
    """The run reached a terminal state; nothing may change it any more."""


def check_run_id(run_id: Any) -> str:
    """``run_id`` when it is a well-formed run id; :class:`StoreError` otherwise."""
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise StoreError(f"not a replay run id: {run_id!r} (run ids look like "
                         f"20261201-150102-a1b2c3; see `hermes-codex-runtime replay show`)")
    return run_id


def new_run_id(now: float | None = None) -> str:
    """A fresh, sortable run id."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now or time.time()))
    return f"{stamp}-{secrets.token_hex(3)}"


def identity(pid: int | None = None) -> dict[str, Any]:
    """``{pid, start}`` of a process (this one by default): a PID alone may be recycled."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start": started(pid)}


def alive(owner: Any) -> bool:
    """Whether the process an :func:`identity` names still runs."""
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int):
        return False
    now = started(owner["pid"])
    recorded = owner.get("start")
    return now is not None and isinstance(recorded, int | float) and abs(now - recorded) < 0.005


def close_variants(state: dict[str, Any], status: str, reason: str) -> list[str]:
    """Give every unfinished variant of ``state`` the run's ``status`` (``cancelled``,
    ``interrupted``, ``failed``; a ``completed`` run closes stragglers as ``failed``) with
    ``reason`` as its error; returns their names."""
    closed = "failed" if status == "completed" else status
    names = []
    for name, variant in (state.get("variants") or {}).items():
        if isinstance(variant, dict) and variant.get("status") in UNFINISHED:
            variant.update(status=closed, error=reason)
            names.append(str(name))
    return names


def _read_json(path: Path, limit: int = MAX_STATE_BYTES) -> Any:
    size = path.stat().st_size  # FileNotFoundError: the caller says what is missing
    if size > limit:
        raise StoreError(f"{path} is too large to display ({size} bytes)")
    return json.loads(path.read_text(encoding="utf-8"))


class Run:
    """One run directory."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.id = check_run_id(run_id)
        self.dir = root / run_id
        self.state_path = self.dir / "state.json"
        self.log_path = self.dir / "run.log"

    # ------------------------------------------------------------------ state

    def exists(self) -> bool:
        """Whether the run has a state file."""
        return self.state_path.is_file()

    def state(self) -> dict[str, Any]:
        """The current state."""
        try:
            data = _read_json(self.state_path)
        except FileNotFoundError:
            raise StoreError(f"no replay run {self.id}") from None
        except ValueError as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"the state of run {self.id} is unreadable ({exc})") from exc
        if not isinstance(data, dict):
            raise StoreError(f"the state of run {self.id} is unreadable")
        return data

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock_path = self.dir / ".state.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def create(self, state: dict[str, Any]) -> None:
        """Write the first state (fails when the run exists)."""
        with self._locked():
            if self.exists():
                raise StoreError(f"replay run {self.id} exists already")
            now = time.time()
            atomic_write_json(self.state_path, {"schema": STATE_SCHEMA, "run_id": self.id,
                                                "created_at": now, "updated_at": now, **state})
        self.log_path.touch(mode=0o600)
        os.chmod(self.log_path, 0o600)

    def update(self, change: Callable[[dict[str, Any]], Any], *,
               reopen: Collection[str] = ()) -> dict[str, Any]:
        """Apply ``change`` to the state under the lock and write it; returns the new state.
        A terminal run raises :class:`RunClosed` unless its status is in ``reopen`` (for
        ``resume`` only: ``failed``, and ``completed`` to rerun interrupted turns — never
        ``cancelled``)."""
        with self._locked():
            state = self.state()
            if state.get("status") in TERMINAL and (state.get("status") not in reopen
                                                    or state.get("status") == "cancelled"):
                raise RunClosed(f"replay run {self.id} is {state.get('status')}")
            change(state)
            state["updated_at"] = time.time()
            atomic_write_json(self.state_path, state)
            return state

    def finish(self, status: str, *, reason: str | None = None, **fields: Any) -> bool:
        """Move to a terminal ``status`` unless the run is already terminal, closing its
        unfinished variants with ``reason`` (default: the run's ``error``); True when this call
        did it (so a cancel that lands first wins)."""
        assert status in TERMINAL

        def change(state: dict[str, Any]) -> None:
            state.update(status=status, finished_at=time.time(), **fields)
            close_variants(state, status, reason or str(
                fields.get("error") or f"the run ended {status} before this variant finished"))
        try:
            self.update(change)
        except RunClosed:
            return False
        return True

    def move_out(self, target: Path, may: Callable[[dict[str, Any]], bool]) -> bool:
        """Rename the run's directory to ``target`` (so it is no run any more) if ``may`` holds
        for its state, read under the run's lock; True when it was moved."""
        with self._locked():
            try:
                state = self.state()
            except StoreError:
                return False
            if not may(state) or target.exists():
                return False
            self.dir.rename(target)
        return True

    # ------------------------------------------------------------------ log

    def log(self, component: str, text: str) -> None:
        """Append ``[component] text`` lines to ``run.log`` (0600)."""
        stamp = time.strftime("%H:%M:%S")
        lines = "".join(f"{stamp} [{component}] {line}\n"
                        for line in (text.splitlines() or [""]))
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, lines.encode("utf-8", "replace"))
        finally:
            os.close(fd)

    def log_tail(self, limit: int = MAX_LOG_TAIL) -> str:
        """At most ``limit`` bytes of the newest log text (from this run's own ``run.log``)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - limit))
                data = fh.read(limit)
        except FileNotFoundError:
            return ""
        text = data.decode("utf-8", "replace")
        if size > limit and "\n" in text:
            text = text[text.index("\n") + 1:]
        return text

    # ------------------------------------------------------------------ records

    def variant_dir(self, name: str) -> Path:
        """Where a variant's turn records live."""
        if not VARIANT_NAME.match(name) or ".." in name:
            raise StoreError(f"bad variant name {name!r}")
        return self.dir / "variants" / name

    def save_turn(self, variant: str, record: dict[str, Any]) -> Path:
        """Write one turn's record (atomic, 0600)."""
        path = self.variant_dir(variant) / "turns" / f"{int(record['index']):03d}.json"
        atomic_write_json(path, record)
        return path

    def turns(self, variant: str) -> list[dict[str, Any]]:
        """The saved turn records of a variant, in turn order."""
        folder = self.variant_dir(variant) / "turns"
        records = []
        for path in sorted(folder.glob("[0-9][0-9][0-9].json")):
            with contextlib.suppress(ValueError, OSError):
                data = _read_json(path)
                if isinstance(data, dict):
                    records.append(data)
        return records

    def save_json(self, name: str, data: Any) -> Path:
        """Write a top-level JSON file of the run (``source.json``, ``report.json``)."""
        path = self.dir / name
        atomic_write_json(path, data)
        return path

    def load_json(self, name: str) -> Any:
        """Read a top-level JSON file of the run."""
        return _read_json(self.artifact(name), limit=2**31)

    def artifact(self, name: str) -> Path:
        """The path of a file in the run directory, refusing names that leave it (a separator,
        ``..``) and symlinks that resolve outside it."""
        if not isinstance(name, str) or "/" in name or "\\" in name or name in ("", ".", ".."):
            raise StoreError(f"bad artifact name {name!r}")
        path = self.dir / name
        if not path.exists() and not path.is_symlink():
            raise StoreError(f"run {self.id} has no {name} yet")
        real = path.resolve()
        if not real.is_relative_to(self.dir.resolve()):
            raise StoreError(f"{name} of run {self.id} points outside its run directory; "
                             f"refusing to read it")
        if not real.is_file():
            raise StoreError(f"{name} of run {self.id} is not a file")
        return real


class RunStore:
    """All runs under one root directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run(self, run_id: Any) -> Run:
        """The run ``run_id`` (checked), which must exist."""
        run = Run(self.root, check_run_id(run_id))
        if not run.exists():
            raise StoreError(f"no replay run {run_id} in {self.root}")
        return run

    def new(self, state: dict[str, Any]) -> Run:
        """Create a run with a fresh id."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for _ in range(10):
            run = Run(self.root, new_run_id())
            if not run.dir.exists():
                run.dir.mkdir(mode=0o700)
                run.create(state)
                return run
        raise StoreError("could not allocate a run id")  # pragma: no cover - 16M ids a second

    def runs(self) -> list[Run]:
        """Every run, newest first."""
        if not self.root.is_dir():
            return []
        found = [Run(self.root, p.name) for p in self.root.iterdir()
                 if RUN_ID.match(p.name) and (p / "state.json").is_file()]
        return sorted(found, key=lambda r: r.id, reverse=True)

    def reconcile(self) -> list[str]:
        """Mark ``running``/``pending`` runs whose runner process is gone as ``interrupted`` —
        never left silently "running". Returns their ids."""
        marked = []
        for run in self.runs():
            try:
                state = run.state()
            except StoreError:
                continue
            if state.get("status") not in ACTIVE or alive(state.get("runner")):
                continue
            if state.get("status") == "pending" and time.time() - float(
                    state.get("created_at") or 0) < 30 and state.get("runner") is None:
                continue  # just created; its runner is still starting
            def mark(s: dict[str, Any]) -> None:
                if s.get("status") in ACTIVE and not alive(s.get("runner")):
                    s.update(status="interrupted", interrupted_at=time.time(),
                             failure_diagnostic={"code": "runner_stopped",
                                                 "runner": s.get("runner")})
                    pid = (s.get("runner") or {}).get("pid")
                    close_variants(s, "interrupted",
                                   "the runner process stopped"
                                   + (f" (pid {pid})" if pid else "")
                                   + " before this variant finished")
            with contextlib.suppress(StoreError):
                if run.update(mark).get("status") == "interrupted":
                    run.log("controller", "the runner process is gone: run marked interrupted "
                                          "(continue it with `replay resume`)")
                    marked.append(run.id)
        return marked
