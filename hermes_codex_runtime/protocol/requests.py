# mypy: no-extra-checks
# (extra checks would refuse spreading ThreadSettings into the params types: a TypedDict that
# lacks some of their optional keys might carry them mistyped as its own subtype. The keys it
# does have are still held to each params type.)
"""Parameter builders for the client requests the runtime sends.

Pure functions: they emit only fields the app-server schema knows (codex silently drops unknown
fields, so a typo would lose intent without an error) and leave out every ``None``. The wire-clean
tests check each builder against the schema the installed binary generates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, TypeVar, cast, get_args

from hermes_codex_runtime.protocol.schema_types import (
    ApprovalsReviewer,
    AskForApproval,
    DynamicToolSpec,
    GetAccountParams,
    GranularAskForApproval,
    InitializeCapabilities,
    InitializeParams,
    Personality,
    ReasoningSummary,
    ResponseItem,
    SandboxMode,
    SandboxPolicy,
    ThreadCompactStartParams,
    ThreadForkParams,
    ThreadInjectItemsParams,
    ThreadResumeParams,
    ThreadRevertParams,
    ThreadStartParams,
    TurnInterruptParams,
    TurnStartParams,
    TurnSteerParams,
    UserInput,
    WorkspaceWriteSandboxPolicy,
)

JsonObject = dict[str, Any]

#: The closed value sets, from the generated schema types.
APPROVAL_POLICIES: frozenset[AskForApproval] = frozenset(get_args(get_args(AskForApproval)[0]))
APPROVALS_REVIEWERS: frozenset[ApprovalsReviewer] = frozenset(get_args(ApprovalsReviewer))
SANDBOX_MODES: frozenset[SandboxMode] = frozenset(get_args(SandboxMode))
PERSONALITIES: frozenset[Personality] = frozenset(get_args(Personality))
SUMMARIES: frozenset[ReasoningSummary] = frozenset(get_args(ReasoningSummary))
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


_Params = TypeVar("_Params", bound=Mapping[str, object])
_Choice = TypeVar("_Choice")


def initialize_params(name: str, title: str, version: str, *, experimental_api: bool = False,
                      opt_out_notifications: Sequence[str] = ()) -> InitializeParams:
    """``initialize`` params: who the client is, and its capabilities (the experimental API;
    notifications it never reads, see :data:`UNUSED_NOTIFICATIONS`)."""
    capabilities: InitializeCapabilities = {}
    if experimental_api:
        capabilities["experimentalApi"] = True
    if opt_out_notifications:
        capabilities["optOutNotificationMethods"] = list(opt_out_notifications)
    return {"clientInfo": {"name": name, "title": title, "version": version},
            "capabilities": capabilities}


def _compact(params: _Params) -> _Params:
    """``params`` without its ``None`` values (every field that may be ``None`` is optional)."""
    return cast(_Params, {key: value for key, value in params.items() if value is not None})


def _choice(name: str, value: object, allowed: frozenset[_Choice]) -> _Choice | None:
    """``value`` as one of ``allowed`` (``None`` stays ``None``); anything else is refused."""
    if value is None:
        return None
    for choice in allowed:
        if choice == value:
            return choice
    raise ValueError(f"{name} must be one of {sorted(map(str, allowed))}, got {value!r}")


def _approval(value: str | GranularAskForApproval | None) -> AskForApproval | None:
    if value == "on-failure":
        raise ValueError("approval_policy 'on-failure' was removed from codex; use 'on-request'")
    if isinstance(value, dict):
        return value  # the granular policy
    return _choice("approval_policy", value, APPROVAL_POLICIES)


class ThreadSettings(TypedDict, total=False):
    """The overrides ``thread/start``, ``thread/resume`` and ``thread/fork`` share (mypy holds
    each field to all three params types)."""

    cwd: str | None
    model: str | None
    modelProvider: str | None
    approvalPolicy: AskForApproval | None
    approvalsReviewer: ApprovalsReviewer | None
    sandbox: SandboxMode | None
    developerInstructions: str | None
    baseInstructions: str | None
    config: dict[str, Any] | None
    serviceTier: str | None


def thread_settings(
    *,
    cwd: str | None = None,
    model: str | None = None,
    model_provider: str | None = None,
    approval_policy: str | GranularAskForApproval | None = None,
    approvals_reviewer: str | None = None,
    sandbox: str | None = None,
    developer_instructions: str | None = None,
    base_instructions: str | None = None,
    config: Mapping[str, Any] | None = None,
    service_tier: str | None = None,
) -> ThreadSettings:
    """The overrides shared by ``thread/start``, ``thread/resume`` and ``thread/fork``."""
    return _compact(ThreadSettings(
        cwd=cwd,
        model=model,
        modelProvider=model_provider,
        approvalPolicy=_approval(approval_policy),
        approvalsReviewer=_choice("approvals_reviewer", approvals_reviewer, APPROVALS_REVIEWERS),
        sandbox=_choice("sandbox", sandbox, SANDBOX_MODES),
        developerInstructions=developer_instructions,
        baseInstructions=base_instructions,
        config=dict(config) if config else None,
        serviceTier=service_tier,
    ))


def thread_start_params(*, ephemeral: bool | None = None, service_name: str | None = None,
                        dynamic_tools: Sequence[DynamicToolSpec] | None = None,
                        personality: str | None = "none", **settings: Any) -> ThreadStartParams:
    """``thread/start`` params. ``settings`` are those of :func:`thread_settings`;
    ``dynamic_tools`` (specs from :class:`~.tools.HostTool`) need the experimental API."""
    return _compact(ThreadStartParams(
        **thread_settings(**settings), ephemeral=ephemeral, serviceName=service_name,
        dynamicTools=list(dynamic_tools) if dynamic_tools else None,
        personality=_choice("personality", personality, PERSONALITIES)))


def thread_resume_params(thread_id: str, *, personality: str | None = "none",
                         **settings: Any) -> ThreadResumeParams:
    """``thread/resume`` params: the stored thread id plus the current overrides. The thread's
    history is not sent back (``excludeTurns``): codex has it, the host has its transcript, and
    a thread parked between turns is resumed often."""
    if not thread_id or not isinstance(thread_id, str):
        raise ValueError("thread/resume needs a thread id")
    return _compact(ThreadResumeParams(
        **thread_settings(**settings), threadId=thread_id, excludeTurns=True,
        personality=_choice("personality", personality, PERSONALITIES)))


def thread_fork_params(thread_id: str, last_turn_id: str | None = None, *,
                       personality: str | None = None, **settings: Any) -> ThreadForkParams:
    """``thread/fork`` params: a new thread with ``thread_id``'s history through
    ``last_turn_id`` (inclusive; ``None``: all of it), plus the current overrides (a fork takes
    no ``personality``: it keeps the source thread's, and one given is left out)."""
    if not thread_id or not isinstance(thread_id, str):
        raise ValueError("thread/fork needs a thread id")
    _choice("personality", personality, PERSONALITIES)
    return _compact(ThreadForkParams(**thread_settings(**settings), threadId=thread_id,
                                     lastTurnId=last_turn_id))


def turn_start_params(
    thread_id: str,
    input_items: Sequence[UserInput],
    *,
    cwd: str | None = None,
    model: str | None = None,
    effort: str | None = None,
    approval_policy: str | GranularAskForApproval | None = None,
    approvals_reviewer: str | None = None,
    sandbox_policy: SandboxPolicy | None = None,
    output_schema: JsonObject | None = None,
    summary: str | None = None,
    client_user_message_id: str | None = None,
    service_tier: str | None = None,
) -> TurnStartParams:
    """``turn/start`` params (``service_tier`` holds for this turn and later ones)."""
    if not input_items:
        raise ValueError("turn/start needs at least one input item")
    if effort is not None and (not isinstance(effort, str) or not effort.strip()):
        raise ValueError(f"effort must be a non-empty string, got {effort!r}")
    return _compact(TurnStartParams(
        threadId=thread_id,
        input=list(input_items),
        cwd=cwd,
        model=model,
        effort=effort,
        approvalPolicy=_approval(approval_policy),
        approvalsReviewer=_choice("approvals_reviewer", approvals_reviewer, APPROVALS_REVIEWERS),
        sandboxPolicy=sandbox_policy,
        outputSchema=output_schema,
        summary=_choice("summary", summary, SUMMARIES),
        clientUserMessageId=client_user_message_id,
        serviceTier=service_tier,
    ))


def thread_revert_params(thread_id: str, before_turn_id: str) -> ThreadRevertParams:
    """``thread/revert`` params: the thread's history before ``before_turn_id`` (that turn and
    every later one dropped from what the model sees; files are not touched)."""
    if not thread_id or not before_turn_id:
        raise ValueError("thread/revert needs a thread id and a turn id")
    return {"threadId": thread_id, "beforeTurnId": before_turn_id}


def thread_inject_items_params(thread_id: str,
                               items: Sequence[ResponseItem]) -> ThreadInjectItemsParams:
    """``thread/inject_items`` params: Responses API items appended to what the thread's model
    sees (turns it never ran)."""
    if not thread_id or not items:
        raise ValueError("thread/inject_items needs a thread id and at least one item")
    return {"threadId": thread_id, "items": list(items)}


def turn_steer_params(thread_id: str, expected_turn_id: str,
                      input_items: Sequence[UserInput]) -> TurnSteerParams:
    """``turn/steer`` params; ``expectedTurnId`` makes codex refuse a steer into another turn."""
    if not input_items:
        raise ValueError("turn/steer needs at least one input item")
    return {"threadId": thread_id, "expectedTurnId": expected_turn_id, "input": list(input_items)}


def turn_interrupt_params(thread_id: str, turn_id: str) -> TurnInterruptParams:
    """``turn/interrupt`` params."""
    return {"threadId": thread_id, "turnId": turn_id}


def account_read_params() -> GetAccountParams:
    """``account/read`` params: what codex knows of the login, without refreshing a token."""
    return {"refreshToken": False}


def compact_start_params(thread_id: str) -> ThreadCompactStartParams:
    """``thread/compact/start`` params."""
    return {"threadId": thread_id}


def sandbox_policy(mode: str, *, network_access: bool = False,
                   writable_roots: Sequence[str] = ()) -> SandboxPolicy:
    """A ``sandboxPolicy`` object for ``turn/start`` from a ``sandbox`` mode name."""
    if mode == "read-only":
        return {"type": "readOnly", "networkAccess": network_access}
    if mode == "workspace-write":
        policy: WorkspaceWriteSandboxPolicy = {"type": "workspaceWrite",
                                               "networkAccess": network_access}
        if writable_roots:
            policy["writableRoots"] = list(writable_roots)
        return policy
    if mode == "danger-full-access":
        return {"type": "dangerFullAccess"}
    raise ValueError(f"sandbox mode must be one of {sorted(SANDBOX_MODES)}, got {mode!r}")
