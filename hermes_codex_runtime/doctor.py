"""The codex side of ``doctor``: why doesn't it work on my machine?

Owns the host-neutral checks (binary, version, ``CODEX_HOME``, configuration, login, readiness for
a service's minimal ``PATH``, the environment that reaches codex, the app-servers) and the report
format. Every check is ok / warn / fail with the exact fix (or off: the runtime is switched off
on purpose, with how to switch it on); a fix names the host's setting or command through
:class:`Wording`, which the host's adapter passes in. Nothing here knows a host.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hermes_codex_runtime.protocol import (
    account_read_params,
    invalid_configuration,
    login_missing,
)
from hermes_codex_runtime.wire import (
    AppServerConnection,
    CodexBinary,
    SpawnOptions,
    TransportClosed,
    WireError,
    allowed_environment,
    command_environment,
    probe_version,
    provider_credential_names,
    redact,
    resolve_codex_binary,
)
from hermes_codex_runtime.wire.binary import (
    SETTING_LABEL,
    TESTED_CODEX_VERSIONS,
    tested_note,
)
from hermes_codex_runtime.wire.codex_config import codex_home_path, required_provider_key

OK, WARN, FAIL = "ok", "warn", "fail"
#: the runtime is switched off on purpose: nothing of it to check, nothing wrong
OFF = "off"
#: CLI overrides that keep a diagnostic spawn from syncing plugins or retrying forever.
QUIET_OVERRIDES = ("-c", "features.plugins=false", "-c", "check_for_update_on_startup=false")


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report."""

    name: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Wording:
    """How the host names, in a fix, its settings and the commands that work as installed."""

    #: where the codex binary is set (the host's key and file)
    binary_setting: str = "the codex binary setting"
    #: where the codex home is set
    home_setting: str = "the codex home setting (or CODEX_HOME)"
    #: how to run exactly the codex (binary and home) the plugin uses
    codex_command: str = "codex"
    #: a command that installs a codex the plugin finds by itself
    install_codex: str = "pip install openai-codex-cli-bin"

    def login(self) -> str:
        """The login command."""
        return f"{self.codex_command} login"


def check_binary(setting: str | None, wording: Wording = Wording()) -> tuple[Check,
                                                                             CodexBinary | None]:
    """Is there a codex, from where (its full path), and is it new enough?"""
    try:
        binary = resolve_codex_binary(setting)
        version = probe_version(binary)
    except WireError as exc:
        problem = getattr(exc, "problem", str(exc)).replace(SETTING_LABEL,
                                                            wording.binary_setting)
        fix = (f"Point {wording.binary_setting} at the codex executable, or install the tested "
               f"codex: `{wording.install_codex}`.")
        if setting and "older than" not in problem:
            try:  # the setting is what is wrong: without it, the plugin finds its own codex
                found = resolve_codex_binary(None)
            except WireError:
                found = None
            if found is not None:
                fix = (f"Remove {wording.binary_setting} to use the {found.source} codex at "
                       f"{found.path}, or point it at an existing codex executable.")
        own = getattr(exc, "fix", "")
        if own and "Install codex" not in own:  # a fix for THIS problem (e.g. chmod +x)
            fix = f"{own} {fix}"
        return Check("codex binary", FAIL, problem, fix), None
    detail = (f"{binary.path} (from {binary.source}): codex {'.'.join(map(str, version))}, "
              f"{tested_note(version)}")
    if version in TESTED_CODEX_VERSIONS:
        return Check("codex binary", OK, detail), binary
    # it runs, but nobody ran this project's tests on it: said, and counted, as a warning
    return Check("codex binary", WARN, detail,
                 f"It may work; a tested codex is `{wording.install_codex}`, or point "
                 f"{wording.binary_setting} at one."), binary


def check_codex_home(setting: str | None, wording: Wording = Wording()) -> Check:
    """Can codex keep its login, config and sessions there?"""
    home = codex_home_path(setting)
    explicit = bool(setting or os.environ.get("CODEX_HOME"))
    if not home.exists() and not explicit:
        return Check("CODEX_HOME", WARN, f"{home} does not exist yet",
                     f"Run `{wording.login()}` (it creates it and logs in).")
    if not home.exists():
        return Check("CODEX_HOME", FAIL, f"{home} does not exist (codex app-server exits at "
                     "start-up without it)",
                     f"Run `{wording.login()}` (it creates {home} and logs in), or point "
                     f"{wording.home_setting} at your codex home.")
    if not home.is_dir():
        return Check("CODEX_HOME", FAIL, f"{home} is not a directory",
                     f"Point {wording.home_setting} at a directory.")
    if not os.access(home, os.W_OK):
        return Check("CODEX_HOME", FAIL, f"{home} is not writable by this user",
                     f"Fix the permissions of {home}, or use another codex home "
                     f"({wording.home_setting}).")
    return Check("CODEX_HOME", OK, str(home))


def check_app_server(binary: CodexBinary, codex_home: str | None,
                     wording: Wording = Wording()) -> list[Check]:
    """Spawn codex once: configuration warnings, and whether it is logged in."""
    home = str(codex_home_path(codex_home))
    try:
        conn = AppServerConnection.spawn(SpawnOptions(
            codex_bin=binary.path, codex_home=home, extra_args=QUIET_OVERRIDES,
            initialize_timeout=20))
    except WireError as exc:
        return [Check("codex config", FAIL, f"codex app-server did not start: {redact(str(exc))}",
                      f"Run `{wording.codex_command} app-server` by hand to see the error, "
                      f"and fix {home}/config.toml.")]
    checks: list[Check] = []
    try:
        invalid: list[str] = []
        try:
            account = conn.request("account/read", account_read_params(), timeout=10)
        except WireError as exc:
            account = {"_error": str(exc)}
        deadline_items = 0
        while deadline_items < 50:
            try:
                message = conn.next_inbound(timeout=0.3)
            except TransportClosed:
                break
            if message is None:
                break
            deadline_items += 1
            text = invalid_configuration(message.params) \
                if message.method == "configWarning" else None
            if text:
                invalid.append(text)
        if invalid:
            checks.append(Check("codex config", FAIL, redact("; ".join(invalid)),
                                f"Fix {home}/config.toml — until then codex ignores ALL of it "
                                "and falls back to its defaults (and the OpenAI provider)."))
        else:
            config = Path(home) / "config.toml"
            checks.append(Check("codex config", OK, f"{config} is valid" if config.is_file()
                                else f"no {config}: codex's defaults"))
        checks.append(_login_check(account, wording))
    finally:
        conn.close()
    return checks


def _login_check(account: dict[str, Any], wording: Wording) -> Check:
    if "_error" in account:
        return Check("codex login", WARN, f"could not ask codex: {redact(account['_error'])}",
                     f"Run `{wording.codex_command} login status`.")
    if not account.get("requiresOpenaiAuth"):
        return Check("codex login", OK, "not needed by the configured model provider")
    info = account.get("account")
    if isinstance(info, dict) or login_missing(account) is None:
        info = info if isinstance(info, dict) else {}
        kind = info.get("type") or "account"
        plan = info.get("planType")
        return Check("codex login", OK, f"logged in ({kind}{', ' + plan if plan else ''})")
    return Check("codex login", FAIL, "codex is not logged in",
                 f"Run `{wording.login()}` (it logs in the codex home the plugin uses).")


def check_minimal_path(binary: CodexBinary | None, setting: str | None,
                       wording: Wording = Wording()) -> Check:
    """Will gateway and cron (started by systemd/launchd with a minimal PATH) find codex?"""
    if setting:
        return Check("gateway/cron readiness", OK, f"set to {setting}")
    if binary is not None and binary.source in ("bundled", "CODEX_BIN"):
        return Check("gateway/cron readiness", OK, f"codex comes from {binary.source}, not PATH")
    if binary is not None:
        return Check("gateway/cron readiness", WARN,
                     f"codex is only found on this shell's PATH ({binary.path})",
                     f"Set {wording.binary_setting} to {binary.path}: services start with a "
                     "minimal PATH.")
    return Check("gateway/cron readiness", FAIL, "no codex binary",
                 f"Install codex (`{wording.install_codex}`), or set {wording.binary_setting}.")


def check_environment(codex_home: str | None, model_provider: str | None = None,
                      passthrough: Sequence[str] = (),
                      command_passthrough: Sequence[str] = ()) -> Check:
    """Which variables reach codex, and which its commands — names only, never values."""
    keys = provider_credential_names(codex_home, model_provider)
    process = allowed_environment(provider_keys=keys,
                                  passthrough=(*passthrough, *command_passthrough))
    commands = command_environment(process, command_passthrough)
    withheld = len(set(os.environ) - set(process))
    credentials = [k for k in keys if k in process]
    detail = (f"codex gets {len(process)} variable(s) ({', '.join(sorted(process))}), "
              f"provider credential: "
              f"{', '.join(credentials) or 'none (codex login or no key needed)'}; "
              f"{withheld} withheld; its commands get {len(commands)} "
              f"({', '.join(sorted(commands))})")
    required = required_provider_key(codex_home, model_provider)
    if required and required not in process:
        return Check("environment", WARN, detail + f"; {required} is not set",
                     f"Set {required} where the host keeps its environment: codex's "
                     "config.toml names it as the model provider's key.")
    return Check("environment", OK, detail)


def codex_checks(codex_bin: str | None, codex_home: str | None, *,
                 model_provider: str | None = None, passthrough: Sequence[str] = (),
                 command_passthrough: Sequence[str] = (),
                 wording: Wording = Wording()) -> list[Check]:
    """Every codex-side check, in order."""
    binary_check, binary = check_binary(codex_bin, wording)
    home_check = check_codex_home(codex_home, wording)
    checks = [binary_check, home_check]
    if not codex_home_path(codex_home).is_dir():
        # codex panics at start-up without its home: nothing more to learn by starting it.
        checks.append(Check("codex config", WARN, "not checked: there is no codex home yet",
                            f"Run `{wording.login()}` first (it creates the home), then doctor "
                            "again."))
    elif binary is not None and home_check.status != FAIL:
        checks.extend(check_app_server(binary, codex_home, wording))
    checks.append(check_environment(codex_home, model_provider, passthrough,
                                    command_passthrough))
    checks.append(check_minimal_path(binary, codex_bin, wording))
    return checks


def check_app_servers(placement: Any, fix: str = "") -> list[Check]:
    """Where threads run: the shared/per-session layout, or each remote endpoint reached and
    initialised with its token (``placement``: a :class:`~hermes_codex_runtime.pool.Placement`
    or ``None`` for the default)."""
    from hermes_codex_runtime.pool import PER_SESSION, Placement
    from hermes_codex_runtime.pool.remote import connect_endpoint

    placement = placement or Placement()
    limits = placement.limits
    if placement.mode == PER_SESSION:
        return [Check("app-servers", OK, "per-session: one local codex process per session")]
    if placement.mode != "endpoints":
        return [Check("app-servers", OK,
                      f"shared: one local codex process carries up to "
                      f"{limits.threads_per_process} sessions with the same settings (another "
                      f"starts beyond, at most {limits.max_processes}); it ends with its last "
                      "session")]
    checks = []
    for spec in placement.endpoints:
        try:
            conn = connect_endpoint(spec, SpawnOptions(initialize_timeout=10.0))
        except WireError as exc:
            hint = getattr(exc, "hint", "")
            detail = redact(str(exc) if not hint or hint in str(exc) else f"{exc} {hint}")
            checks.append(Check("app-server", FAIL, f"{spec.url}: {detail}", fix))
            continue
        try:
            version = ".".join(map(str, conn.server.version or ())) if conn.server else "?"
            checks.append(Check("app-server", OK, f"{spec.url}: codex {version or '?'}, token "
                                "accepted" if spec.token_file else
                                f"{spec.url}: codex {version or '?'} (no token)"))
        finally:
            conn.close()
    return checks


def check_token_file(path: str | None) -> Check | None:
    """A FAIL when an app-server token file is readable by others (``None``: nothing to say)."""
    from hermes_codex_runtime.pool.remote import exposed_token_file

    problem = exposed_token_file(path) if path else None
    if problem is None:
        return None
    detail, _, fix = problem.partition(" Run ")
    return Check("token file", FAIL, detail, f"Run {fix}")


def render(checks: list[Check]) -> str:
    """The report for a terminal."""
    marks = {OK: "ok  ", WARN: "warn", FAIL: "FAIL", OFF: "off "}
    width = max((len(c.name) for c in checks), default=10)
    lines = []
    for check in checks:
        lines.append(f"[{marks.get(check.status, check.status)}] {check.name:<{width}}  "
                     f"{check.detail}")
        if check.fix and check.status != OK:
            label = "to switch it on" if check.status == OFF else "fix"
            lines.append(f"       {'':<{width}}  {label}: {check.fix}")
    failed = sum(c.status == FAIL for c in checks)
    warned = sum(c.status == WARN for c in checks)
    lines.append("")
    if failed or warned:
        lines.append(f"{failed} problem(s), {warned} warning(s)")
    elif any(c.status == OFF for c in checks):
        lines.append("the codex runtime is off: nothing more to check until it is on")
    else:
        lines.append("everything looks right")
    return "\n".join(lines)


def to_json(checks: list[Check]) -> str:
    """The report for scripts."""
    return json.dumps({"ok": not any(c.status == FAIL for c in checks),
                       "checks": [asdict(c) for c in checks]}, indent=2)


def emit(checks: list[Check], *, as_json: bool = False) -> int:
    """Print the report; the exit status is 1 when anything failed."""
    print(to_json(checks) if as_json else render(checks), flush=True)
    return 1 if any(c.status == FAIL for c in checks) else 0


def check_walls(settings: Any, *, off_fix: str = "", fallback_fix: str = "") -> Check:
    """Which sandbox walls a thread with ``settings`` (a
    :class:`~hermes_codex_runtime.values.SessionSettings`) gets — probing the binary when the
    walls are to be relied on (see :mod:`hermes_codex_runtime.walls`)."""
    from hermes_codex_runtime.protocol.permissions import FALLBACK, OFF, OWN_PROFILE, UP
    from hermes_codex_runtime.walls import thread_walls, verify

    try:
        walls = thread_walls(settings)
    except ValueError as exc:
        return Check("sandbox walls", FAIL, str(exc), off_fix)
    if walls.status == UP:
        verdict = verify(settings.codex_bin, settings.walls_cache)
        return Check("sandbox walls", OK,
                     f"up ({walls.mode}): {len(walls.walls.deny_read)} file(s) unreadable and "
                     f"{len(walls.walls.protect)} place(s) read-only for the model's commands; "
                     f"checked on this binary: {verdict.detail}")
    if walls.status == FALLBACK:
        return Check("sandbox walls", FAIL, walls.note, fallback_fix)
    if walls.status == OFF:
        return Check("sandbox walls", WARN, "off: the sandbox is danger-full-access, the model's "
                     "commands can read and change anything this user can", off_fix)
    if walls.status == OWN_PROFILE:
        return Check("sandbox walls", OK, "codex's own permission profile (default_permissions "
                     "in its config.toml) applies; the plugin adds no walls to it")
    return Check("sandbox walls", WARN, "none: no place to wall off was named", off_fix)
