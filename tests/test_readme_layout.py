"""The README's Layout section names every module of the package, each in its room, and nothing
that is not there: a module added, moved or removed without the README is a failure here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hermes_codex_runtime"
#: Where a line's description starts: a line indented this far only continues one.
DESCRIPTION_COLUMN = 28


def layout_block(readme: str) -> list[str]:
    section = readme[readme.index("\n## Layout\n"):]
    start = section.index("\n```\n") + 5
    return section[start:section.index("\n```", start)].splitlines()


def named_paths(lines: list[str]) -> set[str]:
    """The package paths the block names: a line's names come before its first run of two
    spaces, a room ends in ``/`` and holds the lines indented two more under it."""
    rooms: list[str] = []
    named: set[str] = set()
    for number, line in enumerate(lines, 1):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= DESCRIPTION_COLUMN:
            continue
        assert indent % 2 == 0, f"layout line {number}: indent {indent} is not a room's"
        del rooms[indent // 2:]
        assert len(rooms) == indent // 2, f"layout line {number}: no room holds it"
        names = re.split(r" {2,}", line.strip())[0].split(" ")
        for name in names:
            assert name.endswith((".py", "/")), f"layout line {number}: {name!r} is no module"
            named.add("/".join([*rooms, name.rstrip("/")]))
        if len(names) == 1 and names[0].endswith("/"):
            rooms.append(names[0].rstrip("/"))
    return named


def tree_paths() -> set[str]:
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        found.update("/".join(rel.parts[:i]) for i in range(1, len(rel.parts)))
        if path.name != "__init__.py":
            found.add(rel.as_posix())
    return found


def test_the_readme_layout_names_every_module_and_only_those():
    named = named_paths(layout_block((ROOT / "README.md").read_text()))
    named = {n for n in named if not n.endswith("__init__.py")}
    tree = tree_paths()
    assert {"missing from the README": sorted(tree - named),
            "in the README, not in the tree": sorted(named - tree)} == {
        "missing from the README": [], "in the README, not in the tree": []}


def test_the_layout_reader_places_names_in_their_rooms():
    lines = ["a/                          room a",
             "  x.py y.py                 two modules",
             "                            a continued description",
             "  b/                        a room in a",
             "    z.py                    in b",
             "  w.py                      back in a",
             "top.py"]
    assert named_paths(lines) == {"a", "a/x.py", "a/y.py", "a/b", "a/b/z.py", "a/w.py", "top.py"}
