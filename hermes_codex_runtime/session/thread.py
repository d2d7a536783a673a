"""One codex thread's life on a connection: start, resume, the history seed, and the check of
codex's ``config.toml`` that comes first.

* **Resume.** A stored thread id is resumed with ``thread/resume`` carrying the current developer
  instructions, cwd and model/provider. When codex cannot resume it ("no rollout found", another
  id answered, another process still writing it) :func:`resume` answers ``None`` and the session
  starts a fresh thread in the same call — never an error. So does a thread whose host tools
  (codex keeps them from its start: a resume cannot change them) lack one the session offers
  now. No answer at all is not "no such thread": it raises, and the session keeps the id for
  its next attempt. A resume that meets codex still unloading the thread is retried (bounded).
* **Fork.** A new thread with another thread's history up to a turn (``thread/fork`` with
  ``lastTurnId``), for a host that reruns a turn from the point before it; a thread codex cannot
  fork answers ``None`` (start fresh), as for resume.
* **Mend.** A thread the host's conversation moved away from (turns undone, retried, edited, or
  answered by another provider) drops the turns the host no longer has (``thread/revert``) and
  is given the messages it never saw (``thread/inject_items``), keeping what it holds of the
  rest (:class:`Mend`, :func:`mend`). A codex that cannot answers an error: the session then
  starts a fresh thread seeded with the conversation.
* **Start.** A fresh thread gets the host's system prompt once, as ``developerInstructions``,
  with the host's history seed appended only here.
* **Login.** A provider that needs an OpenAI login, on a codex home with none, fails the start
  at once (:func:`check_login`), instead of a turn that retries "waiting for network".
* **Config.** codex reports a ``config.toml`` it could not use right at start-up. On its defaults
  it would talk to OpenAI, so when the user chose another provider nothing is sent
  (:func:`check_config`, :func:`config_refused`).
* **Overload.** Every request here (and ``turn/start``) is retried with bounded backoff and jitter
  while codex answers "Server overloaded; retry later." (:func:`request`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, cast

from hermes_codex_runtime.pool import Channel
from hermes_codex_runtime.protocol import (
    account_read_params,
    history_items,
    invalid_configuration,
    login_missing,
    thread_fork_params,
    thread_inject_items_params,
    thread_resume_params,
    thread_revert_params,
    thread_start_params,
)
from hermes_codex_runtime.protocol.permissions import ThreadPermissions
from hermes_codex_runtime.protocol.schema_types import ThreadStartResponse
from hermes_codex_runtime.session import rollout
from hermes_codex_runtime.session.failures import LoginMissing
from hermes_codex_runtime.values import SessionSettings
from hermes_codex_runtime.wire import (
    CodexConfigError,
    RequestTimeout,
    ServerError,
    WireError,
    command_env_policy,
    redact,
)
from hermes_codex_runtime.wire.codex_config import (
    DEFAULT_PROVIDER,
    chosen_provider,
    codex_home_path,
)

log = logging.getLogger(__name__)

SERVER_OVERLOADED = -32001
OVERLOAD_RETRIES = 4  # then the overload is the error; waits 0.1, 0.2, 0.4, 0.8 s (+jitter)
# codex's JSON-RPC error for a thread it will not make because config.toml cannot be loaded
_CONFIG_REFUSED = re.compile(r"\s*(failed to load config|invalid configuration)", re.IGNORECASE)
#: A resume that met codex still unloading the thread ("… is closing; retry thread/resume after
#: the thread is closed", "… command channel is closed") is retried, waiting 0.05 s doubling.
CLOSING_RETRIES = 5
_CLOSING = re.compile(r"is closing|command channel is closed", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Opened:
    """A thread codex now runs for the session."""

    thread_id: str
    origin: str  # "resumed" | "forked" | "started" | "seeded" (fresh, with the history seed)
    model: str | None  # what codex said it runs the thread on
    path: str | None = None  # the thread's rollout file, where its app-server runs
    effort: str | None = None  # the reasoning effort codex said it runs the thread with


def request(conn: Channel, method: str, params: Mapping[str, Any],
            timeout: float) -> dict[str, Any]:
    """A request, retried with bounded backoff and jitter while codex is overloaded."""
    for attempt in range(OVERLOAD_RETRIES + 1):
        try:
            return conn.request(method, params, timeout=timeout)
        except ServerError as exc:
            if exc.code != SERVER_OVERLOADED or attempt == OVERLOAD_RETRIES:
                raise
            delay = 0.1 * 2 ** attempt * (1 + random.random() / 2)
            log.info("codex is overloaded (%s); retrying %s in %.2fs", exc.message, method,
                     delay)
            time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


#: codex's plan tool, off in an app-server thread unless asked for: with it, the model's plan
#: reaches the host (``turn/plan/updated``). The same key in the settings' config wins (a
#: dotted key: a whole ``tools`` table would replace the user's own settings in it).
PLAN_TOOL = {"tools.update_plan.enabled": True}


def overrides(settings: SessionSettings, cwd: str, walls: ThreadPermissions) -> dict[str, Any]:
    """What every ``thread/start`` and ``thread/resume`` carries of the session's settings —
    with its walls: a permission profile, or ``sandbox`` alone (never both) — and the plan
    tool (:data:`PLAN_TOOL`)."""
    s = settings
    return {"cwd": cwd, "model": s.model, "model_provider": s.model_provider,
            "approval_policy": walls.approval_policy or s.approval_policy,
            "approvals_reviewer": s.approvals_reviewer,
            "sandbox": walls.sandbox, "personality": "none", "service_tier": s.service_tier,
            "config": {**PLAN_TOOL, **(s.config_overrides or {}), **walls.config,
                       "shell_environment_policy":
                       command_env_policy(s.command_env_passthrough)}}


def _model(response: Mapping[str, Any]) -> str | None:
    model = response.get("model")
    return model if isinstance(model, str) and model else None


def _effort(response: Mapping[str, Any]) -> str | None:
    effort = response.get("reasoningEffort")
    return effort if isinstance(effort, str) and effort else None


def _path(response: Mapping[str, Any]) -> str | None:
    thread = response.get("thread")
    path = thread.get("path") if isinstance(thread, Mapping) else None
    return path if isinstance(path, str) and path else None


def resume(conn: Channel, settings: SessionSettings, cwd: str, stored: str,
           instructions: str | None, walls: ThreadPermissions) -> Opened | None:
    """``thread/resume`` of ``stored``; ``None`` when codex cannot resume it (start fresh).
    Raises :class:`~hermes_codex_runtime.wire.WireError` when codex did not answer, and
    :class:`CodexConfigError` when it cannot load its config (the thread itself is fine)."""
    params = thread_resume_params(stored, developer_instructions=instructions,
                                  **overrides(settings, cwd, walls))
    for attempt in range(CLOSING_RETRIES + 1):
        try:
            result = request(conn, "thread/resume", params, settings.request_timeout)
            break
        except ServerError as exc:
            if _CLOSING.search(exc.message) and attempt < CLOSING_RETRIES:
                time.sleep(0.05 * 2 ** attempt)
                continue
            if _CONFIG_REFUSED.match(exc.message):
                config_refused(conn, settings, exc)
            log.warning("codex could not resume thread %s (%s); starting a fresh thread",
                        stored, exc.message)
            return None
    answered = (result.get("thread") or {}).get("id")
    if answered == stored:
        path = _path(result)
        kept = rollout.dynamic_tools(path) if conn.endpoint is None else None
        if kept is not None and not offers_all(kept, settings):
            # codex keeps the thread's tools from its start: the host has tools it lacks
            log.info("codex thread %s lacks host tools the session has now (%s); starting a "
                     "fresh thread with the conversation", stored, tools_added(kept, settings))
            conn.unload()
            return None
        log.info("codex thread %s resumed", stored)
        return Opened(stored, "resumed", _model(result), path, _effort(result))
    log.warning("codex answered thread/resume for %s with thread %r; starting fresh", stored,
                answered)
    return None


def offers_all(kept: Sequence[Mapping[str, Any]], settings: SessionSettings) -> bool:
    """True when a thread's recorded dynamic tools include every tool ``settings`` offer (as
    they are now). Tools the host dropped since may stay: codex still offers them, and the
    session refuses a call to one as a tool it did not declare."""
    def canonical(spec: Mapping[str, Any]) -> str:
        return json.dumps(spec, sort_keys=True, default=str)
    recorded = {canonical(spec) for spec in kept}
    return all(canonical(tool.spec()) in recorded for tool in settings.host_tools)


def tools_added(kept: Sequence[Mapping[str, Any]], settings: SessionSettings) -> str:
    """Which of the session's tools a thread's recorded ones lack, in a few words."""
    recorded = {json.dumps(spec, sort_keys=True, default=str) for spec in kept}
    missing = sorted(tool.name for tool in settings.host_tools
                     if json.dumps(tool.spec(), sort_keys=True, default=str) not in recorded)
    return ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")


def fork(conn: Channel, settings: SessionSettings, cwd: str, source: tuple[str, str | None],
         instructions: str | None, walls: ThreadPermissions) -> Opened | None:
    """``thread/fork`` of ``source`` (a thread id and the last turn to keep); ``None`` when
    codex cannot fork it (start fresh)."""
    thread_id, last_turn = source
    params = overrides(settings, cwd, walls)
    try:
        result = request(conn, "thread/fork", thread_fork_params(
            thread_id, last_turn, developer_instructions=instructions, **params),
            settings.request_timeout)
    except ServerError as exc:
        if _CONFIG_REFUSED.match(exc.message):
            config_refused(conn, settings, exc)
        log.warning("codex could not fork thread %s (%s); starting a fresh thread", thread_id,
                    exc.message)
        return None
    forked = (result.get("thread") or {}).get("id")
    if not isinstance(forked, str) or not forked or forked == thread_id:
        log.warning("codex answered thread/fork of %s with thread %r; starting fresh",
                    thread_id, forked)
        return None
    log.info("codex thread %s forked from %s through turn %s", forked, thread_id, last_turn)
    return Opened(forked, "forked", _model(result), effort=_effort(result))


@dataclass(frozen=True, slots=True)
class Mend:
    """What the thread ``thread_id`` needs before the host's next turn: the turn ``cut`` and
    every later one dropped (``None``: none), then the host's messages ``add`` appended."""

    thread_id: str
    cut: str | None = None
    add: tuple[Mapping[str, Any], ...] = ()


def mend(conn: Channel, settings: SessionSettings, wanted: Mend,
         restart: Callable[[], Opened]) -> Opened | None:
    """Apply ``wanted`` to its thread; ``None`` once done. A codex that cannot (it answers an
    error) leaves that thread for ``restart()``'s — a fresh one seeded with the conversation —,
    which is returned."""
    items = history_items(wanted.add)
    try:
        if wanted.cut is not None:
            request(conn, "thread/revert", thread_revert_params(wanted.thread_id, wanted.cut),
                    settings.request_timeout)
        if items:
            request(conn, "thread/inject_items",
                    thread_inject_items_params(wanted.thread_id, items), settings.request_timeout)
    except ServerError as exc:
        log.warning("codex could not mend thread %s (%s); starting a fresh thread seeded with "
                    "the conversation", wanted.thread_id, exc.message)
        with contextlib.suppress(WireError):
            conn.request("thread/unsubscribe", {"threadId": wanted.thread_id},
                         timeout=settings.control_timeout)
        return restart()
    log.info("codex thread %s mended:%s%s", wanted.thread_id,
             f" turns from {wanted.cut} dropped" if wanted.cut else "",
             f" {len(items)} item(s) of the host's conversation added" if items else "")
    return None


def start(conn: Channel, settings: SessionSettings, cwd: str, instructions: str | None,
          seed: Callable[[], str | None] | None, walls: ThreadPermissions) -> Opened:
    """``thread/start`` of a fresh thread: the host's instructions and (asked only now) its
    history seed as ``developerInstructions``, the host's tools as dynamic tools."""
    seed_text = seed() if seed is not None else None
    combined = "\n\n".join(p for p in (instructions, seed_text) if p) or None
    tools = [tool.spec() for tool in settings.host_tools] or None
    try:
        result = cast(ThreadStartResponse, request(conn, "thread/start", thread_start_params(
            developer_instructions=combined, dynamic_tools=tools,
            **overrides(settings, cwd, walls)),
            settings.request_timeout))
    except ServerError as exc:
        if _CONFIG_REFUSED.match(exc.message):
            config_refused(conn, settings, exc)
        raise
    thread_id = (result.get("thread") or {}).get("id")
    if not isinstance(thread_id, str) or not thread_id:
        raise ServerError("thread/start", -32603, "codex returned no thread id")
    origin = "seeded" if seed_text else "started"
    log.info("codex thread %s started (%s)", thread_id, origin)
    return Opened(thread_id, origin, _model(result), _path(result), _effort(result))


def check_config(conn: Channel, settings: SessionSettings) -> list[str]:
    """The "Invalid configuration" warnings codex gave at start-up, before any thread exists
    (shown at the turn's start). Raises :class:`CodexConfigError` when on its defaults codex
    would send the conversation to another provider than the user chose."""
    problems: list[str] = []
    for message in conn.drain():  # before any thread exists: connection-level notes only
        text = invalid_configuration(message.params) \
            if message.method == "configWarning" else None
        if text:
            problems.append(redact(text))
    if not problems:
        return problems
    if conn.endpoint is not None:
        # a remote server's config.toml is its operator's: shown, not judged from here
        log.warning("the codex app-server at %s ignored its config.toml: %s", conn.endpoint,
                    "; ".join(problems))
        return problems
    home = codex_home_path(settings.codex_home)
    provider = chosen_provider(settings.codex_home, settings.model_provider)
    if provider is None or provider != DEFAULT_PROVIDER:
        chosen = f"the provider {provider!r}" if provider else "the provider you configured"
        raise CodexConfigError(
            f"codex ignored {home}/config.toml ({'; '.join(problems)}). On its defaults it "
            f"would send this conversation to OpenAI instead of {chosen}, so nothing was sent.",
            f"Fix {home}/config.toml; `codex` run in a terminal shows the same warning.")
    log.warning("codex ignored %s/config.toml and uses its defaults: %s", home,
                "; ".join(problems))
    return problems


def check_login(conn: Channel, settings: SessionSettings) -> None:
    """Without the login its provider needs, codex would retry "waiting for network" until the
    turn budget ran out: raise :class:`LoginMissing` at once instead. (A codex too old to say
    is not judged.)"""
    try:
        account = conn.request("account/read", account_read_params(),
                               timeout=settings.control_timeout)
    except (ServerError, RequestTimeout) as exc:
        log.info("codex did not say whether it is logged in (%s); not checked", exc)
        return
    failure = login_missing(account)
    if failure is None:
        return
    if conn.endpoint is not None:
        failure = dataclasses.replace(failure, message=f"the codex app-server at "
                                      f"{conn.endpoint} is not logged in")
    raise LoginMissing(failure)


def config_refused(conn: Channel, settings: SessionSettings, exc: ServerError) -> NoReturn:
    """codex refused a thread because it cannot load ``config.toml``. Its "Invalid
    configuration" warning can arrive after ``initialize`` is answered, so it is looked for
    again; either way the turn fails with the file named, and nothing was sent."""
    check_config(conn, settings)  # raises when the warning says the chosen provider is lost
    home = codex_home_path(settings.codex_home)
    provider = chosen_provider(settings.codex_home, settings.model_provider)
    to = f" to the provider {provider!r}" if provider else ""
    raise CodexConfigError(
        f"codex could not load {home}/config.toml ({redact(exc.message)}), so nothing was "
        f"sent{to}.",
        f"Fix {home}/config.toml; `codex` run in a terminal shows the same error.")
