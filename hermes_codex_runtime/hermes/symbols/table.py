"""Every Hermes symbol the adapter relies on — the source of COMPAT_MANIFEST.md's Hermes table.

Used by ``doctor`` to report missing host seams, and by the tests to walk the installed host.
``required`` symbols are the ones a working install needs; the rest degrade one feature or are
only used by the test suite. The manifest's table is generated from :data:`SYMBOLS`
(``python -m hermes_codex_runtime.hermes.symbols.table --write COMPAT_MANIFEST.md``, or
``make compat-manifest``); a test fails when the file and this list differ.
"""

from __future__ import annotations

from hermes_codex_runtime.hermes.symbols.agent import AGENT_SYMBOLS
from hermes_codex_runtime.hermes.symbols.display import DISPLAY_SYMBOLS
from hermes_codex_runtime.hermes.symbols.row import HostSymbol
from hermes_codex_runtime.hermes.symbols.seams import SEAM_SYMBOLS

#: Every symbol, in the manifest's order.
SYMBOLS: tuple[HostSymbol, ...] = (*SEAM_SYMBOLS, *AGENT_SYMBOLS, *DISPLAY_SYMBOLS)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table() -> str:
    """COMPAT_MANIFEST.md's Hermes table, from :data:`SYMBOLS`."""
    lines = ["| symbol | used for | required | verified | when missing |",
             "|---|---|---|---|---|"]
    for s in SYMBOLS:
        moved = f" (or `{'`, `'.join(s.also_in)}`)" if s.also_in else ""
        lines.append(f"| `{s.module}:{s.path}`{moved} | {_cell(s.feature)} | "
                     f"{'yes' if s.required else 'no'}{'' if s.checked else ' (set later)'} | "
                     f"{s.verified} | "
                     f"{_cell(s.when_missing)} |")
    return "\n".join(lines) + "\n"


BEGIN = ("<!-- BEGIN generated: hermes_codex_runtime/hermes/symbols/table.py"
         " (make compat-manifest) -->\n")
END = "<!-- END generated -->\n"


def with_table(manifest: str) -> str:
    """``manifest`` with its generated block replaced by :func:`render_table`."""
    from hermes_codex_runtime.generated import replace_block

    return replace_block(manifest, BEGIN, END, render_table(), what="the manifest")


def lookup(symbol: HostSymbol, instance: object | None = None) -> bool:
    """True when ``symbol`` exists in the installed host (``instance`` answers ``Class().attr``)."""

    for module in (symbol.module, *symbol.also_in):
        if _lookup_in(module, symbol.path, instance):
            return True
    return False


def _lookup_in(module: str, path: str, instance: object | None) -> bool:
    import importlib

    try:
        obj: object = importlib.import_module(module)
    except Exception:
        return False
    if "()." in path:
        if instance is None:
            return False
        obj = instance
        for part in path.split("().", 1)[1].split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    for part in path.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def missing(instance: object | None = None, *, required_only: bool = True) -> list[HostSymbol]:
    """The listed symbols the installed host lacks (instance attributes skipped without one)."""
    out = []
    for symbol in SYMBOLS:
        if required_only and not symbol.required:
            continue
        if not symbol.checked or ("()." in symbol.path and instance is None):
            continue
        if not lookup(symbol, instance):
            out.append(symbol)
    return out


def main(argv: list[str] | None = None) -> int:
    """``--write PATH``: regenerate the table in the manifest; ``--check PATH``: exit 1 if stale."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="PATH")
    group.add_argument("--check", metavar="PATH")
    args = parser.parse_args(argv)
    path = Path(args.write or args.check)
    current = path.read_text()
    wanted = with_table(current)
    if args.write:
        if wanted != current:
            path.write_text(wanted)
        return 0
    if wanted != current:
        print(f"{path} is stale: run `make compat-manifest`")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
