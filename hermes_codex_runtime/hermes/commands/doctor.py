"""``doctor`` for Hermes: the host's checks, and the codex checks phrased in Hermes' words.

In order: can ``config.yaml`` be read at all (file, line, column — nothing else is checked, and no
command that rewrites it is suggested, until it parses); is Hermes importable here; is the codex
runtime switched off on purpose (``model.openai_runtime: auto``, as ``disable`` and
``/codex-runtime auto`` leave it: one line says so and how to switch it on, and nothing that only
matters to the runtime is checked or counted); are the plugin's keys and the ``approvals`` keys
valid; is the plugin enabled, the runtime switched on, does activation take effect for the
configured provider, does this Hermes have every seam; then the codex checks of
:mod:`hermes_codex_runtime.doctor` with Hermes' keys, file and commands
(:class:`~hermes_codex_runtime.doctor.Wording`). Doctor changes nothing.
"""

from __future__ import annotations

import os
from importlib import metadata
from typing import Any

from hermes_codex_runtime.doctor import (
    FAIL,
    OFF,
    OK,
    WARN,
    Check,
    Wording,
    check_app_servers,
    codex_checks,
    emit,
)
from hermes_codex_runtime.hermes import fixes
from hermes_codex_runtime.hermes.config.file import ConfigFileError, config_path, read_config_file
from hermes_codex_runtime.hermes.config.model_names import (
    codex_name,
    foreign_model_problem,
    foreign_vendor,
)
from hermes_codex_runtime.hermes.config.settings import (
    PluginSettings,
    SettingError,
    approval_problems,
    hermes_home,
    load_config,
    model_section,
    plugin_settings,
    runtime_requested,
)
from hermes_codex_runtime.hermes.symbols import table
from hermes_codex_runtime.hermes.symbols.probe import find_host, present
from hermes_codex_runtime.hermes.turn.fallback import host_falls_back

PLUGIN_NAME = "codex-runtime"


def wording() -> Wording:
    """The codex checks' fixes in Hermes' words, for this installation."""
    return Wording(binary_setting=fixes.config_ref("model.codex_bin"),
                   home_setting=fixes.config_ref("model.codex_home") + " (or CODEX_HOME)",
                   codex_command=fixes.codex_command(),
                   install_codex=fixes.install_codex_command())


def run(*, as_json: bool = False, hermes: bool = True) -> int:
    """Every check, printed; 1 when anything failed."""
    if not hermes:
        return emit(codex_checks(None, None, wording=wording()), as_json=as_json)
    checks, settings = hermes_checks()
    if settings is not None:
        placement = settings.app_server
        if placement is not None and placement.mode == "endpoints":
            # codex, its home, login and config are the servers' (checked per endpoint)
            checks.append(Check("local codex", OK, "not used: sessions run on the remote "
                                "app-servers of model.codex_app_server"))
        else:
            checks.extend(codex_checks(
                settings.codex_bin, settings.codex_home,
                model_provider=settings.codex_model_provider,
                passthrough=settings.env_passthrough,
                command_passthrough=settings.command_env_passthrough, wording=wording()))
        checks.extend(check_app_servers(settings.app_server, app_server_fix()))
        from hermes_codex_runtime.hermes.commands.wall_report import doctor_checks

        checks.extend(doctor_checks(load_config(), settings))
    return emit(checks, as_json=as_json)


def hermes_checks() -> tuple[list[Check], PluginSettings | None]:
    """The Hermes checks, and the plugin's settings for the codex ones (``None`` when they
    could not be read — the codex checks would be about the wrong binary or home — or when the
    runtime is switched off: there is nothing of it to check)."""
    path = config_path()
    try:
        raw = read_config_file(path)
    except ConfigFileError as exc:
        where = f" at line {exc.line}, column {exc.column}" if exc.line is not None else ""
        return [Check("config.yaml", FAIL, str(exc),
                      f"Fix the YAML{where} of {path} by hand (Hermes can read none of your "
                      "settings until then; doctor changed nothing). The other checks run once "
                      "it parses.")], None
    checks = [Check("config.yaml", OK, f"{path} parses") if raw is not None else
              Check("config.yaml", WARN, f"{path} does not exist yet",
                    f"Run `{fixes.own_command()} enable` (it writes it).")]
    host = find_host()
    if host is None:
        checks.append(Check("Hermes", FAIL, "Hermes is not importable in this environment",
                            "Install the plugin into the environment Hermes runs in (README, "
                            "\"Installing into your Hermes\")."))
        return checks, None
    checks.append(Check("Hermes", OK, f"{host.describe()}, HERMES_HOME {hermes_home()}"))
    config = load_config()
    model = model_section(config)
    off = _switched_off(config)
    if off is not None:
        checks.append(off)
        return checks, None
    settings: PluginSettings | None = None
    try:
        settings = plugin_settings(config)
        checks.append(Check("plugin settings", OK, "model.codex_* keys are valid"))
    except SettingError as exc:
        checks.append(Check("plugin settings", FAIL, str(exc),
                            f"Fix that key in {path}."))
    problems = approval_problems(config)
    checks.append(Check("approvals", FAIL, "; ".join(problems), f"Fix them in {path}.")
                  if problems else Check("approvals", OK, "approvals.* keys are valid"))
    checks.append(_enabled_check(config))
    checks.append(_runtime_check(model))
    checks.append(_activation_check(model))
    checks.append(_model_check(model, settings))
    missing = table.missing()
    if missing:
        listing = "; ".join(f"{s.module}:{s.path} ({s.feature})" for s in missing)
        checks.append(Check("host seams", FAIL, f"this Hermes lacks: {listing}",
                            "Use a Hermes version listed in COMPAT_MANIFEST.md (0.19.0 and "
                            "0.22.2.post1 are verified); the plugin leaves those features to "
                            "Hermes."))
    else:
        checks.append(Check("host seams", OK,
                            f"all {sum(s.required for s in table.SYMBOLS)} required "
                            "symbols present"))
    checks.append(Check("host probes", OK, "; ".join(active_probes())))
    return checks, settings


def app_server_fix() -> str:
    """The fix for an unreachable remote app-server."""
    return (f"Check {fixes.config_ref('model.codex_app_server')} (the URL) and "
            "`model.codex_app_server_token_file` (the file holding the server's "
            "`--ws-token-file` token); docs/remote-app-servers.md shows how to run one.")


def active_probes() -> list[str]:
    """How the plugin meets this host, as the feature probes found it (one phrase each)."""
    found = []
    registry = any(table.lookup(s) for s in table.SYMBOLS
                   if s.path == "PluginContext.register_agent_runtime")
    found.append("turn: the host's runtime registry" if registry else
                 "turn: the `agent.codex_runtime` seam")
    found.append("approvals: Hermes' public request_tool_approval"
                 if present("tools.approval", "request_tool_approval") else
                 "approvals: the plugin's own prompt (no request_tool_approval)")
    moved = sorted({m for s in table.SYMBOLS if s.also_in and not present(s.module, s.path)
                    for m in s.also_in if present(m, s.path)})
    if moved:
        found.append("approval helpers from " + ", ".join(moved))
    found.append("API-server approvals: the session's approval notifier"
                 if present("tools.approval", "_gateway_notify_cb") else
                 "API-server approvals: the gateway context")
    found.append("usage-limit fallback: run by Hermes on the returned result"
                 if host_falls_back() else "usage-limit fallback: run by the plugin")
    return found


def _enabled_check(config: dict[str, Any]) -> Check:
    entry_points = [ep for ep in metadata.entry_points(group="hermes_agent.plugins")
                    if ep.name == PLUGIN_NAME]
    if not entry_points:
        return Check("plugin enabled", FAIL, "the codex-runtime entry point is not installed",
                     "Install the plugin into the environment Hermes runs in (README, "
                     "\"Installing into your Hermes\").")
    raw_plugins = config.get("plugins")
    plugins: dict[str, Any] = raw_plugins if isinstance(raw_plugins, dict) else {}
    raw_enabled, raw_disabled = plugins.get("enabled"), plugins.get("disabled")
    enabled: list[Any] = raw_enabled if isinstance(raw_enabled, list) else []
    disabled: list[Any] = raw_disabled if isinstance(raw_disabled, list) else []
    if os.environ.get("HERMES_SAFE_MODE") not in (None, "", "0"):
        return Check("plugin enabled", FAIL, "HERMES_SAFE_MODE is set: no plugin loads",
                     "Unset HERMES_SAFE_MODE.")
    enable = f"Run `{fixes.own_command()} enable` (or `hermes plugins enable codex-runtime`)."
    if PLUGIN_NAME in disabled:
        return Check("plugin enabled", FAIL, "codex-runtime is in plugins.disabled", enable)
    if PLUGIN_NAME not in enabled:
        return Check("plugin enabled", FAIL, "installed but not enabled", enable)
    return Check("plugin enabled", OK, "discovered through its entry point and enabled")


def _switched_off(config: dict[str, Any]) -> Check | None:
    """One line when the user switched the runtime off (``model.openai_runtime: auto``, which
    ``disable`` and ``/codex-runtime auto`` write), else ``None``. An unset or misspelt runtime
    is not "off": the other checks say what is missing."""
    model = model_section(config)
    current = model.get("openai_runtime")
    if not isinstance(current, str) or current.strip().lower() != "auto" \
            or runtime_requested_safe(model):
        return None
    plugins = config.get("plugins")
    enabled = plugins.get("enabled") if isinstance(plugins, dict) else None
    disabled = plugins.get("disabled") if isinstance(plugins, dict) else None
    loaded = isinstance(enabled, list) and PLUGIN_NAME in enabled and not (
        isinstance(disabled, list) and PLUGIN_NAME in disabled)
    enable = f"`{fixes.own_command()} enable`"
    if loaded:
        return Check("codex runtime", OFF, "switched off: model.openai_runtime is 'auto', so "
                     "turns run on Hermes' own runtime (codex-runtime is still enabled)",
                     f"type `/codex-runtime codex_app_server` in Hermes, or run {enable}.")
    return Check("codex runtime", OFF, "switched off: model.openai_runtime is 'auto' and "
                 "codex-runtime is not enabled, so turns run on Hermes' own runtime",
                 f"run {enable} (it says what it changes).")


def _runtime_check(model: dict[str, Any]) -> Check:
    switch_on = (f"Set `model.openai_runtime: codex_app_server` in {config_path()} (`"
                 f"{fixes.own_command()} enable` does it), or type `/codex-runtime "
                 "codex_app_server` in Hermes (it applies from your next message).")
    try:
        wanted = runtime_requested(model)
    except SettingError as exc:
        return Check("openai_runtime", FAIL, str(exc), switch_on)
    if not wanted:
        current = model.get("openai_runtime")
        return Check("openai_runtime", FAIL,
                     f"model.openai_runtime is {current!r}: turns use Hermes' own runtime"
                     if current else "model.openai_runtime is not set", switch_on)
    return Check("openai_runtime", OK, "codex_app_server")


def _activation_check(model: dict[str, Any]) -> Check:
    from hermes_codex_runtime.hermes.config.activation import wrap_resolver
    from hermes_codex_runtime.hermes.symbols.probe import symbol

    if not runtime_requested_safe(model):
        return Check("activation", WARN, "not checked: model.openai_runtime is off",
                     f"Run `{fixes.own_command()} enable`.")
    resolver = symbol("hermes_cli.runtime_provider", "resolve_runtime_provider",
                      feature="activation")
    if not callable(resolver):
        return Check("activation", FAIL, "Hermes has no resolve_runtime_provider",
                     "Use a Hermes version listed in COMPAT_MANIFEST.md.")
    provider = model.get("provider")
    try:
        runtime = wrap_resolver(resolver)(requested=provider)
    except Exception as exc:
        return Check("activation", FAIL, f"resolving provider {provider!r} failed: {exc}",
                     f"Set {fixes.config_ref('model.provider')} to openai-codex (codex owns "
                     "the login).")
    mode = runtime.get("api_mode") if isinstance(runtime, dict) else None
    if mode == "codex_app_server":
        return Check("activation", OK, f"provider {runtime.get('provider')!r} runs on codex")
    return Check("activation", FAIL,
                 f"provider {provider!r} resolves to api_mode {mode!r}, not codex_app_server",
                 f"Run `{fixes.own_command()} enable --provider` (it sets "
                 f"{fixes.config_ref('model.provider')} to openai-codex and keeps {provider!r} "
                 "as your fallback provider), or set model.provider to openai-codex, openai-api "
                 "or openai yourself.")


def _model_check(model: dict[str, Any], settings: PluginSettings | None) -> Check:
    """Does codex get a model it can run: ``model.codex_model`` if pinned, else
    ``model.default`` — another vendor's model fails every turn."""
    pinned = settings.codex_model if settings is not None else None
    key, name = ("model.codex_model", pinned) if pinned else ("model.default",
                                                              model.get("default"))
    if not isinstance(name, str) or not name.strip():
        return Check("model", OK, "codex's own default (model.default is not set)")
    if foreign_vendor(name) is None:
        return Check("model", OK, f"{key}: {codex_name(name)}")
    return Check("model", FAIL, foreign_model_problem(name, name),
                 f"Set {fixes.config_ref(key)} to a codex model (e.g. gpt-5.5); `"
                 f"{fixes.own_command()} enable --provider` does it for model.default and keeps "
                 "that model as your fallback provider's.")


def runtime_requested_safe(model: dict[str, Any]) -> bool:
    """``runtime_requested`` that never raises."""
    try:
        return runtime_requested(model)
    except SettingError:
        return False
