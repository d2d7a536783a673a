"""The Hermes adapter: the only package that imports Hermes modules.

:func:`install` is called by :func:`hermes_codex_runtime.register` from Hermes' plugin loader. It
records that the host loaded the plugin; the turn seam and the hook implementations are installed
here as the adapter grows (see COMPAT_MANIFEST.md for every host symbol it touches).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

#: The contexts Hermes registered us with, in order (one per plugin-manager load).
REGISTRATIONS: list[Any] = []


def install(ctx: Any) -> None:
    """Record the registration. Cheap by design: Hermes calls this while ``run_agent`` imports."""
    REGISTRATIONS.append(ctx)
    log.debug("codex-runtime registered with Hermes (%s)", type(ctx).__name__)
