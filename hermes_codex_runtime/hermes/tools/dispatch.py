"""One Hermes tool call codex made, run the way Hermes' own loop runs it, inside the live agent.

* **Hermes' dispatcher.** The call goes through ``AIAgent._invoke_tool`` on the turn's thread:
  the agent-loop tools (``memory``, ``todo``, ``session_search``, ``delegate_task``,
  ``clarify``, memory-provider tools) on the agent's own stores and budgets, everything else
  through ``model_tools.handle_function_call`` (plugin tools, MCP tools, cron, messaging) — with
  Hermes' tool-request middleware, its ``pre_tool_call`` blocks and approvals, and its
  ``post_tool_call`` hooks. Thread-local context (the review's allow-list, the session's
  approval channel) and Hermes' interrupt (per thread) apply as on its own loop.
* **What the model is shown** is what Hermes' loop would show it: an oversized result persisted
  or cut by Hermes' result budget, untrusted content (web, browser, MCP) wrapped in Hermes'
  delimiters, a multimodal result as its text.
* **Hermes' Tool Search bridge** (the 0.22 line lists most tools behind ``tool_search`` and
  calls them through ``tool_call``) is peeled as Hermes' executor peels it: the call runs as the
  tool it names, within the session's scope.
* **Counters** Hermes' loop resets per call: ``memory`` resets the memory nudge, ``skill_manage``
  the skill nudge (iterations are counted with the turn's tool calls, in the epilogue).
* **Failures are results.** Arguments that are not a JSON object are refused as Hermes refuses
  them (the tool is not run); a raising tool, or a result that says ``"success": false`` or
  carries an ``"error"``, is a failed call the model reads — the turn goes on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import symbol, symbol_in
from hermes_codex_runtime.hermes.tools.bridge import unwrapped
from hermes_codex_runtime.hermes.tools.offer import CODEX_OWNS
from hermes_codex_runtime.protocol import HostToolCall, HostToolOutput

log = logging.getLogger("hermes_codex_runtime.hermes")

#: Hermes' own answer to arguments that are not a JSON object (the tool is not run).
INVALID_ARGUMENTS = json.dumps({
    "error": "Invalid tool arguments",
    "message": "Tool arguments must be a valid JSON object; tool was not executed."})
#: Which nudge counter a call resets, as Hermes' loop does.
RESETS = {"memory": "_turns_since_memory", "skill_manage": "_iters_since_skill"}


def arguments_of(call: HostToolCall) -> dict[str, Any] | None:
    """The call's arguments as a JSON object (codex sends an object; a string is parsed), or
    ``None`` when they are not one."""
    value = call.arguments
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return None
    if value is None:
        return {}
    return dict(value) if isinstance(value, Mapping) else None


def run_tool(agent: Any, call: HostToolCall, name: str, task_id: str | None,
             messages: list[dict[str, Any]] | None) -> HostToolOutput:
    """Run Hermes' tool ``name`` for codex's ``call`` through Hermes' own dispatcher."""
    invoke = getattr(agent, "_invoke_tool", None)
    if not callable(invoke):
        symbol("run_agent", "AIAgent._invoke_tool", feature="Hermes tools on codex")
        return HostToolOutput("This Hermes build cannot run its tools for codex.", success=False)
    arguments = arguments_of(call)
    if arguments is None:
        return HostToolOutput(INVALID_ARGUMENTS, success=False)
    name, arguments, blocked = unwrapped(agent, name, arguments)
    if blocked is None and name in CODEX_OWNS:  # through the bridge too: codex runs these
        blocked = f"'{name}' is not available here: use codex's own tools for this."
    if blocked is not None:
        return HostToolOutput(json.dumps({"error": blocked}), success=False)
    counter = RESETS.get(name)
    if counter is not None and hasattr(agent, counter):
        setattr(agent, counter, 0)
    result = invoke(name, arguments, task_id or "", tool_call_id=call.call_id or None,
                    messages=messages)
    text = shown_to_model(name, result, call.call_id, task_id)
    return HostToolOutput(text, success=succeeded(text))


def shown_to_model(name: str, result: Any, call_id: str, task_id: str | None) -> str:
    """What Hermes' loop would put in the tool message for ``result``, as text."""
    multimodal = _helper("_is_multimodal_tool_result")
    if callable(multimodal) and multimodal(result):
        summary = _helper("_multimodal_text_summary")
        return str(summary(result)) if callable(summary) else json.dumps(result, default=str)
    text = result if isinstance(result, str) else json.dumps(result, default=str)
    persist = symbol("tools.tool_result_storage", "maybe_persist_tool_result",
                     feature="Hermes' result budget for its tools on codex")
    if callable(persist):
        try:
            text = str(persist(content=text, tool_name=name, tool_use_id=call_id or name,
                               env=_active_env(task_id)))
        except Exception:
            log.debug("codex-runtime: Hermes' result budget failed for %s", name, exc_info=True)
    message = _helper("make_tool_result_message")
    if callable(message):
        try:
            wrapped = message(name, text, call_id or name).get("content")
            if isinstance(wrapped, str):
                text = wrapped
        except Exception:
            log.debug("codex-runtime: Hermes' result wrapping failed for %s", name,
                      exc_info=True)
    return text


def succeeded(text: str) -> bool:
    """False for a result Hermes' tools mark as failed (``"success": false`` or an ``error``)."""
    try:
        parsed = json.loads(text)
    except (TypeError, ValueError):
        return True
    if isinstance(parsed, dict):
        return parsed.get("success") is not False and not parsed.get("error")
    return True


def _helper(name: str) -> Any:
    return symbol("agent.tool_dispatch_helpers", name,
                  feature="tool results shown to codex as Hermes shows them")


def _active_env(task_id: str | None) -> Any:
    lookup = symbol_in(("tools.terminal_tool", "tools.terminal_tool_lifecycle"),
                       "get_active_env", feature="where Hermes persists an oversized tool result")
    if not callable(lookup) or not task_id:
        return None
    try:
        return lookup(task_id)
    except Exception:
        return None
