"""COMPAT_MANIFEST.md against the installed host: every Hermes symbol it lists exists, and the
list the plugin itself checks (``hermes/symbols/table.py``, used by ``doctor``) is the same list."""

from __future__ import annotations

import re
from pathlib import Path

from hermes_codex_runtime.hermes.symbols import table

MANIFEST = Path(__file__).resolve().parents[1] / "COMPAT_MANIFEST.md"
ROW = re.compile(r"^\|\s*`([\w.]+):([\w.()]+)`[^|]*\|")


def manifest_rows() -> list[tuple[str, str]]:
    text = MANIFEST.read_text()
    section = text[text.index("## Hermes Agent"):]
    return [m.groups() for line in section.splitlines() if (m := ROW.match(line))]


def test_the_manifest_table_is_generated_from_the_list_the_plugin_checks():
    text = MANIFEST.read_text()
    assert table.with_table(text) == text, "COMPAT_MANIFEST.md is stale: make compat-manifest"
    rows = manifest_rows()
    assert len(rows) > 40
    assert rows == [(s.module, s.path) for s in table.SYMBOLS]


def test_the_generator_rewrites_a_stale_table_and_check_reports_it(tmp_path):
    stale = tmp_path / "manifest.md"
    stale.write_text("intro\n" + table.BEGIN + "| old | row |\n" + table.END + "outro\n")
    assert table.main(["--check", str(stale)]) == 1
    assert table.main(["--write", str(stale)]) == 0
    assert table.main(["--check", str(stale)]) == 0
    text = stale.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "| old |" not in text
    assert "`run_agent:AIAgent._invoke_tool`" in text


def test_every_listed_hermes_symbol_is_where_the_manifest_says_on_the_installed_host(hermes):
    """Each row names the host versions it was verified on: on the installed host, a row that
    names this version exists (in its module or where it moved), and one that doesn't is
    absent — so the manifest is true on every host the suite runs on."""
    from hermes_codex_runtime.hermes.symbols.probe import find_host

    host = find_host()
    assert host is not None
    agent = hermes.agent()
    rows = [s for s in table.SYMBOLS if s.checked]
    assert any(host.version in s.hosts() for s in rows), f"no row verified on {host.version}"
    missing = [s for s in rows if host.version in s.hosts() and not table.lookup(s, agent)]
    assert missing == [], f"COMPAT_MANIFEST.md drifted from {host.describe()}"
    unexpected = [s for s in rows if host.version not in s.hosts() and table.lookup(s, agent)]
    assert unexpected == [], f"present on {host.describe()} but not listed as verified there"
