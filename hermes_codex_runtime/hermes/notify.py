"""Telling the user something where they are, on every Hermes surface.

The CLI prints Hermes' warnings; a chat gateway turns them into a status message; but an API
server run (``POST /v1/runs``) and a cron job have no status channel at all — a warning sent
there reaches only the log. So :func:`warn_user` uses Hermes' warning path where there is one,
and on a surface without one puts the text into the answer itself: streamed first (a client
that joins ``message.delta`` sees it before the reply) and prefixed to the final response
(:func:`take_undelivered`), never into the transcript the model sees.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

_undelivered: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _has_status_channel(agent: Any) -> bool:
    return getattr(agent, "status_callback", None) is not None or \
        str(getattr(agent, "platform", "") or "cli") == "cli"


def warn_user(agent: Any, text: str) -> None:
    """A warning where the user is: Hermes' warning path (CLI line, chat status); ``hermes chat
    -q`` keeps stdout machine-readable and drops status lines, so there it goes to stderr; a
    surface with no status channel gets it in the answer."""
    warn = getattr(agent, "_emit_warning", None) or getattr(agent, "_emit_status", None)
    if callable(warn):
        warn(text)
    if getattr(agent, "suppress_status_output", False):
        print(text, file=sys.stderr, flush=True)
    if _has_status_channel(agent):
        return
    try:
        with _lock:
            _undelivered.setdefault(agent, []).append(text)
    except TypeError:  # an agent that cannot be weakly referenced: the log has it
        return
    fire = getattr(agent, "_fire_stream_delta", None)
    if callable(fire) and getattr(agent, "stream_delta_callback", None) is not None:
        fire(text + "\n\n")


def take_undelivered(agent: Any) -> str:
    """The warnings of this turn that only the answer can carry, as a leading paragraph."""
    try:
        with _lock:
            texts = _undelivered.pop(agent, [])
    except TypeError:
        return ""
    return "".join(f"{text}\n\n" for text in texts)
