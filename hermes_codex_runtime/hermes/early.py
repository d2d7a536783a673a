"""The activation in place before Hermes loads its plugins.

Hermes 0.22 loads plugins in a background thread, and its quiet one-shot path (``hermes chat
-q``, resumes included) resolves the runtime before waiting for them: when the plugin's
``register()`` has not run yet, Hermes' own resolver refuses ("No Codex credentials stored") and
the CLI exits — in about one run of three, more when another plugin loads slowly. The wheel
installs a one-line ``hermes_codex_runtime.pth`` that imports this module when Python starts; it
watches for one import, ``hermes_cli.runtime_provider``, and the moment that module has run it
installs the activation (:func:`.activation.install_activation`) — if ``config.yaml`` enables the
plugin as Hermes' loader reads it (:func:`.settings.plugin_enabled`). The plugin's ``register()``
later finds it installed. In any other Python program it costs one finder that answers ``None``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself is not imported at start-up: it costs milliseconds
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

TARGET = "hermes_cli.runtime_provider"


class _Watch:
    """A meta-path finder that finds nothing itself: it wraps the loader of :data:`TARGET`."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name != TARGET:
            return None
        _stop()
        spec: ModuleSpec | None = None
        for finder in list(sys.meta_path):
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if loader is None or not callable(run):
            return spec

        def exec_module(module: ModuleType) -> None:
            run(module)
            _activate()

        loader.exec_module = exec_module  # type: ignore[method-assign]  # this one spec's loader
        return spec


_watch = _Watch()


def _stop() -> None:
    if _watch in sys.meta_path:
        sys.meta_path.remove(_watch)


def _activate() -> None:
    """Install the activation when the plugin is enabled; never raise into the import."""
    try:
        from hermes_codex_runtime.hermes.activation import install_activation
        from hermes_codex_runtime.hermes.settings import plugin_enabled

        if plugin_enabled():
            install_activation()
    except Exception:
        import logging

        logging.getLogger("hermes_codex_runtime.hermes").debug(
            "codex-runtime: the early activation failed; register() installs it", exc_info=True)


def watch() -> None:
    """Start watching (idempotent); a no-op once ``hermes_cli.runtime_provider`` is imported."""
    if TARGET in sys.modules:
        return
    if _watch not in sys.meta_path:
        sys.meta_path.insert(0, _watch)


watch()
