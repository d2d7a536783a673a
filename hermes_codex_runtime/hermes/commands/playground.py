"""A scripted model for trying the plugin out on the mock provider (``hermes-codex-runtime try``).

It answers what a person types, so each feature can be seen without a real model:

* ``run <command>`` — codex's shell tool, asking to leave the sandbox (an approval prompt);
* ``create <file>`` — a file change through ``apply_patch`` (its changeset, its approval);
* ``limit`` — a usage limit (the fallback provider, when one is configured);
* anything else — a streamed reply that says what it heard.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.offline.replay_script import after_tool, last_user_text, tool_output

HELP = ("try: `run ls -la` (a command that asks first), `create hello.txt` (a file change), "
        "`limit` (a usage limit), or anything else (a streamed reply)")


def agent(body: dict[str, Any]) -> mp.Reply:
    """The scripted answer to one request."""
    if after_tool(body):
        if re.search(r"\b(rejected|declined|denied)\b", tool_output(body), re.I):
            return mp.text("It was declined, so nothing ran and nothing changed.", deltas=4)
        return mp.text("Done — that was codex's tool, run through Hermes.", deltas=4)
    text = last_user_text(body)
    command = re.match(r"\s*run\s+(.+)", text, re.S | re.I)
    if command:
        return mp.exec_command(command.group(1).strip(), escalated=True,
                               justification="you asked me to run it")
    created = re.match(r"\s*create\s+(\S+)", text, re.I)
    if created:
        return mp.apply_patch(mp.add_file_patch(created.group(1), ["created by the playground"]))
    if text.strip().lower() == "limit":
        return mp.usage_limit()
    return mp.text(f"(mock model) You said: {text[:200]} — {HELP}", deltas=8)
