"""The Hermes paths the codex sandbox walls off, for every thread the plugin starts.

The runtime's walls (:mod:`hermes_codex_runtime.walls`) know no Hermes path: this module names
them, and :class:`~..turn.hooks.HermesHost` hands them over in the session settings (codex's own
secrets and conversations, and its home, the runtime adds itself).

* **Unreadable** for the commands the model runs: Hermes' secrets — ``.env``, ``auth.json``
  and its other token files — and every user's conversations — the session store
  (``state.db`` and its ``-wal``/``-shm``, every other database), logs, session files and
  exports, cron jobs and their output, checkpoints, pastes, uploaded media, the API server's
  stored responses, the plugin's own state (Codex Replay's runs) — in ``HERMES_HOME`` and, for
  a profile, in the root above it; every *other* profile whole; the SSH private keys in
  ``~/.ssh``; the remote app-servers' token files; and ``model.codex_deny_read``. Hermes reads
  them itself (``session_search`` runs in Hermes, not in the sandbox).
* **Read-only** for them, even inside a writable workspace (the gateway runs in the home
  directory): ``HERMES_HOME`` (config, ``SOUL.md``, plugins, skills, memories), ``~/.ssh``,
  the shell's start-up files, ``~/.config/autostart`` and the user's systemd units, the git
  directory of a Hermes checkout (its hooks run as the user), the plugin's directory in the
  user's cache (the walls' verdicts), and ``model.codex_protect``.

It also says, once per process, when a session's workspace is the home directory.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from hermes_codex_runtime.hermes.config.paths import user_cache_dir
from hermes_codex_runtime.hermes.config.settings import (
    PluginSettings,
    hermes_home,
)

log = logging.getLogger("hermes_codex_runtime.hermes")

#: What a login or interactive shell (or a desktop session) runs by itself: a write there runs
#: as the user next time.
STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
                 ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".config/fish",
                 ".config/autostart", ".config/systemd")
HERMES_SECRETS = (".env", "auth.json")
#: What in a Hermes home holds credentials, and anybody's conversations (names and globs
#: beneath it; only what exists is walled; a database's ``-shm`` index holds no content).
#: Skills, plugins, ``SOUL.md``, ``config.yaml`` and the memory files (which every session's
#: prompt carries anyway) stay readable.
HERMES_CREDENTIALS = (*HERMES_SECRETS, ".anthropic_oauth.json", "slack_tokens.json",
                      "*oauth*.json", "*tokens*.json", "honcho.json", "mem0.json",
                      "supermemory.json", "whatsapp")
HERMES_CONVERSATIONS = ("*.db", "*.db-wal", "*.sqlite", "*.sqlite-wal", "*.log",
                        "logs", "sessions", "session-exports", "cron", "checkpoints", "pastes",
                        "cache", "*_cache", "browser_recordings", "browser_screenshots",
                        ".hermes_history", "hook_outputs", "moa-traces", "spawn-trees",
                        "sandboxes", "channel_directory.json", "gateway_state.json",
                        "codex-runtime")
HERMES_PRIVATE = (*HERMES_CREDENTIALS, *HERMES_CONVERSATIONS)
_SSH_NOT_KEYS = frozenset({"authorized_keys", "authorized_keys2", "known_hosts",
                           "known_hosts.old", "config", "environment"})
_home_warned: set[str] = set()


def hermes_roots() -> list[Path]:
    """``HERMES_HOME``, and the root above it when it is a profile (``<root>/profiles/<name>``)."""
    home = hermes_home()
    roots = [home]
    if home.parent.name == "profiles":
        roots.append(home.parent.parent)
    return roots


def ssh_private_keys(ssh_dir: Path | None = None) -> list[str]:
    """The files in ``~/.ssh`` that hold private keys (``id_*`` without ``.pub``, or a PEM /
    OpenSSH / PuTTY private key by content)."""
    ssh = ssh_dir or Path("~/.ssh").expanduser()
    try:
        entries = sorted(ssh.iterdir())
    except OSError:
        return []
    keys = []
    for entry in entries:
        if entry.name in _SSH_NOT_KEYS or entry.name.endswith(".pub") or not entry.is_file():
            continue
        if entry.name.startswith("id_") or _looks_private(entry):
            keys.append(str(entry))
    return keys


def _looks_private(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError:
        return False
    return b"PRIVATE KEY" in head or head.startswith(b"PuTTY-User-Key-File")


@functools.cache
def hermes_checkout_git() -> str | None:
    """The ``.git`` of the checkout Hermes runs from, if it runs from one (looked up once)."""
    spec = importlib.util.find_spec("hermes_cli")
    origin = spec.origin if spec is not None else None
    if not origin:
        return None
    for parent in list(Path(origin).resolve().parents)[:4]:
        if (parent / ".git").exists():
            return str(parent / ".git")
    return None


def other_profiles() -> list[str]:
    """Every Hermes profile but the running one (each is a Hermes of its own, with its own
    secrets and conversations)."""
    home = os.path.realpath(hermes_home())
    profiles = hermes_roots()[-1] / "profiles"
    try:
        entries = sorted(profiles.iterdir())
    except OSError:
        return []
    return [str(p) for p in entries if p.is_dir() and os.path.realpath(p) != home]


def deny_read(settings: PluginSettings) -> tuple[str, ...]:
    """What the commands codex runs may not read (see the module docstring)."""
    paths = [str(root / name) for root in hermes_roots() for name in HERMES_PRIVATE]
    paths += other_profiles()
    paths += ssh_private_keys()
    paths += settings.token_files
    paths += settings.deny_read
    return tuple(dict.fromkeys(paths))


def protect(settings: PluginSettings) -> tuple[str, ...]:
    """What stays read-only for the commands codex runs (see the module docstring)."""
    home = Path.home()
    paths = [str(root) for root in hermes_roots()]
    paths.append(str(home / ".ssh"))
    paths += [str(home / name) for name in STARTUP_FILES]
    checkout = hermes_checkout_git()
    if checkout:
        paths.append(checkout)
    paths.append(str(user_cache_dir()))  # the walls' verdicts: a forged one would be trusted
    paths += settings.protect
    return tuple(dict.fromkeys(paths))


def session_workspace(agent: Any) -> str:
    """The workspace of an agent's codex threads: its session's cwd, else the gateway's
    ``TERMINAL_CWD``, else this process's cwd."""
    for candidate in (getattr(agent, "session_cwd", None), os.environ.get("TERMINAL_CWD")):
        if isinstance(candidate, str) and candidate and os.path.isdir(candidate):
            return candidate
    return os.getcwd()


def workspace_is_home(cwd: str) -> bool:
    """True when ``cwd`` is the home directory itself."""
    try:
        return os.path.samefile(cwd, Path.home())
    except OSError:
        return False


HOME_WORKSPACE = ("the codex workspace is the home directory ({cwd}): in workspace-write the "
                  "model's commands may change any file there that the walls do not protect. "
                  "Set `terminal.cwd` in {config} to a project directory.")


def warn_if_home(cwd: str) -> None:
    """Log once per process (per directory) that the workspace is the home directory."""
    if cwd in _home_warned or not workspace_is_home(cwd):
        return
    _home_warned.add(cwd)
    log.warning("codex-runtime: %s", HOME_WORKSPACE.format(cwd=cwd,
                                                          config=hermes_home() / "config.yaml"))


_CWD_PLACEHOLDERS = frozenset({"", ".", "auto", "cwd"})


def configured_workspace(config: dict[str, Any]) -> tuple[str, bool]:
    """The workspace a gateway session gets (``TERMINAL_CWD``, then ``terminal.cwd``, else the
    home directory, as Hermes' gateway resolves it) and whether the user set one."""
    terminal = config.get("terminal")
    value = os.environ.get("TERMINAL_CWD") or (
        terminal.get("cwd") if isinstance(terminal, dict) else None)
    if isinstance(value, str) and value.strip() not in _CWD_PLACEHOLDERS:
        return os.path.expanduser(value.strip()), True
    return str(Path.home()), False
