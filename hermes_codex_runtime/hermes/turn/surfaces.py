"""Where a Hermes agent's progress can be shown beyond Hermes' own tool events, found once per
turn: :class:`Surfaces`.

Hermes has no event of its own for a tool's live output, a plan or a proposed diff (its tools
report ``tool.started``/``tool.completed`` only), so each surface is reached the way it can be:

* **the API server's run stream** (``GET /v1/runs/{id}/events``): its progress callback drops
  every event type it does not know, so the extra events (``tool.output``, ``todo.updated``,
  ``diff.proposed``) go through the run's own push — the function Hermes' run callback closes
  over (``_push``, with ``run_id``), so they are sequenced, retained and counted exactly like
  Hermes' own events;
* **the interactive CLI** (``platform == "cli"``): lines printed to its scrollback through the
  agent's printer (``_vprint``, which ``hermes chat -q`` silences);
* **a chat platform** whose adapter edits a status message in place (``send_or_update_status``:
  Telegram on both lines, Slack on 0.22): ``status_callback(key, text)`` with a key of our own
  edits one bubble. Elsewhere every status call posts a new message, so live output is not sent
  there at all.

Texts reaching any of these are redacted by the caller (:func:`.events.shown`).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("hermes_codex_runtime.hermes")
Push = Callable[[dict[str, Any]], None]
#: The names Hermes' run callback carries (0.19 ``gateway/platforms/api_server.py``, 0.22
#: ``api_server_runs.py``): a closure over the run's push and id.
RUN_CALLBACK = "_make_run_event_callback.<locals>._callback"


@dataclass(slots=True)
class Surfaces:
    """One turn's surfaces (see the module docstring)."""

    push: Push | None = None
    run_id: str | None = None
    cli: bool = False
    edits_in_place: bool = False

    @classmethod
    def of(cls, agent: Any) -> Surfaces:
        """The surfaces ``agent`` shows its progress on."""
        push, run_id = run_stream(getattr(agent, "tool_progress_callback", None))
        return cls(push=push, run_id=run_id,
                   cli=str(getattr(agent, "platform", "") or "") == "cli",
                   edits_in_place=getattr(agent, "status_callback", None) is not None
                   and _edits_in_place(agent))

    def event(self, name: str, **fields: Any) -> None:
        """One event on the API run stream (none elsewhere)."""
        if self.push is None:
            return
        try:
            self.push({"event": name, "run_id": self.run_id, "timestamp": time.time(),
                       **fields})
        except Exception:
            log.debug("codex-runtime: pushing %s to the run stream failed", name, exc_info=True)

    def print(self, agent: Any, text: str) -> None:
        """Lines in the CLI's scrollback (nothing on other surfaces)."""
        vprint = getattr(agent, "_vprint", None)
        if self.cli and callable(vprint):
            vprint(text, force=True)

    def status(self, agent: Any, key: str, text: str, *, only_edited: bool = False) -> None:
        """A chat status message under ``key`` (edited in place where the platform can; with
        ``only_edited``, nothing where it cannot)."""
        callback = getattr(agent, "status_callback", None)
        if callable(callback) and (self.edits_in_place or not only_edited):
            try:
                callback(key, text)
            except Exception:
                log.debug("codex-runtime: status_callback raised", exc_info=True)


def run_stream(callback: Any) -> tuple[Push | None, str | None]:
    """The push and run id behind an API-server run's progress callback, or ``(None, None)``."""
    code = getattr(callback, "__code__", None)
    cells = getattr(callback, "__closure__", None)
    if code is None or not cells or not str(getattr(callback, "__qualname__", "")).endswith(
            RUN_CALLBACK):
        return None, None
    free = dict(zip(code.co_freevars, cells, strict=False))
    try:
        push, run_id = free["_push"].cell_contents, free["run_id"].cell_contents
    except (KeyError, ValueError):  # renamed, or not set yet
        log.info("codex-runtime: the API server's run callback has no `_push`/`run_id`; live "
                 "output, plans and diffs stay off its event stream")
        return None, None
    return (push, str(run_id)) if callable(push) else (None, None)


def _edits_in_place(agent: Any) -> bool:
    """True when the gateway's adapter for the agent's platform edits status messages."""
    run = sys.modules.get("gateway.run")
    ref = getattr(run, "_gateway_runner_ref", None)
    runner = ref() if callable(ref) else None
    platform = str(getattr(agent, "platform", "") or "")
    for key, adapter in (getattr(runner, "adapters", None) or {}).items():
        if str(getattr(key, "value", key)) == platform:
            return callable(getattr(adapter, "send_or_update_status", None))
    return False
