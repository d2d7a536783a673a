"""What Codex Replay needs from Hermes, as plain values: the sessions to replay (``state.db`` and
its exports, :mod:`.sessions`), where runs and web controllers live (:mod:`..config.paths`), the
codex
binary, home and provider the plugin would use, where its sessions run (``model.codex_app_server``
with its token files: replays run where the user's sessions do), the default model
(``model.codex_model``, else Hermes' ``model.default`` as codex names it), the turn timeout, the
process registry, the price table (``$HERMES_HOME/codex-runtime/prices.yaml``, USD per million
tokens per model) and the web controller's settings (``codex_replay.port`` /
``codex_replay.idle_timeout`` in config.yaml, or ``HERMES_CODEX_REPLAY_PORT`` /
``HERMES_CODEX_REPLAY_IDLE_TIMEOUT``; the environment wins)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import yaml

from hermes_codex_runtime.replay.control import ReplayContext, ReplayError
from hermes_codex_runtime.replay.controller import DEFAULT_IDLE_TIMEOUT, DEFAULT_PORT

#: The environment variable that names the web controller's session (its tests and launchers).
CONTROLLER_ID_ENV = "HERMES_CODEX_REPLAY_CONTROLLER_ID"


def load_prices(path: Any) -> dict[str, Any]:
    """A price table file: ``{model: {input, cache_read, cache_write, output}}`` (USD per 1M)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        raise ReplayError(f"cannot read the price table {path}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, dict) and all(
                isinstance(x, int | float) and not isinstance(x, bool) and x >= 0
                for x in v.values()) for k, v in data.items()):
        raise ReplayError(f"the price table {path} must map model names to "
                          "{input, cache_read, cache_write, output} numbers (USD per 1M tokens)")
    return data


def controller_settings(config: dict[str, Any] | None) -> tuple[int, float]:
    """``(port, idle timeout)`` from ``codex_replay`` in Hermes' config and the environment
    (``HERMES_CODEX_REPLAY_PORT``, ``HERMES_CODEX_REPLAY_IDLE_TIMEOUT``; the environment
    wins). Bad values are a :class:`ReplayError` naming the key."""
    section = (config or {}).get("codex_replay") or {}
    if not isinstance(section, dict):
        raise ReplayError("codex_replay in config.yaml must be a mapping")
    port: Any = os.environ.get("HERMES_CODEX_REPLAY_PORT") or section.get("port", DEFAULT_PORT)
    idle: Any = os.environ.get("HERMES_CODEX_REPLAY_IDLE_TIMEOUT") or section.get(
        "idle_timeout", DEFAULT_IDLE_TIMEOUT)
    try:
        port_number = int(port)
    except (TypeError, ValueError):
        port_number = -1
    if isinstance(port, bool) or not 0 <= port_number <= 65535:
        raise ReplayError(f"codex_replay.port (or HERMES_CODEX_REPLAY_PORT) must be a port "
                          f"number, got {port!r}")
    try:
        seconds = float(idle)
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(idle, bool) or not 0 < seconds <= 7 * 86400:
        raise ReplayError(f"codex_replay.idle_timeout (or HERMES_CODEX_REPLAY_IDLE_TIMEOUT) must "
                          f"be seconds, at most a week, got {idle!r}")
    return port_number, seconds


def replay_context(prices_file: str | None = None) -> ReplayContext:
    """The context from Hermes' config (bad plugin keys are a :class:`ReplayError`)."""
    from hermes_codex_runtime.hermes.config.paths import (
        controllers_dir,
        prices_path,
        registry_path,
        replays_dir,
    )
    from hermes_codex_runtime.hermes.config.settings import (
        SettingError,
        hermes_home,
        load_config,
        model_section,
        plugin_settings,
    )
    from hermes_codex_runtime.hermes.replay.sessions import HermesSessions
    from hermes_codex_runtime.hermes.turn.hooks import hermes_model

    try:
        settings = plugin_settings()
    except SettingError as exc:
        raise ReplayError(str(exc)) from exc
    default = settings.codex_model or hermes_model(
        SimpleNamespace(model=model_section().get("default")))
    prices = load_prices(prices_file or prices_path())
    port, idle = controller_settings(load_config())
    return ReplayContext(sources=HermesSessions(hermes_home()), runs_dir=replays_dir(),
                         controllers_dir=controllers_dir(), codex_bin=settings.codex_bin,
                         codex_home=settings.codex_home,
                         model_provider=settings.codex_model_provider, default_model=default,
                         turn_timeout=settings.turn_timeout, registry_path=str(registry_path()),
                         app_server=settings.app_server, prices=prices, controller_port=port,
                         controller_idle_timeout=idle,
                         controller_id=os.environ.get(CONTROLLER_ID_ENV) or None)
