"""One codex thread for one host session: start or resume it, drive its turns, answer codex's
requests, and end every turn as a :class:`TurnResult`.

The rooms:

* :mod:`.codex_session` — :class:`CodexSession`: the session's channel and the order of things
  in a turn; interrupt, steer and close from any thread;
* :mod:`.spawn` — the options a session's app-server starts with (or is shared by), and
  :func:`~.spawn.prepare`: what a first session waits for, done ahead of it;
* :mod:`.thread` — start, resume, mend (:class:`~.thread.Mend`), the history seed, the config
  check;
* :mod:`.turn` — :class:`~.turn.TurnDriver`: one turn's loop over the ordered inbound stream;
* :mod:`.notes` — what each notification does, as a table; :mod:`.recovery` — a turn whose
  ``turn/completed`` never came, completed from codex's record;
* :mod:`.broker` — the server requests of a session (approvals off the stream, host tools);
* :mod:`.rollout` — what codex recorded of a turn (a tool call it ran without telling);
* :mod:`.failures` — one classification of what went wrong into a failure;
* :mod:`.side_task` — a host's side task (a title, a verdict) on a short-lived thread that can
  touch nothing, on the same app-servers.

Where the thread runs (a shared app-server, a process of its own, an endpoint) is the pool's
business (:mod:`hermes_codex_runtime.pool`); the values exchanged with the host are
:mod:`hermes_codex_runtime.values`, and the events of a turn :mod:`hermes_codex_runtime.events`.
"""

from hermes_codex_runtime.events import CodexEvent
from hermes_codex_runtime.session.codex_session import CodexSession
from hermes_codex_runtime.session.spawn import prepare
from hermes_codex_runtime.session.thread import Mend
from hermes_codex_runtime.values import (
    MAX_TIMEOUT,
    ApprovalRequest,
    Cancellation,
    SessionSettings,
    TurnResult,
)

__all__ = [
    "MAX_TIMEOUT",
    "ApprovalRequest",
    "Cancellation",
    "CodexEvent",
    "CodexSession",
    "Mend",
    "SessionSettings",
    "TurnResult",
    "prepare",
]
