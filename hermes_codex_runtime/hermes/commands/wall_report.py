"""doctor's lines about the walls, one per wall, each up or down with the fix.

For the workspace a gateway session gets (:func:`..config.walled.configured_workspace`) and the
sandbox
its threads get, the walls a thread would be started with (:func:`hermes_codex_runtime.walls.
thread_walls`, the binary probed when they are to be relied on) are reported as:

* ``sandbox walls`` — the profile as a whole (up, off, the user's own, the fallback);
* ``walls: secrets`` and ``walls: conversations`` — what the model's commands cannot read;
* ``walls: links`` — walled paths reached through a link a command could point elsewhere;
* ``walls: start-up files`` — protected names that do not exist yet in the writable workspace
  (codex's sandbox cannot keep a missing name from being created);
* ``walls: instruction files`` — whether the workspace's project instruction files reach codex
  turns (:mod:`..turn.instructions`);
* ``workspace`` — the home directory as the workspace; and every app-server token file others
  can read.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any

from hermes_codex_runtime.doctor import FAIL, OK, WARN, Check, check_token_file, check_walls
from hermes_codex_runtime.hermes.config import walled
from hermes_codex_runtime.hermes.config.paths import walls_cache_path
from hermes_codex_runtime.hermes.config.settings import (
    PluginSettings,
    hermes_home,
    sandbox_for_security_mode,
)
from hermes_codex_runtime.hermes.turn import instructions
from hermes_codex_runtime.protocol.permissions import UP, ThreadPermissions
from hermes_codex_runtime.values import SessionSettings
from hermes_codex_runtime.wire.codex_config import codex_home_path, sandbox_defaults

WALLS_OFF_FIX = ("The sandbox comes from `model.codex_sandbox`, else "
                 "`tools.terminal.security_mode` (auto → workspace-write, approval-required → "
                 "read-only, unrestricted/yolo → danger-full-access), else codex's own "
                 "sandbox_mode; choose read-only or workspace-write to get the walls.")
#: Credentials among the private files of Hermes and codex (the rest are conversations).
_CREDENTIALS = (*walled.HERMES_CREDENTIALS, ".credentials.json")


def fallback_fix() -> str:
    """What to do when the walls do not hold on this codex."""
    from hermes_codex_runtime.hermes import fixes

    return (f"Install a codex release whose permission profiles hold here (`"
            f"{fixes.install_codex_command()}` brings the tested one), then run doctor again; "
            "until then the plugin keeps commands read-only.")


def doctor_checks(config: dict[str, Any], settings: PluginSettings) -> list[Check]:
    """doctor's lines about the walls (see the module docstring)."""
    cwd, chosen = walled.configured_workspace(config)
    checks = []
    if settings.app_server is not None and settings.app_server.mode == "endpoints":
        checks.append(Check("sandbox walls", OK, "not sent: sessions run on the remote "
                            "app-servers of model.codex_app_server, whose sandbox is their "
                            "operator's"))
    elif not _binary_found(settings.codex_bin):
        checks.append(Check("sandbox walls", WARN, "not checked: there is no codex binary to "
                            "prove them with", "Fix the codex binary line first."))
    else:
        session = SessionSettings(
            codex_bin=settings.codex_bin, codex_home=settings.codex_home, cwd=cwd,
            sandbox=settings.sandbox or sandbox_for_security_mode(config),
            deny_read=walled.deny_read(settings), protect=walled.protect(settings),
            walls_cache=str(walls_cache_path()))
        checks.append(check_walls(session, off_fix=WALLS_OFF_FIX, fallback_fix=fallback_fix()))
        checks += _each_wall(session, settings)
    if walled.workspace_is_home(cwd):
        how = "terminal.cwd" if chosen else "no terminal.cwd is set, so the gateway's default"
        checks.append(Check("workspace", WARN, f"the gateway's workspace is the home directory "
                            f"{cwd} ({how})", f"Set `terminal.cwd` in {_config_file()} to a "
                            "project directory: in workspace-write the model may change any "
                            "file there the walls do not protect."))
    else:
        checks.append(Check("workspace", OK, cwd))
    for token_file in settings.token_files:
        exposed = check_token_file(token_file)
        if exposed is not None:
            checks.append(exposed)
    return checks


def _binary_found(setting: str | None) -> bool:
    """Whether a codex binary resolves (a missing one is the codex binary line's to report)."""
    from hermes_codex_runtime.wire import WireError, resolve_codex_binary

    try:
        resolve_codex_binary(setting)
    except WireError:
        return False
    return True


def _config_file() -> Path:
    return hermes_home() / "config.yaml"


def _short(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home):] if path == home or path.startswith(home + "/") else path


def _each_wall(session: SessionSettings, settings: PluginSettings) -> list[Check]:
    from hermes_codex_runtime.walls import thread_walls

    try:
        walls = thread_walls(session)
    except ValueError:
        return []  # the sandbox walls line says why
    mode = session.sandbox or sandbox_defaults(session.codex_home).mode or "read-only"
    checks = [*_unreadable(walls, session), _links(walls), _startup(walls)]
    checks.append(_instructions(session.cwd or os.getcwd(), mode,
                                settings.workspace_instructions))
    return checks


def _down(name: str, walls: ThreadPermissions) -> Check:
    status = FAIL if walls.status == "fallback" else WARN
    return Check(name, status, f"down: {walls.status} (see the sandbox walls line)",
                 WALLS_OFF_FIX)


def _unreadable(walls: ThreadPermissions, session: SessionSettings) -> list[Check]:
    if walls.status != UP:
        return [_down("walls: secrets", walls), _down("walls: conversations", walls)]
    secrets: list[str] = []
    conversations: list[str] = []
    for path in walls.walls.deny_read:
        name = os.path.basename(path)
        credential = any(fnmatch.fnmatch(name, p) for p in _CREDENTIALS)
        (conversations if not credential and _in_homes(path, session) else secrets).append(
            _short(path))
    return [
        Check("walls: secrets", OK, f"up: {len(secrets)} unreadable for the model's commands"
              + (f" ({', '.join(secrets)})" if secrets else "")),
        Check("walls: conversations", OK, f"up: {len(conversations)} place(s) holding "
              "conversations unreadable for the model's commands — Hermes' session store, logs "
              "and session files, other profiles, codex's rollouts and databases"
              + (f" ({', '.join(conversations)})" if conversations else "")
              + "; Hermes' session_search reads them itself"),
    ]


def _in_homes(path: str, session: SessionSettings) -> bool:
    """``path`` lies in a Hermes home (or another profile) or in codex's home."""
    homes = [os.path.realpath(root) for root in walled.hermes_roots()]
    homes.append(os.path.realpath(codex_home_path(session.codex_home)))
    return any(path.startswith(home + "/") for home in homes)


def _links(walls: ThreadPermissions) -> Check:
    if not walls.exposed:
        return Check("walls: links", OK, "up: no walled path runs through a link the model's "
                     "commands could point elsewhere")
    shown = "; ".join(f"{_short(e.link)} → {_short(e.target)}" for e in walls.exposed)
    links = " ".join(dict.fromkeys(e.link for e in walls.exposed))
    return Check("walls: links", WARN, f"down for {shown}: each is a symbolic link in a place "
                 "the model's commands can write, so a command could point it elsewhere; what "
                 "it leads to now is walled", f"If you did not make them, remove them (`rm "
                 f"{links}`); otherwise replace each with what it points to, or set "
                 f"`terminal.cwd` in {_config_file()} to a project directory that does not "
                 "contain them.")


def _startup(walls: ThreadPermissions) -> Check:
    if not walls.creatable:
        return Check("walls: start-up files", OK, "up: every protected name exists or lies "
                     "outside the writable workspace")
    names = ", ".join(_short(p) for p in walls.creatable)
    return Check("walls: start-up files", WARN, f"down for {names}: they do not exist yet and "
                 "lie in the writable workspace — codex's sandbox cannot keep a missing name "
                 "from being created without leaving empty files behind", f"Set `terminal.cwd` "
                 f"in {_config_file()} to a project directory: the home directory is then "
                 "outside every writable place.")


def _instructions(cwd: str, mode: str, setting: str) -> Check:
    files = ", ".join(instructions.present_files(cwd)) or "none there now"
    name = "walls: instruction files"
    if not instructions.shared("gateway", cwd) or mode not in instructions.WRITABLE_MODES:
        return Check(name, OK, f"loaded ({files}): the model's commands cannot write {cwd}")
    if setting == "load":
        return Check(name, WARN, f"down: loaded from {cwd} ({files}), which every session's "
                     "commands can write — one session could steer every later one",
                     f"Remove `model.codex_workspace_instructions: load` from {_config_file()}, "
                     "or keep standing instructions in SOUL.md, which no command can change.")
    return Check(name, OK, f"up: not loaded from {cwd} ({files}) on codex turns — several "
                 "sessions share it and their commands can write it (keep standing "
                 f"instructions in {hermes_home() / 'SOUL.md'}; "
                 "`model.codex_workspace_instructions: load` loads them anyway)")
