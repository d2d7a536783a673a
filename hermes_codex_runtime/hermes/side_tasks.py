"""Hermes' side tasks on codex: titles, summaries, the approval judge — with only a codex login.

Around a turn Hermes makes small model calls of its own through its auxiliary client
(``agent.auxiliary_client``: ``call_llm`` / ``async_call_llm``, each resolving a client with
``resolve_provider_client``, which every caller looks up at call time). With provider
``openai-codex`` that client needs Hermes' own codex OAuth token; with only ``codex login`` there
is none, and every side task fails ("No LLM provider configured for task=title_generation").

:func:`install_side_tasks` wraps ``resolve_provider_client``. When Hermes' own resolution gives
no client for ``openai-codex`` and the codex runtime is this plugin's — the main runtime's
``api_mode`` is ``codex_app_server``, or config.yaml switches the runtime on (so an
``auxiliary.<task>.provider: openai-codex`` counts too) — it returns a client that runs the
request as a codex side task (:mod:`hermes_codex_runtime.session.side_task`) on the app-servers
the user's sessions run on. The client is a ``CodexAuxiliaryClient``, so Hermes treats it as its
own codex adapter: the async wrapper, no stream injected, its timeout and fallback handling. A
client Hermes does find (another provider, Hermes' own codex login) is returned untouched.

A request becomes a side task like this: the system messages are the developer instructions,
the rest the input (one user message as is, with its images; several as a transcript); the
model is the one Hermes resolved for the task (``auxiliary.<task>.model``, else the main model —
``model.codex_model`` when it pins the turns' model), the effort from the task's reasoning
settings (reasoning off → ``low``, the least the codex backend takes), and a ``json_schema``
response format becomes codex's ``outputSchema``. A request that carries tools is refused:
Hermes' tools never reach codex.

The reply is the chat-completions shape Hermes' codex adapter returns, with the usage in its
chat-completions form (cached and reasoning tokens broken out), so Hermes' aux accounting
(``session_model_usage``, by task) counts it — never the turn's counters. A failure is an
exception Hermes classifies: a usage or rate limit as a 429 (its fallback chain), a deadline as
a timeout, a dead app-server as a connection error; the user's turn is never touched. Hermes'
warning "no Codex OAuth token found (run: hermes model)" — wrong advice where codex owns the
login — is dropped for exactly the calls this module answers.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from hermes_codex_runtime.hermes.config.activation import PLACEHOLDER_KEY, provider_route
from hermes_codex_runtime.hermes.config.settings import (
    RUNTIME_VALUE,
    SettingError,
    model_section,
    runtime_requested,
)
from hermes_codex_runtime.hermes.symbols.patch import wrap_in_place
from hermes_codex_runtime.hermes.symbols.probe import symbol
from hermes_codex_runtime.protocol import Failure, FailureKind

log = logging.getLogger("hermes_codex_runtime.hermes")
CODEX_PROVIDER = "openai-codex"
#: Seconds a side task may take when Hermes names no timeout.
DEFAULT_TIMEOUT = 120.0
#: Hermes' reasoning effort → what a codex side thread is asked for.
EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high",
          "xhigh": "xhigh", "max": "xhigh", "ultra": "xhigh"}


class CodexSideTaskError(RuntimeError):
    """A side task codex could not do (Hermes re-raises it to the caller: a warning, an untitled
    session, an escalated approval)."""

    def __init__(self, message: str, kind: FailureKind = FailureKind.OTHER) -> None:
        super().__init__(message)
        self.kind = kind


class CodexSideTaskRateLimitError(CodexSideTaskError):
    """A usage or rate limit: Hermes' fallback chain takes it (HTTP 429)."""

    status_code = 429


class CodexSideTaskTimeout(CodexSideTaskError, TimeoutError):
    """The side task ran past its deadline."""


class CodexSideTaskConnectionError(CodexSideTaskError, ConnectionError):
    """The app-server went away, or codex could not reach the model provider."""


_LIMITS = frozenset({FailureKind.USAGE_LIMIT, FailureKind.RATE_LIMIT, FailureKind.OVERLOADED})
_GONE = frozenset({FailureKind.TRANSPORT, FailureKind.SERVICE})


def hermes_error(failure: Failure) -> CodexSideTaskError:
    """``failure`` as the exception Hermes' auxiliary client classifies."""
    text = f"codex side task failed: {failure.describe()}"
    if failure.kind is FailureKind.AUTH:
        from hermes_codex_runtime.hermes.fixes import login_command

        text = (f"codex side task failed: codex is not logged in ({failure.message}); run "
                f"`{login_command()}`")
    if failure.kind in _LIMITS:
        # in Hermes' words for a rate limit (codex's own text names plans and credits, which
        # Hermes would take for a billing error and skip codex for ten minutes)
        return CodexSideTaskRateLimitError(
            f"codex side task failed: codex rate limit ({failure.kind.value}); try again later",
            failure.kind)
    if failure.kind is FailureKind.TIMEOUT:
        return CodexSideTaskTimeout(f"{text} (timed out)", failure.kind)
    if failure.kind in _GONE:
        return CodexSideTaskConnectionError(text, failure.kind)
    return CodexSideTaskError(text, failure.kind)


# ---------------------------------------------------------------------- the request


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(str(part.get("text") or "") for part in content
                         if isinstance(part, Mapping) and isinstance(part.get("text"), str))
    return "" if content is None else str(content)


def _images_of(content: Any) -> list[Any]:
    if not isinstance(content, Sequence) or isinstance(content, str):
        return []
    return [part for part in content if isinstance(part, Mapping)
            and part.get("type") in ("image_url", "input_image")]


def side_task_input(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, Any]:
    """``(instructions, input)`` of chat messages: the system messages' text, and the rest —
    one user message as it is, several as a transcript (images kept)."""
    system = [_text_of(m.get("content")) for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    instructions = "\n\n".join(t for t in system if t.strip()) or None
    if len(rest) == 1 and rest[0].get("role", "user") == "user":
        return instructions, rest[0].get("content")
    parts: list[Any] = []
    for message in rest:
        text = _text_of(message.get("content"))
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                text += f"\n(called {function.get('name')} with {function.get('arguments')})"
        parts.append({"type": "text", "text": f"[{message.get('role', 'user')}]\n{text}"})
        parts.extend(_images_of(message.get("content")))
    return instructions, parts


def _effort(kwargs: Mapping[str, Any]) -> str | None:
    extra = kwargs.get("extra_body")
    reasoning = kwargs.get("reasoning")
    if isinstance(extra, Mapping) and isinstance(extra.get("reasoning"), Mapping):
        reasoning = extra["reasoning"]
    if isinstance(reasoning, Mapping):
        if reasoning.get("enabled") is False:
            return "low"  # codex cannot switch reasoning off; its backend refuses "minimal"
        value = reasoning.get("effort")
    else:
        value = kwargs.get("reasoning_effort")
    return EFFORT.get(str(value or "").lower())


def _output_schema(kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    extra = kwargs.get("extra_body")
    form = kwargs.get("response_format")
    if isinstance(extra, Mapping) and extra.get("response_format") is not None:
        form = extra["response_format"]
    if isinstance(form, Mapping) and form.get("type") == "json_schema":
        spec = form.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        return dict(schema) if isinstance(schema, Mapping) else None
    return None


def codex_model(name: Any, model: Mapping[str, Any], pinned: str | None) -> str | None:
    """The model a side task asks codex for: Hermes' resolved name (an ``openai/`` prefix
    dropped; another vendor's name is not a codex model: codex's own); the main model means the
    turns' model, which ``model.codex_model`` pins."""
    if not isinstance(name, str) or not name.strip():
        return pinned
    name = name.strip()
    if pinned and name == str(model.get("default") or "").strip():
        return pinned
    if name.lower().startswith("openai/"):
        name = name.split("/", 1)[1]
    return None if "/" in name or not name else name


def _session_cwd() -> str:
    cwd = os.environ.get("TERMINAL_CWD")
    return cwd if cwd and os.path.isdir(cwd) else os.getcwd()


def run_request(kwargs: Mapping[str, Any], default_model: str | None) -> Any:
    """One ``chat.completions.create(**kwargs)`` as a codex side task, in the chat-completions
    shape. Raises a :class:`CodexSideTaskError`."""
    if kwargs.get("tools"):
        raise CodexSideTaskError("codex side tasks do not run requests that offer tools "
                                 "(Hermes' tools never reach codex)")
    from hermes_codex_runtime.hermes.config.standing import standing
    from hermes_codex_runtime.hermes.turn.hooks import host_settings
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime
    from hermes_codex_runtime.session.side_task import SideTask, SideTaskFailed, run_side_task

    try:
        fixed = standing()
    except SettingError as exc:
        raise CodexSideTaskError(f"codex side task: {exc}", FailureKind.SETUP) from None
    config, settings = fixed.config, fixed.plugin
    model = codex_model(kwargs.get("model") or default_model, model_section(config),
                        settings.codex_model)
    instructions, task_input = side_task_input(list(kwargs.get("messages") or ()))
    timeout = kwargs.get("timeout")
    seconds = float(timeout) if isinstance(timeout, int | float) and timeout > 0 \
        else DEFAULT_TIMEOUT
    task = SideTask(input=task_input, instructions=instructions, model=model,
                    effort=_effort(kwargs), output_schema=_output_schema(kwargs),
                    timeout=min(seconds, settings.turn_timeout))
    started = time.monotonic()
    try:
        reply = run_side_task(shared_runtime().pool,
                              host_settings(fixed, cwd=_session_cwd()), task)
    except SideTaskFailed as exc:
        log.warning("codex-runtime: a side task failed after %.1fs: %s",
                    time.monotonic() - started, exc.failure.describe())
        raise hermes_error(exc.failure) from None
    except Exception as exc:  # a bug here must still be a failure Hermes handles
        log.exception("codex-runtime: a side task failed unexpectedly")
        raise CodexSideTaskError(f"codex side task failed: {type(exc).__name__}: {exc}") \
            from None
    usage = reply.usage
    log.info("codex-runtime: side task on %s in %.2fs, tokens in %d (cached %d) out %d",
             reply.model or "codex's default model", time.monotonic() - started,
             usage.input_tokens, usage.cached_tokens, usage.output_tokens)
    message = SimpleNamespace(role="assistant", content=reply.text.strip() or None,
                              tool_calls=None)
    return SimpleNamespace(
        choices=[SimpleNamespace(index=0, message=message, finish_reason="stop")],
        model=reply.model or model or "codex",
        usage=SimpleNamespace(
            prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            prompt_tokens_details=SimpleNamespace(cached_tokens=usage.cached_tokens,
                                                  cache_write_tokens=usage.cache_write_tokens),
            completion_tokens_details=SimpleNamespace(reasoning_tokens=usage.reasoning_tokens)))


# ---------------------------------------------------------------------- the seam


class _Completions:
    def __init__(self, model: str | None) -> None:
        self._model = model

    def create(self, **kwargs: Any) -> Any:
        return run_request(kwargs, self._model)


class _NoTransport:
    """What Hermes finds as the client's ``_real_client``: nothing to close."""

    def close(self) -> None:
        return None


@functools.cache
def client_class(base: type) -> type:
    """The side-task client, a subclass of Hermes' ``CodexAuxiliaryClient`` (``base``)."""

    def __init__(self: Any, model: str | None) -> None:
        # not base.__init__: there is no OpenAI client (codex owns the login)
        self._real_client = _NoTransport()
        self.chat = SimpleNamespace(completions=_Completions(model))
        self.api_key = PLACEHOLDER_KEY
        self.base_url = provider_route(CODEX_PROVIDER, None)

    def close(self: Any) -> None:
        return None

    return type("CodexSideTaskClient", (base,), {
        "__init__": __init__, "close": close, "__module__": __name__,
        "__doc__": "Hermes' auxiliary requests as codex side tasks (see hermes.side_tasks)."})


def _ours(arguments: Mapping[str, Any], normalize: Callable[[str], str]) -> bool:
    if arguments.get("raw_codex") or normalize(str(arguments.get("provider") or "")) != \
            CODEX_PROVIDER:
        return False
    main = arguments.get("main_runtime")
    if arguments.get("api_mode") == RUNTIME_VALUE or (
            isinstance(main, Mapping) and main.get("api_mode") == RUNTIME_VALUE):
        return True
    try:
        return runtime_requested(model_section())
    except SettingError:
        return False


class _Expected(logging.Filter):
    """Hermes warns "openai-codex requested but no Codex OAuth token found (run: hermes model)"
    on every resolution that finds no Hermes login — wrong advice where codex owns the login and
    the side task runs there. Dropped only while the resolver of :func:`_filling` resolves such
    a call."""

    def __init__(self) -> None:
        super().__init__()
        self.active = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(self.active, "on", False)
                    and "no Codex OAuth token found" in record.getMessage())


_expected = _Expected()
_told = threading.Event()


def _filling(original: Callable[..., Any], aux: Any) -> Callable[..., Any]:
    """``resolve_provider_client`` that fills the codex-login gap with side-task clients."""
    signature = inspect.signature(original)

    def resolve_provider_client(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = bound.arguments
            ours = _ours(arguments, aux._normalize_aux_provider)
        except Exception:
            log.debug("codex-runtime: could not read a resolve_provider_client call",
                      exc_info=True)
            return original(*args, **kwargs)
        previous = getattr(_expected.active, "on", False)
        _expected.active.on = ours
        try:
            client, model = original(*args, **kwargs)
        finally:
            _expected.active.on = previous
        if client is not None or not ours:
            return client, model
        if not _told.is_set():
            _told.set()
            log.info("codex-runtime: Hermes has no codex login of its own: its side tasks "
                     "(titles, summaries, the approval judge) run on codex")
        try:
            model = arguments.get("model")
            side = client_class(aux.CodexAuxiliaryClient)(model)
            if arguments.get("async_mode"):
                return aux._to_async_client(side, model,
                                            is_vision=bool(arguments.get("is_vision")))
            return side, model
        except Exception:
            log.warning("codex-runtime: could not offer a codex side task", exc_info=True)
            return None, None

    return resolve_provider_client


def install_side_tasks() -> bool:
    """Wrap Hermes' auxiliary client resolver in place. False when this host lacks a piece."""
    feature = "Hermes' side tasks (titles, summaries, smart approvals) on a codex-only login"
    original = symbol("agent.auxiliary_client", "resolve_provider_client", feature=feature)
    base = symbol("agent.auxiliary_client", "CodexAuxiliaryClient", feature=feature)
    normalize = symbol("agent.auxiliary_client", "_normalize_aux_provider", feature=feature)
    to_async = symbol("agent.auxiliary_client", "_to_async_client", feature=feature)
    if not all(callable(x) for x in (original, normalize, to_async)) or \
            not isinstance(base, type):
        return False
    import agent.auxiliary_client as aux

    logger = logging.getLogger(aux.__name__)
    if _expected not in logger.filters:
        logger.addFilter(_expected)
    return wrap_in_place(aux.__name__, "resolve_provider_client",
                         lambda original: _filling(original, aux), feature=feature)
