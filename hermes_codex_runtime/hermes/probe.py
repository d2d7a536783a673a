"""Feature probes for the host: look a Hermes symbol up, or learn that it is missing.

Nothing upstream is a stable API, so every symbol the adapter touches goes through :func:`symbol`:
a missing module or attribute logs ONE clear line (per symbol, per process) naming what stops
working, and returns ``None`` so the caller can leave the host's own behaviour in place.
``COMPAT_MANIFEST.md`` lists each of them; a test walks that list against the installed host.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any

log = logging.getLogger("hermes_codex_runtime.hermes")
_reported: set[str] = set()
_lock = threading.Lock()


def symbol(module: str, name: str, *, feature: str = "") -> Any:
    """``module.name`` from the host, or ``None`` (reported once) when it is missing."""
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # ImportError, or the host module failing to import
        _report(f"{module}", f"cannot import {module} ({type(exc).__name__}: {exc})", feature)
        return None
    value = getattr(mod, name, None)
    if value is None and not hasattr(mod, name):
        _report(f"{module}.{name}", f"{module}.{name} is missing", feature)
    return value


def _report(key: str, what: str, feature: str) -> None:
    with _lock:
        if key in _reported:
            return
        _reported.add(key)
    suffix = f"; {feature} is unavailable" if feature else ""
    log.warning("codex-runtime: this Hermes build is not compatible here: %s%s", what, suffix)


def report_missing(name: str, feature: str) -> None:
    """Report (once) a host attribute that :func:`symbol` cannot look up — an instance
    attribute such as ``HermesCLI()._approval_state`` — as missing."""
    _report(name, f"{name} is missing", feature)
