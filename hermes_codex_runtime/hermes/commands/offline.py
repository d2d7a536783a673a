"""Keeping a Hermes home offline: Hermes looks model metadata up on models.dev while it builds
an agent, and its CLI asks PyPI for updates. Both read an on-disk cache first;
:func:`write_offline_caches` fills them, so the demo, the benchmarks and the tests make no lookup
beyond 127.0.0.1. Plain files (Hermes' own cache names) — nothing here imports Hermes."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hermes_codex_runtime.hermes.symbols.probe import find_host


def write_offline_caches(home: str | Path) -> None:
    """Fresh ``models_dev_cache.json`` (an empty catalog) and ``.update_check`` in ``home``."""
    root = Path(home)
    root.mkdir(parents=True, exist_ok=True)
    host = find_host()
    version = host.version if host is not None else "0"
    (root / "models_dev_cache.json").write_text(json.dumps({"offline": {"models": {}}}))
    (root / ".update_check").write_text(json.dumps({"ts": time.time(), "behind": 0,
                                                    "rev": None, "ver": version}))
