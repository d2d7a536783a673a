"""The Hermes side of ``doctor``: is the plugin installed where Hermes runs, enabled, switched on,
does activation take effect for the configured provider, and does this Hermes have every seam?"""

from __future__ import annotations

import os
from importlib import metadata
from typing import Any

from hermes_codex_runtime.doctor import FAIL, OK, WARN, Check
from hermes_codex_runtime.hermes import compat
from hermes_codex_runtime.hermes.fallback import host_falls_back
from hermes_codex_runtime.hermes.probe import find_host, present
from hermes_codex_runtime.hermes.settings import (
    SettingError,
    hermes_home,
    load_config,
    model_section,
    plugin_settings,
    runtime_requested,
)

PLUGIN_NAME = "codex-runtime"


def settings_or_none() -> Any:
    """The plugin's validated settings, or ``None`` when config.yaml has a bad value (reported
    by :func:`hermes_checks`)."""
    try:
        return plugin_settings(load_config())
    except SettingError:
        return None


def hermes_checks() -> tuple[list[Check], str | None, str | None]:
    """The Hermes checks, plus the ``codex_bin`` / ``codex_home`` settings for the codex ones."""
    checks: list[Check] = []
    host = find_host()
    if host is None:
        checks.append(Check("Hermes", FAIL, "Hermes is not importable in this environment",
                            "Install the plugin into the environment Hermes runs in: "
                            "`<hermes-python> -m pip install hermes-codex-runtime`."))
        return checks, None, None
    checks.append(Check("Hermes", OK, f"{host.describe()}, HERMES_HOME {hermes_home()}"))
    config = load_config()
    model = model_section(config)
    codex_bin: str | None = None
    codex_home: str | None = None
    try:
        settings = plugin_settings(config)
        codex_bin, codex_home = settings.codex_bin, settings.codex_home
        checks.append(Check("plugin settings", OK, "model.codex_* keys are valid"))
    except SettingError as exc:
        checks.append(Check("plugin settings", FAIL, str(exc),
                            "Fix that key in ~/.hermes/config.yaml."))
    checks.append(_enabled_check(config))
    checks.append(_runtime_check(model))
    checks.append(_activation_check(model))
    missing = compat.missing()
    if missing:
        listing = "; ".join(f"{s.module}:{s.path} ({s.feature})" for s in missing)
        checks.append(Check("host seams", FAIL, f"this Hermes lacks: {listing}",
                            "Use a Hermes version listed in COMPAT_MANIFEST.md (0.19.0 and "
                            "0.22.2.post1 are verified); the plugin leaves those features to "
                            "Hermes."))
    else:
        checks.append(Check("host seams", OK,
                            f"all {sum(s.required for s in compat.SYMBOLS)} required "
                            "symbols present"))
    checks.append(Check("host probes", OK, "; ".join(active_probes())))
    settings = settings_or_none()
    if settings is not None:
        from hermes_codex_runtime.doctor import check_app_servers

        checks.extend(check_app_servers(settings.app_server, APP_SERVER_FIX))
        from hermes_codex_runtime.hermes.paths import doctor_checks

        checks.extend(doctor_checks(config, settings))
    return checks, codex_bin, codex_home


APP_SERVER_FIX = ("Check `model.codex_app_server` (the URL) and "
                  "`model.codex_app_server_token_file` (the file holding the server's "
                  "`--ws-token-file` token) in ~/.hermes/config.yaml; docs/remote-app-servers.md "
                  "shows how to run one.")


def active_probes() -> list[str]:
    """How the plugin meets this host, as the feature probes found it (one phrase each)."""
    found = []
    registry = any(compat.lookup(s) for s in compat.SYMBOLS
                   if s.path == "PluginContext.register_agent_runtime")
    found.append("turn: the host's runtime registry" if registry else
                 "turn: the `agent.codex_runtime` seam")
    found.append("approvals: Hermes' public request_tool_approval"
                 if present("tools.approval", "request_tool_approval") else
                 "approvals: the plugin's own prompt (no request_tool_approval)")
    moved = sorted({m for s in compat.SYMBOLS if s.also_in and not present(s.module, s.path)
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
                     "Reinstall: `pip install hermes-codex-runtime` in Hermes' environment.")
    raw_plugins = config.get("plugins")
    plugins: dict[str, Any] = raw_plugins if isinstance(raw_plugins, dict) else {}
    raw_enabled, raw_disabled = plugins.get("enabled"), plugins.get("disabled")
    enabled: list[Any] = raw_enabled if isinstance(raw_enabled, list) else []
    disabled: list[Any] = raw_disabled if isinstance(raw_disabled, list) else []
    if os.environ.get("HERMES_SAFE_MODE") not in (None, "", "0"):
        return Check("plugin enabled", FAIL, "HERMES_SAFE_MODE is set: no plugin loads",
                     "Unset HERMES_SAFE_MODE.")
    if PLUGIN_NAME in disabled:
        return Check("plugin enabled", FAIL, "codex-runtime is in plugins.disabled",
                     "Remove it from plugins.disabled, then `hermes plugins enable codex-runtime`.")
    if PLUGIN_NAME not in enabled:
        return Check("plugin enabled", FAIL, "installed but not enabled",
                     "Run `hermes plugins enable codex-runtime`.")
    return Check("plugin enabled", OK, "discovered through its entry point and enabled")


def _runtime_check(model: dict[str, Any]) -> Check:
    try:
        wanted = runtime_requested(model)
    except SettingError as exc:
        return Check("openai_runtime", FAIL, str(exc),
                     "Set `model.openai_runtime: codex_app_server` in ~/.hermes/config.yaml.")
    if not wanted:
        current = model.get("openai_runtime")
        return Check("openai_runtime", FAIL,
                     f"model.openai_runtime is {current!r}: turns use Hermes' own runtime"
                     if current else "model.openai_runtime is not set",
                     "Set `model.openai_runtime: codex_app_server` (or type "
                     "`/codex-runtime codex_app_server` in Hermes); it applies to new sessions.")
    return Check("openai_runtime", OK, "codex_app_server")


def _activation_check(model: dict[str, Any]) -> Check:
    from hermes_codex_runtime.hermes.activation import wrap_resolver
    from hermes_codex_runtime.hermes.probe import symbol

    if not runtime_requested_safe(model):
        return Check("activation", WARN, "not checked: model.openai_runtime is off",
                     "Set `model.openai_runtime: codex_app_server`.")
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
                     "Set model.provider to openai-codex (codex owns the login).")
    mode = runtime.get("api_mode") if isinstance(runtime, dict) else None
    if mode == "codex_app_server":
        return Check("activation", OK, f"provider {runtime.get('provider')!r} runs on codex")
    return Check("activation", FAIL,
                 f"provider {provider!r} resolves to api_mode {mode!r}, not codex_app_server",
                 "Use model.provider openai-codex / openai-api / openai, or set "
                 "`model.api_mode: codex_app_server`.")


def runtime_requested_safe(model: dict[str, Any]) -> bool:
    """``runtime_requested`` that never raises."""
    try:
        return runtime_requested(model)
    except SettingError:
        return False
