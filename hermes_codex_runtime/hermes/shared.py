"""The one :class:`~hermes_codex_runtime.runtime.CodexRuntime` of this Hermes process: built on
the first codex turn with :class:`~.host.HermesHost` as its host plugin and a pool that
publishes its app-servers for ``status``; and, once per process, the reaping of app-server trees
a Hermes process that died left behind.
"""

from __future__ import annotations

import logging
import threading

from hermes_codex_runtime.hermes.host import HermesHost
from hermes_codex_runtime.hermes.paths import app_servers_dir, registry_path
from hermes_codex_runtime.plugins import make_plugin_manager
from hermes_codex_runtime.pool import ServerPool
from hermes_codex_runtime.runtime import CodexRuntime
from hermes_codex_runtime.wire.registry import ProcessRegistry

log = logging.getLogger("hermes_codex_runtime.hermes")

_runtime: CodexRuntime | None = None
_runtime_lock = threading.Lock()
_orphans_checked = False


def shared_runtime() -> CodexRuntime:
    """The process-wide runtime (one codex session per agent), built on first use."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = CodexRuntime(make_plugin_manager([HermesHost()]),
                                    pool=ServerPool(status_dir=app_servers_dir()))
        return _runtime


def reap_orphans_once() -> list[int]:
    """Once per process: reap app-server trees left behind by a Hermes process that died."""
    global _orphans_checked
    with _runtime_lock:
        if _orphans_checked:
            return []
        _orphans_checked = True
    try:
        return ProcessRegistry(registry_path()).reap_orphans()
    except Exception:
        log.warning("codex-runtime: checking for orphaned codex processes failed",
                    exc_info=True)
        return []
