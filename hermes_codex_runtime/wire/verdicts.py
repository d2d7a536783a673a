"""The record of whether the walls held on a codex binary, kept so a binary is proved once.

Owns :class:`Verdict` (what the probe in :mod:`hermes_codex_runtime.walls` found) and
:class:`VerdictCache`, one JSON file — meant for the user's cache directory, so every home and
every process of the user shares it — holding the verdicts by :func:`binary_key`: what the
binary IS (its content's digest, not its path), the ``bwrap`` on ``PATH`` (codex prefers it to
its own, so another one there is another sandbox), the kernel, the user and what the probe
proves. The same binary installed in a new place or a new container's image is not proved
again; a changed one is. Hashing a binary (~300 MB, ~0.4 s) is done once per file as it lies on
disk: the file's path, size, mtime and inode remember its digest, in the same file and in this
process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Bumped when the probe changes what it proves (old verdicts are then probed again).
PROBE_VERSION = 3
_FORMAT = 1
_digests: dict[str, str] = {}
_hashing: dict[str, threading.Lock] = {}
_digests_guard = threading.Lock()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the probe found on one binary. ``held`` is ``None`` when it could not tell."""

    held: bool | None
    detail: str
    binary: str
    checked: float = 0.0


def _stat_identity(real: str) -> str | None:
    """The file as it lies on disk (``None``: it does not exist)."""
    try:
        info = os.stat(real)
    except OSError:
        return None
    return f"{real}:{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"


def _hash(real: str) -> str:
    with open(real, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def content_digest(path: str | None, known: dict[str, str] | None = None) -> str:
    """The sha256 of the file at ``path`` (``"-"`` for none, ``"missing"`` for a path that is
    not there), from this process's memory or ``known`` (identity → digest) when the file is
    unchanged on disk; a digest computed here is added to both."""
    if not path:
        return "-"
    real = os.path.realpath(path)
    identity = _stat_identity(real)
    if identity is None:
        return "missing"
    with _digests_guard:
        hashing = _hashing.setdefault(identity, threading.Lock())
    with hashing:  # a second caller waits for the first one's digest rather than hash again
        with _digests_guard:
            digest = _digests.get(identity) or (known or {}).get(identity)
        if digest is None:
            try:
                digest = _hash(real)
            except OSError:
                return "missing"
        with _digests_guard:
            _digests[identity] = digest
    if known is not None:
        known[identity] = digest
    return digest


def binary_key(binary: str, search_path: str | None = None,
               known: dict[str, str] | None = None) -> str:
    """A binary's identity for the cache (see the module docstring); ``search_path`` (default:
    ``$PATH``) is where codex looks for ``bwrap``; ``known`` as for :func:`content_digest`."""
    bwrap = shutil.which("bwrap", path=search_path if search_path is not None
                         else os.environ.get("PATH", ""))
    raw = (f"{content_digest(binary, known)}|{content_digest(bwrap, known)}|"
           f"{os.uname().release}|{os.geteuid()}|{PROBE_VERSION}")
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


class VerdictCache:
    """Verdicts by :func:`binary_key` in one JSON file (``None``: nothing is kept)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path else None

    def _read(self) -> dict[str, dict[str, Any]]:
        """``{"verdicts": {key: verdict}, "digests": {identity: digest}}``; anything else in
        the file (another format, broken JSON) reads as empty and is replaced at the next put."""
        empty: dict[str, dict[str, Any]] = {"verdicts": {}, "digests": {}}
        if self.path is None:
            return empty
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return empty
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return empty
        return {part: data[part] if isinstance(data.get(part), dict) else {}
                for part in ("verdicts", "digests")}

    def key(self, binary: str) -> str:
        """:func:`binary_key` of ``binary``, with the digests this file remembers."""
        return binary_key(binary, known=self._read()["digests"])

    def get(self, binary: str, key: str | None = None) -> Verdict | None:
        """The kept verdict for ``binary`` (whose key may be given), if any (unknown verdicts
        are never kept)."""
        entry = self._read()["verdicts"].get(key or self.key(binary))
        if not isinstance(entry, dict) or not isinstance(entry.get("held"), bool):
            return None
        return Verdict(held=entry["held"], detail=str(entry.get("detail") or ""), binary=binary,
                       checked=float(entry.get("checked") or 0.0))

    def put(self, verdict: Verdict) -> None:
        """Keep a definite verdict, with the digests it was keyed by (written atomically; a
        failure to write is only logged)."""
        if self.path is None or verdict.held is None:
            return
        data = self._read()
        data["digests"] = {identity: digest for identity, digest in data["digests"].items()
                           if _stat_identity(identity.rsplit(":", 3)[0]) == identity}
        key = binary_key(verdict.binary, known=data["digests"])
        data["verdicts"][key] = asdict(verdict) | {"checked": verdict.checked or time.time()}
        tmp: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".walls-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"format": _FORMAT, **data}, handle, indent=1)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not keep the sandbox probe's verdict in %s: %s", self.path, exc)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
