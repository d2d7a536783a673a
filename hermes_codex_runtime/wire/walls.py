"""The local side of the walls: the shape of a profile codex can enforce.

Owns :func:`shape` — what of a :class:`~hermes_codex_runtime.protocol.permissions.Walls` to send
  for a thread, given the places its commands may write (:func:`writable_roots`). codex's
  sandbox (bubblewrap on Linux) mounts over every path in the profile at every command, and
  some paths are trouble (verified on 0.163 and 0.171, docs/codex-facts.md):

  - a path that crosses a symbolic link lying where commands can write fails every command
    ("cannot enforce sandbox … because it crosses writable symlink"), and a link to a file
    elsewhere fails the thread's start ("bwrap: Can't create file at …"): so the *target* of
    every link is sent, and a link that commands could point elsewhere is reported
    (:class:`Exposure`) — never a thread that cannot start;
  - a missing path inside a writable place gets a placeholder in the real file system that
    codex does not reliably remove (and, beneath a walled directory, fails the thread): no
    missing path is sent (one that appears is walled from the next thread on), and a protected
    one inside a writable place is reported as creatable;
  - every entry costs each command time: a ``read`` entry outside every writable place (already
    read-only) and an entry beneath another that covers it are left out, and globs are
    expanded here, at the thread's start, rather than by a walk of the file system at every
    command;
  - codex keeps a thread's profile for the thread's life: a walled name that appears later
    (codex's own ``thread_history_1.sqlite`` at a fresh home's first turn, a database's
    ``-wal``) would stay readable. So the shape keeps what it was made from
    (:attr:`Shape.watched`), and :func:`outgrown` tells — with one directory listing per
    walled directory — when the session must renew its thread's walls before the next turn.
    A name that vanishes needs nothing: codex leaves a missing path of the profile out of a
    turn's sandbox and walls it again once it is back.

  :func:`search_path_dirs` gives the ``PATH`` directories that are walls of their own (codex
  takes ``bwrap`` from ``PATH`` before its bundled one).

The verdicts that say whether a profile can be relied on are kept in :mod:`.verdicts`.
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hermes_codex_runtime.protocol.permissions import Exposure, Walls, Watched

log = logging.getLogger(__name__)

_GLOB = set("*?[")
#: At most this many paths one glob of the host's expands to (the rest are left out, logged).
MAX_GLOB_MATCHES = 512
_NONE, _READ = "none", "read"


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


def _inside(path: str, roots: Iterable[str]) -> bool:
    """``path`` is one of ``roots`` or lies beneath one."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _below(path: str, roots: Iterable[str]) -> bool:
    """``path`` lies strictly beneath one of ``roots``."""
    return any(path != root and path.startswith(root.rstrip("/") + "/") for root in roots)


def writable_roots(mode: str | None, cwd: str | None, *, tmpdir: str | None = None,
                   extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Where a thread's commands may write, as codex's built-in profiles have it (resolved):
    nothing in ``read-only``; the workspace, ``/tmp``, ``$TMPDIR`` and the user's further
    writable roots in ``workspace-write``."""
    if mode != "workspace-write":
        return ()
    roots = [cwd or os.getcwd(), "/tmp", *([tmpdir] if tmpdir else []), *extra]
    return tuple(dict.fromkeys(os.path.realpath(os.path.expanduser(r)) for r in roots))


@dataclass(frozen=True, slots=True)
class Shape:
    """What a thread is sent (:attr:`walls`), and what the sandbox cannot wall."""

    walls: Walls
    exposed: tuple[Exposure, ...] = ()
    #: Walled names that do not exist yet where a command could create them.
    creatable: tuple[str, ...] = ()
    #: What the walls were made from, for :func:`outgrown`.
    watched: tuple[Watched, ...] = ()


def _expand(entry: str, cwd: str | None) -> list[str]:
    path = _absolute(entry, cwd)
    if _glob_prefix(path) is None:
        return [path]
    found = sorted(glob.glob(path, recursive=True, include_hidden=True))
    if len(found) > MAX_GLOB_MATCHES:
        log.warning("%s matches %d paths; the first %d are walled", path, len(found),
                    MAX_GLOB_MATCHES)
    return found[:MAX_GLOB_MATCHES]


def _links(path: str) -> list[str]:
    """The symbolic links on ``path`` (its directories and itself), outermost first."""
    parts = Path(path).parts
    links, current = [], parts[0]
    for part in parts[1:]:
        current = os.path.join(current, part)
        if os.path.islink(current):
            links.append(current)
    return links


def shape(walls: Walls, *, cwd: str | None, writable: Iterable[str]) -> Shape:
    """``walls`` as codex can enforce them for commands that may write ``writable`` (see the
    module docstring); relative paths are taken against ``cwd``, ``~`` is expanded."""
    roots = tuple(writable)
    watched = _watch(walls, cwd, roots)  # first: a name made meanwhile is then renewed, not lost
    sent: dict[str, str] = {}  # real path -> access ("none" wins over "read")
    links: list[tuple[str, str, str]] = []
    missing: list[str] = []
    for access, entries in ((_NONE, walls.deny_read), (_READ, walls.protect)):
        for entry in entries:
            for path in _expand(entry, cwd):
                real = os.path.realpath(path)
                if real != path:
                    links += [(path, link, real) for link in _links(path)]
                if not os.path.exists(real):
                    if access == _READ and _inside(real, roots):  # a place to keep: creatable
                        missing.append(real)
                    continue  # walled from the next thread on, once it exists
                if access == _NONE or _inside(real, roots):
                    sent.setdefault(real, access)
    covered = {access: [p for p, a in sent.items() if a == access] for access in (_NONE, _READ)}
    deny = tuple(p for p in covered[_NONE] if not _below(p, covered[_NONE]))
    protect = tuple(p for p in covered[_READ] if not _below(p, covered[_READ])
                    and not _inside(p, deny))
    held = (*deny, *protect)
    exposed = tuple(Exposure(path, link, target) for path, link, target in links
                    if _inside(os.path.realpath(os.path.dirname(link)), roots)
                    and not _inside(os.path.realpath(os.path.dirname(link)), held))
    creatable = tuple(dict.fromkeys(p for p in missing if not _below(p, held)))
    return Shape(Walls(deny_read=deny, protect=protect, writable_roots=walls.writable_roots,
                       network=walls.network), exposed=tuple(dict.fromkeys(exposed)),
                 creatable=creatable, watched=watched)


def _watch(walls: Walls, cwd: str | None, roots: tuple[str, ...]) -> tuple[Watched, ...]:
    """Per directory that holds walled names — every unreadable one, and the protected ones
    inside a writable place — a pattern of those names and what it matches now. A name whose
    directory is itself a glob is not watched (it is looked at again by the next thread)."""
    patterns: dict[str, list[str]] = {}
    for entries, everywhere in ((walls.deny_read, True), (walls.protect, False)):
        for entry in entries:
            directory, name = os.path.split(_absolute(entry, cwd))
            if name and _glob_prefix(directory) is None \
                    and (everywhere or _inside(os.path.realpath(directory), roots)):
                patterns.setdefault(directory, []).append(fnmatch.translate(name))
    watched = []
    for directory, names in patterns.items():
        pattern = "|".join(dict.fromkeys(names))
        watched.append((directory, pattern, _matching(directory, re.compile(pattern))))
    return tuple(watched)


def _matching(directory: str, pattern: re.Pattern[str]) -> frozenset[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    return frozenset(name for name in names if pattern.match(name))


def outgrown(watched: Iterable[Watched]) -> str | None:
    """A walled name that appeared since a thread's walls were shaped (``watched``), or
    ``None`` when they still hold everything they should."""
    for directory, pattern, then in watched:
        appeared = _matching(directory, re.compile(pattern)) - then
        if appeared:
            return f"{os.path.join(directory, min(appeared))} appeared"
    return None


#: What codex keeps in its home that no command may read: its credentials, and every user's
#: conversations (rollouts, history, its SQLite databases and their write-ahead logs, logs,
#: queued input, memories, attachments). codex reads them itself, outside the sandbox; its
#: skills and the helpers it puts on ``PATH`` (``tmp/``) stay readable. Every entry costs every
#: command (docs/codex-facts.md): a database's ``-shm`` index (page numbers, no content) is not
#: walled.
CODEX_PRIVATE = ("auth.json", ".credentials.json", ".env", "sessions", "archived_sessions",
                 "history.jsonl", "session_index.jsonl", "*.sqlite", "*.sqlite-wal", "log",
                 "shell_snapshots", "attachments", "generated_images", "memories")


def codex_own(codex_home: Path) -> Walls:
    """codex's own walls: its private files unreadable, its home read-only (its
    ``config.toml`` would otherwise let a command change the next thread's sandbox)."""
    return Walls(deny_read=tuple(str(codex_home / name) for name in CODEX_PRIVATE),
                 protect=(str(codex_home),))


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
