"""The PluginManager: our hookspecs, the defaults, third-party plugins, then the host.

Registration order decides who answers a ``firstresult`` hook first (pluggy calls the most
recently registered implementation first, after every ``tryfirst`` one):

1. :mod:`hermes_codex_runtime.defaults` (``trylast``: answers only when nobody else does);
2. third-party plugins from the ``codex_runtime`` entry-point group (a policy that must override
   the host marks its hooks ``tryfirst``);
3. the host adapter(s) passed in — so the host answers before an ordinary third-party plugin, and a
   third-party plugin can turn a host "decline" into "accept" only with ``tryfirst``, by design.

``CODEX_RUNTIME_LOAD_PLUGINS`` chooses which entry points load: unset loads all, a comma-separated
list loads those names, an empty value loads none (the test suite uses that).

Once everything is registered, pluggy's ``check_pending()`` looks for implementations of hooks
that do not exist: a misspelt hook (``codex_aproval``) would otherwise register silently and
never be called — an approval policy that never runs. Each is one warning naming the plugin, the
hook and the nearest real hook name; the plugin's other hooks keep working.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
from collections.abc import Iterable
from importlib import metadata
from typing import Any

import pluggy

from hermes_codex_runtime import defaults, hookspecs

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "codex_runtime"
LOAD_PLUGINS_ENV = "CODEX_RUNTIME_LOAD_PLUGINS"


def _third_party() -> list[tuple[str, Any]]:
    selection = os.environ.get(LOAD_PLUGINS_ENV)
    wanted = None if selection is None else {n.strip() for n in selection.split(",") if n.strip()}
    if wanted is not None and not wanted:
        return []  # none wanted: skip the (slow) scan of every installed distribution
    loaded = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if wanted is not None and entry.name not in wanted:
            continue
        try:
            loaded.append((entry.name, entry.load()))
        except Exception as exc:
            _report_broken(entry.name, exc)
    return loaded


_reported: set[str] = set()


def _report_broken(name: str, exc: BaseException) -> None:
    """One warning per broken plugin per process; the plugin is skipped, the turn goes on."""
    if name in _reported:
        return
    _reported.add(name)
    log.warning("codex-runtime plugin %r is broken and was skipped: %s: %s", name,
                type(exc).__name__, exc)


def make_plugin_manager(hosts: Iterable[Any] = (), *,
                        load_entry_points: bool = True) -> pluggy.PluginManager:
    """A PluginManager with the hookspecs, the defaults, third-party plugins and ``hosts``."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(defaults, name="codex_runtime.defaults")
    if load_entry_points:
        for name, plugin in _third_party():
            if pm.is_registered(plugin):
                continue
            try:
                pm.register(plugin, name=f"entrypoint:{name}")
            except Exception as exc:  # e.g. a hook whose signature the spec does not have
                _report_broken(name, exc)
                with contextlib.suppress(Exception):
                    pm.unregister(name=f"entrypoint:{name}")
    for index, host in enumerate(hosts):
        pm.register(host, name=f"host:{index}:{type(host).__name__}")
    _check_pending(pm)
    return pm


def _check_pending(pm: pluggy.PluginManager) -> None:
    """Warn (once per plugin and hook) about implementations of hooks that have no spec."""
    try:
        pm.check_pending()
        return
    except pluggy.PluginValidationError:
        pass
    known = [name for name in vars(pm.hook) if getattr(pm.hook, name).has_spec()]
    for name, caller in sorted(vars(pm.hook).items()):
        if caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if impl.optionalhook or (impl.plugin_name, name) in _unknown_reported:
                continue
            _unknown_reported.add((impl.plugin_name, name))
            nearest = difflib.get_close_matches(name, known, n=1)
            log.warning("codex-runtime plugin %r implements %r, which is not a codex-runtime "
                        "hook, so it is never called%s", _plugin_label(impl.plugin_name), name,
                        f" (did you mean {nearest[0]!r}?)" if nearest else "")


_unknown_reported: set[tuple[str, str]] = set()


def _plugin_label(registered_name: str) -> str:
    """The name a user knows a plugin by: its entry point's name, else pluggy's."""
    return registered_name.removeprefix("entrypoint:")
