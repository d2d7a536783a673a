"""COMPAT_MANIFEST.md against the installed host: every Hermes symbol it lists exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

MANIFEST = Path(__file__).resolve().parents[1] / "COMPAT_MANIFEST.md"
ROW = re.compile(r"^\|\s*`([\w.]+):([\w.()]+)`\s*\|")


def hermes_rows() -> list[tuple[str, str]]:
    text = MANIFEST.read_text()
    section = text[text.index("## Hermes Agent"):]
    return [m.groups() for line in section.splitlines() if (m := ROW.match(line))]


def test_the_manifest_lists_the_hermes_symbols():
    rows = hermes_rows()
    assert len(rows) > 40
    assert ("agent.codex_runtime", "run_codex_app_server_turn") in rows


def test_every_listed_hermes_symbol_exists_in_the_installed_host(hermes):
    missing = []
    agent = hermes.agent()
    for module_name, path in hermes_rows():
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            missing.append(f"{module_name} ({exc})")
            continue
        if "()." in path:
            class_name, attr = path.split("().", 1)
            target = agent if class_name == "AIAgent" else None
            if target is None or not hasattr(target, attr):
                missing.append(f"{module_name}:{path}")
            continue
        obj = module
        for part in path.split("."):
            if not hasattr(obj, part):
                missing.append(f"{module_name}:{path}")
                break
            obj = getattr(obj, part)
    assert missing == [], "COMPAT_MANIFEST.md drifted from the installed Hermes"
