"""COMPAT_MANIFEST.md against the installed host: every Hermes symbol it lists exists, and the
list the plugin itself checks (``hermes/compat.py``, used by ``doctor``) is the same list."""

from __future__ import annotations

import re
from pathlib import Path

from hermes_codex_runtime.hermes import compat

MANIFEST = Path(__file__).resolve().parents[1] / "COMPAT_MANIFEST.md"
ROW = re.compile(r"^\|\s*`([\w.]+):([\w.()]+)`\s*\|")


def manifest_rows() -> list[tuple[str, str]]:
    text = MANIFEST.read_text()
    section = text[text.index("## Hermes Agent"):]
    return [m.groups() for line in section.splitlines() if (m := ROW.match(line))]


def test_the_manifest_and_the_plugin_check_the_same_symbols():
    rows = manifest_rows()
    assert len(rows) > 40
    assert rows == [(s.module, s.path) for s in compat.SYMBOLS]


def test_every_listed_hermes_symbol_exists_in_the_installed_host(hermes):
    agent = hermes.agent()
    missing = compat.missing(agent, required_only=False)
    assert missing == [], "COMPAT_MANIFEST.md drifted from the installed Hermes"
