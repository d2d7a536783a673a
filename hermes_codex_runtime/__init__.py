"""hermes-codex-runtime: run Hermes Agent turns through OpenAI's ``codex app-server``.

This module is what Hermes' plugin loader imports (entry point group ``hermes_agent.plugins``).
It must stay tiny: discovery runs while ``run_agent`` is still importing, so :func:`register` only
hands over to the Hermes adapter, which installs its seams lazily.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def register(ctx: Any) -> None:
    """Hermes plugin entry: install the codex runtime into the host through ``ctx``."""
    from hermes_codex_runtime.hermes import install

    install(ctx)
