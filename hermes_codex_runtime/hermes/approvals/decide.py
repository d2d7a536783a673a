"""Deciding codex's approval requests the way Hermes decides its own.

codex asks only when an action needs to leave its sandbox (a command to escalate, a file change,
extra permissions, an MCP tool call). Each request is decided when it arrives — so a ``/yolo``
toggled mid-session counts for the next request — in this order:

1. a command Hermes hard-blocks (``rm -rf /`` and friends) or a user deny rule, or a file change
   in a protected place (:mod:`..config.protected`: the host's credentials and state, codex's login,
   ``~/.ssh``, ``/etc``): decline. A command that names a protected place skips steps 2–4:
   only a person can allow it;
2. approvals bypassed — ``approvals.mode: off`` (YAML ``off`` is ``False``), ``--yolo`` /
   ``HERMES_YOLO_MODE`` (frozen at import), or this session's ``/yolo``: accept;
3. cron: ``approvals.cron_mode`` (``approve`` accepts, anything else declines);
4. a pattern the user already approved for the session or permanently: accept;
4½. ``approvals.mode: smart``, a command: Hermes' own approval judge decides first (its
   ``_smart_approve`` prompt, its observer hooks; the 0.22 line's ``_smart_verdict``) — run on
   codex when Hermes has no login of its own (:mod:`..side_tasks`). ``approve`` accepts this
   command once, ``deny`` declines it, ``escalate`` (or a judge that fails) asks a person as
   ``manual`` does;
5. a gateway context (a chat platform, or an API-server client with an approval notifier): asked
   through Hermes' own gateway approval channel — the pending approval, the chat platform
   notified, the user's answer (or the host's timeout) resolving it. An API-server request with
   no notifier on the 0.22 line (``/v1/responses``, a chat completion that does not stream):
   Hermes' gate decides by ``approvals.unattended_mode`` (``deny`` by default, or ``approve``);
6. the CLI: asked through the interactive approval callback;
7. nobody can answer: decline (fail closed).

Steps 5–6 — asking a person — are :mod:`.prompts`': through Hermes' public plugin entry
point ``tools.approval.request_tool_approval`` wherever the host has it (0.19.0 and the 0.22 line
do; Hermes then applies its own presence checks, allow-lists keyed ``plugin_rule:codex:…``,
prompt, gateway channel and approval hooks), its private helpers for hosts without it and for a
protected place, which must never be offered "always".

Choices map ``once → accept``, ``session/always → acceptForSession`` (Hermes records them too),
``deny/timeout → decline``. The ``pre_approval_request`` / ``post_approval_response`` plugin hooks
fire around every question asked. Nothing is downloaded.

What a prompt shows is redacted line by line (it may go to a third-party chat service), and a
prompt is withdrawn the moment its question lapses — the turn ended, was interrupted or
``/stop``-ped, or codex resolved the request itself: the gateway's queue entry is resolved as a
denial and removed (so the user's next ``/approve`` answers the question they see), and the CLI's
prompt is dismissed.
"""

from __future__ import annotations

import contextvars
import fnmatch
import logging
import os
import shlex
from collections.abc import Mapping
from typing import Any

from hermes_codex_runtime.hermes.approvals.prompts import (
    ApprovalScope,
    approval_module,
    ask_cli,
    ask_gateway,
    ask_host,
    call,
    call_optional,
    can_prompt,
    find,
    notifier,
)
from hermes_codex_runtime.hermes.config import protected
from hermes_codex_runtime.hermes.config.settings import (
    SettingError,
    approval_problems,
    approvals_section,
    hermes_home,
)
from hermes_codex_runtime.hermes.config.standing import standing
from hermes_codex_runtime.hermes.symbols.probe import symbol
from hermes_codex_runtime.protocol import Decision
from hermes_codex_runtime.values import ApprovalRequest
from hermes_codex_runtime.wire import redact

log = logging.getLogger("hermes_codex_runtime.hermes")

_CHOICES = {"once": Decision.ACCEPT, "session": Decision.ACCEPT_FOR_SESSION,
            "always": Decision.ACCEPT_FOR_SESSION}


_warned_keys: set[str] = set()


def _warn_bad_keys(agent: Any, section: dict[str, Any]) -> None:
    """A bad ``approvals.*`` value makes Hermes decline at once or wait in silence: say so where
    the user is, once per text (doctor reports it too)."""
    problems = approval_problems(section=section)
    if not problems:
        return
    text = "; ".join(problems)
    if text in _warned_keys:
        return
    _warned_keys.add(text)
    from hermes_codex_runtime.hermes.config.file import config_path
    from hermes_codex_runtime.hermes.notify import warn_user

    log.warning("codex-runtime: %s", text)
    warn_user(agent, f"⚠ {text} — fix it in {config_path()}.")


def capture_scope(agent: Any) -> ApprovalScope:
    """Capture, on the agent's own thread, how approvals can be answered for this turn."""
    approval = approval_module()
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
            gateway = notifier(approval, key) is not None  # someone can answer
    get_callback = symbol("tools.terminal_tool", "_get_approval_callback",
                          feature="CLI approval prompts")
    if callable(get_callback):
        try:
            cli_callback = get_callback()
        except Exception:
            cli_callback = None
    platform = str(getattr(agent, "platform", "") or "")
    _warn_bad_keys(agent, approvals_section())  # read now, not while codex waits for an answer
    cron = platform == "cron" or bool(os.environ.get("HERMES_CRON_SESSION"))
    if not session_key:
        session_key = str(getattr(agent, "session_id", "") or "")
    try:
        roots = list(standing().protected_roots)
    except SettingError:
        roots = protected.protected_roots(hermes_home(), None)
    promptless = callable(cli_callback) and not can_prompt(cli_callback)
    # the 0.22 line: an API-server request no client can answer (no notifier): Hermes' gate
    # decides by approvals.unattended_mode
    unattended = approval is not None and not gateway and not cron and bool(
        call_optional(approval, "_is_unattended_platform_approval_context", default=False))
    return ApprovalScope(contextvars.copy_context(), session_key,
                         None if promptless else cli_callback, gateway and not cron, cron,
                         platform, roots, promptless, unattended)


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
    approval = approval_module()
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
        mode = call(approval, "_get_cron_approval_mode", default="deny")
        return Decision.ACCEPT if auto and mode == "approve" else Decision.DECLINE
    key = scope.session_key
    host_redact = symbol("agent.redact", "redact_sensitive_text", feature="redaction")
    shown_what = protected.prompt_text(what, host_redact)
    shown_description = protected.prompt_text(description, host_redact)
    pattern = protected.prompt_text(pattern, host_redact)
    if auto and request.kind == "command" and call(
            approval, "_command_matches_permanent_allowlist", what, default=False):
        return Decision.ACCEPT  # a command the user allowed for good in Hermes' own prompts
    if auto and request.kind == "command" and _smart(approval):
        verdict = _judge(approval, what, description, pattern, key)
        log.info("codex-runtime: Hermes' approval judge said %s for %s", verdict,
                 redact(shown_what))
        if verdict == "approve":
            return Decision.ACCEPT  # this command only, as Hermes' own smart approvals do
        if verdict == "deny":
            return Decision.DECLINE
    if not scope.gateway:  # the CLI's prompt box draws one line per field
        shown_description = _one_line(shown_description)
    public = getattr(approval, "request_tool_approval", None)
    if auto and callable(public) and (scope.gateway or callable(scope.cli_callback)
                                      or scope.unattended):
        if request.cancelled.is_set():
            return Decision.DECLINE
        return ask_host(approval, public, scope, shown_what, shown_description, pattern, request)
    if target:
        shown_description += (f"\n(it touches {target}: approve only if you meant it)"
                              if scope.gateway else
                              f" (it touches {target}: approve only if you meant it)")
    if auto and key and call(approval, "is_approved", key, pattern, default=False):
        return Decision.ACCEPT_FOR_SESSION
    allow_permanent = request.kind == "command" and auto
    hook_args = {"command": shown_what, "description": shown_description,
                 "pattern_key": pattern, "pattern_keys": [pattern], "session_key": key}
    if request.cancelled.is_set():
        return Decision.DECLINE  # the turn already ended: ask nobody
    if scope.gateway:
        choice = ask_gateway(approval, key, shown_what, shown_description, pattern,
                              allow_permanent, request)
    elif callable(scope.cli_callback):
        choice = ask_cli(approval, scope.cli_callback, hook_args, shown_what,
                          shown_description, allow_permanent, request)
    else:
        log.info("codex-runtime: no one can answer codex's approval request (%s); declining",
                 request.kind)
        if scope.promptless:
            _tell_promptless(agent, request.kind, shown_what)
        return Decision.DECLINE
    if request.cancelled.is_set():
        return Decision.DECLINE  # the turn ended meanwhile; the session drops the answer anyway
    decision = _CHOICES.get(str(choice or "").lower(), Decision.DECLINE)
    if target and decision.accepts:
        return Decision.ACCEPT  # once: a protected place is never remembered as approved
    if decision.accepts and key and choice in ("session", "always"):
        call(approval, "approve_session", key, pattern)
    if choice == "always" and allow_permanent:
        call(approval, "approve_permanent", pattern)
        permanent = getattr(approval, "_permanent_approved", None)
        if permanent is not None:
            call(approval, "save_permanent_allowlist", permanent)
    return decision


def _one_line(description: str) -> str:
    """A multi-line description (a file change's paths and diff) as one line, since the CLI's
    prompt box draws one line per field: the headline, the paths, then the diff's first lines
    joined by `` · ``."""
    heads = [line.strip() for line in description.splitlines()
             if line.strip() and not line.startswith((" ", "\t"))]
    body = [line.strip() for line in description.splitlines()
            if line.strip() and line.startswith((" ", "\t"))]
    if not heads:
        return ""
    text = heads[0] if len(heads) == 1 else f"{heads[0].rstrip(':')}: {', '.join(heads[1:])}"
    if body:
        text += " — " + " · ".join(body[:12]) + (" · …" if len(body) > 12 else "")
    return text


def _tell_promptless(agent: Any, kind: str, what: str) -> None:
    """At once, instead of a prompt nobody sees waiting out its timeout."""
    from hermes_codex_runtime.hermes.notify import warn_user

    asked = "to run" if kind == "command" else "for"
    warn_user(agent, f"⚠ codex asked {asked} `{what.splitlines()[0][:200]}` outside its sandbox; "
              "`hermes chat -q` cannot show an approval prompt, so it was declined. Run it in "
              "an interactive `hermes chat`, or allow without asking: `--yolo` or "
              "`approvals.mode: off`.")


def _smart(approval: Any) -> bool:
    """``approvals.mode: smart`` (from the cached config)."""
    mode = approvals_section().get("mode", "manual")
    normalize = find(approval, "_normalize_approval_mode")
    try:
        return bool((normalize(mode) if callable(normalize) else str(mode).lower()) == "smart")
    except Exception:
        return False


def _judge(approval: Any, command: str, description: str, pattern: str, key: str) -> str:
    """Hermes' approval judge on ``command``: ``approve``, ``deny`` or ``escalate`` (what fails
    escalates, as in Hermes), its observer hooks fired as Hermes fires them, once."""
    try:
        verdict_of = getattr(approval, "_smart_verdict", None)
        if callable(verdict_of):  # the 0.22 line: the judge with its hooks
            verdict = verdict_of(command, description, pattern, [pattern], key)
        else:  # 0.19.0: the judge, and its hooks around it
            judge = symbol("tools.approval", "_smart_approve", feature="approvals.mode: smart")
            if not callable(judge):
                return "escalate"
            prepare = getattr(approval, "_prepare_smart_approval_observer", None)
            observe = getattr(approval, "_observe_smart_approval_verdict", None)
            payload = prepare(command=command, description=description, pattern_key=pattern,
                              pattern_keys=[pattern], session_key=key) \
                if callable(prepare) else None
            verdict = judge(command, description)
            if callable(observe):
                observe(payload, verdict)
    except Exception:
        log.warning("codex-runtime: Hermes' approval judge failed; asking as for manual",
                    exc_info=True)
        return "escalate"
    return verdict if verdict in ("approve", "deny") else "escalate"


def _bypass(approval: Any) -> bool:
    """``is_approval_bypass_active()`` without re-reading config.yaml on every request:
    ``--yolo`` (frozen at import), this session's ``/yolo``, or ``approvals.mode: off``."""
    frozen = getattr(approval, "_YOLO_MODE_FROZEN", None)
    session_yolo = getattr(approval, "is_current_session_yolo_enabled", None)
    normalize = find(approval, "_normalize_approval_mode")
    if frozen is None or not callable(session_yolo) or not callable(normalize):
        return bool(call(approval, "is_approval_bypass_active", default=False))
    if frozen:
        return True
    try:
        if session_yolo():
            return True
        return bool(normalize(approvals_section().get("mode", "manual")) == "off")
    except Exception:
        return bool(call(approval, "is_approval_bypass_active", default=False))


def _hardline(approval: Any, command: str) -> bool:
    for name in ("detect_hardline_command", "_check_sudo_stdin_guard"):
        verdict = call(approval, name, command, default=None)
        if isinstance(verdict, tuple) and verdict and verdict[0]:
            return True
    return _denied_by_user_rule(approval, command)


def _denied_by_user_rule(approval: Any, command: str) -> bool:
    """``approvals.deny`` globs, matched like Hermes matches them (case-insensitive, over its
    deobfuscated command variants), from the cached config."""
    variants = find(approval, "_command_detection_variants")
    if not callable(variants):
        return call(approval, "_match_user_deny_rule", command, default=None) is not None
    patterns = approvals_section().get("deny") or []
    globs = [p.strip().lower() for p in patterns if isinstance(p, str) and p.strip()]
    if not globs:
        return False
    for variant in variants(command):
        candidate = str(variant).lower().strip()
        if any(fnmatch.fnmatchcase(candidate, pattern) for pattern in globs):
            return True
    return False


