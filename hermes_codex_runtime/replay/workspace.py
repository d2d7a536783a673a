"""Baselines and isolated working copies for replay variants.

A baseline is a commit of the repository the recorded session worked in (``HEAD`` is resolved
to its SHA once, when the run is planned), or ``empty``. Each variant gets its own working copy
under the run directory:

* a commit: ``git clone --shared --no-checkout`` of the repository, then a detached checkout of
  the baseline. Nothing is written to the user's repository — not even the ``.git/worktrees``
  entry a ``git worktree add`` would leave — and the user's checkout (with its uncommitted
  changes) is never touched. The variant runs in the same subdirectory the session ran in.
* ``empty``: a fresh repository with one empty commit, so its changes diff the same way.

What a variant changed on disk is ``git diff`` of the copy against its baseline (new files
included). A failed attempt's copy is archived beside the next attempt's fresh one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GIT_TIMEOUT = 120.0
MAX_DIFF_BYTES = 1 * 2**20
_GIT_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "user.name=hermes-codex-runtime replay",
               "-c", "user.email=replay@localhost", "-c", "commit.gpgsign=false",
               "-c", "core.autocrlf=false", "-c", "advice.detachedHead=false")


class WorkspaceError(ValueError):
    """A baseline or working copy that cannot be made, with what to do about it."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """Where every variant starts."""

    kind: str  # "commit" | "empty"
    repo: str | None = None  # the repository's top level
    commit: str | None = None  # full SHA
    subdir: str = ""  # the session's cwd relative to the repository
    requested: str = "HEAD"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Baseline:
        """The inverse of :meth:`to_json`."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def describe(self) -> str:
        """One line for the plan."""
        if self.kind == "empty":
            return "an empty directory"
        where = f"{self.repo}/{self.subdir}" if self.subdir else str(self.repo)
        return f"{where} at {str(self.commit)[:12]} ({self.requested})"


def git(*args: str, cwd: str | os.PathLike[str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git without hooks, prompts or the user's global identity."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
           "LC_ALL": "C"}
    try:
        done = subprocess.run(["git", *_GIT_CONFIG, *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=GIT_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise WorkspaceError("git is not installed; replay needs it for working copies") \
            from exc
    except subprocess.TimeoutExpired as exc:
        raise WorkspaceError(f"git {args[0]} timed out after {GIT_TIMEOUT:g} s") from exc
    if check and done.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args[:2])} failed: "
                             f"{(done.stderr or done.stdout).strip()[-500:]}")
    return done


def resolve_baseline(requested: str, cwd: str | None, repo: str | None = None) -> Baseline:
    """The baseline ``requested`` (``HEAD``, a commit, or ``empty``) for a session that ran in
    ``cwd`` (``repo`` overrides where the repository is)."""
    requested = (requested or "HEAD").strip()
    if requested == "empty":
        return Baseline("empty", requested="empty")
    where = repo or cwd
    if not where:
        raise WorkspaceError("the session recorded no working directory: name the repository "
                             "with --repo PATH, or use --baseline empty")
    if not Path(where).is_dir():
        raise WorkspaceError(f"the session's working directory {where} is gone: name the "
                             f"repository with --repo PATH, or use --baseline empty")
    top = git("rev-parse", "--show-toplevel", cwd=where, check=False)
    if top.returncode != 0:
        raise WorkspaceError(f"{where} is not in a git repository: use --baseline empty (the "
                             f"variants start from an empty directory) or --repo PATH")
    toplevel = top.stdout.strip()
    found = git("rev-parse", "--verify", "--quiet", f"{requested}^{{commit}}", cwd=toplevel,
                check=False)
    if found.returncode != 0 or not found.stdout.strip():
        raise WorkspaceError(f"baseline commit {requested!r} does not exist in {toplevel}")
    subdir = ""
    if cwd and not repo:
        real_cwd, real_top = os.path.realpath(cwd), os.path.realpath(toplevel)
        if real_cwd != real_top and real_cwd.startswith(real_top + os.sep):
            subdir = os.path.relpath(real_cwd, real_top)
    return Baseline("commit", repo=toplevel, commit=found.stdout.strip(), subdir=subdir,
                    requested=requested)


def create_copy(baseline: Baseline, dest: Path) -> Path:
    """Make a fresh working copy at ``dest``; returns the directory codex runs in."""
    if dest.exists():
        raise WorkspaceError(f"{dest} exists already")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if baseline.kind == "empty":
        dest.mkdir()
        git("init", "--quiet", str(dest))
        git("commit", "--quiet", "--allow-empty", "-m", "replay baseline (empty)", cwd=dest)
        return dest
    assert baseline.repo and baseline.commit
    git("clone", "--quiet", "--shared", "--no-checkout", baseline.repo, str(dest))
    git("checkout", "--quiet", "--detach", baseline.commit, cwd=dest)
    workdir = dest / baseline.subdir if baseline.subdir else dest
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def archive_copy(dest: Path, archived: Path) -> Path | None:
    """Move a failed attempt's copy aside (returns where it went)."""
    if not dest.exists():
        return None
    if archived.exists():
        shutil.rmtree(archived, ignore_errors=True)
    dest.rename(archived)
    return archived


def changes(dest: Path) -> dict[str, Any]:
    """What the variant changed in its copy: ``{files: [{status, path}], diff, truncated}``."""
    if not (dest / ".git").exists():
        return {"files": [], "diff": "", "truncated": False}
    git("add", "-A", cwd=dest)
    base = "HEAD"
    status = git("diff", "--cached", "--name-status", "--no-renames", base, cwd=dest)
    files = []
    for line in status.stdout.splitlines():
        code, _, path = line.partition("\t")
        if path:
            files.append({"status": {"A": "added", "D": "deleted"}.get(code[:1], "modified"),
                          "path": path})
    patch = git("diff", "--cached", "--no-renames", "--no-color", base, cwd=dest).stdout
    truncated = len(patch.encode("utf-8", "replace")) > MAX_DIFF_BYTES
    if truncated:
        patch = patch.encode("utf-8", "replace")[:MAX_DIFF_BYTES].decode("utf-8", "ignore")
    return {"files": files, "diff": patch, "truncated": truncated}
