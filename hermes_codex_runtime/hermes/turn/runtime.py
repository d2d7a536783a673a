"""The one :class:`~hermes_codex_runtime.runtime.CodexRuntime` of this Hermes process: built on
the first codex turn with :class:`~.hooks.HermesHost` as its host plugin and a pool that
publishes its app-servers for ``status``; and, once per process, the reaping of app-server trees
a Hermes process that died left behind; and the agent behind each recent session key, for
``/codex-status``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from hermes_codex_runtime.hermes.config.paths import app_servers_dir, registry_path
from hermes_codex_runtime.hermes.symbols.probe import symbol
from hermes_codex_runtime.hermes.turn.hooks import HermesHost
from hermes_codex_runtime.plugins import make_plugin_manager
from hermes_codex_runtime.pool import ServerPool
from hermes_codex_runtime.runtime import CodexRuntime
from hermes_codex_runtime.wire.registry import ProcessRegistry

log = logging.getLogger("hermes_codex_runtime.hermes")

_runtime: CodexRuntime | None = None
_runtime_lock = threading.Lock()
_orphans_checked = False
_recent: dict[str, weakref.ReferenceType[Any]] = {}
_recent_lock = threading.Lock()


def shared_runtime() -> CodexRuntime:
    """The process-wide runtime (one codex session per agent), built on first use."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = CodexRuntime(make_plugin_manager([HermesHost()]),
                                    pool=ServerPool(status_dir=app_servers_dir()))
        return _runtime


def end_idle_app_servers() -> int:
    """End now the app-servers no session uses any more (see the package's function)."""
    with _runtime_lock:
        runtime = _runtime
    return runtime.pool.end_idle() if runtime is not None else 0


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


def remember_agent(agent: Any, session_key: str) -> None:
    """Note the agent behind a session key (the slash command reports on it)."""
    try:
        ref = weakref.ref(agent)
    except TypeError:
        return
    with _recent_lock:
        _recent[session_key or ""] = ref


def current_agent() -> Any:
    """The agent of the session asking. With a session key, only that session's agent — never
    another user's in a multi-user gateway. Without one (a bare CLI), the only session there is,
    if there is exactly one."""
    key = ""
    get_key = symbol("tools.approval", "get_current_session_key")
    if callable(get_key):
        try:
            key = str(get_key(default="") or "")
        except Exception:
            key = ""
    with _recent_lock:
        if key:
            ref = _recent.get(key)
        else:
            live = {id(agent): r for r in _recent.values() if (agent := r()) is not None}
            ref = next(iter(live.values())) if len(live) == 1 else None
    return ref() if ref is not None else None
