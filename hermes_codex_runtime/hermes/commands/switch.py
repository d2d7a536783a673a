"""Switching the codex runtime on and off — and saying exactly what changed, and when it applies.

* ``hermes-codex-runtime enable`` / ``disable``: the plugin in ``plugins.enabled`` and
  ``model.openai_runtime`` in config.yaml (:mod:`..config.file`: a backup first; ``--print``
  shows the lines and writes nothing). ``disable`` is also what to run before uninstalling: a
  config that still asks for ``codex_app_server`` without the plugin fails every turn.
* ``/codex-runtime`` inside Hermes: both host lines ship their own command, which looks for
  ``codex`` on ``PATH`` only, rewrites ``~/.codex/config.toml`` without saying so and says
  "effective on next session" although the very next message switches. The plugin takes over
  its ``apply`` (``hermes_cli.codex_runtime_switch.apply``, which the CLI and the gateway
  both call): the plugin's own binary resolution, codex's config never touched, and the truth
  about when it applies — the next message (the CLI re-resolves its runtime for every message;
  the gateway drops the session's cached agent on a change).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from hermes_codex_runtime.hermes import fixes
from hermes_codex_runtime.hermes.commands.provider_switch import (
    Mismatch,
    default_codex_model,
    forget_record,
    load_record,
    mismatch,
    model_of,
    provider_edit,
    restore_edit,
    save_record,
    what_it_takes,
)
from hermes_codex_runtime.hermes.config.file import (
    ConfigChange,
    ConfigFileError,
    config_path,
    read_config_file,
    update_config_file,
)
from hermes_codex_runtime.hermes.config.settings import (
    RUNTIME_VALUE,
    SettingError,
    model_section,
    plugin_settings,
    runtime_requested,
)
from hermes_codex_runtime.hermes.symbols.patch import original_of, wrap_in_place
from hermes_codex_runtime.hermes.symbols.probe import symbol

log = logging.getLogger("hermes_codex_runtime.hermes")
PLUGIN_NAME = "codex-runtime"


# ---------------------------------------------------------------- config.yaml edits


def _enable_edit(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    plugins = data.get("plugins")
    if not isinstance(plugins, dict):
        plugins = data["plugins"] = {}
    enabled = plugins.get("enabled")
    if not isinstance(enabled, list):
        enabled = plugins["enabled"] = []
    if PLUGIN_NAME not in enabled:
        enabled.append(PLUGIN_NAME)
        lines.append(f"plugins.enabled: add {PLUGIN_NAME}")
    disabled = plugins.get("disabled")
    if isinstance(disabled, list) and PLUGIN_NAME in disabled:
        disabled.remove(PLUGIN_NAME)
        lines.append(f"plugins.disabled: remove {PLUGIN_NAME}")
    model = model_of(data)
    if model.get("openai_runtime") != RUNTIME_VALUE:
        model["openai_runtime"] = RUNTIME_VALUE
        lines.append(f"model.openai_runtime: {RUNTIME_VALUE}")
    return lines


def _disable_edit(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    model = data.get("model")
    if isinstance(model, dict):
        if str(model.get("openai_runtime") or "auto").strip().lower() != "auto":
            model["openai_runtime"] = "auto"
            lines.append("model.openai_runtime: auto")
        if model.get("api_mode") == RUNTIME_VALUE:
            del model["api_mode"]
            lines.append("model.api_mode: removed (it was codex_app_server)")
    plugins = data.get("plugins")
    enabled = plugins.get("enabled") if isinstance(plugins, dict) else None
    if isinstance(enabled, list) and PLUGIN_NAME in enabled:
        enabled.remove(PLUGIN_NAME)
        lines.append(f"plugins.enabled: remove {PLUGIN_NAME}")
    return lines


def _report(change: ConfigChange, print_only: bool, verb: str) -> None:
    if not change.lines:
        print(f"nothing to change: {change.path} already has the codex runtime {verb}")
        return
    if print_only:
        print(f"what would change in {change.path} (nothing was written):")
    else:
        print(f"{change.path}: codex runtime {verb}")
    for line in change.lines:
        print(f"  {line}")
    if change.backup is not None:
        print(f"backup of the previous file: {change.backup}"
              + (" (it keeps the comments, which the rewritten file does not)"
                 if change.comments_dropped else ""))


def _edit(edit: Any, print_only: bool, verb: str) -> int:
    try:
        change = update_config_file(edit, dry_run=print_only)
    except ConfigFileError as exc:
        print(f"{fixes.SCRIPT}: {exc}\nconfig.yaml does not parse, so nothing was changed: fix "
              f"it by hand first (`{fixes.own_command()} doctor` shows where).")
        return 2
    except OSError as exc:
        print(f"{fixes.SCRIPT}: could not write {config_path()}: {exc}")
        return 1
    _report(change, print_only, verb)
    return 0


def enable(print_only: bool = False, provider: bool = False) -> int:
    """``hermes-codex-runtime enable [--provider]``: the plugin and the runtime on. A config
    whose provider or model cannot run on codex is changed only with consent (``--provider``,
    or yes at the prompt on a terminal); otherwise nothing is written and the command says what
    it would take (:mod:`.provider_switch`)."""
    try:
        found = mismatch(read_config_file() or {})
    except ConfigFileError:
        found = Mismatch(None, None)  # _edit reports it
    new_model = default_codex_model() if found.model else None
    if found and not provider:
        if not print_only and sys.stdin.isatty() and sys.stdout.isatty():
            answer = input(f"{what_it_takes(found, new_model)}\nSwitch now? [y/N] ")
            provider = answer.strip().lower() in ("y", "yes")
        if not provider:
            print(f"{fixes.SCRIPT}: nothing changed — {what_it_takes(found, new_model)}\n"
                  f"To run turns on codex: `{fixes.own_command()} enable --provider`.")
            return 2
    record: dict[str, Any] = {}

    def edit(data: dict[str, Any]) -> list[str]:
        return _enable_edit(data) + provider_edit(data, record, new_model)

    status = _edit(edit, print_only, "on")
    if status == 0 and not print_only:
        if record:
            save_record({**load_record(), **record})
        print(f"next: `{fixes.login_command()}` (codex owns its login), then "
              f"`{fixes.own_command()} doctor`; new messages run on codex from now on.")
    return status


def disable(print_only: bool = False) -> int:
    """``hermes-codex-runtime disable``: turns go back to Hermes' own runtime, with the provider
    and model ``enable --provider`` replaced."""
    record = load_record()

    def edit(data: dict[str, Any]) -> list[str]:
        return _disable_edit(data) + restore_edit(data, record)

    status = _edit(edit, print_only, "off")
    if status == 0 and not print_only:
        forget_record()
        print("turns now run on Hermes' own runtime, which needs its own credential for its "
              "provider (`hermes model`); the model.codex_* keys are left in place and do "
              "nothing without the plugin. To uninstall: "
              f"`{fixes.pip_command('uninstall hermes-codex-runtime openai-codex-cli-bin')}`.")
    return status


# ---------------------------------------------------------------- /codex-runtime


def install_switch() -> bool:
    """Take over ``hermes_cli.codex_runtime_switch.apply`` (the host's ``/codex-runtime``)."""
    name = "hermes_cli.codex_runtime_switch"

    def make(original: Any) -> Any:
        def apply(config: dict[str, Any], new_value: str | None, *,
                  persist_callback: Any = None) -> Any:
            lines, success, changed = runtime_switch(config, new_value)
            return _status(sys.modules[name], success=success, new_value=new_value,
                           message="\n".join(lines), changed=changed)

        return apply

    return wrap_in_place(name, "apply", make,
                         feature="/codex-runtime with the plugin's codex (the host's own stays)")


def _status(module: Any, *, success: bool, new_value: str | None, message: str,
            changed: bool) -> Any:
    make = getattr(module, "CodexRuntimeStatus", None)
    if not callable(make):  # pragma: no cover - both host lines have it
        return message
    return make(success=success, new_value=new_value, old_value=None, message=message,
                requires_new_session=changed)


def runtime_switch(config: dict[str, Any], new_value: str | None) -> tuple[list[str], bool, bool]:
    """``/codex-runtime [auto|codex_app_server]``: the lines to show, whether it succeeded,
    and whether config.yaml changed. Writes only ``model.openai_runtime`` (with a backup), and
    never a config.yaml that does not parse."""
    path = config_path()
    try:
        read_config_file(path)
    except ConfigFileError as exc:
        return [f"openai_runtime: not changed — {exc}",
                "config.yaml does not parse: fix it by hand first (nothing was written)."], \
            False, False
    current = _current(path)
    if new_value is None:
        return [f"openai_runtime: {current} (in {path})", _codex_line(),
                f"your next message: {next_runtime()}"], True, False
    if new_value == RUNTIME_VALUE:
        codex = _codex_line()
        if codex.startswith("codex: not usable"):
            return [f"openai_runtime: not changed ({current}) — {codex[len('codex: '):]}"], \
                False, False
    if new_value == current:
        return [f"openai_runtime: already {current} (in {path})",
                f"your next message: {next_runtime()}"], True, False

    def edit(data: dict[str, Any]) -> list[str]:
        model = data.get("model")
        if not isinstance(model, dict):
            model = data["model"] = {} if model is None else {"default": model}
        model["openai_runtime"] = new_value
        return [f"openai_runtime: {current} → {new_value}"]

    try:
        change = update_config_file(edit, path=path)
    except OSError as exc:
        return [f"openai_runtime: not changed — could not write {path}: {exc}"], False, False
    model = config.get("model")
    if isinstance(model, dict):
        model["openai_runtime"] = new_value  # the caller's copy agrees with the file
    lines = [f"{change.lines[0]} (written to {path}"
             + (f"; backup {change.backup.name})" if change.backup else ")")]
    if new_value == RUNTIME_VALUE:
        lines.append(_codex_line())
        lines.append("codex's own config.toml is left as it is.")
    lines.append(f"from your next message: {next_runtime()}")
    return lines, True, True


def _current(path: Any) -> str:
    try:
        value = model_section(read_config_file(path) or {}).get("openai_runtime")
    except ConfigFileError:
        value = None
    return str(value).strip() if isinstance(value, str) and value.strip() else "auto"


def _codex_line() -> str:
    from hermes_codex_runtime.wire import WireError, probe_version, resolve_codex_binary

    try:
        setting = plugin_settings().codex_bin
    except SettingError as exc:
        return f"codex: not usable — {exc}"
    try:
        binary = resolve_codex_binary(setting)
        version = ".".join(map(str, probe_version(binary)))
    except WireError as exc:
        return (f"codex: not usable — {getattr(exc, 'problem', exc)} Install the tested codex "
                f"with `{fixes.install_codex_command()}`, or set "
                f"{fixes.config_ref('model.codex_bin')}.")
    return f"codex: {binary.path} (codex {version}, from {binary.source})"


def next_runtime() -> str:
    """Where a message sent now runs: config.yaml read as activation will read it when Hermes
    resolves the configured provider for that message."""
    from hermes_codex_runtime.hermes.config.activation import runtime_applies

    model = model_section()
    provider = str(model.get("provider") or "") or None
    try:
        on_codex = runtime_requested(model) and runtime_applies(None, model)
    except SettingError as exc:
        return f"Hermes' own runtime — {exc}"
    if on_codex:
        return f"codex app-server (provider {provider or 'openai-codex'})"
    text = f"Hermes' own runtime (provider {provider or '?'})"
    problem = _host_runtime_problem(provider)
    if problem:
        problem = problem.rstrip(". ")
        login = "" if "`hermes " in problem or "hermes auth" in problem else \
            " Log in for it with `hermes model`, or"
        text += (f" — which cannot run here: {problem}.{login or ' Or'} switch back with "
                 "`/codex-runtime codex_app_server`")
    return text


def _host_runtime_problem(provider: str | None) -> str:
    """Why Hermes' own runtime could not resolve ``provider`` now ('' when it can)."""
    resolver = symbol("hermes_cli.runtime_provider", "resolve_runtime_provider",
                      feature="checking Hermes' own runtime")
    original = original_of(resolver)
    if not callable(original):
        return ""
    try:
        original(requested=provider)
    except Exception as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ""
