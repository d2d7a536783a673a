"""Running one part of the bench on its own: ``python bench/<part>.py [--out FILE]`` runs it
on the resolved codex binary, prints its lines and, with ``--out``, writes ``{key: result}``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def main(key: str, run: Callable[[str], dict[str, Any]],
         render: Callable[[dict[str, Any]], list[str]]) -> int:
    from hermes_codex_runtime.wire import resolve_codex_binary

    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else None
    result = run(resolve_codex_binary().path)
    print("\n".join(render(result)))
    if out:
        out.write_text(json.dumps({key: result}, indent=2))
    return 0
