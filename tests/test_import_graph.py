"""The package's import graph: no circles, and nothing below the Hermes adapter imports it.

Every ``import`` statement of every module counts — at module level, inside a function, under
``TYPE_CHECKING`` — because a function-local import is still a dependency, only a hidden one. An
edge goes to the module named (``from pkg import sub`` to ``pkg.sub`` when ``sub`` is a module);
a package's ``__init__`` is a module like any other, so a re-export that closes a loop is a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hermes_codex_runtime"
ROOT_NAME = "hermes_codex_runtime"
ADAPTER = f"{ROOT_NAME}.hermes"
#: The only module outside the adapter that may import it: ``python -m hermes_codex_runtime``,
#: the console script's other name (an entry at the very top, above every layer).
ADAPTER_USERS = frozenset({f"{ROOT_NAME}.__main__"})
ALLOWED_EDGES: frozenset[tuple[str, str]] = frozenset()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith(ROOT_NAME) and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    """Every package module and the package modules it imports (the allowed edges left out)."""
    mods = modules()
    known = set(mods)
    return {name: {t for t in imports_of(name, path, known) if (name, t) not in ALLOWED_EDGES}
            for name, path in mods.items()}


def circles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = iter(range(10**6))

    def visit(node: str) -> None:
        index[node] = low[node] = next(counter)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _is_adapter(name: str) -> bool:
    return name == ADAPTER or name.startswith(ADAPTER + ".")


def test_the_package_has_no_import_circles():
    assert [sorted(c) for c in circles(graph())] == []


def test_nothing_below_the_hermes_adapter_imports_it():
    upward = sorted((source, target) for source, targets in graph().items()
                    for target in targets
                    if _is_adapter(target) and not _is_adapter(source)
                    and source not in ADAPTER_USERS)
    assert upward == []


def test_the_graph_reader_sees_function_local_and_package_imports(tmp_path):
    """The checker itself: a hidden (function-local) import and a re-export both make edges, so a
    circle through either is found."""
    pkg = tmp_path / ROOT_NAME
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import thing\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from hermes_codex_runtime import b\n")
    (pkg / "b.py").write_text("from hermes_codex_runtime.sub import thing\n")
    known = {"hermes_codex_runtime", "hermes_codex_runtime.sub", "hermes_codex_runtime.sub.a",
             "hermes_codex_runtime.b"}
    global PACKAGE
    saved, PACKAGE = PACKAGE, pkg
    try:
        edges = {module_name(p): imports_of(module_name(p), p, known)
                 for p in sorted(pkg.rglob("*.py"))}
    finally:
        PACKAGE = saved
    assert edges["hermes_codex_runtime.sub.a"] == {"hermes_codex_runtime.b"}
    assert edges["hermes_codex_runtime.sub"] == {"hermes_codex_runtime.sub.a"}
    assert circles(edges) == [frozenset({"hermes_codex_runtime.b", "hermes_codex_runtime.sub",
                                         "hermes_codex_runtime.sub.a"})]


def rooms_of(package: str, edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The rooms directly inside ``package`` (its modules and subpackages, its own ``__init__``
    one more) and the arrows between them: an import from anywhere in one room to anywhere in
    another."""
    def room(name: str) -> str | None:
        if name == package:
            return "__init__"
        if not name.startswith(package + "."):
            return None
        return name[len(package) + 1:].split(".")[0]

    arrows: dict[str, set[str]] = {}
    for source, targets in edges.items():
        start = room(source)
        if start is None:
            continue
        arrows.setdefault(start, set())
        arrows[start] |= {end for t in targets if (end := room(t)) not in (None, start)}
    return arrows


def test_the_rooms_of_every_package_form_no_circle():
    """Inside every package, its modules and subpackages stack in floors: no two rooms import
    each other, however indirectly — so every arrow runs down."""
    edges = graph()
    packages = sorted({name for name, path in modules().items() if path.name == "__init__.py"})
    found = {package: [sorted(c) for c in circles(rooms_of(package, edges))]
             for package in packages}
    assert {package: c for package, c in found.items() if c} == {}


def test_a_circle_between_two_rooms_is_found_though_no_module_circle_is():
    """The checker itself: ``a.x`` imports ``b.y`` and ``b.z`` imports ``a.w`` — no module
    circle, but the rooms ``a`` and ``b`` import each other."""
    edges = {"p": set(), "p.a.x": {"p.b.y"}, "p.a.w": set(), "p.b.y": set(), "p.b.z": {"p.a.w"}}
    assert circles(edges) == []
    assert circles(rooms_of("p", edges)) == [frozenset({"a", "b"})]


def test_no_package_module_imports_test_support():
    """``testing/`` is for tests: the runtime, the adapter, the demo and the walls' proof run
    without it (their offline pieces live in ``offline/``)."""
    testing = f"{ROOT_NAME}.testing"
    users = sorted((source, target) for source, targets in graph().items() for target in targets
                   if (target == testing or target.startswith(testing + "."))
                   and not (source == testing or source.startswith(testing + ".")))
    assert users == []
