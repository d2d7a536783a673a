"""The Hermes paths the codex sandbox walls off, for every thread the plugin starts.

The runtime's walls (:mod:`hermes_codex_runtime.walls`) know no Hermes path: this module names
them, and :class:`~.host.HermesHost` hands them over in the session settings.

* **Unreadable** for the commands the model runs: Hermes' ``.env`` and ``auth.json`` (in
  ``HERMES_HOME`` and, for a profile, in the root above it), codex's ``auth.json``, the SSH
  private keys in ``~/.ssh``, the remote app-servers' token files, and ``model.codex_deny_read``.
* **Read-only** for them, even inside a writable workspace (the gateway runs in the home
  directory): ``HERMES_HOME`` (config, ``SOUL.md``, plugins, skills, cron jobs, memories, state),
  ``~/.ssh``, codex's home, the shell's start-up files, ``~/.config/autostart`` and the user's
  systemd units, the git directory of a Hermes checkout (its hooks run as the user), and
  ``model.codex_protect``.

It also says, once per process, when a session's workspace is the home directory.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from hermes_codex_runtime.hermes.paths import walls_cache_path
from hermes_codex_runtime.hermes.settings import (
    PluginSettings,
    hermes_home,
    sandbox_for_security_mode,
)
from hermes_codex_runtime.wire.codex_config import codex_home_path

log = logging.getLogger("hermes_codex_runtime.hermes")

#: What a login or interactive shell (or a desktop session) runs by itself: a write there runs
#: as the user next time.
STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
                 ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".config/fish",
                 ".config/autostart", ".config/systemd")
HERMES_SECRETS = (".env", "auth.json")
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


def deny_read(settings: PluginSettings) -> tuple[str, ...]:
    """What the commands codex runs may not read (see the module docstring)."""
    paths = [str(root / name) for root in hermes_roots() for name in HERMES_SECRETS]
    paths.append(str(codex_home_path(settings.codex_home) / "auth.json"))
    paths += ssh_private_keys()
    paths += settings.token_files
    paths += settings.deny_read
    return tuple(dict.fromkeys(paths))


def protect(settings: PluginSettings) -> tuple[str, ...]:
    """What stays read-only for the commands codex runs (see the module docstring)."""
    home = Path.home()
    paths = [str(root) for root in hermes_roots()]
    paths += [str(home / ".ssh"), str(codex_home_path(settings.codex_home))]
    paths += [str(home / name) for name in STARTUP_FILES]
    checkout = hermes_checkout_git()
    if checkout:
        paths.append(checkout)
    paths += settings.protect
    return tuple(dict.fromkeys(paths))


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


def doctor_checks(config: dict[str, Any], settings: PluginSettings) -> list[Any]:
    """doctor's lines about the walls: which are up (probing the binary), and the workspace."""
    from hermes_codex_runtime.doctor import OK, WARN, Check, check_token_file, check_walls
    from hermes_codex_runtime.values import SessionSettings

    cwd, chosen = configured_workspace(config)
    checks = []
    if settings.app_server is not None and settings.app_server.mode == "endpoints":
        checks.append(Check("sandbox walls", OK, "not sent: sessions run on the remote "
                            "app-servers of model.codex_app_server, whose sandbox is their "
                            "operator's"))
    else:
        session = SessionSettings(
            codex_bin=settings.codex_bin, codex_home=settings.codex_home, cwd=cwd,
            sandbox=settings.sandbox or sandbox_for_security_mode(config),
            deny_read=deny_read(settings), protect=protect(settings),
            walls_cache=str(walls_cache_path()))
        checks.append(check_walls(session, off_fix=WALLS_OFF_FIX, fallback_fix=fallback_fix()))
    if workspace_is_home(cwd):
        how = "terminal.cwd" if chosen else "no terminal.cwd is set, so the gateway's default"
        checks.append(Check("workspace", WARN, f"the gateway's workspace is the home directory "
                            f"{cwd} ({how})", f"Set `terminal.cwd` in "
                            f"{hermes_home() / 'config.yaml'} to a project directory: in "
                            "workspace-write the model may change any file there the walls do "
                            "not protect."))
    else:
        checks.append(Check("workspace", OK, cwd))
    for token_file in settings.token_files:
        exposed = check_token_file(token_file)
        if exposed is not None:
            checks.append(exposed)
    return checks


WALLS_OFF_FIX = ("The sandbox comes from `model.codex_sandbox`, else "
                 "`tools.terminal.security_mode` (auto → workspace-write, approval-required → "
                 "read-only, unrestricted/yolo → danger-full-access), else codex's own "
                 "sandbox_mode; choose read-only or workspace-write to get the walls.")
def fallback_fix() -> str:
    """What to do when the walls do not hold on this codex."""
    from hermes_codex_runtime.hermes import fixes

    return (f"Install a codex release whose permission profiles hold here (`"
            f"{fixes.install_codex_command()}` brings the tested one), then run doctor again; "
            "until then the plugin keeps commands read-only.")
