"""Every Hermes symbol the adapter relies on (mirrored, row for row, in COMPAT_MANIFEST.md).

Used by ``doctor`` to report missing host seams, and by the tests to walk the installed host.
``required`` symbols are the ones a working install needs; the rest degrade one feature or are
only used by the test suite.
"""

from __future__ import annotations

from typing import NamedTuple


class HostSymbol(NamedTuple):
    """``module:path`` (``Class.attr``, or ``Class().attr`` for an instance attribute)."""

    module: str
    path: str
    feature: str
    required: bool


SYMBOLS: tuple[HostSymbol, ...] = (
    HostSymbol(
        "hermes_cli.plugins",
        "ENTRY_POINTS_GROUP",
        "discovery through hermes_agent.plugins (value: the module)",
        True,
    ),
    HostSymbol(
        "hermes_cli.plugins", "invoke_hook", "post_llm_call / on_session_end for codex turns", True
    ),
    HostSymbol(
        "hermes_cli.plugins", "discover_plugins", "tests: discovery as Hermes does it", False
    ),
    HostSymbol(
        "agent.codex_runtime",
        "run_codex_app_server_turn",
        "THE turn seam (replaced; AIAgent._run_codex_app_server_turn imports it per call)",
        True,
    ),
    HostSymbol("run_agent", "AIAgent._run_codex_app_server_turn", "the caller of the seam", True),
    HostSymbol(
        "hermes_cli.runtime_provider",
        "resolve_runtime_provider",
        "activation of model.openai_runtime on every path (wrapped)",
        True,
    ),
    HostSymbol("hermes_cli.config", "load_config", "reading model.*, approvals.*", True),
    HostSymbol("hermes_constants", "get_hermes_home", "HERMES_HOME (thread bindings file)", True),
    HostSymbol(
        "agent.background_review",
        "_resolve_review_runtime",
        "keeping the review fork on codex_responses (wrapped)",
        True,
    ),
    HostSymbol(
        "agent.conversation_compression",
        "COMPACTION_STATUS",
        "the status line for native compaction",
        True,
    ),
    HostSymbol(
        "agent.conversation_compression",
        "_compress_context_via_codex_app_server",
        "/compress reaches codex through agent._codex_session.compact_thread()",
        True,
    ),
    HostSymbol("agent.usage_pricing", "CanonicalUsage", "cost estimate input", True),
    HostSymbol("agent.usage_pricing", "estimate_usage_cost", "cost estimate", True),
    HostSymbol(
        "agent.error_classifier",
        "FailoverReason",
        "rate_limit: the reason that arms Hermes' cooldown on fallback",
        True,
    ),
    HostSymbol(
        "agent.redact", "redact_sensitive_text", "redacting commands shown in gateway prompts", True
    ),
    HostSymbol(
        "hermes_state",
        "SessionDB.get_session",
        "reading the thread binding (sessions.model_config)",
        True,
    ),
    HostSymbol(
        "hermes_state",
        "SessionDB._execute_write",
        "writing the binding atomically (json_set)",
        True,
    ),
    HostSymbol(
        "hermes_state", "SessionDB.update_token_counts", "token accounting in state.db", True
    ),
    HostSymbol(
        "hermes_state", "SessionDB.get_messages", "tests: what reached the session DB", False
    ),
    HostSymbol("tools.approval", "get_current_session_key", "the approval session key", True),
    HostSymbol("tools.approval", "_is_gateway_approval_context", "gateway vs CLI", True),
    HostSymbol(
        "tools.approval", "is_approval_bypass_active", "approvals.mode: off, --yolo, /yolo", True
    ),
    HostSymbol("tools.approval", "_get_cron_approval_mode", "cron approvals", True),
    HostSymbol("tools.approval", "_YOLO_MODE_FROZEN", "--yolo", True),
    HostSymbol("tools.approval", "is_current_session_yolo_enabled", "this session's /yolo", True),
    HostSymbol("tools.approval", "_normalize_approval_mode", "approvals.mode", True),
    HostSymbol("tools.approval", "_command_detection_variants", "approvals.deny", True),
    HostSymbol("tools.approval", "detect_hardline_command", "never-run commands", True),
    HostSymbol("tools.approval", "_check_sudo_stdin_guard", "sudo without a password source", True),
    HostSymbol("tools.approval", "_match_user_deny_rule", "approvals.deny", True),
    HostSymbol("tools.approval", "_command_matches_permanent_allowlist", "command_allowlist", True),
    HostSymbol("tools.approval", "is_approved", "approvals remembered for the session", True),
    HostSymbol("tools.approval", "approve_session", '"session" / "always" choices', True),
    HostSymbol("tools.approval", "approve_permanent", '"always"', True),
    HostSymbol("tools.approval", "save_permanent_allowlist", '"always"', True),
    HostSymbol(
        "tools.approval",
        "_gateway_notify_cbs",
        "is there an approval channel for this gateway session",
        True,
    ),
    HostSymbol("tools.approval", "_lock", "reading the channel table", True),
    HostSymbol(
        "tools.approval",
        "_await_gateway_decision",
        "asking through the gateway (pending approval, notify, wait, timeout)",
        True,
    ),
    HostSymbol(
        "tools.approval",
        "_gateway_queues",
        "withdrawing a lapsed gateway prompt (its entry resolved as deny and removed)",
        False,
    ),
    HostSymbol(
        "tools.approval",
        "_ApprovalEntry",
        "the queued entry a withdrawal resolves (.data identifies ours; .result, .event)",
        False,
    ),
    HostSymbol(
        "gateway.run",
        "GatewayRunner._handle_message",
        "tests: a chat platform's message path (/stop, /approve) with a persistent key",
        False,
    ),
    HostSymbol(
        "gateway.platforms.base",
        "BasePlatformAdapter.handle_message",
        "tests: a test chat adapter feeding the gateway",
        False,
    ),
    HostSymbol(
        "cli",
        "HermesCLI._approval_callback",
        "the CLI prompt a withdrawal dismisses (_approval_state: command, response_queue)",
        False,
    ),
    HostSymbol(
        "tools.approval",
        "_fire_approval_hook",
        "pre_approval_request / post_approval_response around CLI prompts",
        True,
    ),
    HostSymbol(
        "tools.approval", "prompt_dangerous_approval", "the CLI prompt (redaction, timeout)", True
    ),
    HostSymbol(
        "tools.approval", "set_current_session_key", "tests: binding a session like the CLI", False
    ),
    HostSymbol("tools.approval", "enable_session_yolo", "tests: /yolo", False),
    HostSymbol(
        "tools.terminal_tool",
        "_get_approval_callback",
        "the CLI's interactive approval callback",
        True,
    ),
    HostSymbol(
        "tools.terminal_tool", "set_approval_callback", "tests: installing a CLI callback", False
    ),
    HostSymbol("run_agent", "AIAgent.interrupt", "wrapped: reaches the codex session", True),
    HostSymbol("run_agent", "AIAgent.close", "wrapped: closes the codex process tree", True),
    HostSymbol(
        "run_agent", "AIAgent.release_clients", "wrapped: gateway eviction closes codex", True
    ),
    HostSymbol("run_agent", "AIAgent.clear_interrupt", "end of a codex turn", True),
    HostSymbol("run_agent", "AIAgent.run_conversation", "the fallback re-runs the turn", True),
    HostSymbol("run_agent", "AIAgent._try_activate_fallback", "usage-limit fallback", True),
    HostSymbol(
        "run_agent", "AIAgent._restore_primary_runtime", "held off during the fallback turn", True
    ),
    HostSymbol(
        "run_agent",
        "AIAgent._flush_messages_to_session_db",
        "persisting projected messages (idempotent)",
        True,
    ),
    HostSymbol("run_agent", "AIAgent._sync_external_memory_for_turn", "memory sync", True),
    HostSymbol("run_agent", "AIAgent._spawn_background_review", "the background review", True),
    HostSymbol(
        "run_agent", "AIAgent._reset_stream_delivery_tracking", "streaming state per turn", True
    ),
    HostSymbol("run_agent", "AIAgent._fire_stream_delta", "streamed text", True),
    HostSymbol("run_agent", "AIAgent._fire_reasoning_delta", "streamed reasoning", True),
    HostSymbol("run_agent", "AIAgent._emit_status", "compaction, retry and quiet status lines",
               True),
    HostSymbol("run_agent", "AIAgent._touch_activity",
               "the activity clock the gateway's inactivity watchdog reads", False),
    HostSymbol("run_agent", "AIAgent.steer", "wrapped: /steer reaches the codex turn", False),
    HostSymbol("run_agent", "AIAgent._drain_pending_steer",
               "taking Hermes' pending steer for codex", False),
    HostSymbol("run_agent", "AIAgent()._pending_steer_lock",
               "handing a refused steer back to Hermes", False),
    HostSymbol("run_agent", "AIAgent().reasoning_config", "Hermes' effort → codex's effort",
               False),
    HostSymbol("run_agent", "AIAgent.get_activity_summary",
               "tests: what the inactivity watchdog sees", False),
    HostSymbol("run_agent", "AIAgent._ensure_db_session", "session row before token writes", True),
    HostSymbol("run_agent", "AIAgent().session_id", "binding key", True),
    HostSymbol("run_agent", "AIAgent()._session_db", "state.db", True),
    HostSymbol("run_agent", "AIAgent()._cached_system_prompt", "developer instructions", True),
    HostSymbol(
        "run_agent", "AIAgent()._persist_user_message_idx", "history before this turn", True
    ),
    HostSymbol("run_agent", "AIAgent()._user_turn_count", "rewound for the fallback turn", True),
    HostSymbol("run_agent", "AIAgent()._iters_since_skill", "skill nudge", True),
    HostSymbol("run_agent", "AIAgent()._skill_nudge_interval", "skill nudge", True),
    HostSymbol("run_agent", "AIAgent().valid_tool_names", "skill nudge needs skill_manage", True),
    HostSymbol("run_agent", "AIAgent().context_compressor", "compressor updates", True),
    HostSymbol(
        "run_agent",
        "AIAgent().session_prompt_tokens",
        "session counters (and the other session_*)",
        True,
    ),
    HostSymbol("run_agent", "AIAgent().tool_progress_callback", "progress", True),
    HostSymbol("run_agent", "AIAgent().event_callback", "session:compress", True),
    HostSymbol("run_agent", "AIAgent()._fallback_chain", "is a fallback configured", True),
    HostSymbol(
        "run_agent",
        "AIAgent()._session_init_model_config",
        "binding survives compression rotation",
        True,
    ),
    HostSymbol(
        "run_agent", "AIAgent()._interrupt_requested", "a stop before the turn starts", True
    ),
    HostSymbol(
        "hermes_cli.commands",
        "resolve_command",
        "registering /codex-runtime only where Hermes has none",
        True,
    ),
    HostSymbol(
        "hermes_cli.config", "save_config", "/codex-runtime on hosts without a built-in one", True
    ),
    HostSymbol(
        "hermes_cli.fallback_config",
        "get_fallback_chain",
        "the demo builds its agent as the CLI does",
        False,
    ),
    HostSymbol("hermes_state", "SessionDB", "the demo's session database", False),
    HostSymbol(
        "hermes_cli.plugins", "get_plugin_commands", "tests: /codex-status is registered", False
    ),
    HostSymbol(
        "tools.approval", "register_gateway_notify", "tests: a gateway approval channel", False
    ),
    HostSymbol(
        "hermes_cli.config",
        "OPTIONAL_ENV_VARS",
        "tests: every credential Hermes' .env knows (password-flagged)",
        False,
    ),
    HostSymbol(
        "hermes_cli.plugins",
        "PluginContext.register_command",
        "registering /codex-status (and /codex-runtime where Hermes has none)",
        True,
    ),
    HostSymbol(
        "hermes_cli.plugins",
        "PluginContext.register_cli_command",
        "`hermes codex-plugin doctor|status`",
        True,
    ),
    HostSymbol(
        "run_agent",
        "AIAgent()._pending_cli_user_message",
        "the fallback turn reuses the saved user message",
        True,
    ),
    HostSymbol("run_agent", "AIAgent()._turns_since_memory", "rewound for the fallback turn", True),
)


def lookup(symbol: HostSymbol, instance: object | None = None) -> bool:
    """True when ``symbol`` exists in the installed host (``instance`` answers ``Class().attr``)."""
    import importlib

    try:
        obj: object = importlib.import_module(symbol.module)
    except Exception:
        return False
    if "()." in symbol.path:
        return instance is not None and hasattr(instance, symbol.path.split("().", 1)[1])
    for part in symbol.path.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def missing(instance: object | None = None, *, required_only: bool = True) -> list[HostSymbol]:
    """The listed symbols the installed host lacks (instance attributes skipped without one)."""
    out = []
    for symbol in SYMBOLS:
        if required_only and not symbol.required:
            continue
        if "()." in symbol.path and instance is None:
            continue
        if not lookup(symbol, instance):
            out.append(symbol)
    return out
