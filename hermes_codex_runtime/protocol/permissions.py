"""The walls around the commands codex runs: a permission profile the runtime owns, and which
``thread/start`` fields carry it.

codex (0.163 and 0.171, verified in docs/codex-facts.md) takes a named permission profile in the
per-thread ``config``: ``default_permissions = <name>`` and ``permissions.<name> = {extends,
filesystem, network}``, where ``filesystem`` maps a path (or glob) to ``"read"``, ``"write"`` or
``"none"``. It does **not** combine with the legacy ``sandbox`` field: sent together, codex
silently drops the profile (and the experimental ``permissions`` field is refused). So a thread
with walls is started with the profile and *without* ``sandbox``; a thread without walls keeps
``sandbox`` as before.

A profile with an unreadable entry makes codex 0.171 read the workspace through its sandboxed
file-system helper — a whole bubblewrap sandbox per read — at every ``turn/start``: it looks for
``.agents/skills`` in the workspace and in each directory above it up to the project root
(docs/codex-facts.md). A walled thread is therefore started with ``project_root_markers = []``:
the workspace is its own project root, one look per turn instead of one per directory above.

Owns :class:`Walls` (what to wall off, as plain paths the host names), :func:`profile_config`
(the ``config`` entries for one sandbox mode) and :func:`thread_permissions` (the decision: which
fields a thread gets, or why it gets none). Pure: no I/O — which paths exist, what the user's
``config.toml`` says and whether the walls held on this binary are worked out by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The profile's name in the thread's config layer (the user's own profiles are not touched).
PROFILE = "codex-runtime-walls"
#: codex's built-in profile each legacy sandbox mode corresponds to.
BUILT_IN = {"read-only": ":read-only", "workspace-write": ":workspace"}
FULL_ACCESS = "danger-full-access"
#: What a thread gets when the walls did not hold on this binary: nothing can be written, and
#: codex asks before any command it does not itself know to be read-only.
FALLBACK_SANDBOX = "read-only"
FALLBACK_APPROVAL = "untrusted"

UP, OFF, OWN_PROFILE, FALLBACK, NONE = "up", "off", "own-profile", "fallback", "none"


@dataclass(frozen=True, slots=True)
class Walls:
    """What commands may not touch. Paths are absolute (globs allowed); the caller has already
    shaped them for codex (see ``wire.walls.shape``)."""

    #: Unreadable for commands (codex ``"none"``): credential files.
    deny_read: tuple[str, ...] = ()
    #: Read-only for commands even inside a writable workspace (codex ``"read"``).
    protect: tuple[str, ...] = ()
    #: Further writable roots and network access the user gave codex's legacy
    #: ``sandbox_workspace_write`` (carried over: a profile replaces those settings).
    writable_roots: tuple[str, ...] = ()
    network: bool = False

    def __bool__(self) -> bool:
        return bool(self.deny_read or self.protect)


def profile_config(mode: str, walls: Walls) -> dict[str, Any]:
    """The ``config`` entries that select the runtime's profile for a ``read-only`` or
    ``workspace-write`` thread: codex's built-in profile for that mode, plus the walls; and the
    workspace as the project root (see the module docstring)."""
    if mode not in BUILT_IN:
        raise ValueError(f"a permission profile extends read-only or workspace-write, got "
                         f"{mode!r}")
    filesystem: dict[str, str] = {}
    if mode == "workspace-write":
        filesystem.update({root: "write" for root in walls.writable_roots})
    filesystem.update({path: "read" for path in walls.protect})
    filesystem.update({path: "none" for path in walls.deny_read})  # unreadable wins
    profile: dict[str, Any] = {"extends": BUILT_IN[mode], "filesystem": filesystem}
    if walls.network and mode == "workspace-write":
        profile["network"] = {"enabled": True}
    return {"default_permissions": PROFILE, "permissions": {PROFILE: profile},
            "project_root_markers": []}  # see the module docstring


@dataclass(frozen=True, slots=True)
class Exposure:
    """A walled path the sandbox cannot keep as asked: a symbolic link on its way lies where
    the model's commands can write, so a command could point it elsewhere. What it leads to
    now is walled; the link itself is not."""

    path: str  # the walled path as the host named it
    link: str  # the link a command could replace
    target: str  # where the path leads now (walled)


#: A directory, a regular expression over its entries' names, and the names it matched.
Watched = tuple[str, str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class ThreadPermissions:
    """What a thread is started with, and why (for the log and doctor)."""

    status: str  # UP | OFF | OWN_PROFILE | FALLBACK | NONE
    sandbox: str | None = None  # thread/start ``sandbox`` (never together with a profile)
    config: dict[str, Any] = field(default_factory=dict)  # merged into thread/start ``config``
    approval_policy: str | None = None  # replaces the host's policy (the fallback only)
    mode: str | None = None  # the sandbox mode the walls stand in
    walls: Walls = field(default_factory=Walls)
    note: str = ""  # what the user must be told (the fallback's reason, links left unwalled)
    #: Links on walled paths that commands could point elsewhere (see :class:`Exposure`).
    exposed: tuple[Exposure, ...] = ()
    #: Walled names that do not exist yet, where a command could create them.
    creatable: tuple[str, ...] = ()
    #: What the walls were shaped from, to tell when they no longer fit the file system
    #: (``wire.walls.outgrown``): per directory, a pattern of the walled names in it and the
    #: names it matched when the thread started.
    watched: tuple[Watched, ...] = ()


def thread_permissions(*, sandbox: str | None, walls: Walls, user_mode: str | None,
                       user_profile: str | None, held: bool | None,
                       approval_policy: Any = None) -> ThreadPermissions:
    """Which fields a thread gets.

    ``sandbox`` is the host's explicit mode (``None``: the user's ``config.toml`` decides,
    ``user_mode``, codex's default being read-only); ``user_profile`` is a ``default_permissions``
    the user chose in ``config.toml``; ``held`` is the probe's verdict on this binary (``None``:
    unknown). The user's choices win: ``danger-full-access`` stays what it says, and their own
    profile stands when the host names no mode. Walls that did not (or could not be shown to)
    hold give the fallback instead of a profile that would only look safe."""
    if not walls:
        return ThreadPermissions(NONE, sandbox=sandbox, mode=sandbox)
    if sandbox is None and user_profile:
        return ThreadPermissions(OWN_PROFILE)
    mode = sandbox or user_mode or "read-only"
    if mode == FULL_ACCESS:
        return ThreadPermissions(OFF, sandbox=FULL_ACCESS, mode=mode)
    if mode not in BUILT_IN:
        raise ValueError(f"sandbox must be one of read-only, workspace-write, {FULL_ACCESS}; "
                         f"got {mode!r}")
    if held is not True:
        nobody_asked = approval_policy == "never"  # nobody to ask: stay read-only, ask nobody
        return ThreadPermissions(FALLBACK, sandbox=FALLBACK_SANDBOX, mode=FALLBACK_SANDBOX,
                                 approval_policy=None if nobody_asked else FALLBACK_APPROVAL)
    return ThreadPermissions(UP, config=profile_config(mode, walls), mode=mode, walls=walls)
