"""A running command's output on its way to Hermes' surfaces: :class:`LiveOutput`, one per
command, fed codex's ``outputDelta`` text and flushed — coalesced and bounded — to each surface
(:class:`~.surfaces.Surfaces`):

* the API run stream: a ``tool.output`` event ``{tool, tool_call_id, text}`` at most every
  :data:`INTERVAL` seconds with the lines since the last one (at most :data:`CHUNK` characters,
  the newest kept; ``skipped`` counts the older ones left out); when the command completes, one
  last event with ``final: true`` carrying codex's own record of the output (``output``, its
  last :data:`CHUNK` characters, ``omitted`` counting the rest) — output printed before codex
  announced the command never arrives as live text, so a client shows this in place of the
  live lines;
* the CLI: the first :data:`CLI_LINES` lines in its scrollback, then how many more there were;
* a chat that edits its status message: one bubble per command, edited at most every
  :data:`CHAT_EVERY` seconds with the last :data:`CHAT_LINES` lines, and a last edit with the
  recorded output's tail.

Only whole lines leave (``\\n`` or ``\\r`` ends one), so a redaction pattern never sees half a
secret; a partial line leaves at a heartbeat or at the end. A 5 MB output costs at most a few
events per second and a few kilobytes each.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from hermes_codex_runtime.hermes.turn.surfaces import Surfaces
from hermes_codex_runtime.projector import ToolCall

INTERVAL = 0.3  # seconds between two flushes of one command's output
CHUNK = 2000  # characters of output per event (the newest kept)
CLI_LINES = 8  # lines of a command shown in the CLI
CHAT_EVERY = 2.0  # seconds between two edits of a chat bubble
CHAT_LINES = 6  # lines a chat bubble shows
LINE = 200  # characters of one line shown in the CLI or a chat
_LINE_END = re.compile(r"[\r\n]")


class LiveOutput:
    """One command's output between codex and the host's surfaces; ``redact`` is what every
    text passes before it leaves."""

    def __init__(self, tool: ToolCall, redact: Callable[[str], str]) -> None:
        self.tool = tool
        self._redact = redact
        self._pending = ""  # received, not flushed yet (bounded: the newest kept)
        self._skipped = 0  # characters coalesced away since the last flush
        self._last_flush = float("-inf")
        self._last_chat = float("-inf")
        self._chat_sent = False
        self._chat_behind = False  # lines the bubble does not show yet
        self._tail: deque[str] = deque(maxlen=CHAT_LINES)
        self.lines = 0  # lines flushed
        self.cli_shown = 0
        self.events = 0

    def feed(self, surfaces: Surfaces, agent: Any, delta: str) -> None:
        """Take one delta; flush what is due."""
        self._pending += delta
        if len(self._pending) > 2 * CHUNK:  # coalesced: the newest output wins
            self._skipped += len(self._pending) - CHUNK
            self._pending = self._pending[-CHUNK:]
        if time.monotonic() - self._last_flush >= INTERVAL:
            self._flush(surfaces, agent, partial=False)

    def beat(self, surfaces: Surfaces, agent: Any) -> None:
        """A heartbeat while codex is quiet: whatever waits leaves, a partial line too, and a
        bubble that lags behind is brought up to date."""
        if self._pending and time.monotonic() - self._last_flush >= INTERVAL:
            self._flush(surfaces, agent, partial=True)
        elif self._chat_behind and time.monotonic() - self._last_chat >= CHAT_EVERY:
            self._chat(surfaces, agent, "running…")

    def finish(self, surfaces: Surfaces, agent: Any, item: dict[str, Any]) -> None:
        """The command completed: the last lines, then codex's record of the output (nothing
        for a command that streamed none)."""
        self._flush(surfaces, agent, partial=True, chat=False)
        if not self.events:
            return
        recorded = item.get("aggregatedOutput")
        output = recorded if isinstance(recorded, str) else ""
        tail = self._redact(output[-CHUNK:])
        surfaces.event("tool.output", tool=self.tool.name, tool_call_id=self.tool.call_id,
                       final=True, output=tail, omitted=max(0, len(output) - CHUNK))
        more = max(self.lines, len(_lines(output))) - self.cli_shown  # coalesced ones too
        if more > 0:
            surfaces.print(agent, f"  ┊ │ … {more} more line{'s' if more != 1 else ''}")
        if self._chat_sent:
            exit_code = item.get("exitCode")
            end = f"exit code {exit_code}" if isinstance(exit_code, int) else str(
                item.get("status") or "done")
            self._tail.clear()
            self._tail.extend(_lines(tail)[-CHAT_LINES:])
            self._chat(surfaces, agent, f"✓ {end}")

    def _flush(self, surfaces: Surfaces, agent: Any, *, partial: bool, chat: bool = True) -> None:
        text = self._pending
        if not partial:
            end = max(text.rfind("\n"), text.rfind("\r")) + 1
            if end:
                text = text[:end]
            elif len(text) < CHUNK:  # a long line without an end leaves as it is
                text = ""
        if not text:
            return
        self._pending = self._pending[len(text):]
        self._last_flush = time.monotonic()
        skipped, self._skipped = self._skipped, 0
        if len(text) > CHUNK:  # the newest CHUNK characters, from a line's start
            cut = len(text) - CHUNK
            start = text.find("\n", cut, len(text) - 1) + 1 or cut
            skipped, text = skipped + start, text[start:]
        shown = self._redact(text)
        lines = _lines(shown)
        self.lines += len(lines)
        self.events += 1
        fields = {"skipped": skipped} if skipped else {}
        surfaces.event("tool.output", tool=self.tool.name, tool_call_id=self.tool.call_id,
                       text=shown, **fields)
        room = CLI_LINES - self.cli_shown
        if room > 0 and lines:
            surfaces.print(agent, "\n".join(f"  ┊ │ {line[:LINE]}" for line in lines[:room]))
            self.cli_shown += min(room, len(lines))
        self._tail.extend(lines)
        self._chat_behind = self._chat_behind or (surfaces.edits_in_place and bool(lines))
        if chat and self._chat_behind and time.monotonic() - self._last_chat >= CHAT_EVERY:
            self._chat(surfaces, agent, "running…")

    def _chat(self, surfaces: Surfaces, agent: Any, state: str) -> None:
        self._last_chat = time.monotonic()
        self._chat_sent, self._chat_behind = True, False
        command = str(self.tool.arguments.get("command") or self.tool.name)[:LINE]
        body = "\n".join(line[:LINE] for line in self._tail)
        surfaces.status(agent, f"codex-output:{self.tool.call_id}",
                        f"💻 {self._redact(command)} — {state}\n```\n{body}\n```",
                        only_edited=True)


def _lines(text: str) -> list[str]:
    return [line for line in _LINE_END.split(text) if line.strip()]
