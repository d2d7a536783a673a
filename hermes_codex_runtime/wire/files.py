"""Small durable files: written atomically (temporary file, ``fsync``, ``os.replace``) with
owner-only permissions, so a crash mid-write keeps the previous content."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_json(path: Path, data: Any, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` as JSON, atomically, mode 0600; ``durable`` also waits
    until the data is on disk (a record that must survive a power cut)."""
    atomic_write_text(path, json.dumps(data), durable=durable)


def atomic_write_text(path: Path, text: str, *, durable: bool = False) -> None:
    """Replace ``path`` with ``text``, atomically, mode 0600, through a fresh file of a unique
    name (never one already there, nor a link planted where the file goes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(text)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
