"""Starting a local ``codex app-server`` safely when several start at once.

codex initialises a sqlite state database in ``CODEX_HOME`` on start-up; several app-servers
starting at once on a fresh home race on it ("failed to initialize sqlite state runtime").
Start-ups on one home are serialised in this process until one succeeded, and a start-up that
lost the race to another process is retried (bounded: 4 attempts).
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator

from hermes_codex_runtime.wire import AppServerConnection, SpawnOptions, TransportClosed

_READY_HOMES: set[str] = set()
_HOME_LOCKS: dict[str, threading.Lock] = {}
_HOME_LOCKS_GUARD = threading.Lock()
ATTEMPTS = 4


@contextlib.contextmanager
def _home_lock(home: str) -> Iterator[None]:
    """Held while starting codex on a CODEX_HOME no app-server of this process started on yet."""
    if home in _READY_HOMES:
        yield
        return
    with _HOME_LOCKS_GUARD:
        lock = _HOME_LOCKS.setdefault(home, threading.Lock())
    with lock:
        yield


def launch(spawn: Callable[[SpawnOptions], AppServerConnection],
           options: SpawnOptions) -> AppServerConnection:
    """``spawn(options)``, serialised per codex home until one start-up there succeeded, and
    retried when it lost codex's sqlite start-up race to another process."""
    home = os.path.realpath(options.codex_home or os.environ.get("CODEX_HOME") or "~")
    with _home_lock(home):
        for attempt in range(ATTEMPTS):
            try:
                conn = spawn(options)
                _READY_HOMES.add(home)
                return conn
            except TransportClosed as exc:
                if attempt == ATTEMPTS - 1 or "sqlite" not in str(exc).lower():
                    raise
                time.sleep(0.1 * (attempt + 1) + random.random() * 0.1)
    raise AssertionError("unreachable")  # pragma: no cover
