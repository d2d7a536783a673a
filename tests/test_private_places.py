"""What codex writes in the places the plugin gives it is private, whatever the umask, and
nothing else changes: the runtime's default ACL (``wire.private_dirs``) and the Hermes home's
places that get it (``hermes.config.private_places``). codex on both hosts is in
``tests/test_walls_real.py``."""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
from pathlib import Path

import pytest

from hermes_codex_runtime.hermes.config import private_places
from hermes_codex_runtime.hermes.config.settings import plugin_settings
from hermes_codex_runtime.wire import private_dirs
from hermes_codex_runtime.wire.private_dirs import DEFAULT_ACL_XATTR, keep_new_files_private


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def make_private(place: Path) -> None:
    reason = keep_new_files_private(str(place))
    if reason == "its file system has no POSIX ACLs":
        pytest.skip(f"{place}: {reason}")
    assert reason is None


def create(place: Path, umask: int) -> None:
    """A file and a directory, as another process with ``umask`` makes them."""
    subprocess.run(["sh", "-c", f"umask {umask:03o} && echo x > file && mkdir dir "
                    "&& echo y > dir/deeper"], cwd=place, check=True, timeout=30)


def test_what_is_created_in_a_private_place_is_private_whatever_the_umask(tmp_path):
    place, elsewhere = tmp_path / "scratch", tmp_path / "workspace"
    place.mkdir()
    elsewhere.mkdir()
    (place / "old").mkdir()  # written before: made private once, and so is what comes later
    (place / "old" / "lock").write_text("")
    os.chmod(place / "old" / "lock", 0o644)
    os.chmod(place / "old", 0o755)
    outside = elsewhere / "target"
    outside.write_text("")
    os.chmod(outside, 0o644)
    (place / "link").symlink_to(outside)  # never followed
    make_private(place)
    assert keep_new_files_private(str(place)) is None  # again: nothing to do
    for umask in (0o022, 0o000):
        (place / f"u{umask}").mkdir()
        (elsewhere / f"u{umask}").mkdir()
        create(place / f"u{umask}", umask)
        create(elsewhere / f"u{umask}", umask)
        got = {p.name: mode(p) for p in (place / f"u{umask}").rglob("*")}
        assert got == {"file": 0o600, "dir": 0o700, "deeper": 0o600}, (umask, got)
        got = {p.name: mode(p) for p in (elsewhere / f"u{umask}").rglob("*")}
        assert got == {"file": 0o666 & ~umask, "dir": 0o777 & ~umask,
                       "deeper": 0o666 & ~umask}, (umask, got)
    assert (mode(place / "old"), mode(place / "old" / "lock")) == (0o700, 0o600)
    (place / "old" / "new").write_text("")
    assert mode(place / "old" / "new") == 0o600
    assert mode(outside) == 0o644  # the link's target is not the place's


def unsupported(*_args, **_kwargs):
    raise OSError(errno.EOPNOTSUPP, "Operation not supported")


def test_a_default_acl_of_its_own_stays_and_a_file_system_without_acls_is_named(
        tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    group_reads = private_dirs.PRIVATE_DEFAULT_ACL[:12] + b"\x04\x00\x05\x00" \
        + private_dirs.PRIVATE_DEFAULT_ACL[16:]  # g::r-x
    try:
        os.setxattr(shared, DEFAULT_ACL_XATTR, group_reads)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip(f"{tmp_path}: no POSIX ACLs")
        raise
    assert "a default ACL of its own" in keep_new_files_private(str(shared))
    assert os.getxattr(shared, DEFAULT_ACL_XATTR) == group_reads  # an administrator's choice
    (shared / "file").write_text("")
    assert mode(shared / "file") & 0o040

    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setattr(os, "setxattr", unsupported)
    assert keep_new_files_private(str(plain)) == "its file system has no POSIX ACLs"
    monkeypatch.delattr(os, "setxattr")
    assert keep_new_files_private(str(plain)) == "this platform has no POSIX ACLs"


def test_the_places_are_what_codex_gets_inside_the_hermes_home_and_a_failure_is_said_once(
        tmp_path, monkeypatch, caplog):
    home = tmp_path / "hermes"
    scratch, codex_home = home / "cache" / "scratch", home / "codex"
    scratch.mkdir(parents=True)
    codex_home.mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    plugin = plugin_settings({"model": {"codex_home": str(codex_home)}})
    environ = {"TMPDIR": str(scratch), "TMP": str(tmp_path / "tmp"), "TEMP": str(scratch)}
    assert private_places.places(plugin, environ) == (str(scratch.resolve()),
                                                      str(codex_home.resolve()))
    # a temp dir and codex home of the user's own (/tmp, ~/.codex) are not the plugin's to change
    outside = plugin_settings({"model": {"codex_home": str(tmp_path / "dot-codex")}})
    assert private_places.places(outside, {"TMPDIR": str(tmp_path / "tmp")}) == ()

    monkeypatch.setattr(os, "setxattr", unsupported)
    with caplog.at_level(logging.WARNING, logger="hermes_codex_runtime.hermes"):
        for _turn in range(2):
            private_places.keep_private([str(scratch), str(home / "not-yet")])
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(scratch) in said[0] and "no POSIX ACLs" in said[0], said
