"""Parameter builders for the client requests the runtime sends.

Pure functions: they emit only fields the app-server schema knows (codex silently drops unknown
fields, so a typo would lose intent without an error) and leave out every ``None``. The wire-clean
tests check each builder against the schema the installed binary generates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

JsonObject = dict[str, Any]

APPROVAL_POLICIES = frozenset({"untrusted", "on-request", "never"})
APPROVALS_REVIEWERS = frozenset({"user", "auto_review", "guardian_subagent"})
SANDBOX_MODES = frozenset({"read-only", "workspace-write", "danger-full-access"})
PERSONALITIES = frozenset({"none", "friendly", "pragmatic"})
#: Notifications the runtime never reads, suppressed for its connections (``initialize``'s
#: ``capabilities.optOutNotificationMethods``: exact names; names a codex does not know are
#: ignored): one rate-limit note per model response, and thread metadata nobody shows.
UNUSED_NOTIFICATIONS = (
    "account/rateLimits/updated",
    "remoteControl/status/changed",
    "thread/started",
    "thread/goal/cleared",
    "thread/goal/updated",
    "thread/name/updated",
    "thread/readState/changed",
    "deprecationNotice",
    "skills/changed",
    "app/list/updated",
)


def _compact(fields: Mapping[str, Any]) -> JsonObject:
    return {key: value for key, value in fields.items() if value is not None}


def _check(name: str, value: Any, allowed: frozenset[str]) -> None:
    if value is not None and not isinstance(value, dict) and value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {value!r}")


def thread_settings(
    *,
    cwd: str | None = None,
    model: str | None = None,
    model_provider: str | None = None,
    approval_policy: str | JsonObject | None = None,
    approvals_reviewer: str | None = None,
    sandbox: str | None = None,
    developer_instructions: str | None = None,
    base_instructions: str | None = None,
    personality: str | None = "none",
    config: Mapping[str, Any] | None = None,
    service_tier: str | None = None,
) -> JsonObject:
    """The overrides shared by ``thread/start`` and ``thread/resume``."""
    if approval_policy == "on-failure":
        raise ValueError("approval_policy 'on-failure' was removed from codex; use 'on-request'")
    _check("approval_policy", approval_policy, APPROVAL_POLICIES)
    _check("approvals_reviewer", approvals_reviewer, APPROVALS_REVIEWERS)
    _check("sandbox", sandbox, SANDBOX_MODES)
    _check("personality", personality, PERSONALITIES)
    return _compact(
        {
            "cwd": cwd,
            "model": model,
            "modelProvider": model_provider,
            "approvalPolicy": approval_policy,
            "approvalsReviewer": approvals_reviewer,
            "sandbox": sandbox,
            "developerInstructions": developer_instructions,
            "baseInstructions": base_instructions,
            "personality": personality,
            "config": dict(config) if config else None,
            "serviceTier": service_tier,
        }
    )


def thread_start_params(*, ephemeral: bool | None = None, service_name: str | None = None,
                        dynamic_tools: Sequence[Mapping[str, Any]] | None = None,
                        **settings: Any) -> JsonObject:
    """``thread/start`` params. ``settings`` are those of :func:`thread_settings`;
    ``dynamic_tools`` (specs from :class:`~.tools.HostTool`) need the experimental API."""
    params = thread_settings(**settings)
    params.update(_compact({"ephemeral": ephemeral, "serviceName": service_name,
                            "dynamicTools": [dict(t) for t in dynamic_tools]
                            if dynamic_tools else None}))
    return params


def thread_resume_params(thread_id: str, **settings: Any) -> JsonObject:
    """``thread/resume`` params: the stored thread id plus the current overrides. The thread's
    history is not sent back (``excludeTurns``): codex has it, the host has its transcript, and
    a thread parked between turns is resumed often."""
    if not thread_id or not isinstance(thread_id, str):
        raise ValueError("thread/resume needs a thread id")
    params = thread_settings(**settings)
    params["threadId"] = thread_id
    params["excludeTurns"] = True
    return params


def thread_fork_params(thread_id: str, last_turn_id: str | None = None,
                       **settings: Any) -> JsonObject:
    """``thread/fork`` params: a new thread with ``thread_id``'s history through
    ``last_turn_id`` (inclusive; ``None``: all of it), plus the current overrides (a fork takes
    no ``personality``: it keeps the source thread's)."""
    if not thread_id or not isinstance(thread_id, str):
        raise ValueError("thread/fork needs a thread id")
    params = thread_settings(**settings)
    params.pop("personality", None)
    params["threadId"] = thread_id
    if last_turn_id is not None:
        params["lastTurnId"] = last_turn_id
    return params


def turn_start_params(
    thread_id: str,
    input_items: Sequence[JsonObject],
    *,
    cwd: str | None = None,
    model: str | None = None,
    effort: str | None = None,
    approval_policy: str | JsonObject | None = None,
    approvals_reviewer: str | None = None,
    sandbox_policy: JsonObject | None = None,
    output_schema: JsonObject | None = None,
    summary: str | None = None,
    client_user_message_id: str | None = None,
) -> JsonObject:
    """``turn/start`` params."""
    if not input_items:
        raise ValueError("turn/start needs at least one input item")
    _check("approval_policy", approval_policy, APPROVAL_POLICIES)
    _check("approvals_reviewer", approvals_reviewer, APPROVALS_REVIEWERS)
    if effort is not None and (not isinstance(effort, str) or not effort.strip()):
        raise ValueError(f"effort must be a non-empty string, got {effort!r}")
    return _compact(
        {
            "threadId": thread_id,
            "input": list(input_items),
            "cwd": cwd,
            "model": model,
            "effort": effort,
            "approvalPolicy": approval_policy,
            "approvalsReviewer": approvals_reviewer,
            "sandboxPolicy": sandbox_policy,
            "outputSchema": output_schema,
            "summary": summary,
            "clientUserMessageId": client_user_message_id,
        }
    )


def turn_steer_params(thread_id: str, expected_turn_id: str,
                      input_items: Sequence[JsonObject]) -> JsonObject:
    """``turn/steer`` params; ``expectedTurnId`` makes codex refuse a steer into another turn."""
    if not input_items:
        raise ValueError("turn/steer needs at least one input item")
    return {"threadId": thread_id, "expectedTurnId": expected_turn_id, "input": list(input_items)}


def turn_interrupt_params(thread_id: str, turn_id: str) -> JsonObject:
    """``turn/interrupt`` params."""
    return {"threadId": thread_id, "turnId": turn_id}


def compact_start_params(thread_id: str) -> JsonObject:
    """``thread/compact/start`` params."""
    return {"threadId": thread_id}


def sandbox_policy(mode: str, *, network_access: bool = False,
                   writable_roots: Sequence[str] = ()) -> JsonObject:
    """A ``sandboxPolicy`` object for ``turn/start`` from a ``sandbox`` mode name."""
    if mode == "read-only":
        return {"type": "readOnly", "networkAccess": network_access}
    if mode == "workspace-write":
        policy: JsonObject = {"type": "workspaceWrite", "networkAccess": network_access}
        if writable_roots:
            policy["writableRoots"] = list(writable_roots)
        return policy
    if mode == "danger-full-access":
        return {"type": "dangerFullAccess"}
    raise ValueError(f"sandbox mode must be one of {sorted(SANDBOX_MODES)}, got {mode!r}")
