"""Deciding codex's approval requests the way Hermes decides its own.

codex asks only when an action needs to leave its sandbox (a command to escalate, a file change,
extra permissions, an MCP tool call). Each request is decided when it arrives — so a ``/yolo``
toggled mid-session counts for the next request — in this order:

1. a command Hermes hard-blocks (``rm -rf /`` and friends) or a user deny rule, or a file change
   in a protected place (:mod:`.protected`: the host's credentials and state, codex's login,
   ``~/.ssh``, ``/etc``): decline. A command that names a protected place skips steps 2–4:
   only a person can allow it;
2. approvals bypassed — ``approvals.mode: off`` (YAML ``off`` is ``False``), ``--yolo`` /
   ``HERMES_YOLO_MODE`` (frozen at import), or this session's ``/yolo``: accept;
3. cron: ``approvals.cron_mode`` (``approve`` accepts, anything else declines);
4. a pattern the user already approved for the session or permanently: accept;
5. a gateway context (a chat platform, or an API-server client with an approval notifier): asked
   through Hermes' own gateway approval channel — the pending approval, the chat platform
   notified, the user's answer (or the host's timeout) resolving it;
6. the CLI: asked through the interactive approval callback;
7. nobody can answer: decline (fail closed).

Steps 5–6 go through Hermes' public plugin entry point ``tools.approval.request_tool_approval``
wherever the host has it (0.19.0 and the 0.22 line do): Hermes then applies its own presence
checks, allow-lists (keyed ``plugin_rule:codex:…``), prompt, gateway channel and approval hooks. The
private helpers below are the fallback for hosts without it, and for a protected place, which
must never be offered "always".

Choices map ``once → accept``, ``session/always → acceptForSession`` (Hermes records them too),
``deny/timeout → decline``. The ``pre_approval_request`` / ``post_approval_response`` plugin hooks
fire around every question asked. No LLM is consulted ("smart" mode asks like "manual") and nothing
is downloaded.

What a prompt shows is redacted line by line (it may go to a third-party chat service), and a
prompt is withdrawn the moment its question lapses — the turn ended, was interrupted or
``/stop``-ped, or codex resolved the request itself: the gateway's queue entry is resolved as a
denial and removed (so the user's next ``/approve`` answers the question they see), and the CLI's
prompt is dismissed.
"""

from __future__ import annotations

import contextvars
import fnmatch
import itertools
import logging
import os
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hermes_codex_runtime.hermes import protected
from hermes_codex_runtime.hermes.probe import report_missing, symbol, symbol_in
from hermes_codex_runtime.hermes.settings import (
    SettingError,
    approvals_section,
    hermes_home,
    plugin_settings,
)
from hermes_codex_runtime.protocol import Decision
from hermes_codex_runtime.values import ApprovalRequest
from hermes_codex_runtime.wire import redact

log = logging.getLogger("hermes_codex_runtime.hermes")

_CHOICES = {"once": Decision.ACCEPT, "session": Decision.ACCEPT_FOR_SESSION,
            "always": Decision.ACCEPT_FOR_SESSION}
CLI_DISMISS_WINDOW = 2.0  # how long a withdrawal waits for a CLI prompt that is about to open


@dataclass(slots=True)
class ApprovalScope:
    """What the agent's thread knew about who can answer, captured when the turn started (the
    decision itself runs on the session's approval thread, where thread-locals are gone)."""

    context: contextvars.Context
    session_key: str
    cli_callback: Any
    gateway: bool
    cron: bool
    platform: str
    protected_roots: list[str]


def capture_scope(agent: Any) -> ApprovalScope:
    """Capture, on the agent's own thread, how approvals can be answered for this turn."""
    approval = _module()
    session_key = ""
    gateway = False
    cli_callback = None
    if approval is not None:
        try:
            session_key = str(approval.get_current_session_key(default="") or "")
        except Exception:
            session_key = ""
        try:
            gateway = bool(approval._is_gateway_approval_context())
        except Exception:
            gateway = False
        if not gateway and os.environ.get("HERMES_EXEC_ASK", "").strip().lower() in (
                "1", "true", "yes", "on"):
            key = session_key or str(getattr(agent, "session_id", "") or "")
            gateway = _notifier(approval, key) is not None  # someone can answer
    get_callback = symbol("tools.terminal_tool", "_get_approval_callback",
                          feature="CLI approval prompts")
    if callable(get_callback):
        try:
            cli_callback = get_callback()
        except Exception:
            cli_callback = None
    platform = str(getattr(agent, "platform", "") or "")
    approvals_section()  # read config.yaml now, not while codex waits for an answer
    cron = platform == "cron" or bool(os.environ.get("HERMES_CRON_SESSION"))
    if not session_key:
        session_key = str(getattr(agent, "session_id", "") or "")
    try:
        codex_home = plugin_settings().codex_home
    except SettingError:
        codex_home = None
    return ApprovalScope(contextvars.copy_context(), session_key, cli_callback,
                         gateway and not cron, cron, platform,
                         protected.protected_roots(hermes_home(), codex_home))


#: Where Hermes keeps its approval helpers: one module in 0.19.0, split in the 0.22 line.
APPROVAL_MODULES = ("tools.approval", "tools.approval_context", "tools.approval_detection",
                    "tools.approval_floors", "tools.approval_gateway_wait")


def _find(approval: Any, name: str, feature: str = "part of Hermes' approval flow") -> Any:
    """``name`` from ``tools.approval``, else from the module it moved to (0.22), else None."""
    value = getattr(approval, name, None)
    if value is not None:
        return value
    return symbol_in(APPROVAL_MODULES[1:], name, feature=feature)


def _notifier(approval: Any, key: str) -> Any:
    """The approval notifier a gateway client registered for this session, or ``None`` (0.22's
    API server registers one for ``/v1/runs`` and streaming chat, though its gateway-context
    probe says False there)."""
    if not key:
        return None
    lookup = getattr(approval, "_gateway_notify_cb", None)
    if callable(lookup):
        try:
            return lookup(key)
        except Exception:
            return None
    lock = getattr(approval, "_lock", None)
    callbacks = getattr(approval, "_gateway_notify_cbs", None)
    if lock is None or not isinstance(callbacks, dict):
        return None
    with lock:
        return callbacks.get(key)


def _module() -> Any:
    try:
        import tools.approval as approval
    except Exception:
        symbol("tools.approval", "is_approval_bypass_active", feature="Hermes approvals")
        return None
    return approval


def _command_text(request: ApprovalRequest) -> str:
    command = request.params.get("command")
    if isinstance(command, list):
        return shlex.join(str(part) for part in command)
    return str(command or request.command or "")


def _describe(request: ApprovalRequest) -> tuple[str, str, str]:
    """``(what, description, pattern key)`` shown to the person and used for session caching."""
    if request.kind == "command":
        command = _command_text(request)
        description = f"codex wants to run this command outside its sandbox in " \
                      f"{request.cwd or 'the session directory'}"
        if request.reason:
            description += f" — {request.reason}"
        return command, description, f"codex:command:{command}"
    if request.kind == "file_change":
        lines = []
        for change in request.changes:
            kind = change.get("kind")
            kind_name = kind.get("type") if isinstance(kind, Mapping) else "update"
            lines.append(f"{kind_name} {change.get('path')}")
            diff = str(change.get("diff") or "")
            if diff and protected.is_credential_file(str(change.get("path") or "")):
                lines.append(f"    (contents hidden: {len(diff.splitlines())} line(s) of a "
                             "credentials file)")
            elif diff:
                lines.extend("    " + line for line in diff.splitlines()[:40])
        what = "apply_patch: " + (", ".join(
            str(c.get("path")) for c in request.changes if c.get("path")) or "files")
        description = "codex wants to change files:\n" + "\n".join(lines) if lines else \
            "codex wants to change files"
        if request.reason:
            description += f"\n({request.reason})"
        return what, description, "codex:file_change"
    if request.kind == "permissions":
        permissions = dict(request.params.get("permissions") or {})
        return (f"grant codex extra permissions: {permissions}",
                request.reason or "codex asks for more filesystem or network access",
                "codex:permissions")
    if request.kind == "mcp_tool_call":
        meta = request.params.get("_meta")
        meta = meta if isinstance(meta, Mapping) else {}
        server = request.params.get("serverName") or "mcp"
        tool_params = meta.get("tool_params")
        return (f"{server}: {request.params.get('message') or 'run an MCP tool'}",
                f"MCP tool call with {tool_params}" if tool_params else "MCP tool call",
                f"codex:mcp:{server}")
    return (str(request.params.get("message") or request.method),
            f"{request.params.get('serverName') or 'codex'} asks for input", "codex:other")


def decide(request: ApprovalRequest, scope: ApprovalScope, agent: Any) -> Decision:
    """The decision for one request (runs inside the turn's captured context)."""
    try:
        return scope.context.copy().run(_decide, request, scope, agent)
    except Exception:
        log.exception("codex-runtime: the approval decision failed; declining")
        return Decision.DECLINE


def _decide(request: ApprovalRequest, scope: ApprovalScope, agent: Any) -> Decision:
    approval = _module()
    if request.kind in ("user_input", "dynamic_tool", "unknown"):
        return Decision.DECLINE
    if request.kind == "elicitation":
        # A free-form MCP form: nobody here can fill it in; accepting an empty form is only
        # right when the user turned approvals off.
        return Decision.ACCEPT if approval is not None and _bypass(approval) else \
            Decision.DECLINE
    what, description, pattern = _describe(request)
    if request.kind == "command" and approval is not None and _hardline(approval, what):
        log.warning("codex-runtime: declined a command Hermes never runs: %s", redact(what))
        return Decision.DECLINE
    target = protected.protected_target(request.kind, what, request.changes, request.params,
                                        request.cwd, scope.protected_roots)
    if target and request.kind == "file_change":
        log.warning("codex-runtime: declined a change to a protected path (%s): %s", target,
                    redact(what))
        return Decision.DECLINE
    if approval is None:
        return Decision.DECLINE  # no approval machinery: nobody can answer
    auto = target is None  # a protected place is never approved without a person
    if auto and _bypass(approval):
        return Decision.ACCEPT
    if scope.cron:  # nobody to ask: approvals.cron_mode decides (as Hermes' gate would)
        mode = _call(approval, "_get_cron_approval_mode", default="deny")
        return Decision.ACCEPT if auto and mode == "approve" else Decision.DECLINE
    key = scope.session_key
    host_redact = symbol("agent.redact", "redact_sensitive_text", feature="redaction")
    shown_what = protected.prompt_text(what, host_redact)
    shown_description = protected.prompt_text(description, host_redact)
    pattern = protected.prompt_text(pattern, host_redact)
    if auto and request.kind == "command" and _call(
            approval, "_command_matches_permanent_allowlist", what, default=False):
        return Decision.ACCEPT  # a command the user allowed for good in Hermes' own prompts
    public = getattr(approval, "request_tool_approval", None)
    if auto and callable(public) and (scope.gateway or callable(scope.cli_callback)):
        if request.cancelled.is_set():
            return Decision.DECLINE
        return _ask_host(approval, public, scope, shown_what, shown_description, pattern, request)
    if target:
        shown_description += f"\n(it touches {target}: approve only if you meant it)"
    if auto and key and _call(approval, "is_approved", key, pattern, default=False):
        return Decision.ACCEPT_FOR_SESSION
    allow_permanent = request.kind == "command" and auto
    hook_args = {"command": shown_what, "description": shown_description,
                 "pattern_key": pattern, "pattern_keys": [pattern], "session_key": key}
    if request.cancelled.is_set():
        return Decision.DECLINE  # the turn already ended: ask nobody
    if scope.gateway:
        choice = _ask_gateway(approval, key, shown_what, shown_description, pattern,
                              allow_permanent, request)
    elif callable(scope.cli_callback):
        choice = _ask_cli(approval, scope.cli_callback, hook_args, shown_what,
                          shown_description, allow_permanent, request)
    else:
        log.info("codex-runtime: no one can answer codex's approval request (%s); declining",
                 request.kind)
        return Decision.DECLINE
    if request.cancelled.is_set():
        return Decision.DECLINE  # the turn ended meanwhile; the session drops the answer anyway
    decision = _CHOICES.get(str(choice or "").lower(), Decision.DECLINE)
    if target and decision.accepts:
        return Decision.ACCEPT  # once: a protected place is never remembered as approved
    if decision.accepts and key and choice in ("session", "always"):
        _call(approval, "approve_session", key, pattern)
    if choice == "always" and allow_permanent:
        _call(approval, "approve_permanent", pattern)
        permanent = getattr(approval, "_permanent_approved", None)
        if permanent is not None:
            _call(approval, "save_permanent_allowlist", permanent)
    return decision


def _call(module: Any, name: str, *args: Any, default: Any = None) -> Any:
    function = _find(module, name)
    if not callable(function):
        return default
    try:
        return function(*args)
    except Exception:
        log.debug("codex-runtime: %s raised", name, exc_info=True)
        return default


def _bypass(approval: Any) -> bool:
    """``is_approval_bypass_active()`` without re-reading config.yaml on every request:
    ``--yolo`` (frozen at import), this session's ``/yolo``, or ``approvals.mode: off``."""
    frozen = getattr(approval, "_YOLO_MODE_FROZEN", None)
    session_yolo = getattr(approval, "is_current_session_yolo_enabled", None)
    normalize = _find(approval, "_normalize_approval_mode")
    if frozen is None or not callable(session_yolo) or not callable(normalize):
        return bool(_call(approval, "is_approval_bypass_active", default=False))
    if frozen:
        return True
    try:
        if session_yolo():
            return True
        return bool(normalize(approvals_section().get("mode", "manual")) == "off")
    except Exception:
        return bool(_call(approval, "is_approval_bypass_active", default=False))


def _hardline(approval: Any, command: str) -> bool:
    for name in ("detect_hardline_command", "_check_sudo_stdin_guard"):
        verdict = _call(approval, name, command, default=None)
        if isinstance(verdict, tuple) and verdict and verdict[0]:
            return True
    return _denied_by_user_rule(approval, command)


def _denied_by_user_rule(approval: Any, command: str) -> bool:
    """``approvals.deny`` globs, matched like Hermes matches them (case-insensitive, over its
    deobfuscated command variants), from the cached config."""
    variants = _find(approval, "_command_detection_variants")
    if not callable(variants):
        return _call(approval, "_match_user_deny_rule", command, default=None) is not None
    patterns = approvals_section().get("deny") or []
    globs = [p.strip().lower() for p in patterns if isinstance(p, str) and p.strip()]
    if not globs:
        return False
    for variant in variants(command):
        candidate = str(variant).lower().strip()
        if any(fnmatch.fnmatchcase(candidate, pattern) for pattern in globs):
            return True
    return False


def _ask_gateway(approval: Any, key: str, what: str, description: str, pattern: str,
                 allow_permanent: bool, request: ApprovalRequest) -> str | None:
    await_decision = getattr(approval, "_await_gateway_decision", None)
    if not callable(await_decision):
        symbol("tools.approval", "_await_gateway_decision", feature="gateway approval prompts")
        return None
    notify = _notifier(approval, key)
    if notify is None:
        log.info("codex-runtime: this gateway session has no approval channel; declining")
        return None
    data = {"command": what, "description": description, "pattern_key": pattern,
            "pattern_keys": [pattern], "allow_permanent": allow_permanent}

    def withdraw() -> None:
        _withdraw_gateway_entry(approval, key, data)

    def notify_unless_withdrawn(payload: Any) -> None:
        # Runs after Hermes queued the entry: a question that lapsed meanwhile is never sent
        # (raising here makes Hermes drop the entry at once).
        if request.cancelled.is_set():
            raise RuntimeError("the codex turn ended before the approval prompt was sent")
        notify(payload)

    request.cancelled.add_callback(withdraw)
    try:
        outcome = await_decision(key, notify_unless_withdrawn, data, surface="gateway")
    finally:
        request.cancelled.remove_callback(withdraw)
    if not isinstance(outcome, Mapping) or outcome.get("notify_failed") \
            or not outcome.get("resolved"):
        return None
    choice = outcome.get("choice")
    return choice if isinstance(choice, str) else None


def _withdraw_gateway_entry(approval: Any, key: str, data: dict[str, Any]) -> None:
    """Resolve OUR pending gateway entry as a denial and take it out of the session's queue, so
    the user's next ``/approve`` answers the question they can see, not this lapsed one."""
    lock = getattr(approval, "_lock", None)
    queues = getattr(approval, "_gateway_queues", None)
    if lock is None or not isinstance(queues, dict):
        symbol("tools.approval", "_gateway_queues", feature="withdrawing lapsed gateway prompts")
        return
    def ours(entry: Any) -> bool:  # the host may queue a copy of the data (0.22 does)
        queued = getattr(entry, "data", None)
        return queued is data or (isinstance(queued, Mapping) and "pattern_key" in data
                                  and queued.get("pattern_key") == data["pattern_key"]
                                  and getattr(entry, "result", None) is None)

    withdraw = getattr(approval, "withdraw_gateway_approval", None)
    if callable(withdraw):  # the host's own withdrawal (0.22): its surfaces retract the prompt
        with lock:
            ids = [entry.data.get("request_id") for entry in queues.get(key) or []
                   if ours(entry) and isinstance(getattr(entry, "data", None), Mapping)]
        for request_id in ids:
            if request_id and withdraw(key, str(request_id), "the codex turn ended"):
                log.info("codex-runtime: withdrew a gateway approval prompt whose codex turn "
                         "ended")
        if ids:
            return
    withdrawn = None
    with lock:
        entries = queues.get(key) or []
        for entry in list(entries):
            if ours(entry):
                entries.remove(entry)
                withdrawn = entry
        if not entries:
            queues.pop(key, None)
    if withdrawn is not None:
        withdrawn.result = "deny"
        withdrawn.event.set()
        log.info("codex-runtime: withdrew a gateway approval prompt whose codex turn ended")


def _dismiss_cli_prompt(cli: Any, command: str | Callable[[str], bool]) -> None:
    """Answer the CLI's open prompt for ``command`` with a denial, the way Hermes itself clears
    a prompt on interrupt. The prompt may be a moment from opening: wait for it, briefly."""
    deadline = time.monotonic() + CLI_DISMISS_WINDOW
    while time.monotonic() < deadline:
        state = getattr(cli, "_approval_state", None)
        if not isinstance(state, dict):
            time.sleep(0.05)
            continue
        shown = state.get("command")
        if isinstance(shown, str) and (command(shown) if callable(command) else shown == command):
            answers = state.get("response_queue")
            if answers is not None:
                answers.put("deny")
                log.info("codex-runtime: dismissed a CLI approval prompt whose codex turn ended")
            return
        time.sleep(0.05)


def _ask_cli(approval: Any, callback: Any, hook_args: dict[str, Any], what: str,
             description: str, allow_permanent: bool,
             request: ApprovalRequest) -> str | None:
    fire = _find(approval, "_fire_approval_hook", "approval hooks for codex requests")
    prompt = getattr(approval, "prompt_dangerous_approval", None)
    cli = getattr(callback, "__self__", None)
    dismiss: Callable[[], None] | None = None
    if cli is not None and hasattr(cli, "_approval_state"):
        def dismiss() -> None:
            threading.Thread(target=_dismiss_cli_prompt, args=(cli, what),
                             name="codex-dismiss-prompt", daemon=True).start()

        request.cancelled.add_callback(dismiss)
    elif cli is not None:  # a CLI object without the prompt state Hermes' own CLI keeps
        report_missing(f"{type(cli).__name__}()._approval_state",
                       "dismissing lapsed CLI prompts")
    # (a plain callback function has no prompt of ours to dismiss)
    if callable(fire):
        fire("pre_approval_request", surface="cli", **hook_args)
    choice: str | None
    try:
        if callable(prompt):
            choice = prompt(what, description, allow_permanent=allow_permanent,
                            approval_callback=callback)
        else:
            choice = callback(what, description, allow_permanent=allow_permanent)
    except Exception:
        log.exception("codex-runtime: the approval prompt failed; declining")
        choice = "deny"
    finally:
        if dismiss is not None:
            request.cancelled.remove_callback(dismiss)
    if callable(fire):
        fire("post_approval_response", surface="cli", choice=choice, **hook_args)
    return choice if isinstance(choice, str) else None


# ------------------------------------------------------------------ Hermes' public entry point

_host_hooks = threading.local()
_request_numbers = itertools.count(1)


def observe_approval_hook(**kwargs: Any) -> None:
    """Registered for Hermes' ``pre_approval_request`` hook: notes, on the asking thread, that
    the host fired the hook itself (0.22 does on every surface; 0.19.0 not on the CLI)."""
    fired = getattr(_host_hooks, "fired", None)
    if fired is not None:
        fired.add(str(kwargs.get("pattern_key") or ""))


def _ask_host(approval: Any, public: Callable[..., Any], scope: ApprovalScope, what: str,
              description: str, pattern: str, request: ApprovalRequest) -> Decision:
    """Ask a person through ``request_tool_approval``: Hermes checks who can answer (the CLI, a
    chat platform, an API-server client's notifier; else it fails closed), keeps its allow-lists
    under ``plugin_rule:<pattern>`` and fires its approval hooks. The prompt shows the command
    itself as the tool (``<codex: rm -rf build>``) and the description as the reason."""
    tool = what if what.startswith("codex") else f"codex: {what}"
    rule_key = pattern
    plugin_key = f"plugin_rule:{rule_key}"
    fire = _find(approval, "_fire_approval_hook", "approval hooks for codex requests")
    hook_args = {"command": tool, "description": description, "pattern_key": plugin_key,
                 "pattern_keys": [plugin_key], "session_key": scope.session_key,
                 "surface": "cli"}
    asked: dict[str, Any] = {}
    callback = None
    if callable(scope.cli_callback) and not scope.gateway:
        cli_callback = scope.cli_callback

        def callback(command: str, shown_description: str, **kwargs: Any) -> Any:
            # The host may not fire its approval hooks on this path (0.19.0): then we do.
            if plugin_key not in (getattr(_host_hooks, "fired", None) or ()) and callable(fire):
                fire("pre_approval_request", **hook_args)
                asked["fired"] = True
            asked["choice"] = choice = cli_callback(command, shown_description, **kwargs)
            return choice

    def withdraw() -> None:
        _withdraw_gateway_entry(approval, scope.session_key, {"pattern_key": plugin_key})
        cli = getattr(scope.cli_callback, "__self__", None)
        if cli is not None and hasattr(cli, "_approval_state"):
            threading.Thread(target=_dismiss_cli_prompt, args=(cli, lambda shown: tool in shown),
                             name="codex-dismiss-prompt", daemon=True).start()

    # Hermes keys its allow-lists and gateway queue by the context's session key; where the host
    # bound none (an embedded AIAgent), the agent's session id is the key, as in the scope.
    current = _find(approval, "get_current_session_key")
    bind = _find(approval, "set_current_session_key")
    try:
        unbound = callable(current) and not current(default="")
    except Exception:
        unbound = False
    if unbound and scope.session_key and callable(bind):
        bind(scope.session_key)  # inside this request's copy of the turn's context only
    number = next(_request_numbers)
    _host_hooks.fired = set()
    request.cancelled.add_callback(withdraw)
    try:
        result = public(tool, description, rule_key=rule_key, approval_callback=callback)
    except Exception:
        log.exception("codex-runtime: Hermes' approval gate failed; declining")
        result = None
    finally:
        request.cancelled.remove_callback(withdraw)
        _host_hooks.fired = None
    if asked.get("fired") and callable(fire):
        fire("post_approval_response", choice=asked.get("choice"), **hook_args)
    approved = isinstance(result, Mapping) and result.get("approved") is True
    log.info("codex-runtime: codex approval request #%d (%s) %s by Hermes' approval gate",
             number, request.kind, "approved" if approved else "declined")
    if request.cancelled.is_set():
        return Decision.DECLINE  # the turn ended meanwhile
    return Decision.ACCEPT if approved else Decision.DECLINE
