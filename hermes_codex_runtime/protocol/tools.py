"""Host tools codex may call back: codex's dynamic tools, as pure data.

A host that wants codex to use one of ITS tools (its memory and skill tools for the background
review, say) declares it on ``thread/start`` as a dynamic tool — an experimental part of the
app-server API, so the connection must opt in with ``capabilities.experimentalApi``. codex then
sends ``item/tool/call`` (``{threadId, turnId, callId, tool, namespace, arguments}``) and waits
for ``{"contentItems": [...], "success": bool}``. This module owns the spec and both shapes; the
session runs the call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hermes_codex_runtime.protocol.schema_types import (
    DynamicToolCallResponse,
    FunctionDynamicToolSpec,
)

#: The Responses API's function-name rule, which codex forwards the name to.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class HostTool:
    """A tool the host runs for codex: a name, what it does, and its JSON-schema arguments."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    #: The host's own name for the tool where codex must know it by another (``name``): what
    #: the host's transcript and display say for its calls. Empty: the same as ``name``.
    host_name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"a host tool name must match {_NAME.pattern}, got {self.name!r}")
        if not isinstance(self.input_schema, Mapping):
            raise ValueError(f"host tool {self.name!r}: input_schema must be a JSON object")

    def spec(self) -> FunctionDynamicToolSpec:
        """The ``thread/start.dynamicTools`` entry."""
        return {"type": "function", "name": self.name, "description": self.description or "",
                "inputSchema": dict(self.input_schema)}


@dataclass(frozen=True, slots=True)
class HostToolCall:
    """One ``item/tool/call`` from codex."""

    tool: str
    arguments: Any
    call_id: str
    thread_id: str
    turn_id: str

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> HostToolCall:
        """The call in ``item/tool/call`` params (missing fields become empty strings)."""
        return cls(tool=str(params.get("tool") or ""), arguments=params.get("arguments"),
                   call_id=str(params.get("callId") or ""),
                   thread_id=str(params.get("threadId") or ""),
                   turn_id=str(params.get("turnId") or ""))


@dataclass(frozen=True, slots=True)
class HostToolOutput:
    """What the host's tool returned: the text codex's model sees, and whether it worked."""

    text: str
    success: bool = True

    def answer(self) -> DynamicToolCallResponse:
        """The ``item/tool/call`` answer."""
        return {"contentItems": [{"type": "inputText", "text": self.text}],
                "success": bool(self.success)}
