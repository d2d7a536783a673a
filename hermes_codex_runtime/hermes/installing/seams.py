"""Installing the plugin into a running Hermes, one feature-probed seam at a time.

:func:`install` runs inside ``register(ctx)`` — while ``run_agent`` is still importing — so it only
swaps module attributes:

* the turn: ``ctx.register_agent_runtime`` where the host offers a runtime registry, otherwise
  ``agent.codex_runtime.run_codex_app_server_turn`` (``AIAgent._run_codex_app_server_turn``
  imports it afresh on every call, so the swap reaches every turn);
* activation: ``hermes_cli.runtime_provider.resolve_runtime_provider`` (:mod:`..config.activation`);
* Hermes' side tasks on a codex-only login: ``agent.auxiliary_client.resolve_provider_client``
  (:mod:`..side_tasks`);
* compression before a process's first codex turn:
  ``agent.conversation_compression._compress_context_via_codex_app_server`` gives an agent on
  codex whose session has a stored thread its session handle first (:func:`_install_compaction`);
* a turn's memory recall and plugin context: ``agent.conversation_loop.build_turn_context``
  keeps the user message as Hermes would have sent it (:func:`_keep_turn_context`);
* approvals on the API server's streaming chat completions, once its module is imported: a
  chunk an OpenAI SDK client can read, withdrawn when the client goes away
  (:mod:`..approvals.api_stream`).

Class-level wiring — ``AIAgent.steer`` delivering to the codex turn, ``close`` and
``release_clients`` closing the codex session (:mod:`..turn.controls`), the background review's fork
routed (see :mod:`..turn.review`) — waits until ``run_agent`` has finished importing: the turn seam
does it on the first codex turn (:func:`wire_agent_class`). ``AIAgent.interrupt`` is not wrapped:
it reaches codex through the turn's ``_active_request_abort`` (one route). A missing symbol logs
one line and leaves the host's own behaviour in place; nothing here raises into the host.

This module only installs; running a turn is :mod:`..turn.run`'s, the controls are
:mod:`..turn.controls`'.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from hermes_codex_runtime.hermes.symbols.patch import wrap_in_place
from hermes_codex_runtime.hermes.symbols.probe import symbol

log = logging.getLogger("hermes_codex_runtime.hermes")
_wired: set[type] = set()
_wire_lock = threading.Lock()


def install(ctx: Any) -> dict[str, bool]:
    """Install every seam this host supports; return which ones took."""
    installed = {"turn": _install_turn(ctx)}
    from hermes_codex_runtime.hermes.config.activation import install_activation

    installed["activation"] = install_activation()
    from hermes_codex_runtime.hermes.side_tasks import install_side_tasks

    installed["side tasks"] = install_side_tasks()
    installed["compaction before the first turn"] = _install_compaction()
    installed["memory recall and plugin context"] = _keep_turn_context()
    from hermes_codex_runtime.hermes.commands.switch import install_switch

    installed["/codex-runtime"] = install_switch()
    from hermes_codex_runtime.hermes.commands.slash import register_commands

    for name, took in register_commands(ctx).items():
        installed[f"command:{name}"] = took
    installed["hook:pre_approval_request"] = _observe_approvals(ctx)
    installed["approvals on streaming chat completions"] = _follow_api_server()
    return installed


def _follow_api_server() -> bool:
    """Once the gateway imports its API server (now, if it has), make the approvals on its
    streaming chat completions readable by an OpenAI SDK client (:mod:`..approvals.api_stream`;
    a host whose chat completions carry no approvals is left as it is)."""
    from hermes_codex_runtime.hermes.after_import import after_import

    def follow() -> None:
        try:
            from hermes_codex_runtime.hermes.approvals.api_stream import install

            install()
        except Exception:
            log.warning("codex-runtime: approvals on streaming chat completions stay Hermes' "
                        "own", exc_info=True)

    after_import("gateway.platforms.api_server", follow)
    return True


def _observe_approvals(ctx: Any) -> bool:
    """Listen to Hermes' ``pre_approval_request``: a codex approval asked through the host's
    public gate fires the hooks itself on some hosts and surfaces, and must not fire twice."""
    register_hook = getattr(ctx, "register_hook", None)
    if not callable(register_hook):
        return False
    try:
        register_hook("pre_approval_request", _approval_hook_fired)
    except Exception:
        log.warning("codex-runtime: could not observe approval hooks", exc_info=True)
        return False
    return True


def _approval_hook_fired(**kwargs: Any) -> None:
    prompts = sys.modules.get("hermes_codex_runtime.hermes.approvals.prompts")
    if prompts is not None:  # nothing of ours asks before that module is loaded
        prompts.observe_approval_hook(**kwargs)


def codex_turn(agent: Any, **kwargs: Any) -> Any:
    """What Hermes calls for every codex turn: the agent's class is wired (once), then the turn
    runs (:mod:`..turn.run`). The runtime behind it (session, wire, pluggy) is imported on the
    first turn, not while Hermes starts up."""
    try:
        wire_agent_class(type(agent))
    except Exception:
        log.warning("codex-runtime: wiring %s failed; its steer/close stay Hermes' own",
                    type(agent).__name__, exc_info=True)
    from hermes_codex_runtime.hermes.turn.run import run_codex_app_server_turn

    return run_codex_app_server_turn(agent, **kwargs)


def _install_turn(ctx: Any) -> bool:
    register_runtime = getattr(ctx, "register_agent_runtime", None)
    if callable(register_runtime):
        try:
            register_runtime(descriptor={"name": "codex_app_server",
                                         "api_mode": "codex_app_server",
                                         "plugin": "codex-runtime"},
                             factory=lambda: codex_turn)
            log.info("codex-runtime: registered through the host's agent-runtime registry")
            return True
        except Exception:
            log.warning("codex-runtime: the host's runtime registry refused the plugin; "
                        "using the module seam", exc_info=True)

    def replace(original: Any) -> Any:
        def run_codex_app_server_turn(agent: Any, **kwargs: Any) -> Any:
            return codex_turn(agent, **kwargs)

        return run_codex_app_server_turn

    return wrap_in_place("agent.codex_runtime", "run_codex_app_server_turn", replace,
                         feature="running Hermes turns on codex (the host's runtime stays)")


def _install_compaction() -> bool:
    """Hermes compacts a codex thread through ``agent._codex_session``, which the plugin sets
    after a turn — so a resumed process's preflight compression, before its first turn, found
    none and skipped. Wrapped: the handle is there first, and the compaction resumes the stored
    thread (:func:`~..turn.controls.attach_handle`)."""
    def make(original: Any) -> Any:
        def compress(agent: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                from hermes_codex_runtime.hermes.turn.controls import attach_handle

                attach_handle(agent)
            except Exception:
                log.warning("codex-runtime: could not prepare the codex thread for compaction",
                            exc_info=True)
            return original(agent, *args, **kwargs)

        return compress

    return wrap_in_place("agent.conversation_compression",
                         "_compress_context_via_codex_app_server", make,
                         feature="compression before the first codex turn of a process")


def _route_review_fork() -> None:
    """The background review runs a short-lived forked agent. With a Hermes-side credential it
    goes Hermes' way (``codex_responses``, never a codex app-server of its own); with a codex-only
    login it stays on codex, where it can actually run (see :mod:`..turn.review`)."""
    from hermes_codex_runtime.hermes.turn.review import review_runtime

    def make(original: Any) -> Any:
        def resolve(agent: Any, *args: Any, **kwargs: Any) -> Any:
            return review_runtime(agent, original(agent, *args, **kwargs))

        return resolve

    wrap_in_place("agent.background_review", "_resolve_review_runtime", make,
                  feature="running the background review with a codex-only login")


def follow_agent_construction() -> bool:
    """``AIAgent.__init__`` wrapped: an agent built for codex has what its first turn would wait
    for — the process's app-server, the walls' verdict — started in the background
    (:func:`~..turn.run.prepare_first_turn`) while Hermes composes that turn, and whether its
    workspace's instruction files stay out of that turn decided before Hermes builds its
    system prompt (:mod:`..turn.instructions`). Called once ``run_agent`` has been imported
    (:mod:`.early`)."""
    feature = "codex started while the first turn is built"
    cls = symbol("run_agent", "AIAgent", feature=feature)
    if not isinstance(cls, type):
        return False
    from hermes_codex_runtime.hermes.turn import instructions

    instructions.install()

    def make(init: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            if getattr(self, "api_mode", None) == "codex_app_server":
                try:
                    from hermes_codex_runtime.hermes.turn.run import prepare_first_turn

                    prepare_first_turn(self)
                except Exception:
                    log.debug("codex-runtime: preparing the first codex turn failed; the turn "
                              "does it", exc_info=True)

        return __init__

    return wrap_in_place(cls, "__init__", make, feature=feature)


def _keep_turn_context() -> bool:
    """Hermes composes each turn's memory recall and ``pre_llm_call`` plugin context (the
    gateway's turn notes ride along) for the user message — then hands a codex turn the plain
    message. ``build_turn_context`` wrapped: for a codex agent the message as Hermes would
    have sent it is kept for that turn (:func:`~..turn.run.keep_as_sent`)."""
    feature = "memory recall and plugin context on codex turns"
    compose = symbol("agent.turn_context", "compose_user_api_content", feature=feature)
    if not callable(compose):
        return False

    def make(original: Any) -> Any:
        def build(agent: Any, *args: Any, **kwargs: Any) -> Any:
            built = original(agent, *args, **kwargs)
            if getattr(agent, "api_mode", None) == "codex_app_server":
                try:
                    from hermes_codex_runtime.hermes.turn.run import keep_as_sent

                    keep_as_sent(agent, compose(getattr(built, "user_message", None),
                                                getattr(built, "ext_prefetch_cache", "") or "",
                                                getattr(built, "plugin_user_context", "") or ""))
                except Exception:
                    log.warning("codex-runtime: this turn's memory recall and plugin context "
                                "could not be kept for codex", exc_info=True)
            return built

        return build

    return wrap_in_place("agent.conversation_loop", "build_turn_context", make, feature=feature)


def wire_agent_class(cls: type) -> None:
    """Make ``steer`` reach the codex turn and ``close``/``release_clients`` close the codex
    session."""
    with _wire_lock:
        if cls in _wired:
            return
        _wired.add(cls)
    from hermes_codex_runtime.hermes.turn import controls

    def follow(name: str, after: Any) -> None:
        def make(original: Any) -> Any:
            def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    return original(self, *args, **kwargs)
                finally:
                    try:
                        after(self)
                    except Exception as exc:
                        log.warning("codex-runtime: following AIAgent.%s failed: %s: %s", name,
                                    type(exc).__name__, exc)

            return wrapper

        wrap_in_place(cls, name, make, feature=f"codex sessions following AIAgent.{name}")

    _route_review_fork()
    _wrap_steer(cls)
    follow("close", controls.close)
    follow("release_clients", controls.close)


def _wrap_steer(cls: type) -> None:
    """``AIAgent.steer`` (``/steer``) stores the text as Hermes' pending steer; on a codex turn it
    is then delivered with ``turn/steer`` — or, if codex refuses, left pending for the next turn."""
    def make(original: Any) -> Any:
        def steer(self: Any, text: Any, *args: Any, **kwargs: Any) -> Any:
            accepted = original(self, text, *args, **kwargs)
            if accepted and getattr(self, "api_mode", None) == "codex_app_server":
                from hermes_codex_runtime.hermes.turn.controls import deliver_pending_steer

                try:
                    deliver_pending_steer(self)
                except Exception:
                    log.warning("codex-runtime: delivering /steer to codex failed; it stays "
                                "pending for the next turn", exc_info=True)
            return accepted

        return steer

    wrap_in_place(cls, "steer", make, feature="/steer on codex turns")
