"""The local side of the walls: which of the host's paths codex can wall off, and the record of
whether the walls held on a binary.

Owns two things:

* :func:`present` — the paths of a :class:`~hermes_codex_runtime.protocol.permissions.Walls`
  that codex can take (and :func:`search_path_dirs`, the ``PATH`` directories that are walls of
  their own: codex takes ``bwrap`` from ``PATH`` before its bundled one). codex's sandbox
  (bubblewrap on Linux) mounts over every path in the profile, and a path that does not exist is
  trouble (verified on 0.163 and 0.171, docs/codex-facts.md): codex makes a placeholder for it
  in the real file system and may leave it behind (an empty ``~/.profile``; an empty 0444 file
  on 0.163 for a missing unreadable one), an entry whose parent directory is missing fails the
  thread's start on 0.163, and a placeholder beneath a read-only entry fails it on both. So only
  paths that exist are sent (globs when their fixed prefix exists), symlinks at both ends.
* :class:`VerdictCache` — the probe's verdict per binary (its real path, size and mtime, the
  ``bwrap`` on ``PATH``, the kernel, the user), kept in a JSON file so a binary is probed once,
  not once per process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from hermes_codex_runtime.protocol.permissions import Walls

log = logging.getLogger(__name__)

_GLOB = set("*?[")
#: Bumped when the probe changes what it proves (old verdicts are then probed again).
PROBE_VERSION = 1


def _glob_prefix(path: str) -> str | None:
    """The directory before a glob's first wildcard (``None`` for a literal path)."""
    parts = Path(path).parts
    for index, part in enumerate(parts):
        if _GLOB & set(part):
            return str(Path(*parts[:index])) if index else "/"
    return None


def _absolute(path: str, cwd: str | None) -> str:
    expanded = os.path.expanduser(path.strip())
    return os.path.normpath(os.path.join(cwd or os.getcwd(), expanded))


def _both_ends(path: str) -> list[str]:
    real = os.path.realpath(path)
    return [path] if real == path else [path, real]


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path != root and path.startswith(root.rstrip("/") + "/") for root in roots)


def present(walls: Walls, cwd: str | None = None) -> Walls:
    """``walls`` with only the paths codex can wall off (see the module docstring); relative
    paths are taken against ``cwd``, ``~`` is expanded."""
    kept: dict[str, list[str]] = {"none": [], "read": []}
    for access, entries in (("none", walls.deny_read), ("read", walls.protect)):
        for entry in entries:
            path = _absolute(entry, cwd)
            prefix = _glob_prefix(path)
            if prefix is not None:
                if os.path.isdir(prefix):
                    kept[access].append(path)
            elif os.path.lexists(path):
                kept[access].extend(_both_ends(path))
    deny = [p for p in kept["none"] if _glob_prefix(p) is not None
            or not _inside(p, kept["none"])]
    return Walls(deny_read=tuple(dict.fromkeys(deny)), protect=tuple(dict.fromkeys(kept["read"])),
                 writable_roots=walls.writable_roots, network=walls.network)


# ---------------------------------------------------------------------- verdicts


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the probe found on one binary. ``held`` is ``None`` when it could not tell."""

    held: bool | None
    detail: str
    binary: str
    checked: float = 0.0


def _identity(path: str | None) -> str:
    if not path:
        return "-"
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError:
        return f"{real}:missing"
    return f"{real}:{info.st_size}:{info.st_mtime_ns}"


def binary_key(binary: str, search_path: str | None = None) -> str:
    """A binary's identity for the cache: its real path, size and mtime; the ``bwrap`` on
    ``search_path`` (default: ``$PATH``) — codex prefers it to its own, so another one there
    is another sandbox; the kernel and the user; and what the probe proves."""
    bwrap = shutil.which("bwrap", path=search_path if search_path is not None
                         else os.environ.get("PATH", ""))
    raw = (f"{_identity(binary)}|{_identity(bwrap)}|{os.uname().release}|{os.geteuid()}|"
           f"{PROBE_VERSION}")
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def search_path_dirs(search_path: str | None, cwd: str | None) -> tuple[str, ...]:
    """The directories on ``search_path`` (default: ``$PATH``) that exist, except the
    workspace itself and the directories above it: commands must not plant a program there —
    codex itself takes ``bwrap`` from PATH."""
    workspace = os.path.realpath(cwd or os.getcwd())
    found = []
    for entry in (search_path if search_path is not None
                  else os.environ.get("PATH", "")).split(os.pathsep):
        if not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if workspace == real or workspace.startswith(real.rstrip("/") + "/"):
            continue
        found.append(entry)
    return tuple(dict.fromkeys(found))


class VerdictCache:
    """Verdicts by :func:`binary_key` in one JSON file (``None``: nothing is kept)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path else None

    def _read(self) -> dict[str, dict[str, object]]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, binary: str) -> Verdict | None:
        """The kept verdict for ``binary``, if any (unknown verdicts are never kept)."""
        entry = self._read().get(binary_key(binary))
        if not isinstance(entry, dict) or not isinstance(entry.get("held"), bool):
            return None
        return Verdict(held=bool(entry["held"]), detail=str(entry.get("detail") or ""),
                       binary=str(entry.get("binary") or binary),
                       checked=float(entry.get("checked") or 0.0))  # type: ignore[arg-type]

    def put(self, verdict: Verdict) -> None:
        """Keep a definite verdict (written atomically; a failure to write is only logged)."""
        if self.path is None or verdict.held is None:
            return
        data = self._read()
        data[binary_key(verdict.binary)] = asdict(verdict) | {"checked": verdict.checked
                                                              or time.time()}
        tmp: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".walls-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not keep the sandbox probe's verdict in %s: %s", self.path, exc)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
