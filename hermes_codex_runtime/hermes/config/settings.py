"""Reading the plugin's settings from Hermes' ``config.yaml``.

Keys (all optional):

* ``model.openai_runtime: codex_app_server`` — turn the codex runtime on (``auto`` turns it off);
  ``model.api_mode: codex_app_server`` is honoured the same way;
* ``model.codex_bin`` (or ``$CODEX_BIN``) — the codex executable; needed where ``PATH`` is minimal;
* ``model.codex_home`` (or ``$CODEX_HOME``) — codex's home (login, config, sessions);
* ``model.codex_turn_timeout`` — seconds one codex turn may take (default 600);
* ``model.codex_sandbox`` — ``read-only`` / ``workspace-write`` / ``danger-full-access``;
* ``model.codex_model`` / ``model.codex_model_provider`` — the model (and the
  ``[model_providers]`` entry of codex's config.toml) codex should use; by default codex's own
  config decides;
* ``model.codex_env_passthrough`` — further environment variable names (or ``PREFIX_*`` globs)
  the codex process may inherit; by default it gets only what a process needs plus the
  credential of the model provider its ``config.toml`` selects;
* ``model.codex_command_env_passthrough`` — names (or globs) the commands the model runs may
  inherit; by default they get no credential at all;
* ``model.codex_deny_read`` — further files (absolute or ``~/…`` paths, globs allowed) the
  commands the model runs may not read, on top of Hermes' and codex's credentials and the SSH
  keys (see :mod:`.paths`);
* ``model.codex_protect`` — further places that stay read-only for those commands even inside a
  writable workspace, on top of ``HERMES_HOME``, ``~/.ssh``, codex's home and the shell's
  start-up files;
* ``model.codex_workspace_instructions`` — ``auto`` (the default) or ``load``: whether project
  instruction files in the workspace (``AGENTS.md``, ``CLAUDE.md``, ``.hermes.md`` …) reach a
  codex turn where the model's commands can write that workspace and several sessions share
  it (the home directory, a gateway's workspace). ``auto`` leaves them out there — a command in
  one session could otherwise steer every later one (see :mod:`..turn.instructions`); ``load``
  loads them anyway;
* ``model.codex_app_server`` — where codex threads run: ``shared`` (the default: one local
  app-server for all sessions with the same settings), ``per-session`` (a process each), or
  remote app-servers: a URL (``ws://host:port``, ``wss://…``, ``unix:///path``) or a list of
  them (each a URL or ``{url: …, token_file: …}``);
* ``model.codex_app_server_token_file`` — the file holding the capability token of the remote
  app-servers (codex's ``--ws-auth capability-token --ws-token-file``);
* ``model.codex_app_server_threads`` — threads one local app-server carries before another
  starts (default: 16 per CPU core);
* ``model.codex_app_server_max_processes`` — local app-servers at most (default 64); at the cap
  the session idle the longest is parked to make room;
* ``model.codex_app_server_idle`` — seconds after which an idle session is parked (its thread
  is resumed on its next turn); default 900, ``0`` never (nor is a thread unloaded after its
  shorter idle, see :class:`~hermes_codex_runtime.pool.PoolLimits`);
* ``model.codex_app_server_grace`` — seconds a shared app-server stays up after its last
  session closed, so the next run (an API request, a cron job) reuses it; default 300, ``0``
  ends it at once. A session of a surface that runs once ends with its run (:mod:`..turn.lifetime`).

A value of the wrong type is a :class:`SettingError` naming the key and the fix — never a crash
deep inside a turn. What a turn takes from the agent rather than from config.yaml — the
service tier ``/fast`` chose (:func:`service_tier`) — is read on every turn.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import present, swallowed, symbol
from hermes_codex_runtime.pool import PER_SESSION, SHARED, EndpointSpec, Placement, PoolLimits

RUNTIME_VALUE = "codex_app_server"
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
WORKSPACE_INSTRUCTIONS = ("auto", "load")
MAX_TURN_TIMEOUT = 86_400
#: Seconds a shared app-server outlives its last session (``model.codex_app_server_grace``): the
#: next run within it starts no process. An idle app-server holds no thread (each is unloaded
#: when its session closes) and about 30 MiB.
APP_SERVER_GRACE = 300.0


class SettingError(ValueError):
    """A config.yaml value the plugin cannot use."""


def hermes_home() -> Path:
    """``$HERMES_HOME`` as Hermes resolves it (default ``~/.hermes``)."""
    get_home = symbol("hermes_constants", "get_hermes_home", feature="HERMES_HOME lookup")
    if callable(get_home):
        try:
            return Path(get_home())
        except Exception:
            pass
    return Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")


def load_config() -> dict[str, Any]:
    """Hermes' merged config (its own loader when available, else the YAML file)."""
    loader = symbol("hermes_cli.config", "load_config", feature="reading config.yaml")
    if callable(loader):
        try:
            config = loader()
            return config if isinstance(config, dict) else {}
        except Exception:
            pass
    import yaml

    path = hermes_home() / "config.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


_config_cache: tuple[tuple[Any, ...], dict[str, Any]] | None = None


def loaded_config() -> dict[str, Any]:
    """:func:`load_config`, re-read only when config.yaml changes (its path, modification time,
    size, inode): Hermes' ``load_config`` deep-copies the whole config on every call (~1 ms).
    The dict is shared — read it, never change it."""
    global _config_cache
    path = hermes_home() / "config.yaml"
    try:
        info = path.stat()
        key: tuple[Any, ...] = (str(path), info.st_mtime_ns, info.st_size, info.st_ino)
    except OSError:
        key = (str(path), None)
    cached = _config_cache
    if cached is not None and cached[0] == key:
        return cached[1]
    config = load_config()
    _config_cache = (key, config)
    return config


def approvals_section() -> dict[str, Any]:
    """``config["approvals"]`` (from :func:`loaded_config`: an approval is on the hot path)."""
    section = loaded_config().get("approvals")
    return dict(section) if isinstance(section, Mapping) else {}


PLUGIN_NAME = "codex-runtime"


def plugin_enabled(config: Mapping[str, Any] | None = None) -> bool:
    """Whether Hermes' loader would load the plugin: in ``plugins.enabled``, not in
    ``plugins.disabled`` (which wins), and ``HERMES_SAFE_MODE`` unset."""
    if os.environ.get("HERMES_SAFE_MODE") not in (None, "", "0"):
        return False
    plugins = (load_config() if config is None else config).get("plugins")
    if not isinstance(plugins, Mapping):
        return False
    enabled, disabled = plugins.get("enabled"), plugins.get("disabled")
    return isinstance(enabled, list) and PLUGIN_NAME in enabled and not (
        isinstance(disabled, list) and PLUGIN_NAME in disabled)


def model_section(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config["model"]`` as a dict (Hermes also allows a bare model-name string)."""
    config = loaded_config() if config is None else config
    model = config.get("model")
    return dict(model) if isinstance(model, Mapping) else {}


#: What ``model.openai_runtime`` may say (Hermes' own ``/codex-runtime`` writes these).
RUNTIME_CHOICES = ("auto", RUNTIME_VALUE)


def did_you_mean(value: str, choices: tuple[str, ...]) -> str:
    """`` — did you mean 'x'?`` for a near miss among ``choices``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(value.strip().lower(), choices, n=1, cutoff=0.6)
    return f" — did you mean {close[0]!r}?" if close else ""


def runtime_requested(model: Mapping[str, Any]) -> bool:
    """True when config.yaml asks for the codex app-server runtime. A value that is neither a
    runtime nor empty is a :class:`SettingError` (with the near miss it probably meant): a typo
    must never silently leave the user on another runtime."""
    for key in ("openai_runtime", "api_mode"):
        value = model.get(key)
        if value is None or value is False or value == "":
            continue
        if not isinstance(value, str):
            raise SettingError(
                f"model.{key} must be a string such as 'codex_app_server' or 'auto', "
                f"got {value!r}")
        normal = value.strip().lower().replace("-", "_")
        if normal == RUNTIME_VALUE:
            return True
        if key == "openai_runtime" and normal not in RUNTIME_CHOICES:
            raise SettingError(
                f"model.openai_runtime is {value!r}, which is not a runtime (use "
                f"'codex_app_server' or 'auto'){did_you_mean(normal, RUNTIME_CHOICES)}")
    return False


APPROVAL_MODES = ("manual", "smart", "off")


def _seconds_ok(value: Any) -> bool:
    """Hermes reads ``approvals.timeout`` with ``int()``: what that accepts, from 1 s to a day."""
    if isinstance(value, bool):
        return False
    try:
        seconds = int(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return 1 <= seconds <= MAX_TURN_TIMEOUT


def approval_problems(config: Mapping[str, Any] | None = None, *,
                      section: Any = None) -> list[str]:
    """What is wrong with the ``approvals`` keys the plugin and Hermes read (``mode``,
    ``timeout``, ``cron_mode``), one sentence each naming the key; empty when all is well.
    Hermes does not refuse them: a bad ``timeout`` makes it decline every prompt at once or
    wait its default in silence, a bad ``mode`` makes it ask — so they are reported instead.
    ``section``: the ``approvals`` mapping itself, when the caller has it."""
    if section is None:
        section = (loaded_config() if config is None else config).get("approvals")
    if section is None:
        return []
    if not isinstance(section, Mapping):
        return [f"approvals must be a mapping (mode, timeout, cron_mode), got {section!r}"]
    problems = []
    mode = section.get("mode")
    if mode is not None and mode is not False and (
            not isinstance(mode, str) or mode.strip().lower() not in APPROVAL_MODES):
        hint = did_you_mean(mode, APPROVAL_MODES) if isinstance(mode, str) else ""
        problems.append(f"approvals.mode must be manual, smart or off, got {mode!r}{hint}")
    timeout = section.get("timeout")
    if timeout is not None and not _seconds_ok(timeout):
        problems.append(f"approvals.timeout must be a number of seconds from 1 to "
                        f"{MAX_TURN_TIMEOUT}, got {timeout!r} (Hermes would decline every "
                        "prompt at once, or wait its default in silence)")
    cron = section.get("cron_mode")
    if cron is not None and (not isinstance(cron, str)
                             or cron.strip().lower() not in ("approve", "deny")):
        problems.append(f"approvals.cron_mode must be approve or deny, got {cron!r}")
    return problems


@dataclass(frozen=True, slots=True)
class PluginSettings:
    """The plugin's view of config.yaml (validated)."""

    codex_bin: str | None
    codex_home: str | None
    turn_timeout: float
    sandbox: str | None
    codex_model: str | None = None
    codex_model_provider: str | None = None
    env_passthrough: tuple[str, ...] = ()
    command_env_passthrough: tuple[str, ...] = ()
    app_server: Placement | None = None
    deny_read: tuple[str, ...] = ()
    protect: tuple[str, ...] = ()
    #: Every app-server token file config.yaml names (also one not in use at the moment).
    token_files: tuple[str, ...] = ()
    #: ``model.codex_workspace_instructions`` (``auto`` or ``load``).
    workspace_instructions: str = "auto"


#: Every ``model.codex_*`` key the plugin reads (any other is a typo, told with its near miss).
PLUGIN_KEYS = (
    "codex_bin", "codex_home", "codex_turn_timeout", "codex_sandbox", "codex_model",
    "codex_model_provider", "codex_env_passthrough", "codex_command_env_passthrough",
    "codex_deny_read", "codex_protect", "codex_workspace_instructions", "codex_app_server",
    "codex_app_server_token_file", "codex_app_server_threads", "codex_app_server_grace",
    "codex_app_server_max_processes", "codex_app_server_idle",
)


def plugin_settings(config: Mapping[str, Any] | None = None) -> PluginSettings:
    """Validate and return the plugin's keys. Raises :class:`SettingError`."""
    model = model_section(config)
    unknown = [key for key in model if isinstance(key, str) and key.startswith("codex_")
               and key not in PLUGIN_KEYS]
    if unknown:
        hint = did_you_mean(unknown[0], PLUGIN_KEYS).replace(" 'codex_", " 'model.codex_")
        raise SettingError(f"model.{unknown[0]} is not a setting of the plugin{hint} (the "
                           "README's Configuration reference lists them all)")
    codex_bin = model.get("codex_bin")
    if codex_bin is not None and (not isinstance(codex_bin, str) or not codex_bin.strip()):
        raise SettingError(f"model.codex_bin must be the path of the codex executable, got "
                           f"{codex_bin!r}")
    codex_home = model.get("codex_home") or os.environ.get("CODEX_HOME") or None
    if codex_home is not None and not isinstance(codex_home, str):
        raise SettingError(f"model.codex_home must be a directory path, got {codex_home!r}")
    timeout = model.get("codex_turn_timeout", 600)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
            or not math.isfinite(timeout) or not 0 < timeout <= MAX_TURN_TIMEOUT:
        raise SettingError(f"model.codex_turn_timeout must be a positive number of seconds, at "
                           f"most {MAX_TURN_TIMEOUT} (a day), got {timeout!r}")
    instructions = model.get("codex_workspace_instructions", "auto")
    if instructions not in WORKSPACE_INSTRUCTIONS:
        raise SettingError(f"model.codex_workspace_instructions must be one of "
                           f"{', '.join(WORKSPACE_INSTRUCTIONS)}, got {instructions!r}")
    sandbox = model.get("codex_sandbox")
    if sandbox is not None and sandbox not in SANDBOX_MODES:
        raise SettingError(f"model.codex_sandbox must be one of {', '.join(SANDBOX_MODES)}, got "
                           f"{sandbox!r}")
    names: dict[str, str | None] = {}
    for key in ("codex_model", "codex_model_provider"):
        value = model.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise SettingError(f"model.{key} must be a non-empty string, got {value!r}")
        names[key] = value.strip() if isinstance(value, str) else None
    passthrough = {key: _names(model, key)
                   for key in ("codex_env_passthrough", "codex_command_env_passthrough")}
    placement = app_server_placement(model)
    token_default = model.get("codex_app_server_token_file")
    token_files = [spec.token_file for spec in (placement.endpoints if placement else ())
                   if spec.token_file]
    if isinstance(token_default, str):
        token_files.append(os.path.expanduser(token_default.strip()))
    return PluginSettings(
        codex_bin=os.path.expanduser(codex_bin.strip()) if isinstance(codex_bin, str) else None,
        codex_home=os.path.expanduser(codex_home) if codex_home else None,
        turn_timeout=float(timeout),
        sandbox=sandbox,
        codex_model=names["codex_model"],
        codex_model_provider=names["codex_model_provider"],
        env_passthrough=passthrough["codex_env_passthrough"],
        command_env_passthrough=passthrough["codex_command_env_passthrough"],
        app_server=placement,
        deny_read=_paths(model, "codex_deny_read"),
        protect=_paths(model, "codex_protect"),
        token_files=tuple(dict.fromkeys(token_files)),
        workspace_instructions=instructions,
    )


def _paths(model: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = model.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(
            isinstance(v, str) and v.strip().startswith(("/", "~")) for v in value):
        raise SettingError(f"model.{key} must be a list of absolute (or ~/...) paths, globs "
                           f"allowed, e.g. [~/.netrc, ~/.aws/credentials], got {value!r}")
    return tuple(dict.fromkeys(os.path.expanduser(v.strip()) for v in value))


APP_SERVER_KEY = "model.codex_app_server"


def app_server_placement(model: Mapping[str, Any]) -> Placement:
    """``model.codex_app_server`` (+ its token file, caps, idle and grace) as a placement.
    Raises :class:`SettingError`."""
    value = model.get("codex_app_server")
    token_default = model.get("codex_app_server_token_file")
    if token_default is not None and (not isinstance(token_default, str)
                                      or not token_default.strip()):
        raise SettingError(f"model.codex_app_server_token_file must be the path of a file "
                           f"holding the app-server's token, got {token_default!r}")
    changes: dict[str, Any] = {}
    for key, field, low, high in (("codex_app_server_threads", "threads_per_process", 1, 1024),
                                  ("codex_app_server_max_processes", "max_processes", 1, 4096)):
        number = model.get(key)
        if number is None:
            continue
        if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
            raise SettingError(f"model.{key} must be a whole number from {low} to {high}, got "
                               f"{number!r}")
        changes[field] = number
    for key, field, zero, default in (
            ("codex_app_server_idle", "idle_session", "never park", None),
            ("codex_app_server_grace", "idle_grace", "end at once", APP_SERVER_GRACE)):
        seconds = model.get(key, default)
        if seconds is None:
            continue
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
                or not math.isfinite(seconds) or not 0 <= seconds <= MAX_TURN_TIMEOUT:
            raise SettingError(f"model.{key} must be seconds from 0 ({zero}) to "
                               f"{MAX_TURN_TIMEOUT}, got {seconds!r}")
        changes[field] = float(seconds)
    limits = dataclasses.replace(PoolLimits(), **changes)
    if value is None or value == SHARED:
        return Placement(SHARED, limits=limits)
    if value == PER_SESSION:
        return Placement(PER_SESSION, limits=limits)
    if isinstance(value, str) and "://" not in value:
        hint = did_you_mean(value, (SHARED, PER_SESSION))
        if hint:
            raise SettingError(f"{APP_SERVER_KEY} is {value!r}: not a layout or a URL{hint}")
    entries = value if isinstance(value, list) else [value]
    if not entries:
        raise SettingError(f"{APP_SERVER_KEY} is an empty list; name at least one app-server "
                           "URL, or use 'shared'")
    specs = [_endpoint_spec(entry, token_default) for entry in entries]
    if len({spec.url for spec in specs}) != len(specs):
        raise SettingError(f"{APP_SERVER_KEY} names the same URL twice")
    return Placement("endpoints", endpoints=tuple(specs), limits=limits)


def _endpoint_spec(entry: Any, token_default: str | None) -> EndpointSpec:
    usage = (f"{APP_SERVER_KEY} must be 'shared', 'per-session', an app-server URL "
             "(ws://host:port, wss://host/path or unix:///path/to/socket), or a list of URLs / "
             "{url: ..., token_file: ...}")
    token = token_default
    if isinstance(entry, Mapping):
        url = entry.get("url")
        token = entry.get("token_file", token_default)
        unknown = set(entry) - {"url", "token_file"}
        if unknown:
            raise SettingError(f"{usage}; unknown key(s) {sorted(unknown)}")
    else:
        url = entry
    if not isinstance(url, str) or not url.strip():
        raise SettingError(f"{usage}, got {entry!r}")
    url = url.strip()
    from hermes_codex_runtime.wire.websocket import Endpoint, EndpointError

    try:
        Endpoint.parse(url)
    except EndpointError as exc:
        raise SettingError(f"{APP_SERVER_KEY}: {exc}") from None
    if token is not None:
        if not isinstance(token, str) or not token.strip():
            raise SettingError(f"the token_file of {url} must be a file path, got {token!r}")
        token = os.path.expanduser(token.strip())
        if not os.path.isfile(token):
            raise SettingError(f"the token file {token} for {url} does not exist; write the "
                               "app-server's capability token there (the file you passed to "
                               "`codex app-server --ws-token-file`)")
    return EndpointSpec(url=url, token_file=token)


#: Hermes' ``tools.terminal.security_mode`` → codex's sandbox, when ``model.codex_sandbox`` is
#: unset. Without an explicit mode, codex's own ``sandbox_mode`` decides.
SECURITY_MODE_SANDBOX = {"auto": "workspace-write", "approval-required": "read-only",
                         "unrestricted": "danger-full-access", "yolo": "danger-full-access"}


def sandbox_for_security_mode(config: dict[str, Any]) -> str | None:
    """codex's sandbox for the terminal security mode the user set (env var, then config)."""
    mode = os.environ.get("HERMES_TERMINAL_SECURITY_MODE")
    if not mode:
        tools = config.get("tools")
        terminal = tools.get("terminal") if isinstance(tools, dict) else None
        mode = terminal.get("security_mode") if isinstance(terminal, dict) else None
    return SECURITY_MODE_SANDBOX.get(str(mode).strip().lower()) if mode else None


#: Hermes' service tiers → codex's ``turn/start.serviceTier`` (codex sends ``priority`` for its
#: own ``fast``). A tier codex has no word for (the 0.22 line's ``ultrafast``; ``auto``/``cold``
#: are windows, resolved to ``priority`` or nothing per request) is not sent.
CODEX_SERVICE_TIERS = {"priority": "priority", "fast": "priority", "flex": "flex"}


def service_tier(agent: Any) -> str | None:
    """The service tier Hermes' own loop would request for ``agent``'s next request, as codex
    takes it (``None``: the provider's default). Hermes puts the tier in the request from its
    request overrides: ``agent.fast_mode.effective_request_overrides(agent)`` where the host has
    it (the 0.22 line: ``/fast auto``/``cold`` windows), else ``agent.request_overrides`` (which
    ``/fast`` fills per model, e.g. none for a ``*-codex`` model on 0.19.0); an agent with
    neither gives its ``service_tier``. Never raises."""
    overrides: Any = None
    if present("agent.fast_mode", "effective_request_overrides"):
        effective = symbol("agent.fast_mode", "effective_request_overrides")
        try:
            overrides = effective(agent)
        except Exception:
            swallowed("reading the /fast window")
    if not isinstance(overrides, Mapping):
        overrides = getattr(agent, "request_overrides", None)
    if isinstance(overrides, Mapping):
        tier = overrides.get("service_tier")
    else:
        tier = None if hasattr(agent, "request_overrides") else getattr(agent, "service_tier",
                                                                        None)
    return CODEX_SERVICE_TIERS.get(tier.strip().lower()) if isinstance(tier, str) else None


def _names(model: Mapping[str, Any], key: str) -> tuple[str, ...]:
    from hermes_codex_runtime.wire.env import valid_name_pattern

    value = model.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(valid_name_pattern(v) for v in value):
        raise SettingError(
            f"model.{key} must be a list of environment variable names (or PREFIX_* globs), "
            f"e.g. [GITHUB_TOKEN], got {value!r}")
    return tuple(dict.fromkeys(str(v) for v in value))
