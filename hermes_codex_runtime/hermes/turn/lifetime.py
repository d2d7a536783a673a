"""How long a Hermes agent's codex session lives.

Hermes' API server builds an ``AIAgent`` for every request (``/v1/chat/completions``,
``/v1/responses``, ``/v1/runs``) and cron one for every job; the API server never closes them, so
their sessions would otherwise wait for Python's garbage collector. An agent of such a surface
runs one Hermes run: its codex session ends with it — the thread unloaded at once, bound to the
Hermes session so the next run's agent resumes it. Every other agent's session lives until
Hermes closes or releases the agent (``close``/``release_clients``, :mod:`.controls`), or the
agent is collected. The process under the sessions outlives them by policy, not by chance:
``model.codex_app_server_grace`` (:mod:`..config.settings`) keeps a shared app-server warm for the
next run.
"""

from __future__ import annotations

from typing import Any

#: Surfaces whose agents run once: the API server (an agent per request) and cron (per job).
ONE_RUN_PLATFORMS = frozenset({"api_server", "cron"})


def ends_with_run(agent: Any) -> bool:
    """True when ``agent``'s codex session ends with its run (see the module docstring)."""
    return str(getattr(agent, "platform", "") or "") in ONE_RUN_PLATFORMS
