"""Answers to the requests codex sends the client (approvals, elicitations, tool calls).

Every server request must get a schema-valid answer — a malformed one is treated by codex as a
rejection, and an unanswered one hangs the turn. This module owns the table of safe "no" answers,
and the mapping from a host's :class:`Decision` to the exact shape each method expects
(permissions answer with ``{"permissions": ...}``, elicitations with ``{"action": ...}``, the
legacy methods with a ``ReviewDecision``). Methods outside the table get JSON-RPC ``-32601``.
A request nobody decides — outside a turn, or for a thread no session holds — gets
:func:`default_answer`, the one rule for those.
"""

from __future__ import annotations

import copy
from enum import StrEnum
from typing import Any, cast

from hermes_codex_runtime.protocol.schema_types import (
    ApplyPatchApprovalResponse,
    CommandExecutionApprovalDecision,
    CommandExecutionRequestApprovalResponse,
    DynamicToolCallResponse,
    ExecCommandApprovalResponse,
    FileChangeApprovalDecision,
    FileChangeRequestApprovalResponse,
    GrantedPermissionProfile,
    McpServerElicitationAction,
    McpServerElicitationRequestResponse,
    PermissionGrantScope,
    PermissionsRequestApprovalResponse,
    ReviewDecision,
    ToolRequestUserInputResponse,
)

JsonObject = dict[str, Any]
#: The answer to a server request: one of the shapes codex's schema gives the methods below.
Answer = (CommandExecutionRequestApprovalResponse | FileChangeRequestApprovalResponse
          | PermissionsRequestApprovalResponse | McpServerElicitationRequestResponse
          | ToolRequestUserInputResponse | DynamicToolCallResponse | ExecCommandApprovalResponse
          | ApplyPatchApprovalResponse)

METHOD_NOT_FOUND = -32601

COMMAND_APPROVAL = "item/commandExecution/requestApproval"
FILE_CHANGE_APPROVAL = "item/fileChange/requestApproval"
PERMISSIONS_APPROVAL = "item/permissions/requestApproval"
MCP_ELICITATION = "mcpServer/elicitation/request"
USER_INPUT = "item/tool/requestUserInput"
DYNAMIC_TOOL_CALL = "item/tool/call"
LEGACY_EXEC_APPROVAL = "execCommandApproval"
LEGACY_PATCH_APPROVAL = "applyPatchApproval"

#: Methods whose answer is a decision a host (or a person) makes.
APPROVAL_METHODS = frozenset(
    {
        COMMAND_APPROVAL,
        FILE_CHANGE_APPROVAL,
        PERMISSIONS_APPROVAL,
        MCP_ELICITATION,
        LEGACY_EXEC_APPROVAL,
        LEGACY_PATCH_APPROVAL,
    }
)

_SAFE_ANSWERS: dict[str, Answer] = {
    COMMAND_APPROVAL: {"decision": "decline"},
    FILE_CHANGE_APPROVAL: {"decision": "decline"},
    PERMISSIONS_APPROVAL: {"permissions": {}},
    MCP_ELICITATION: {"action": "decline", "content": None, "_meta": None},
    USER_INPUT: {"answers": {}},
    DYNAMIC_TOOL_CALL: {"contentItems": [], "success": False},
    LEGACY_EXEC_APPROVAL: {"decision": {"denied": {"rejection": "Declined."}}},
    LEGACY_PATCH_APPROVAL: {"decision": {"denied": {"rejection": "Declined."}}},
}


class Decision(StrEnum):
    """A host's answer to an approval, independent of the method's wire shape."""

    ACCEPT = "accept"
    ACCEPT_FOR_SESSION = "acceptForSession"
    DECLINE = "decline"
    CANCEL = "cancel"  # decline and end the turn

    @property
    def accepts(self) -> bool:
        """True for the two accepting decisions."""
        return self in (Decision.ACCEPT, Decision.ACCEPT_FOR_SESSION)


def safe_answer(method: str) -> Answer | None:
    """The fail-closed answer for ``method``, or ``None`` when it must get a ``-32601`` error."""
    answer = _SAFE_ANSWERS.get(method)
    return copy.deepcopy(answer) if answer is not None else None


def default_answer(method: str, params: JsonObject | None = None) -> Answer | None:
    """The answer to a server request nobody decides: a decision declined, anything else its
    safe answer; ``None`` for a method outside the table (answer it with ``-32601``)."""
    if method in APPROVAL_METHODS:
        return answer_for(method, Decision.DECLINE, params)
    return safe_answer(method)


# The v2 approvals' decisions.
_COMMAND: dict[Decision, CommandExecutionApprovalDecision] = {
    Decision.ACCEPT: "accept", Decision.ACCEPT_FOR_SESSION: "acceptForSession",
    Decision.DECLINE: "decline", Decision.CANCEL: "cancel",
}
_FILE_CHANGE: dict[Decision, FileChangeApprovalDecision] = {
    Decision.ACCEPT: "accept", Decision.ACCEPT_FOR_SESSION: "acceptForSession",
    Decision.DECLINE: "decline", Decision.CANCEL: "cancel",
}

# The legacy (v1) ReviewDecision. codex >= 0.163 spells a denial as an object carrying the
# rejection text; v2 threads never send these methods, but an answer must still be valid.
_LEGACY: dict[Decision, ReviewDecision] = {
    Decision.ACCEPT: "approved",
    Decision.ACCEPT_FOR_SESSION: "approved_for_session",
    Decision.DECLINE: {"denied": {"rejection": "Declined."}},
    Decision.CANCEL: "abort",
}


def answer_for(method: str, decision: Decision, params: JsonObject | None = None,
               *, content: Any = None) -> Answer | None:
    """The wire answer that carries ``decision`` for a ``method`` request with ``params``.

    Returns ``None`` for methods outside the table (answer them with ``-32601``). For methods that
    are not approvals (user input, dynamic tools) the safe answer is returned whatever the
    decision. ``content`` is the accepted elicitation's form content (``{}`` when omitted).
    """
    params = params or {}
    if method == COMMAND_APPROVAL:
        return CommandExecutionRequestApprovalResponse(decision=_COMMAND[decision])
    if method == FILE_CHANGE_APPROVAL:
        return FileChangeRequestApprovalResponse(decision=_FILE_CHANGE[decision])
    if method == LEGACY_EXEC_APPROVAL:
        return ExecCommandApprovalResponse(decision=copy.deepcopy(_LEGACY[decision]))
    if method == LEGACY_PATCH_APPROVAL:
        return ApplyPatchApprovalResponse(decision=copy.deepcopy(_LEGACY[decision]))
    if method == PERMISSIONS_APPROVAL:
        if not decision.accepts:
            return PermissionsRequestApprovalResponse(permissions={})
        requested = params.get("permissions")
        # codex asks with a RequestPermissionProfile: the grant's shape ({fileSystem, network}).
        granted = cast(GrantedPermissionProfile, copy.deepcopy(requested)
                       if isinstance(requested, dict) else {})
        scope: PermissionGrantScope = ("session" if decision is Decision.ACCEPT_FOR_SESSION
                                       else "turn")
        return PermissionsRequestApprovalResponse(permissions=granted, scope=scope)
    if method == MCP_ELICITATION:
        if decision.accepts:
            return McpServerElicitationRequestResponse(
                action="accept", content=content if content is not None else {}, _meta=None)
        action: McpServerElicitationAction = ("cancel" if decision is Decision.CANCEL
                                              else "decline")
        return McpServerElicitationRequestResponse(action=action, content=None, _meta=None)
    return safe_answer(method)


def approval_kind(method: str, params: JsonObject | None = None) -> str:
    """A short name of what is being approved: ``command``, ``file_change``, ``permissions``,
    ``mcp_tool_call`` (an elicitation that is really an MCP tool approval), ``elicitation``,
    ``user_input``, ``dynamic_tool`` or ``unknown``."""
    params = params or {}
    if method in (COMMAND_APPROVAL, LEGACY_EXEC_APPROVAL):
        return "command"
    if method in (FILE_CHANGE_APPROVAL, LEGACY_PATCH_APPROVAL):
        return "file_change"
    if method == PERMISSIONS_APPROVAL:
        return "permissions"
    if method == MCP_ELICITATION:
        meta = params.get("_meta")
        if isinstance(meta, dict) and meta.get("codex_approval_kind") == "mcp_tool_call":
            return "mcp_tool_call"
        return "elicitation"
    if method == USER_INPUT:
        return "user_input"
    if method == DYNAMIC_TOOL_CALL:
        return "dynamic_tool"
    return "unknown"
