"""What the plugin does the moment a Hermes module has been imported — before Hermes loads its
plugins, or before anyone uses the module.

Hermes 0.22 loads plugins in a background thread, and its quiet one-shot path (``hermes chat
-q``, resumes included) resolves the runtime before waiting for them: when the plugin's
``register()`` has not run yet, Hermes' own resolver refuses ("No Codex credentials stored") and
the CLI exits — in about one run of three, more when another plugin loads slowly. The wheel
installs a one-line ``hermes_codex_runtime.pth`` that imports this module when Python starts; it
follows two imports (:func:`..after_import.after_import`):

* ``hermes_cli.runtime_provider``: the activation (:func:`..config.activation.install_activation`);
* ``run_agent``: an ``AIAgent`` built for codex gets its app-server started while Hermes is still
  composing the first turn (:func:`.seams.follow_agent_construction`);

each only if ``config.yaml`` enables the plugin as Hermes' loader reads it
(:func:`..config.settings.plugin_enabled`); ``register()`` later finds the activation installed (and
installs it itself where no ``.pth`` ran). In any other Python program this costs one finder
that answers ``None``.
"""

from __future__ import annotations

import sys

from hermes_codex_runtime.hermes.after_import import after_import, watching

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def _when_enabled(what: str, install: Callable[[], object]) -> Callable[[], None]:
    """``install`` when the plugin is enabled; never raises into the import."""
    def follow() -> None:
        try:
            from hermes_codex_runtime.hermes.config.settings import plugin_enabled

            if plugin_enabled():
                install()
        except Exception:
            import logging

            logging.getLogger("hermes_codex_runtime.hermes").debug(
                "codex-runtime: following the import of %s failed", what, exc_info=True)
    return follow


def _activation() -> object:
    from hermes_codex_runtime.hermes.config.activation import install_activation

    return install_activation()


def _agents() -> object:
    from hermes_codex_runtime.hermes.installing.seams import follow_agent_construction

    return follow_agent_construction()


def watch() -> None:
    """Start following (idempotent; a module already imported is not waited for)."""
    for name, install in (("hermes_cli.runtime_provider", _activation), ("run_agent", _agents)):
        if name not in sys.modules and not watching(name):
            after_import(name, _when_enabled(name, install))


watch()
