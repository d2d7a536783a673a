"""What Codex Replay needs from Hermes, as plain values: ``HERMES_HOME``, the codex binary, home
and provider the plugin would use, the default model (``model.codex_model``, else Hermes'
``model.default`` as codex names it), the turn timeout, the process registry, and the price
table (``$HERMES_HOME/codex-runtime/prices.yaml``, USD per million tokens per model)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import yaml

from hermes_codex_runtime.replay.control import ReplayContext, ReplayError


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


def replay_context(prices_file: str | None = None) -> ReplayContext:
    """The context from Hermes' config (bad plugin keys are a :class:`ReplayError`)."""
    from hermes_codex_runtime.hermes.host import hermes_model
    from hermes_codex_runtime.hermes.paths import prices_path, registry_path
    from hermes_codex_runtime.hermes.settings import (
        SettingError,
        hermes_home,
        model_section,
        plugin_settings,
    )

    try:
        settings = plugin_settings()
    except SettingError as exc:
        raise ReplayError(str(exc)) from exc
    home = hermes_home()
    default = settings.codex_model or hermes_model(
        SimpleNamespace(model=model_section().get("default")))
    prices = load_prices(prices_file or prices_path())
    from hermes_codex_runtime.hermes.settings import load_config
    from hermes_codex_runtime.replay.controller import controller_settings

    port, idle = controller_settings(load_config())
    return ReplayContext(hermes_home=home, codex_bin=settings.codex_bin,
                         codex_home=settings.codex_home,
                         model_provider=settings.codex_model_provider, default_model=default,
                         turn_timeout=settings.turn_timeout, registry_path=str(registry_path()),
                         prices=prices, controller_port=port, controller_idle_timeout=idle)
