"""Every file and directory the plugin keeps: under ``$HERMES_HOME/codex-runtime/``, and in
the user's cache directory.

One function per place, so the layout is written down once: the process registry (orphan
reaping), the thread bindings (where the host has no session database), the app-server status
files (``status``), and Codex Replay's runs, controllers and price table in the Hermes home; the
verdicts of the sandbox-walls probe in the user's cache, shared by every Hermes home (and
profile) of the user, since they are about a codex binary on this machine, not about a home.
(The Hermes paths the walls protect are :mod:`.walled`'s.)
"""

from __future__ import annotations

import os
from pathlib import Path

from hermes_codex_runtime.hermes.config.settings import hermes_home


def plugin_home() -> Path:
    """``$HERMES_HOME/codex-runtime``: the plugin's own corner of the Hermes home."""
    return hermes_home() / "codex-runtime"


def registry_path() -> Path:
    """Where this host records the codex processes it spawned (for orphan reaping)."""
    return plugin_home() / "processes.json"


def bindings_path() -> Path:
    """Hermes session id → codex thread, where the session database has no place for it."""
    return plugin_home() / "threads.json"


def app_servers_dir() -> Path:
    """Where each Hermes process publishes its app-servers for ``status`` (one file each)."""
    return plugin_home() / "app-servers"


def replays_dir() -> Path:
    """Codex Replay's runs."""
    return plugin_home() / "replays"


def controllers_dir() -> Path:
    """Codex Replay's web controllers (one directory per controller session)."""
    return plugin_home() / "controllers"


def prices_path() -> Path:
    """Codex Replay's price table (USD per million tokens per model)."""
    return plugin_home() / "prices.yaml"


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hermes-codex-runtime`` (default ``~/.cache/hermes-codex-runtime``):
    what the plugin keeps for every Hermes home of the user."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / \
        "hermes-codex-runtime"


def walls_cache_path() -> Path:
    """Where the verdict of the sandbox probe is kept per codex binary (by its content)."""
    return user_cache_dir() / "walls.json"
