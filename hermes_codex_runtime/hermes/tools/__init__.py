"""Hermes' own tools on a codex turn: which of the agent's tools codex is offered
(:mod:`.offer`), and running a call codex makes through Hermes' dispatcher inside the live agent
(:mod:`.dispatch`).

The agent's tool list is the one Hermes' own loop sends the model (``AIAgent.tools``: its enabled
toolsets for this platform minus ``agent.disabled_toolsets``, plugin tools, the tools of the MCP
servers Hermes' MCP client runs, memory-provider and context-engine tools). codex gets it as its
dynamic tools on every thread, from the first turn, without the tools codex has its own sandboxed
form of (:data:`.offer.CODEX_OWNS`).
"""

from hermes_codex_runtime.hermes.tools.dispatch import run_tool
from hermes_codex_runtime.hermes.tools.offer import Offer, offered

__all__ = ["Offer", "offered", "run_tool"]
