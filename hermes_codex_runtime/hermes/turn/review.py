"""Hermes' background memory/skill review when the user is logged in only through codex.

After some turns Hermes forks the agent (``agent.background_review``) and asks the fork, with only
the memory and skill tools allowed, whether anything should be saved. Hermes runs that fork on
``codex_responses`` — a direct Responses API call that needs a Hermes-side credential (its own
``openai-codex`` login). A user who logged in with ``codex login`` alone has none: the fork would
call the API with this plugin's placeholder key and the review would fail every time.

So a fork whose runtime carries no Hermes credential stays on ``codex_app_server``, and its turn
runs through this plugin like any other, with four differences that keep it a review:

* it starts a fresh codex thread seeded with the conversation, never the parent's thread (the fork
  shares the parent's session id; it neither resumes nor binds a thread);
* only Hermes' memory and skill tools are declared to codex as host tools, and each call runs
  through Hermes' own dispatcher (:mod:`..tools.dispatch`) on the review thread, so the review's
  thread-local tool allow-list and memory-write provenance apply exactly as on Hermes' path;
* codex runs read-only with no approvals (nobody is there to answer them);
* the fork's turn writes nothing to the session database (Hermes disabled persistence on it).

With a Hermes-side credential Hermes' own route is kept (it reuses the warm prompt cache).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hermes_codex_runtime.hermes.config.activation import PLACEHOLDER_KEY
from hermes_codex_runtime.hermes.symbols.probe import symbol
from hermes_codex_runtime.hermes.tools.offer import build
from hermes_codex_runtime.protocol import HostTool

log = logging.getLogger("hermes_codex_runtime.hermes")

RUNTIME_VALUE = "codex_app_server"
REVIEW_ORIGIN = "background_review"


def is_review_fork(agent: Any) -> bool:
    """True for the short-lived agent Hermes forks for its background review."""
    return getattr(agent, "_memory_write_origin", None) == REVIEW_ORIGIN


def _no_hermes_credential(runtime: Mapping[str, Any]) -> bool:
    key = runtime.get("api_key")
    return not (isinstance(key, str) and key.strip()) or key == PLACEHOLDER_KEY


def review_runtime(agent: Any, runtime: Any) -> Any:
    """The runtime the review fork of ``agent`` runs on, given the one Hermes resolved."""
    if not isinstance(runtime, dict):
        return runtime
    parent_on_codex = getattr(agent, "api_mode", None) == RUNTIME_VALUE
    mode = runtime.get("api_mode")
    if parent_on_codex and mode in ("codex_responses", RUNTIME_VALUE) \
            and _no_hermes_credential(runtime):
        return dict(runtime, api_mode=RUNTIME_VALUE)  # codex holds the only login
    if mode == RUNTIME_VALUE:
        return dict(runtime, api_mode="codex_responses")  # Hermes can call the API itself
    return runtime


def _thread_allow_list() -> set[str] | None:
    holder = symbol("hermes_cli.plugins", "_thread_tool_whitelist",
                    feature="the background review's tool allow-list on codex")
    allowed = getattr(holder, "allowed", None) if holder is not None else None
    return set(allowed) if isinstance(allowed, set | frozenset | list | tuple) else None


def host_tools(agent: Any) -> tuple[HostTool, ...]:
    """Hermes' memory and skill tools for the review fork, as codex host tools — narrowed to
    the review thread's allow-list when Hermes set one."""
    definitions = symbol("model_tools", "get_tool_definitions",
                         feature="the background review's tools on codex")
    if not callable(definitions):
        return ()
    toolsets = ["skills"]
    if getattr(agent, "_memory_enabled", False) or getattr(agent, "_user_profile_enabled", False):
        toolsets.insert(0, "memory")
    try:
        specs = definitions(enabled_toolsets=toolsets, quiet_mode=True)
    except Exception as exc:
        log.warning("codex-runtime: listing Hermes' review tools failed: %s: %s",
                    type(exc).__name__, exc)
        return ()
    allowed = _thread_allow_list()
    return tuple(tool for tool in build(list(specs or ())).tools
                 if allowed is None or (tool.host_name or tool.name) in allowed)
