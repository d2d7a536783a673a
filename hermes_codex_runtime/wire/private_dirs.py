"""Directories codex is given whose new files must be private to the user, whatever the umask.

Owns :func:`keep_new_files_private`. codex writes into the places it is handed (``$TMPDIR``:
``codex-bwrap-synthetic-mount-targets-<uid>/lock``, 0644 under umask 022, on 0.163 and 0.171;
its home: rollouts and databases, 0644) with the process umask, and the commands it runs
inherit that umask — so an umask of 077 on codex would also make every file a command writes
in the user's workspace private. Instead each such directory gets a POSIX **default ACL**
``u::rwx,g::---,o::---``: whatever is created inside it, at any depth and by any process, is
created without group and other bits (the kernel applies the default ACL in place of the
umask), and everything else keeps the umask. The first time a directory gets it, what is
already inside is made private too (files written before, and each existing subdirectory gets
the same default ACL); symbolic links are never followed.

A directory that already carries a default ACL of its own (an administrator's sharing choice)
is left as it is, and a file system without POSIX ACLs (or a directory of another owner) keeps
the umask: both are reported, never raised.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct

#: The extended attribute that holds a directory's default ACL (Linux).
DEFAULT_ACL_XATTR = "system.posix_acl_default"
_ACL_VERSION = 2
_UNDEFINED_ID = 0xFFFFFFFF
_USER_OBJ, _GROUP_OBJ, _OTHER = 0x01, 0x04, 0x20
#: ``u::rwx,g::---,o::---`` in the kernel's binary format (version, then tag/perm/id entries
#: in tag order).
PRIVATE_DEFAULT_ACL = struct.pack("<I", _ACL_VERSION) + b"".join(
    struct.pack("<HHI", tag, perm, _UNDEFINED_ID)
    for tag, perm in ((_USER_OBJ, 0o7), (_GROUP_OBJ, 0), (_OTHER, 0)))


def _default_acl(path: str) -> bytes | None:
    """The directory's default ACL (``None``: it has none)."""
    try:
        return os.getxattr(path, DEFAULT_ACL_XATTR, follow_symlinks=False)
    except OSError as exc:
        if exc.errno == errno.ENODATA:
            return None
        raise


def keep_new_files_private(directory: str) -> str | None:
    """Give ``directory`` the private default ACL (once: a directory that has it is left alone)
    and make what is already inside private. ``None`` when new files there are private; else
    why they keep the umask (no ACLs on this platform or file system, not the owner, a default
    ACL of its own)."""
    if not hasattr(os, "setxattr"):
        return "this platform has no POSIX ACLs"
    try:
        current = _default_acl(directory)
        if current == PRIVATE_DEFAULT_ACL:
            return None
        if current is not None:
            return "it has a default ACL of its own (left as it is)"
        os.setxattr(directory, DEFAULT_ACL_XATTR, PRIVATE_DEFAULT_ACL, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return "its file system has no POSIX ACLs"
        return exc.strerror or str(exc)
    _make_private(directory)
    return None


def _make_private(directory: str) -> None:
    """What is already under ``directory``: group and other bits off, and every subdirectory
    the same default ACL (a file a later process creates in it is private too). Entries that
    cannot be changed (another owner's) are skipped; links are neither changed nor followed."""
    for root, dirs, files in os.walk(directory):
        for name in [*dirs, *files]:
            path = os.path.join(root, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                with contextlib.suppress(OSError):
                    if _default_acl(path) is None:
                        os.setxattr(path, DEFAULT_ACL_XATTR, PRIVATE_DEFAULT_ACL)
            if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & 0o077:
                with contextlib.suppress(OSError):
                    os.chmod(path, stat.S_IMODE(mode) & ~0o077)
