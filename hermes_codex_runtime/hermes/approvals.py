"""Deciding codex's approval requests the way Hermes decides its own.

codex asks only when an action needs to leave its sandbox (a command to escalate, a file change,
extra permissions, an MCP tool call). Each request is decided when it arrives — so a ``/yolo``
toggled mid-session counts for the next request — in this order:

1. a command Hermes hard-blocks (``rm -rf /`` and friends) or a user deny rule: decline;
2. approvals bypassed — ``approvals.mode: off`` (YAML ``off`` is ``False``), ``--yolo`` /
   ``HERMES_YOLO_MODE`` (frozen at import), or this session's ``/yolo``: accept;
3. cron: ``approvals.cron_mode`` (``approve`` accepts, anything else declines);
4. a pattern the user already approved for the session or permanently: accept;
5. a gateway context: asked through Hermes' own gateway approval channel — the pending approval,
   the chat platform notified, the user's answer (or the host's timeout) resolving it;
6. the CLI: asked through the interactive approval callback;
7. nobody can answer: decline (fail closed).

Choices map ``once → accept``, ``session/always → acceptForSession`` (Hermes records them too),
``deny/timeout → decline``. The ``pre_approval_request`` / ``post_approval_response`` plugin hooks
fire around every question asked. No LLM is consulted ("smart" mode asks like "manual") and nothing
is downloaded.
"""

from __future__ import annotations

import contextvars
import fnmatch
import logging
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hermes_codex_runtime.hermes.probe import symbol
from hermes_codex_runtime.hermes.settings import approvals_section
from hermes_codex_runtime.protocol import Decision
from hermes_codex_runtime.session import ApprovalRequest

log = logging.getLogger("hermes_codex_runtime.hermes")

_CHOICES = {"once": Decision.ACCEPT, "session": Decision.ACCEPT_FOR_SESSION,
            "always": Decision.ACCEPT_FOR_SESSION}
SENSITIVE_PREFIXES = ("/etc/", "/boot/", "/usr/lib/systemd/", "/private/etc/", "/private/var/",
                      "/var/run/docker.sock", "/run/docker.sock")


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
    get_callback = symbol("tools.terminal_tool", "_get_approval_callback",
                          feature="CLI approval prompts")
    if callable(get_callback):
        try:
            cli_callback = get_callback()
        except Exception:
            cli_callback = None
    platform = str(getattr(agent, "platform", "") or "")
    import os

    approvals_section()  # read config.yaml now, not while codex waits for an answer
    cron = platform == "cron" or bool(os.environ.get("HERMES_CRON_SESSION"))
    if not session_key:
        session_key = str(getattr(agent, "session_id", "") or "")
    return ApprovalScope(contextvars.copy_context(), session_key, cli_callback,
                         gateway and not cron, cron, platform)


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
            if diff:
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


def _sensitive(request: ApprovalRequest) -> bool:
    for change in request.changes:
        path = str(change.get("path") or "")
        if path.startswith(SENSITIVE_PREFIXES) or path.endswith("/.hermes/config.yaml"):
            return True
    return False


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
        log.warning("codex-runtime: declined a command Hermes never runs: %s", what)
        return Decision.DECLINE
    if request.kind == "file_change" and _sensitive(request):
        log.warning("codex-runtime: declined a change to a protected path: %s", what)
        return Decision.DECLINE
    if approval is None:
        return Decision.DECLINE  # no approval machinery: nobody can answer
    if _bypass(approval):
        return Decision.ACCEPT
    if scope.cron:
        mode = _call(approval, "_get_cron_approval_mode", default="deny")
        return Decision.ACCEPT if mode == "approve" else Decision.DECLINE
    key = scope.session_key
    if request.kind == "command" and _call(approval, "_command_matches_permanent_allowlist",
                                           what, default=False):
        return Decision.ACCEPT
    if key and _call(approval, "is_approved", key, pattern, default=False):
        return Decision.ACCEPT_FOR_SESSION
    allow_permanent = request.kind == "command"
    hook_args = {"command": what, "description": description, "pattern_key": pattern,
                 "pattern_keys": [pattern], "session_key": key}
    if scope.gateway:
        choice = _ask_gateway(approval, key, what, description, pattern, allow_permanent,
                              request)
    elif callable(scope.cli_callback):
        choice = _ask_cli(approval, scope.cli_callback, hook_args, what, description,
                          allow_permanent)
    else:
        log.info("codex-runtime: no one can answer codex's approval request (%s); declining",
                 request.kind)
        return Decision.DECLINE
    if request.cancelled.is_set():
        return Decision.DECLINE  # the turn ended meanwhile; the session drops the answer anyway
    decision = _CHOICES.get(str(choice or "").lower(), Decision.DECLINE)
    if decision.accepts and key and choice in ("session", "always"):
        _call(approval, "approve_session", key, pattern)
    if choice == "always" and allow_permanent:
        _call(approval, "approve_permanent", pattern)
        permanent = getattr(approval, "_permanent_approved", None)
        if permanent is not None:
            _call(approval, "save_permanent_allowlist", permanent)
    return decision


def _call(module: Any, name: str, *args: Any, default: Any = None) -> Any:
    function = getattr(module, name, None)
    if not callable(function):
        symbol(module.__name__, name, feature="part of Hermes' approval flow")
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
    normalize = getattr(approval, "_normalize_approval_mode", None)
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
    variants = getattr(approval, "_command_detection_variants", None)
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
    lock = getattr(approval, "_lock", None)
    callbacks = getattr(approval, "_gateway_notify_cbs", None)
    await_decision = getattr(approval, "_await_gateway_decision", None)
    if lock is None or callbacks is None or not callable(await_decision):
        symbol("tools.approval", "_await_gateway_decision", feature="gateway approval prompts")
        return None
    with lock:
        notify = callbacks.get(key)
    if notify is None:
        log.info("codex-runtime: this gateway session has no approval channel; declining")
        return None
    redact = symbol("agent.redact", "redact_sensitive_text", feature="redaction")
    shown = redact(what) if callable(redact) else what
    data = {"command": shown, "description": description, "pattern_key": pattern,
            "pattern_keys": [pattern], "allow_permanent": allow_permanent}
    outcome = await_decision(key, notify, data, surface="gateway")
    if not isinstance(outcome, Mapping) or outcome.get("notify_failed") \
            or not outcome.get("resolved"):
        return None
    choice = outcome.get("choice")
    return choice if isinstance(choice, str) else None


def _ask_cli(approval: Any, callback: Any, hook_args: dict[str, Any], what: str,
             description: str, allow_permanent: bool) -> str | None:
    fire = getattr(approval, "_fire_approval_hook", None)
    prompt = getattr(approval, "prompt_dangerous_approval", None)
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
    if callable(fire):
        fire("post_approval_response", surface="cli", choice=choice, **hook_args)
    return choice if isinstance(choice, str) else None
