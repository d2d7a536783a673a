"""The Hermes implementation of the runtime's hooks: what a codex turn does to an ``AIAgent``.

Owns the mapping from the agent and Hermes' config to the runtime's values — settings (binary,
``CODEX_HOME``, cwd from ``session_cwd`` → ``TERMINAL_CWD`` → process cwd, sandbox from the
terminal security mode, the walls' paths from :mod:`..config.walled`, effort from
``reasoning_config``),
the system prompt as developer instructions — and hands each other hook to the room that owns
it: the thread binding (:mod:`.binding`), approvals (:mod:`..approvals.decide`), progress
(:mod:`.events`, redacted), accounting (:mod:`.accounting`), the epilogue (:mod:`.epilogue`)
and the fallback provider (:mod:`.fallback`). What a hook needs of the turn in flight comes in
its ``context`` (:mod:`.state`), never from the agent.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_codex_runtime.continuity import Binding
from hermes_codex_runtime.events import CodexEvent
from hermes_codex_runtime.hermes import tools
from hermes_codex_runtime.hermes.approvals import decide
from hermes_codex_runtime.hermes.config import private_places, walled
from hermes_codex_runtime.hermes.config.model_names import (
    codex_name,
    foreign_model_problem,
    foreign_vendor,
)
from hermes_codex_runtime.hermes.config.settings import (
    SettingError,
    model_section,
    service_tier,
)
from hermes_codex_runtime.hermes.config.standing import Standing, standing
from hermes_codex_runtime.hermes.turn import binding, instructions, review
from hermes_codex_runtime.hermes.turn.accounting import record_compaction, record_usage
from hermes_codex_runtime.hermes.turn.epilogue import epilogue
from hermes_codex_runtime.hermes.turn.events import bridge
from hermes_codex_runtime.hermes.turn.state import HermesContext, state_of
from hermes_codex_runtime.hookspecs import hookimpl
from hermes_codex_runtime.protocol import Decision, Failure, HostToolCall, HostToolOutput
from hermes_codex_runtime.usage import UsageReport
from hermes_codex_runtime.values import ApprovalRequest, SessionSettings, TurnResult

log = logging.getLogger("hermes_codex_runtime.hermes")
#: How this host names itself to codex (``initialize``'s ``clientInfo.title``).
CLIENT_TITLE = "Hermes Agent (codex runtime)"


class HermesHost:
    """The hook implementations for Hermes (registered as the host plugin)."""

    # ------------------------------------------------------------------ settings

    @hookimpl
    def codex_session_settings(self, agent: Any) -> SessionSettings:
        """Binary, home, cwd, timeouts and model from config.yaml (read once, see
        :mod:`..config.standing`) and the agent."""
        fixed = standing()
        review_fork = review.is_review_fork(agent)
        cwd = walled.session_workspace(agent)
        walled.warn_if_home(cwd)
        settings = host_settings(fixed, cwd=cwd)
        offer = tools.offered(agent) if not review_fork else None
        return dataclasses.replace(
            settings,
            model=fixed.plugin.codex_model
            or hermes_model(agent, model_section(fixed.config).get("default")),
            sandbox="read-only" if review_fork else settings.sandbox,
            approval_policy="never" if review_fork else "on-request",
            host_tools=review.host_tools(agent) if offer is None else offer.tools,
            config_overrides=_thread_config(agent, offer),
            effort=codex_effort(getattr(agent, "reasoning_config", None)),
            service_tier=service_tier(agent),
            conversation=getattr(agent, "session_id", None))

    @hookimpl
    def codex_developer_instructions(self, agent: Any) -> str | None:
        """What Hermes' own loop sends as the system message: its composed system prompt, then
        the agent's ephemeral one (an API client's system message or ``instructions``, a
        personality, the gateway's session context), never cached or saved by Hermes."""
        return developer_instructions(agent)

    # ------------------------------------------------------------------ thread binding

    @hookimpl
    def codex_stored_thread(self, agent: Any) -> Binding | None:
        """The codex thread bound to this Hermes session by an earlier process (with the remote
        app-server holding it, if any, and its instructions' digest)."""
        return binding.stored_thread(agent)

    @hookimpl
    def codex_thread_bound(self, agent: Any, thread_id: str, endpoint: str | None,
                           instructions: str, conversation: str | None) -> None:
        """Persist the binding with the session and in the plugin's own file."""
        binding.bind_thread(agent, thread_id, endpoint, instructions, conversation)

    # ------------------------------------------------------------------ approvals & progress

    @hookimpl
    def codex_approval(self, agent: Any, request: ApprovalRequest,
                       context: HermesContext) -> Decision:
        """Decide like Hermes' terminal tool would (see :mod:`..approvals.decide`)."""
        state = state_of(context)
        scope = state.scope if state is not None else decide.capture_scope(agent)
        return decide.decide(request, scope, agent)

    @hookimpl
    def codex_tool_call(self, agent: Any, call: HostToolCall,
                        context: HermesContext) -> HostToolOutput:
        """A Hermes tool codex called, run by Hermes' dispatcher in the agent (see
        :mod:`..tools`)."""
        state = state_of(context)
        name = tools.offered(agent).hermes_name(call.tool) or call.tool
        return tools.run_tool(agent, call, name, state.effective_task_id if state else None,
                              state.messages if state else None)

    @hookimpl
    def codex_event(self, agent: Any, event: CodexEvent, context: HermesContext) -> None:
        """Bridge progress into the agent's display callbacks."""
        try:
            bridge(agent, event, state_of(context))
        except Exception:
            log.debug("codex-runtime: a display callback raised", exc_info=True)

    # ------------------------------------------------------------------ accounting

    @hookimpl
    def codex_record_usage(self, agent: Any, usage: UsageReport,
                           context: HermesContext) -> None:
        """Session counters, compressor, cost and the session database."""
        record_usage(agent, usage)
        state = state_of(context)
        if state is not None:
            state.usage_recorded = True

    @hookimpl
    def codex_record_compaction(self, agent: Any, turn: TurnResult) -> None:
        """codex compacted the thread: Hermes' compaction bookkeeping and event."""
        record_compaction(agent, turn)

    @hookimpl
    def codex_turn_finished(self, agent: Any, turn: TurnResult,
                            messages: Sequence[Mapping[str, Any]],
                            context: HermesContext) -> None:
        """Splice, persist, nudge, sync memory, review, and fire Hermes' hooks."""
        state = state_of(context)
        if state is None or state.epilogue_done or turn.fallback is not None:
            return  # a fallback turn ran Hermes' own epilogue
        state.epilogue_done = True
        epilogue(agent, turn, messages, state)

    @hookimpl
    def codex_fallback(self, agent: Any, turn: TurnResult, failure: Failure,
                       context: HermesContext) -> dict[str, Any] | None:
        """Complete the same turn on the first configured fallback provider; the runtime keeps
        what it returns as ``turn.fallback``."""
        state = state_of(context)
        if state is None:
            return None
        from hermes_codex_runtime.hermes.turn.fallback import run_on_fallback

        return run_on_fallback(agent, state, failure)


# ---------------------------------------------------------------------- helpers


def host_settings(fixed: Standing, *, cwd: str) -> SessionSettings:
    """What every codex thread of this Hermes gets from config.yaml, whatever the agent: the
    binary, home, provider, timeouts, environment, placement and walls. Threads with equal
    answers share an app-server (the side tasks of :mod:`..side_tasks` join the sessions').
    The places in the Hermes home codex writes into are made private first
    (:mod:`..config.private_places`)."""
    private_places.keep_private(fixed.private_places)
    settings = fixed.plugin
    return SessionSettings(
        codex_bin=settings.codex_bin,  # None: $CODEX_BIN, the bundled binary, then PATH
        codex_home=settings.codex_home,
        cwd=cwd,
        model_provider=settings.codex_model_provider,
        turn_timeout=settings.turn_timeout,
        sandbox=fixed.sandbox,
        env_passthrough=settings.env_passthrough,
        command_env_passthrough=settings.command_env_passthrough,
        client_version=fixed.client_version,
        client_title=CLIENT_TITLE,
        registry_path=fixed.registry_path,
        app_server=settings.app_server,
        deny_read=fixed.deny_read,
        protect=fixed.protect,
        walls_cache=fixed.walls_cache,
    )


def developer_instructions(agent: Any) -> str | None:
    """Hermes' system message for ``agent``: ``_cached_system_prompt`` and
    ``ephemeral_system_prompt``, joined as Hermes joins them at every API call."""
    prompt = getattr(agent, "_cached_system_prompt", None)
    text = prompt if isinstance(prompt, str) else ""
    ephemeral = getattr(agent, "ephemeral_system_prompt", None)
    if isinstance(ephemeral, str) and ephemeral:
        text = (text + "\n\n" + ephemeral).strip()
    return text if text.strip() else None


def _thread_config(agent: Any, offer: Any) -> dict[str, Any]:
    """Further codex config for the agent's thread: what its tool offer switches off, and
    codex's own loading of project instruction files off — Hermes' project context is the
    one copy the model gets (:mod:`.instructions`)."""
    return {**(offer.config if offer is not None else {}), **instructions.CODEX_CONFIG}


#: Hermes' reasoning effort → codex's (codex has no "max"/"ultra": its highest is "xhigh").
EFFORT = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
          "xhigh": "xhigh", "max": "xhigh", "ultra": "xhigh"}


def hermes_model(agent: Any, configured: object = None) -> str | None:
    """The model Hermes chose for this agent (``model.default``, or a ``/model`` switch), as codex
    names it: an ``openai/`` aggregator prefix is dropped. Another vendor's model
    (``anthropic/claude-sonnet-4``, which Hermes sends as ``claude-sonnet-4``) is a
    :class:`~..config.settings.SettingError` naming the fix: the turn fails at once, before codex's
    provider refuses it. ``configured``: config.yaml's ``model.default``, for the message."""
    model = getattr(agent, "model", None)
    if not isinstance(model, str) or not model.strip():
        return None
    if foreign_vendor(model) is not None:
        raise SettingError(foreign_model_problem(model, configured))
    return codex_name(model) or None


def codex_effort(reasoning_config: Any) -> str | None:
    """codex's reasoning effort for Hermes' ``reasoning_config`` (``None``: codex's default;
    reasoning switched off → ``minimal``, the least codex models offer)."""
    if not isinstance(reasoning_config, dict):
        return None
    if reasoning_config.get("enabled") is False:
        return "minimal"
    return EFFORT.get(str(reasoning_config.get("effort") or "").lower())

