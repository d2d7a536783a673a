"""The one way the adapter patches Hermes: :func:`wrap_in_place`.

A Hermes function or method the plugin must change is replaced where Hermes looks it up by a
wrapper that calls the original — made by :func:`wrapped`, marked as the plugin's with one
marker (:data:`MARK`), so installing twice (a second plugin load, ``run_agent`` imported after
discovery) never wraps a wrapper, and the original stays reachable (:func:`original_of`).
A missing symbol is reported once through :func:`~.probe.symbol` and leaves Hermes as it is.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import symbol

#: The attribute that marks a wrapper as the plugin's.
MARK = "__hermes_codex_runtime__"

Make = Callable[[Callable[..., Any]], Callable[..., Any]]


def is_ours(function: object) -> bool:
    """Whether ``function`` is a wrapper the plugin installed."""
    return bool(getattr(function, MARK, False))


def original_of(function: Any) -> Any:
    """The host's own function behind a wrapper of ours (``function`` itself otherwise)."""
    while is_ours(function):
        function = function.__wrapped__
    return function


def wrapped(original: Callable[..., Any], make: Make) -> Callable[..., Any]:
    """``make(original)`` dressed as ``original`` and marked as ours — or ``original`` itself
    when it already is a wrapper of ours."""
    if is_ours(original):
        return original
    wrapper = functools.wraps(original)(make(original))
    setattr(wrapper, MARK, True)
    return wrapper


def wrap_in_place(owner: str | type, name: str, make: Make, *, feature: str) -> bool:
    """Replace ``owner.name`` — ``owner`` a Hermes module's name or a Hermes class — with
    :func:`wrapped` ``(original, make)``. True when it is (now, or already) ours; False, with
    the one report of :func:`~.probe.symbol` naming ``feature``, when the host lacks it."""
    if isinstance(owner, str):
        original = symbol(owner, name, feature=feature)
        target: Any = sys.modules.get(owner)
    else:
        original = getattr(owner, name, None)
        target = owner
        if not callable(original):
            symbol(owner.__module__, f"{owner.__name__}.{name}", feature=feature)
    if target is None or not callable(original):
        return False
    setattr(target, name, wrapped(original, make))
    return True
