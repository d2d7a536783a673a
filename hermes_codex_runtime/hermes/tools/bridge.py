"""Hermes' Tool Search bridge on codex. Where Hermes lists most of an agent's tools behind
``tool_search`` (the 0.22 line does by default), its loop offers the model the bridge —
``tool_search``, ``tool_describe``, ``tool_call`` — and codex is offered the same. A ``tool_call``
then runs as the tool it names, peeled the way Hermes' executor peels it (:func:`unwrapped`),
within the session's scope (:func:`bridged_names`).
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import symbol

#: Hermes' Tool Search bridge: the tool that calls a tool listed behind ``tool_search``.
BRIDGE_CALL = "tool_call"


def unwrapped(agent: Any, name: str, arguments: dict[str, Any]
              ) -> tuple[str, dict[str, Any], str | None]:
    """A call through Hermes' Tool Search bridge (``tool_call``: the tools Hermes lists behind
    ``tool_search`` instead of offering them all) as the tool it calls, the way Hermes' executor
    peels it — so the agent-loop tools run on the agent, and hooks see the real tool. Returns
    ``(name, arguments, block)``; ``block`` is Hermes' message for a tool outside the session's
    scope (or arguments its schema refuses)."""
    if name != BRIDGE_CALL:
        return name, arguments, None
    peel = _executor_helper("_unwrap_tool_search_call")  # the 0.22 line: Hermes' own helper
    if callable(peel):
        try:
            peeled_name, peeled, block = peel(agent, name, arguments, flatten_probe=True)
        except Exception:
            return name, arguments, None
        return str(peeled_name), dict(peeled), block
    resolve = symbol("tools.tool_search", "resolve_underlying_call",
                     feature="Hermes' tool_call bridge on codex")
    scoped = _executor_helper("_tool_search_scoped_names")
    if not callable(resolve):
        return name, arguments, None
    try:
        underlying, peeled, error = resolve(arguments)
        if error or not underlying:
            return name, arguments, None  # Hermes' dispatcher answers the malformed call
        if callable(scoped) and underlying not in scoped(agent):
            return name, arguments, (f"'{underlying}' is not available in this session. Use "
                                     "tool_search to find tools you can call.")
    except Exception:
        return name, arguments, None
    return str(underlying), dict(peeled), None


def bridged_names(agent: Any) -> frozenset[str]:
    """The tools the session reaches through Hermes' Tool Search bridge (its scope)."""
    scoped = _executor_helper("_tool_search_scoped_names")
    if not callable(scoped):
        return frozenset()
    try:
        return frozenset(scoped(agent))
    except Exception:
        return frozenset()


def _executor_helper(name: str) -> Any:
    """A helper of Hermes' tool executor, where this Hermes has it (probed, not reported:
    the two host lines peel the bridge in different places)."""
    try:
        return getattr(importlib.import_module("agent.tool_executor"), name, None)
    except Exception:
        return None


def called(name: str, arguments: Any) -> tuple[str, Any]:
    """The tool a call is of and its arguments, as Hermes names them: for a ``tool_call``
    through the bridge, the tool it calls (what Hermes' display shows and stores as the
    result's ``tool_name``) and that tool's arguments."""
    if name != BRIDGE_CALL:
        return name, arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return name, arguments
    if not isinstance(arguments, dict):
        return name, arguments
    calls = arguments.get("calls")
    first = calls[0] if isinstance(calls, list) and len(calls) == 1 else arguments
    tool = first.get("name") if isinstance(first, dict) else None
    if not isinstance(tool, str) or not tool.strip():
        return name, arguments
    return tool, first.get("arguments")
