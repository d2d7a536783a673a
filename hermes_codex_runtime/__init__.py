"""hermes-codex-runtime: run Hermes Agent turns through OpenAI's ``codex app-server``.

The root of the package holds only the version: it imports nothing, so every layer may import it.
Hermes' plugin loader enters through :mod:`hermes_codex_runtime.hermes` (entry point group
``hermes_agent.plugins``), whose ``register(ctx)`` installs the codex runtime.
"""

from __future__ import annotations

__version__ = "0.1.0"
