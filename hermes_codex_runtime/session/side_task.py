"""One side task of a host on codex: a short-lived thread that can touch nothing.

Around its turns a host makes small model calls of its own — a session title, a summary, an
approval verdict. :func:`run_side_task` runs one on the app-servers the host's sessions use (the
pool places it as it places a session: the shared process, a process of its own, a remote
endpoint), on a thread of its own that

* is ``ephemeral`` (codex writes no rollout and never resumes it) and sees nothing but the
  task's own input — no environment context, no project docs, no apps or collaboration-mode
  instructions — with the task's system prompt as developer instructions under a short neutral
  base prompt (not codex's agent prompt);
* can do nothing: a ``read-only`` sandbox, approvals ``never``, and every tool a thread can
  switch off switched off (:data:`SIDE_TASK_CONFIG`: shell, web search, image viewer,
  sub-agents, goals, apps and the MCP servers of codex's ``config.toml``). codex still offers
  ``apply_patch`` (the read-only sandbox refuses every patch, and approvals ``never`` asks
  nobody) and ``request_user_input`` (unavailable in codex's default mode); no switch removes
  them;
* is bounded: its own deadline, and at most :data:`MAX_IN_FLIGHT` side tasks at a time on one
  app-server (the others wait, within their deadline);
* is unsubscribed when it ends (its channel closes), whatever happened.

It returns the answer's text, the tokens the thread used (a fresh thread: all of them the task's)
and the model codex ran; a failure raises :class:`SideTaskFailed` carrying a classified
:class:`~hermes_codex_runtime.protocol.Failure`. Nothing of it touches a host session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from hermes_codex_runtime.events import CodexEvent
from hermes_codex_runtime.pool import Channel, ServerPool, SharedServer
from hermes_codex_runtime.protocol import (
    Failure,
    FailureKind,
    InputError,
    thread_start_params,
    to_user_input,
    turn_start_params,
)
from hermes_codex_runtime.protocol.schema_types import (
    ConfigReadParams,
    ThreadStartResponse,
    TurnStartResponse,
    UserInput,
)
from hermes_codex_runtime.session import thread
from hermes_codex_runtime.session.broker import RequestBroker
from hermes_codex_runtime.session.failures import Stage, failure_from, transport_failure
from hermes_codex_runtime.session.spawn import spawn_options
from hermes_codex_runtime.session.turn import TurnDriver
from hermes_codex_runtime.usage import TokenUsage
from hermes_codex_runtime.values import SessionSettings, TurnResult
from hermes_codex_runtime.wire import WireError

log = logging.getLogger(__name__)

#: Side tasks in flight at once on one app-server; more wait for a slot within their deadline.
MAX_IN_FLIGHT = 4
#: The base prompt of a side thread (codex's own is an agent's, for a coding session).
BASE_INSTRUCTIONS = "You are a helpful assistant."
#: What a side thread has switched off (codex config overrides, accepted without a warning by
#: codex 0.163 and 0.171).
SIDE_TASK_CONFIG: dict[str, Any] = {
    "features.shell_tool": False,
    "features.unified_exec": False,
    "features.view_image": False,
    "features.multi_agent": False,
    "features.goals": False,
    "features.apps": False,
    "features.memories": False,
    "web_search": "disabled",
    "project_doc_max_bytes": 0,
    "include_environment_context": False,
    "include_apps_instructions": False,
    "include_collaboration_mode_instructions": False,
}


@dataclass(frozen=True, slots=True)
class SideTask:
    """What a host asks of one side task."""

    #: The input: a string or content parts (text and images), as for a turn.
    input: Any
    #: The task's system prompt (sent as developer instructions); ``None``: none.
    instructions: str | None = None
    #: The model and effort; ``None``: the settings' (else codex's own).
    model: str | None = None
    effort: str | None = None
    #: A JSON schema the answer must follow (``outputSchema``).
    output_schema: Mapping[str, Any] | None = None
    #: Seconds the whole task may take, waiting for a slot included.
    timeout: float = 120.0


@dataclass(frozen=True, slots=True)
class SideTaskReply:
    """What one side task produced."""

    text: str
    usage: TokenUsage
    model: str | None


class SideTaskFailed(Exception):
    """A side task did not produce an answer; :attr:`failure` says why."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


_slots: weakref.WeakKeyDictionary[SharedServer, threading.BoundedSemaphore] = \
    weakref.WeakKeyDictionary()
_mcp_names: weakref.WeakKeyDictionary[SharedServer, tuple[str, ...]] = \
    weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _slot(server: SharedServer) -> threading.BoundedSemaphore:
    with _lock:
        slot = _slots.get(server)
        if slot is None:
            slot = _slots[server] = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        return slot


def _timeout(what: str, seconds: float) -> SideTaskFailed:
    return SideTaskFailed(Failure(FailureKind.TIMEOUT,
                                  f"the codex side task timed out {what} (its deadline: "
                                  f"{seconds:g}s)"))


def run_side_task(pool: ServerPool, settings: SessionSettings, task: SideTask) -> SideTaskReply:
    """Run ``task`` on a thread of its own on ``pool``'s app-servers (placed as ``settings``
    say). Raises :class:`SideTaskFailed`."""
    started = time.monotonic()
    deadline = started + task.timeout
    try:
        items = to_user_input(task.input, base_dir=settings.cwd)
        conn = pool.channel(spawn_options(settings), settings.app_server)
    except InputError as exc:
        raise SideTaskFailed(Failure(FailureKind.INPUT, str(exc))) from None
    except (WireError, ValueError, OSError) as exc:
        raise SideTaskFailed(failure_from(exc, Stage.START)[0]) from None
    slot = _slot(conn.shared)
    try:
        if not slot.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise _timeout("waiting for a free slot on its app-server", task.timeout)
        try:
            return _run(conn, settings, task, items, deadline)
        finally:
            slot.release()
    finally:
        conn.close()
        log.debug("codex side task done in %.3fs", time.monotonic() - started)


def _run(conn: Channel, settings: SessionSettings, task: SideTask,
         items: list[UserInput], deadline: float) -> SideTaskReply:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _timeout("before it could start", task.timeout)
    settings = dataclasses.replace(settings, turn_timeout=remaining, sandbox="read-only",
                                   approval_policy="never", host_tools=(),
                                   model=task.model or settings.model,
                                   effort=task.effort or settings.effort)
    try:
        thread.check_config(conn, settings)
        thread.check_login(conn, settings)
        reply = cast(ThreadStartResponse, thread.request(conn, "thread/start", thread_start_params(
            ephemeral=True, cwd=settings.cwd, model=settings.model,
            model_provider=settings.model_provider, approval_policy="never",
            sandbox="read-only", base_instructions=BASE_INSTRUCTIONS,
            developer_instructions=task.instructions or None,
            config={**SIDE_TASK_CONFIG, **_mcp_off(conn, settings)}),
            min(settings.request_timeout, remaining)))
    except WireError as exc:
        raise _failed(exc, Stage.START, conn) from None
    thread_id = (reply.get("thread") or {}).get("id")
    if not isinstance(thread_id, str) or not thread_id:
        raise SideTaskFailed(Failure(FailureKind.OTHER, "codex returned no thread id"))
    try:
        started = cast(TurnStartResponse, thread.request(conn, "turn/start", turn_start_params(
            thread_id, items, model=settings.model, effort=settings.effort,
            output_schema=dict(task.output_schema) if task.output_schema else None),
            min(settings.request_timeout, max(0.1, deadline - time.monotonic()))))
    except WireError as exc:
        raise _failed(exc, Stage.TURN, conn) from None
    turn_id = (started.get("turn") or {}).get("id")
    result = TurnResult(thread_id=thread_id, turn_id=turn_id if isinstance(turn_id, str)
                        else None, model=settings.model or _model(reply))
    _drive(conn, settings, result, thread_id)
    if result.failure is not None and result.failure.kind is FailureKind.TIMEOUT:
        raise _timeout(f"before its answer ({result.failure.message})", task.timeout)
    if result.failure is not None:
        raise SideTaskFailed(result.failure)
    usage = result.usage.turn if result.usage is not None else TokenUsage()
    return SideTaskReply(text=result.final_text, usage=usage, model=result.model)


def _failed(exc: WireError, stage: Stage, conn: Channel) -> SideTaskFailed:
    return SideTaskFailed(failure_from(exc, stage, conn.stderr_tail(12))[0])


def _drive(conn: Channel, settings: SessionSettings, result: TurnResult,
           thread_id: str) -> None:
    """The turn to its end, with a broker that decides nothing (a side thread asks for no
    approval; whatever codex asks anyway gets its safe answer)."""
    def ignore(_event: CodexEvent) -> None:
        return None

    broker = RequestBroker(approve=None, emit=ignore, call_tool=None, host_tools=lambda: (),
                           connection=lambda: conn)
    broker.begin_turn(conn)
    driver = TurnDriver(conn, settings, result, thread_id, result.turn_id, broker=broker,
                        emit=ignore, interrupted=threading.Event(),
                        on_turn=lambda _turn: None,
                        transport_failure=lambda message: transport_failure(
                            message, conn.stderr_tail(12)))
    try:
        driver.run()
    finally:
        broker.end_turn(conn, driver.leftover)


def _mcp_off(conn: Channel, settings: SessionSettings) -> dict[str, Any]:
    """``mcp_servers.<name>.enabled = false`` for every MCP server of the app-server's config
    (read once per app-server): an empty ``mcp_servers`` table would be merged, not replace."""
    server = conn.shared
    with _lock:
        names = _mcp_names.get(server)
    if names is None:
        names = ()
        with contextlib.suppress(WireError):
            everything: ConfigReadParams = {}
            config = conn.request("config/read", everything, timeout=settings.control_timeout)
            servers = (config.get("config") or {}).get("mcp_servers")
            if isinstance(servers, Mapping):
                names = tuple(str(name) for name in servers)
        with _lock:
            _mcp_names[server] = names
    return {f"mcp_servers.{name}.enabled": False for name in names}


def _model(reply: Mapping[str, Any]) -> str | None:
    model = reply.get("model")
    return model if isinstance(model, str) and model else None
