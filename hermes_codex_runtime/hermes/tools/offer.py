"""Which of the agent's Hermes tools codex is offered, under which names, and which of codex's
own tools make way for them.

The list is the agent's own (``AIAgent.tools``, what Hermes' loop sends the model), read at every
turn but built into host tools only when it changed (a toolset switched, an MCP server that came
up late, a plugin loaded): the runtime then starts the next thread with the new list, seeded with
the conversation (codex keeps a thread's dynamic tools for its life).

Overlaps, decided once (README "Hermes' tools on codex"):

* **codex's, not offered** (:data:`CODEX_OWNS`): commands, processes and files. codex runs them in
  its sandbox, under its approvals and walls; Hermes' versions would run outside both.
  ``execute_code`` too: it runs a program on the host, outside codex's sandbox. And
  ``web_search``: codex offers its provider's hosted search under that name in every thread.
* **Hermes', and codex's own switched off for the thread** (:data:`REPLACES`): ``todo`` (the
  list lives in the Hermes session — it survives compression and is what Hermes' review and
  ``/todo`` see; codex's ``update_plan`` lives in one codex thread) and ``delegate_task``
  (Hermes' delegation budget, depth limit and the subagent's own toolsets; codex's multi-agent
  tools would spawn codex agents Hermes never sees).
* **both**: ``vision_analyze`` (Hermes' auxiliary vision model, URLs included) beside codex's
  ``view_image`` (a local file shown to codex's own model); ``web_extract``, browser, skills,
  memory, session search, clarify, cron, messaging and every plugin or MCP tool have no codex
  counterpart in an app-server thread.

A name codex would refuse (its ``mcp__`` prefix is reserved — Hermes names its MCP tools
``mcp__server__tool`` —, one of its own tools' names, or not a Responses function name) is
offered under an alias (``mcp_server__tool``, else ``hermes_<name>_<hash>``); the call runs the
Hermes tool it stands for, and the transcript and display name it as Hermes does.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hermes_codex_runtime.hermes.tools.bridge import BRIDGE_CALL, bridged_names
from hermes_codex_runtime.protocol import HostTool

log = logging.getLogger("hermes_codex_runtime.hermes")

#: Hermes tools codex has its own sandboxed form of: never offered (why, for the README table).
CODEX_OWNS: Mapping[str, str] = {
    "terminal": "codex's exec_command runs commands in its sandbox, under its approvals",
    "process": "codex's exec_command and write_stdin keep its long-running processes",
    "read_file": "codex reads files itself, inside its walls",
    "write_file": "codex's apply_patch writes files under its file-change approvals",
    "patch": "codex's apply_patch, under its file-change approvals",
    "search_files": "codex searches with rg inside its sandbox",
    "execute_code": "it would run a program outside codex's sandbox; exec_command runs it inside",
    "web_search": "codex offers its provider's own web_search in every thread (same name)",
    "process_manage": "the 0.22 line's name for process",
}

#: Hermes tools that replace one of codex's own: (codex's tool, the thread config that switches
#: codex's off while the Hermes tool is offered). Dotted keys: a whole table (``features``)
#: would replace the process's own settings in it (its bounded retries, no shell snapshots).
REPLACES: Mapping[str, tuple[str, Mapping[str, Any]]] = {
    "todo": ("update_plan", {"tools.update_plan.enabled": False}),
    "todo_list": ("update_plan", {"tools.update_plan.enabled": False}),  # the 0.22 line's name
    "delegate_task": ("multi_agent", {"features.multi_agent": False}),
}

#: codex's own tool names in an app-server thread: a Hermes tool of the same name is aliased.
CODEX_TOOL_NAMES = frozenset({
    "exec_command", "write_stdin", "shell", "apply_patch", "update_plan", "request_user_input",
    "view_image", "spawn_agent", "send_input", "wait", "close_agent", "resume_agent",
    "get_goal", "create_goal", "update_goal", "web_search", "image_generation"})

_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_RESERVED_PREFIX = "mcp__"
_EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class Offer:
    """What a thread of the agent is offered: host tools (each with the Hermes tool behind its
    codex name), and the codex config that switches off what Hermes' tools replace."""

    tools: tuple[HostTool, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)

    def hermes_name(self, codex_name: str) -> str | None:
        """The Hermes tool a codex tool name stands for (``None``: not one of ours)."""
        return next((tool.host_name or tool.name for tool in self.tools
                     if tool.name == codex_name), None)


NOTHING = Offer()
#: The last offer built per agent, with the tool list it was built from.
_built: weakref.WeakKeyDictionary[Any, tuple[tuple[int, tuple[str, ...]], Offer]] = \
    weakref.WeakKeyDictionary()


def offered(agent: Any) -> Offer:
    """The agent's Hermes tools as codex is offered them (built again only when they changed).
    Where Hermes lists tools behind its Tool Search bridge (``tool_search`` / ``tool_call``),
    codex is offered the bridge, as Hermes' loop is; the tools behind it count for what they
    replace of codex's own."""
    definitions = getattr(agent, "tools", None)
    if not isinstance(definitions, list | tuple) or not definitions:
        return NOTHING
    signature = (id(definitions), tuple(_name(d) or "" for d in definitions))
    try:
        cached = _built.get(agent)
    except TypeError:  # not weak-referenceable: built every time
        cached = None
    if cached is not None and cached[0] == signature:
        return cached[1]
    offer = build(definitions, behind_bridge=bridged(agent, definitions))
    with contextlib.suppress(TypeError):  # not weak-referenceable
        _built[agent] = (signature, offer)
    return offer


def bridged(agent: Any, definitions: Sequence[Any]) -> frozenset[str]:
    """The tools the agent reaches through Hermes' Tool Search bridge (none without it)."""
    if BRIDGE_CALL not in {_name(d) or "" for d in definitions}:
        return frozenset()
    return bridged_names(agent)


def build(definitions: Sequence[Any], *, behind_bridge: frozenset[str] = frozenset()) -> Offer:
    """An :class:`Offer` from OpenAI-style tool definitions (``{"type": "function",
    "function": {"name", "description", "parameters"}}``); ``behind_bridge``: the tools
    reachable through Hermes' Tool Search bridge."""
    tools: list[HostTool] = []
    names: dict[str, str] = {}
    config: dict[str, Any] = {}
    for replacing in sorted(behind_bridge & REPLACES.keys()):
        config.update(REPLACES[replacing][1])
    for definition in definitions:
        name = _name(definition)
        if name is None or name in CODEX_OWNS or name in names.values():
            continue
        function = definition["function"]
        parameters = function.get("parameters")
        codex_name = _codex_name(name, taken=names)
        try:
            tool = HostTool(codex_name, str(function.get("description") or ""),
                            parameters if isinstance(parameters, Mapping) else _EMPTY_SCHEMA,
                            host_name=name if codex_name != name else "")
        except ValueError as exc:
            log.warning("codex-runtime: not offering Hermes tool %r to codex: %s", name, exc)
            continue
        tools.append(tool)
        names[codex_name] = name
        if name in REPLACES:
            config.update(REPLACES[name][1])
    return Offer(tuple(tools), config)


def _name(definition: Any) -> str | None:
    function = definition.get("function") if isinstance(definition, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) and name else None


def _codex_name(name: str, *, taken: Mapping[str, str]) -> str:
    """``name`` itself where codex accepts it; Hermes' MCP tools (``mcp__server__tool``)
    without codex's reserved prefix (``mcp_server__tool``); else a stable alias
    (``hermes_…``)."""
    def acceptable(candidate: str) -> bool:
        return bool(_FUNCTION_NAME.match(candidate)) and candidate not in CODEX_TOOL_NAMES \
            and not candidate.startswith(_RESERVED_PREFIX) and candidate not in taken
    if acceptable(name):
        return name
    if name.startswith(_RESERVED_PREFIX):
        unreserved = "mcp_" + name[len(_RESERVED_PREFIX):].lstrip("_")
        if acceptable(unreserved):
            return unreserved
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:45] or "tool"
    return f"hermes_{stem}_{digest}"
