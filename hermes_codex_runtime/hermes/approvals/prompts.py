"""Asking a person about a codex approval the way Hermes asks its own: through Hermes' public
plugin entry point (``tools.approval.request_tool_approval``) wherever the host has it — Hermes
then applies its own presence checks, allow-lists, prompt, gateway channel and approval hooks —
else through the private helpers: the gateway's approval channel (the pending approval, the chat
platform notified, the user's answer or the host's timeout) or the CLI's interactive callback,
with the ``pre_approval_request`` / ``post_approval_response`` hooks fired around the question.

Owns the question's life too: :class:`ApprovalScope` (who can answer, captured on the agent's
thread when the turn started), and withdrawing a prompt the moment its question lapses (the
gateway's queue entry resolved as a denial and removed; the CLI's prompt dismissed). What to
decide without asking anyone is :mod:`.decide`'.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import present, report_missing, symbol, symbol_in
from hermes_codex_runtime.protocol import Decision
from hermes_codex_runtime.values import ApprovalRequest

log = logging.getLogger("hermes_codex_runtime.hermes")

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
    #: A CLI that cannot show a prompt (``hermes chat -q``: its interactive application never
    #: runs, so its callback could only wait out the timeout).
    promptless: bool = False
    #: A surface the host calls unattended (the 0.22 line: the API server, webhooks) with no
    #: client that can answer: ``approvals.unattended_mode`` decides in the host's gate.
    unattended: bool = False


#: Where Hermes keeps its approval helpers: one module in 0.19.0, split in the 0.22 line.
APPROVAL_MODULES = ("tools.approval", "tools.approval_context", "tools.approval_detection",
                    "tools.approval_floors", "tools.approval_gateway_wait")


def can_prompt(callback: Any) -> bool:
    """Whether a CLI approval callback can reach a person: Hermes' CLI draws its prompt in its
    interactive application (``HermesCLI._app``), which ``hermes chat -q`` never starts."""
    owner = getattr(callback, "__self__", None)
    return owner is None or not hasattr(owner, "_app") or owner._app is not None


def find(approval: Any, name: str, feature: str = "part of Hermes' approval flow") -> Any:
    """``name`` from ``tools.approval``, else from the module it moved to (0.22), else None."""
    value = getattr(approval, name, None)
    if value is not None:
        return value
    return symbol_in(APPROVAL_MODULES[1:], name, feature=feature)


def notifier(approval: Any, key: str) -> Any:
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


def approval_module() -> Any:
    try:
        import tools.approval as approval
    except Exception:
        symbol("tools.approval", "is_approval_bypass_active", feature="Hermes approvals")
        return None
    return approval


def call_optional(approval: Any, name: str, *args: Any, default: Any = None) -> Any:
    """``name(*args)`` from ``tools.approval`` or where the 0.22 line moved it — for what only
    some host lines have: ``default``, unreported, where the host has none."""
    function = getattr(approval, name, None)
    for module in APPROVAL_MODULES[1:]:
        if function is not None:
            break
        if present(module, name):
            function = getattr(sys.modules[module], name, None)
    return _invoke(name, function, args, default)


def call(module: Any, name: str, *args: Any, default: Any = None) -> Any:
    """``name(*args)`` from ``tools.approval`` or where it moved (reported when missing)."""
    return _invoke(name, find(module, name), args, default)


def _invoke(name: str, function: Any, args: tuple[Any, ...], default: Any) -> Any:
    """``function(*args)``; ``default`` when there is none or it raises."""
    if not callable(function):
        return default
    try:
        return function(*args)
    except Exception:
        log.debug("codex-runtime: %s raised", name, exc_info=True)
        return default


def ask_gateway(approval: Any, key: str, what: str, description: str, pattern: str,
                 allow_permanent: bool, request: ApprovalRequest) -> str | None:
    await_decision = getattr(approval, "_await_gateway_decision", None)
    if not callable(await_decision):
        symbol("tools.approval", "_await_gateway_decision", feature="gateway approval prompts")
        return None
    notify = notifier(approval, key)
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


def ask_cli(approval: Any, callback: Any, hook_args: dict[str, Any], what: str,
             description: str, allow_permanent: bool,
             request: ApprovalRequest) -> str | None:
    fire = find(approval, "_fire_approval_hook", "approval hooks for codex requests")
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


def ask_host(approval: Any, public: Callable[..., Any], scope: ApprovalScope, what: str,
              description: str, pattern: str, request: ApprovalRequest) -> Decision:
    """Ask a person through ``request_tool_approval``: Hermes checks who can answer (the CLI, a
    chat platform, an API-server client's notifier; else it fails closed), keeps its allow-lists
    under ``plugin_rule:<pattern>`` and fires its approval hooks. The prompt shows the command
    itself as the tool (``<codex: rm -rf build>``) and the description as the reason."""
    tool = what if what.startswith("codex") else f"codex: {what}"
    rule_key = pattern
    plugin_key = f"plugin_rule:{rule_key}"
    fire = find(approval, "_fire_approval_hook", "approval hooks for codex requests")
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
    current = find(approval, "get_current_session_key")
    bind = find(approval, "set_current_session_key")
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
