"""The places no codex request may touch on its own, and what an approval prompt may show.

Owns two questions the approval flow (:mod:`..approvals.decide`) asks:

* :func:`protected_target` — does a request touch a protected place? Those are the host's home
  (``HERMES_HOME``: its ``.env``, ``auth.json``, ``config.yaml``, ``state.db``, plugins, cron
  jobs, and the plugin's own ``codex-runtime/`` state), codex's ``auth.json`` and
  ``config.toml``, ``~/.ssh``, the shell's start-up files and autostart places, and — for file
  changes and permission grants — system configuration (``/etc`` …). Paths are normalised
  first (``~`` and ``$HOME``, relative to the request's cwd, ``..``, symlinks), so
  ``./x/../../.hermes/.env`` or a symlink into ``~/.ssh`` are caught. A file change there is
  declined; a command that names one is never auto-approved (yolo, ``approvals.mode: off``,
  session or permanent approvals, cron ``approve``): only a person can allow it.
* :func:`prompt_text` — every line a prompt carries (to a terminal, or to a third-party chat
  service through the gateway) is redacted; the diff of a credentials file is not shown at all.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hermes_codex_runtime.wire import redact
from hermes_codex_runtime.wire.codex_config import codex_home_path

SYSTEM_PREFIXES = ("/etc/", "/boot/", "/usr/lib/systemd/", "/private/etc/", "/private/var/",
                   "/var/run/docker.sock", "/run/docker.sock")
#: Names of files whose contents are credentials wherever they are: their diffs are never shown.
CREDENTIAL_FILE = re.compile(
    r"(^|/)(\.env(\..*)?|auth\.json|credentials(\.json)?|\.netrc|\.pgpass|\.npmrc|\.pypirc|"
    r"id_[a-z0-9]+|.*\.(pem|key|p12|pfx))$")
_HOME_VAR = re.compile(r"^(\$HOME|\$\{HOME\})(?=/|$)")


def protected_roots(hermes_home: Path, codex_home: str | None) -> list[str]:
    """The protected files and directories, resolved (symlinks followed): those above, plus the
    places the sandbox keeps read-only for a persistence reason (the shell's start-up files,
    autostart, systemd user units, a Hermes checkout's git directory — see :mod:`.paths`), so
    that a change codex asks about there is declined too."""
    from hermes_codex_runtime.hermes.config.walled import STARTUP_FILES, hermes_checkout_git

    codex = codex_home_path(codex_home)
    home = Path.home()
    places = [hermes_home, codex / "auth.json", codex / "config.toml", home / ".ssh",
              *(home / name for name in STARTUP_FILES)]
    checkout = hermes_checkout_git()
    if checkout:
        places.append(Path(checkout))
    return list(dict.fromkeys(os.path.realpath(p) for p in places))


def normalise(path: str, cwd: str | None) -> str:
    """``path`` as the file system will see it: ``~``/``$HOME`` expanded, made absolute against
    ``cwd``, ``..`` folded and symlinks resolved (as far as they exist)."""
    expanded = os.path.expanduser(_HOME_VAR.sub("~", path.strip()))
    if not os.path.isabs(expanded):
        expanded = os.path.join(cwd or os.getcwd(), expanded)
    return os.path.realpath(expanded)


def _inside(path: str, roots: Iterable[str], *, system: bool) -> str | None:
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root
    if system and (path.startswith(SYSTEM_PREFIXES)
                   or any(path == p.rstrip("/") for p in SYSTEM_PREFIXES)):
        return path
    return None


def _command_words(command: str) -> list[str]:
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    out: list[str] = []
    for word in words:
        for part in re.split(r"[=<>|;&()`]", word):
            part = part.strip("'\"")
            if part and ("/" in part or part.startswith(("~", ".", "$HOME", "${HOME}"))):
                out.append(part)
    return out


def protected_target(kind: str, command: str, changes: Iterable[Mapping[str, Any]],
                     params: Mapping[str, Any], cwd: str | None, roots: list[str]) -> str | None:
    """The protected place a request touches (``None`` when it touches none)."""
    candidates: list[str] = []
    if kind == "file_change":
        candidates += [str(c.get("path")) for c in changes if c.get("path")]
    elif kind == "command":
        candidates += _command_words(command)
    elif kind == "permissions":
        candidates += [v for v in _strings(params.get("permissions")) if "/" in v or
                       v.startswith("~")]
    for candidate in candidates:
        # Writing system configuration is protected too; a command merely naming /etc is not.
        hit = _inside(normalise(candidate, cwd), roots, system=kind != "command")
        if hit:
            return hit
    if kind == "command":
        # A command can reach a place without spelling its path (`cd ~/.hermes && cat .env`):
        # naming a protected directory's own name is enough to need a person.
        for root in roots:
            parent, name = os.path.split(root)
            marker = f"{os.path.basename(parent)}/{name}" if "." in name.strip(".") else name
            if marker and marker in command:
                return root
    return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def is_credential_file(path: str) -> bool:
    """True for a file whose contents are credentials (``.env``, keys, ``auth.json`` …)."""
    return bool(CREDENTIAL_FILE.search(path.replace("\\", "/")))


def prompt_text(text: str, host_redact: Any = None) -> str:
    """``text`` as a prompt may show it: our redaction over every line, then the host's own."""
    shown = "\n".join(redact(line) for line in redact(text).split("\n"))
    if callable(host_redact):
        with contextlib.suppress(Exception):
            shown = str(host_redact(shown))
    return shown
