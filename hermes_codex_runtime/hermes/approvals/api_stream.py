"""Approvals on the API server's streaming chat completions, as an OpenAI client reads them.

On the 0.22 line a streaming ``POST /v1/chat/completions`` is also a run that
``POST /v1/runs/{completion id}/approval`` answers: each approval goes on the stream as an SSE event
``approval.request`` whose data is Hermes' approval payload, with a top-level ``choices`` list of
answers (``["once", "session", "always", "deny"]``). The official ``openai`` SDK (2.x) makes a chunk
of every SSE event that carries data, whatever its name — so that chunk's ``choices[0]`` is the
string ``"once"``, ``chunk.choices[0].delta`` raises, and the approval is left waiting for Hermes'
timeout (``approvals.timeout``: 300 s on 0.22).

:func:`install` wraps the host's ``_register_stream_approval`` — where that stream's approvals are
made — so that

* the event keeps its name, and its data is a well-formed ``chat.completion.chunk`` (the
  completion's id, one choice with an empty delta) carrying Hermes' payload, ``choices``
  included, under ``approval`` (``chunk.approval`` in the SDK) — and its other fields where they
  were;
* a pending approval whose client has gone away is withdrawn at once (the host's
  ``withdraw_gateway_approval``, else answered ``deny``), so the turn goes on and the session is
  free for the next request — Hermes itself notices a closed stream only at its next write.

0.19.0's chat completions and both lines' ``/v1/responses`` register no approval channel (a codex
request there is declined at once: nobody can answer), and ``/v1/runs`` events are no OpenAI stream:
nothing to do there. With the plugin loaded this applies to every approval on that stream, Hermes'
own tools' included: one shape per stream.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from typing import Any

from hermes_codex_runtime.hermes.symbols.patch import wrap_in_place
from hermes_codex_runtime.hermes.symbols.probe import present, symbol

log = logging.getLogger("hermes_codex_runtime.hermes")

#: Where the 0.22 line keeps its OpenAI-compatible routes, and the method that makes a streaming
#: completion answerable as a run.
ROUTES = "gateway.platforms.api_server_openai_routes"
MIXIN = "OpenAICompatRoutesMixin"
REGISTER = "_register_stream_approval"
#: The queue item Hermes' chat writer sends as ``event: approval.request``.
APPROVAL_ITEM = "__approval__"
#: How often a pending approval's client is looked at (on the server's event loop).
WATCH_INTERVAL = 0.1
FEATURE = "approvals an OpenAI SDK client can read on streaming chat completions"


def install() -> bool:
    """Wrap the host's ``_register_stream_approval`` where the host has one (the 0.22 line);
    True when it is (now, or already) ours."""
    if not present(ROUTES, MIXIN):
        log.debug("codex-runtime: this Hermes' chat completions carry no approvals")
        return False
    routes = symbol(ROUTES, MIXIN, feature=FEATURE)
    if not isinstance(routes, type) or not callable(getattr(routes, REGISTER, None)):
        log.debug("codex-runtime: this Hermes' chat completions carry no approvals")
        return False
    return wrap_in_place(routes, REGISTER, _readable, feature=FEATURE)


def _readable(original: Any) -> Any:
    signature = inspect.signature(original)

    def register(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(self, *args, **kwargs)
            queue = bound.arguments["stream_q"]
            completion_id = str(bound.arguments["completion_id"])
            request = bound.arguments.get("request")
            bound.arguments["stream_q"] = ApprovalChunks(
                queue, completion_id, model=_model(self, request), request=request,
                loop=asyncio.get_running_loop())
        except Exception:  # a changed signature, or no running loop: the host's own stream
            log.warning("codex-runtime: %s is off for this stream", FEATURE, exc_info=True)
            return original(self, *args, **kwargs)
        return original(*bound.args, **bound.kwargs)

    return register


def _model(adapter: Any, request: Any) -> str:
    """The model the client asked for (what Hermes' own chunks name), else the server's."""
    body = getattr(request, "_read_bytes", None)  # the body the handler has read
    if isinstance(body, bytes):
        try:
            asked = json.loads(body).get("model")
        except (ValueError, AttributeError):
            asked = None
        if isinstance(asked, str) and asked:
            return asked
    return str(getattr(adapter, "_model_name", "") or "hermes-agent")


def approval_chunk(event: dict[str, Any], *, completion_id: str, created: int,
                   model: str) -> dict[str, Any]:
    """Hermes' approval payload as a ``chat.completion.chunk``: an empty delta, the whole payload
    under ``approval``, and its fields at the top as well (``run_id``, ``request_id``,
    ``command``… where a client reading the raw stream finds them) — all but ``choices``, which
    is the chunk's."""
    fields = {key: value for key, value in event.items() if key != "choices"}
    return {**fields, "id": completion_id, "object": "chat.completion.chunk",
            "created": created, "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": None}], "approval": event}


class ApprovalChunks:
    """The stream's queue as Hermes' approval notifier sees it: an approval goes in as a chunk
    (:func:`approval_chunk`), and while one waits, its client is watched."""

    def __init__(self, queue: Any, completion_id: str, *, model: str, request: Any,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._queue = queue
        self._completion_id = completion_id
        self._model = model
        self._created = int(time.time())
        self._request = request
        self._loop = loop
        self._request_ids: list[str] = []
        self._watch: asyncio.Task[None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    def put_threadsafe(self, item: Any, *args: Any, **kwargs: Any) -> None:
        """Called on the agent's thread by Hermes' notifier."""
        if isinstance(item, tuple) and len(item) == 2 and item[0] == APPROVAL_ITEM \
                and isinstance(item[1], dict):
            event = item[1]
            request_id = event.get("request_id")
            if isinstance(request_id, str) and request_id:
                self._request_ids.append(request_id)
            item = (APPROVAL_ITEM, approval_chunk(event, completion_id=self._completion_id,
                                                  created=self._created, model=self._model))
            self._queue.put_threadsafe(item, *args, **kwargs)
            self._loop.call_soon_threadsafe(self._start_watch)
            return
        self._queue.put_threadsafe(item, *args, **kwargs)

    def _start_watch(self) -> None:
        if self._watch is None or self._watch.done():
            self._watch = self._loop.create_task(self._withdraw_when_gone())

    async def _withdraw_when_gone(self) -> None:
        """Until no approval of this stream waits (Hermes' timeout bounds that): when the client
        has gone, withdraw what waits."""
        key = self._completion_id
        while _waiting(key):
            if _gone(self._request):  # off the loop: the host's approval hooks may fire
                await asyncio.to_thread(_withdraw, key, list(self._request_ids))
                return
            await asyncio.sleep(WATCH_INTERVAL)


def _gone(request: Any) -> bool:
    transport = getattr(request, "transport", None)
    return transport is None or transport.is_closing()


def _waiting(key: str) -> bool:
    waiting = symbol("tools.approval", "has_blocking_approval", feature=FEATURE)
    try:
        return bool(waiting(key)) if callable(waiting) else False
    except Exception:
        return False


def _withdraw(key: str, request_ids: list[str]) -> None:
    """Withdraw the stream's pending approvals (each by its id where the host can), else answer
    them ``deny``."""
    withdraw = symbol("tools.approval", "withdraw_gateway_approval", feature=FEATURE)
    withdrawn = 0
    if callable(withdraw):
        for request_id in request_ids:
            try:
                withdrawn += bool(withdraw(key, request_id, "the client went away"))
            except Exception:
                log.debug("codex-runtime: withdrawing approval %s failed", request_id,
                          exc_info=True)
    if not withdrawn or _waiting(key):
        resolve = symbol("tools.approval", "resolve_gateway_approval", feature=FEATURE)
        if callable(resolve):
            try:
                withdrawn += int(resolve(key, "deny", resolve_all=True) or 0)
            except Exception:
                log.debug("codex-runtime: declining the approvals of %s failed", key,
                          exc_info=True)
    log.info("codex-runtime: the client of %s went away while %d approval(s) waited; withdrawn",
             key, withdrawn)
