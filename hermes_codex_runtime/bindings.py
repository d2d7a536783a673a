"""A small durable map: host session id → codex thread id.

Used where the host has no place of its own for the binding. One JSON file, written atomically
(temporary file + ``fsync`` + ``os.replace``) with owner-only permissions, so a crash mid-write
keeps the previous binding; a corrupt or unreadable file reads as "no binding" with a warning,
never an exception. Entries are capped (oldest dropped) so the file cannot grow without bound.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from hermes_codex_runtime.wire.files import atomic_write_json

log = logging.getLogger(__name__)
MAX_ENTRIES = 5_000


class ThreadBindings:
    """``session id → {"thread_id", "updated", …}`` in one JSON file (``set``'s extras kept)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            log.warning("codex thread bindings at %s are unreadable (%s); ignoring them",
                        self.path, exc)
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            log.warning("codex thread bindings at %s are corrupt; ignoring them", self.path)
            return {}
        bindings = data.get("bindings") if isinstance(data, dict) else None
        return bindings if isinstance(bindings, dict) else {}

    def get(self, session_id: str) -> str | None:
        """The thread bound to ``session_id``, if any."""
        thread = self.entry(session_id).get("thread_id")
        return thread if isinstance(thread, str) and thread else None

    def entry(self, session_id: str) -> dict[str, Any]:
        """Everything kept with ``session_id``'s binding (``{}`` when there is none)."""
        entry = self._read().get(session_id)
        return entry if isinstance(entry, dict) else {}

    def set(self, session_id: str, thread_id: str, **extra: Any) -> None:
        """Bind ``session_id`` to ``thread_id`` (atomically)."""
        with self._lock:
            bindings = self._read()
            bindings[session_id] = {"thread_id": thread_id, "updated": time.time(), **extra}
            if len(bindings) > MAX_ENTRIES:
                ordered = sorted(bindings.items(), key=lambda kv: kv[1].get("updated", 0)
                                 if isinstance(kv[1], dict) else 0)
                bindings = dict(ordered[-MAX_ENTRIES:])
            self._write({"version": 1, "bindings": bindings})

    def _write(self, data: dict[str, Any]) -> None:
        atomic_write_json(self.path, data)
