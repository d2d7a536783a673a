"""What a turn's settings take from this process's files, read once: :func:`standing`.

Every turn needs the plugin's keys of ``config.yaml`` (validated), the sandbox its terminal
security mode implies, the walls' paths (Hermes' credentials and conversations, the other
profiles, the SSH keys in ``~/.ssh``, the places kept read-only), the protected places an
approval checks, the directories in the Hermes home codex writes into (kept private:
:mod:`.private_places`), and the version Hermes gives itself. None of that changes between turns
unless a file does, so it is computed once and kept while ``config.yaml``, codex's
``config.toml``, the ``~/.ssh`` directory and Hermes' ``profiles`` directory keep their
modification times (and the environment variables it reads stay the same): four ``stat``
calls per turn instead of two config loads (Hermes deep-copies its whole config on each), a
TOML parse, directory listings and a few dozen path resolutions.
A bad value is never cached: its :class:`~.settings.SettingError` is raised on every turn.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_codex_runtime.hermes.config import paths, private_places, protected, walled
from hermes_codex_runtime.hermes.config.settings import (
    PluginSettings,
    hermes_home,
    loaded_config,
    plugin_settings,
    sandbox_for_security_mode,
)
from hermes_codex_runtime.hermes.symbols.probe import host_version
from hermes_codex_runtime.wire.codex_config import codex_home_path

#: The environment variables the standing settings read (besides the files).
ENVIRONMENT = ("HERMES_HOME", "CODEX_HOME", "HERMES_TERMINAL_SECURITY_MODE", "HOME",
               *private_places.TEMP_VARIABLES)


@dataclass(frozen=True, slots=True)
class Standing:
    """The per-process part of a turn's settings."""

    config: dict[str, Any]  # Hermes' merged config (shared: never mutate it)
    plugin: PluginSettings
    sandbox: str | None  # model.codex_sandbox, else what the terminal security mode implies
    deny_read: tuple[str, ...]
    protect: tuple[str, ...]
    protected_roots: tuple[str, ...]
    private_places: tuple[str, ...]  # where in the Hermes home codex writes
    client_version: str
    registry_path: str
    walls_cache: str


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


def _key() -> tuple[Any, ...]:
    config = hermes_home() / "config.yaml"
    return (str(config), _stat(config), tuple(os.environ.get(name) for name in ENVIRONMENT))


def _depends(plugin: PluginSettings) -> tuple[Any, ...]:
    """The other files a standing value was derived from, as they are now."""
    return (_stat(codex_home_path(plugin.codex_home) / "config.toml"),
            _stat(Path("~/.ssh").expanduser()), _stat(walled.hermes_roots()[-1] / "profiles"))


_lock = threading.Lock()
_cached: tuple[tuple[Any, ...], tuple[Any, ...], Standing] | None = None


def standing() -> Standing:
    """The standing settings, recomputed only when a file they come from changed. Raises
    :class:`~.settings.SettingError` for a bad ``config.yaml`` value."""
    global _cached
    key = _key()
    cached = _cached
    if cached is not None and cached[0] == key and cached[1] == _depends(cached[2].plugin):
        return cached[2]
    with _lock:
        cached = _cached
        if cached is not None and cached[0] == key and cached[1] == _depends(cached[2].plugin):
            return cached[2]
        value = _compute()
        _cached = (key, _depends(value.plugin), value)
        return value


def _compute() -> Standing:
    config = loaded_config()
    plugin = plugin_settings(config)
    return Standing(
        config=config, plugin=plugin,
        sandbox=plugin.sandbox or sandbox_for_security_mode(config),
        deny_read=walled.deny_read(plugin), protect=walled.protect(plugin),
        protected_roots=tuple(protected.protected_roots(hermes_home(), plugin.codex_home)),
        private_places=private_places.places(plugin),
        client_version=host_version(), registry_path=str(paths.registry_path()),
        walls_cache=str(paths.walls_cache_path()))
