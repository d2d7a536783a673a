"""The Hermes adapter: the only package that imports Hermes modules.

:func:`register` is what Hermes' plugin loader calls — this module is the
``hermes_agent.plugins`` entry point — while ``run_agent`` is still importing. It stays cheap: it
swaps the turn seam and the runtime resolver (:mod:`.installing.seams`), and never raises into the
host — a
missing seam is one log line and the host's own runtime stays in place. Everything else happens on
the first codex turn.
"""

from __future__ import annotations


def register(ctx: object) -> None:
    """Hermes plugin entry: install the codex runtime into the host through ``ctx``."""
    install(ctx)


def end_idle_app_servers() -> int:
    """For a program that embeds Hermes' ``AIAgent``: end now the codex app-servers this process
    keeps up with no session on them. ``agent.close()`` ends the agent's codex session, but a
    shared app-server then stays up for ``model.codex_app_server_grace`` seconds (300) so the
    next agent starts warm; it always ends with the process. Returns how many ended; the next
    codex turn starts a fresh one."""
    from hermes_codex_runtime.hermes.turn.runtime import end_idle_app_servers as end_idle

    return end_idle()


def install(ctx: object) -> None:
    """Install the codex runtime into Hermes through ``ctx`` (feature-probed, never raising).
    Importing this package costs nothing: the ``.pth`` start-up hook (:mod:`.installing.early`) is
    under it, so every import here waits for ``install``."""
    import logging
    import sys

    from hermes_codex_runtime.hermes.registrations import REGISTRATIONS

    log = logging.getLogger("hermes_codex_runtime.hermes")
    REGISTRATIONS.append(ctx)
    try:
        from hermes_codex_runtime.hermes.installing import seams

        installed = seams.install(ctx)
        run_agent = sys.modules.get("run_agent")
        agent_class = getattr(run_agent, "AIAgent", None) if run_agent is not None else None
        if isinstance(agent_class, type):  # discovery ran after run_agent finished importing
            seams.wire_agent_class(agent_class)
        log.debug("codex-runtime installed: %s", installed)
    except Exception:
        log.exception("codex-runtime: installation failed; Hermes keeps its own codex runtime")
