"""Running code the moment a module has been imported: :func:`after_import`.

A meta-path finder that finds nothing itself: for a watched module it asks the other finders,
wraps that one spec's loader, and runs the followers right after the module's code has run. It
imports nothing of the project (Python's start-up imports it, see :mod:`.installing.early`); with
nothing watched it is off ``sys.meta_path``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself is not imported at start-up: it costs milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

#: The modules watched, each with what runs once it has been imported.
_followers: dict[str, list[Callable[[], None]]] = {}


class _Watch:
    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in _followers:
            return None
        followers = _followers.pop(name)
        if not _followers:
            _stop()
        spec: ModuleSpec | None = None
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        loader = spec.loader if spec is not None else None
        run = getattr(loader, "exec_module", None)
        if spec is None or loader is None or not callable(run):
            return spec

        def exec_module(module: ModuleType) -> None:
            run(module)
            for follow in followers:
                follow()

        loader.exec_module = exec_module  # type: ignore[method-assign]  # this one spec's loader
        return spec


_watch = _Watch()


def _stop() -> None:
    if _watch in sys.meta_path:
        sys.meta_path.remove(_watch)


def watching(name: str) -> bool:
    """Whether followers wait for module ``name``."""
    return name in _followers


def after_import(name: str, follow: Callable[[], None]) -> None:
    """Run ``follow`` once module ``name`` has been imported: at once if it already is, else
    right after its code has run (``follow`` must not raise)."""
    if name in sys.modules:
        follow()
        return
    _followers.setdefault(name, []).append(follow)
    if _watch not in sys.meta_path:
        sys.meta_path.insert(0, _watch)
