"""What a user sees while codex works, measured from outside as a client sees it: a real Hermes
(its API server's event stream, its session database, a chat gateway) on the real codex binary,
the model played by the mock provider on 127.0.0.1.

A command's output arrives line by line before the tool completes; codex's reasoning summary is
Hermes' reasoning event; its plan is a structured event; commentary and the answer are two
texts; a 5 MB output stays a handful of bounded events; a command codex ran without telling
(the sandbox denied it at once) is in the transcript anyway.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
from typing import Any

import pytest
import yaml
from hermes_env import Gateway, write_config

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes

TICKS = "for i in 1 2 3 4 5 6; do echo tick-$i; sleep 0.5; done"
PLAN = {"explanation": "two steps", "plan": [{"step": "count the ticks", "status": "in_progress"},
                                             {"step": "answer", "status": "pending"}]}
FLOOD = "sleep 0.5; head -c 5000000 /dev/zero | tr '\\0' x | fold -w 99"  # 5 MB in 50,000 lines


def scenario(provider: mp.MockResponsesProvider) -> None:
    """A plan (with a reasoning summary), commentary streamed before a command that prints a
    line every 0.5 s for 3 s, a new file, then the answer."""
    provider.enqueue(
        dataclasses.replace(mp.tool_call("update_plan", PLAN), reasoning="Planning the ticks."),
        mp.said_before("Let me look.", mp.exec_command(TICKS)),
        mp.apply_patch(mp.add_file_patch("ticks.txt", ["six ticks"])),
        mp.text("Done."))


def run(gateway: Gateway, text: str) -> list[dict]:
    run_id = gateway.call("POST", "/v1/runs", {"input": text})["run_id"]
    return list(gateway.events(run_id))


def test_an_api_run_streams_output_reasoning_the_plan_and_two_texts(home, mock_provider):
    # codex's own plan tool is the plan where Hermes' todo is not offered (it replaces it)
    config = yaml.safe_load((home / "config.yaml").read_text())
    config["agent"] = {**config.get("agent", {}), "disabled_toolsets": ["todo"]}
    write_config(home, config)
    gateway = Gateway(home)
    try:
        scenario(mock_provider)
        events = run(gateway, "count the ticks")
        mock_provider.enqueue(mp.exec_command(FLOOD), mp.text("Flooded."))
        flood = run(gateway, "flood me")
    finally:
        gateway.stop()
    names = [e["event"] for e in events]
    assert names[-1] == "run.completed", names

    # live output: the ticks arrive one by one, well before the command completes
    [done] = [e for e in events if e["event"] == "tool.completed" and e["tool"] == "exec_command"]
    live = [e for e in events if e["event"] == "tool.output" and not e.get("final")]
    ticks = {line: e["timestamp"] for e in live for line in e["text"].split() if "tick" in line}
    assert {"tick-3", "tick-4", "tick-5"} <= set(ticks), ticks
    assert all(e["timestamp"] < done["timestamp"] for e in live)
    assert done["timestamp"] - ticks["tick-3"] >= 1.0, (ticks, done["timestamp"])
    assert ticks["tick-5"] - ticks["tick-3"] >= 0.6, ticks  # as printed, not all at the end
    [final] = [e for e in events if e["event"] == "tool.output" and e.get("final")]
    recorded = [word for word in final["output"].split() if word.startswith("tick-")]
    assert recorded == [f"tick-{i}" for i in range(1, 7)]  # codex's record: tick-1 too
    assert names.index("tool.completed", names.index("tool.output")) > names.index("tool.output")

    # the reasoning summary is Hermes' reasoning event; the plan is a structured event
    assert any(e["event"] == "reasoning.available" and "Planning the ticks." in e["text"]
               for e in events), names
    [plan] = [e for e in events if e["event"] == "todo.updated"]
    assert plan["todos"] == [
        {"id": "1", "content": "count the ticks", "status": "in_progress"},
        {"id": "2", "content": "answer", "status": "pending"}]
    assert plan["explanation"] == "two steps"

    # the file change as codex proposed it (before it was applied)
    [proposed] = [e for e in events if e["event"] == "diff.proposed"]
    [change] = proposed["changes"]
    assert change["path"].endswith("ticks.txt") and change["kind"] == "add", proposed
    assert "six ticks" in change["diff"], proposed
    assert names.index("diff.proposed") < names.index("tool.completed", names.index(
        "diff.proposed")), names

    # commentary and the answer: two texts for a client that joins the deltas
    joined = "".join(e["delta"] for e in events if e["event"] == "message.delta")
    assert joined.split("\n\n") == ["Let me look.", "Done."], repr(joined)

    # 5 MB of output: a few bounded events, and codex's record at the end
    assert flood[-1]["event"] == "run.completed", [e["event"] for e in flood]
    output = [e for e in flood if e["event"] == "tool.output"]
    sizes = [len(e.get("text") or e.get("output") or "") for e in output]
    assert 1 <= len(output) <= 60 and max(sizes) <= 2000, (len(output), sizes)
    assert output[-1]["final"] and output[-1]["omitted"] > 0
    print(f"\nticks at {sorted((t - done['timestamp']) for t in ticks.values())} s before "
          f"the command completed; 5 MB of output: {len(output)} events, "
          f"{sum(sizes):,} characters")


def test_a_command_the_sandbox_denied_at_once_is_in_the_transcript_the_db_and_replay(
        hermes, monkeypatch, tmp_path):
    """codex #47433: under a read-only sandbox codex denies ``touch`` before it announces the
    command (with an empty HOME, every time), so no tool event reaches Hermes — yet the model
    was shown its output. The transcript, the session database and Codex Replay's reading of
    it all have the call, once, in its place before the answer."""
    from hermes_codex_runtime.hermes.replay.sessions import HermesSessions

    empty = tmp_path / "empty-home"
    empty.mkdir()
    monkeypatch.setenv("HOME", str(empty))
    hermes.configure(codex_sandbox="read-only")
    hermes.provider.enqueue(mp.exec_command("touch notes.txt"), mp.text("Done."))
    announced: list[str] = []
    agent = hermes.agent(tool_progress_callback=lambda kind, name=None, *a, **k:
                         announced.append(f"{kind} {name}"))
    result = agent.run_conversation("write notes")
    assert result["final_response"] == "Done."

    def calls(messages):
        return [(m["role"], m.get("tool_calls") and m["tool_calls"][0]["function"]["name"],
                 m.get("content") if m["role"] != "assistant" or not m.get("tool_calls")
                 else json.loads(m["tool_calls"][0]["function"]["arguments"])["command"])
                for m in messages if m["role"] in ("assistant", "tool")]

    transcript = calls(result["messages"])
    assert len(transcript) == 3, transcript
    (call_role, call_name, command), (tool_role, _, output), answer = transcript
    assert (call_role, call_name, command) == ("assistant", "exec_command", "touch notes.txt")
    assert tool_role == "tool" and "Read-only file system" in output, output
    assert answer == ("assistant", None, "Done.")
    stored = calls(hermes.session_db().get_messages(agent.session_id))
    assert [row[:2] for row in stored] == [row[:2] for row in transcript], stored
    assert "Read-only file system" in stored[1][2]
    [turn] = HermesSessions(hermes.tmp).open(agent.session_id).turns
    assert [c["name"] for c in turn.tool_calls] == ["exec_command"], turn.tool_calls
    assert "touch notes.txt" in turn.tool_calls[0]["arguments"]
    print(f"\nHermes' tool events for the turn: {announced} (none: codex never announced it)")


@functools.cache
def _editing_adapter_class() -> type:
    """A chat adapter that edits a status message in place (as Telegram's does): what each
    status key's bubble showed, edit by edit, is in ``bubbles``."""
    from test_gateway_chat_approvals import _chat_adapter_class

    class EditingAdapter(_chat_adapter_class()):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.bubbles: dict[str, list[tuple[float, str]]] = {}

        async def send_or_update_status(self, chat_id: str, status_key: str, content: str, *,
                                        metadata: Any = None) -> Any:
            from gateway.platforms.base import SendResult

            self.bubbles.setdefault(status_key, []).append((time.monotonic(), content))
            return SendResult(success=True, message_id=f"status-{status_key}")

    return EditingAdapter


def test_a_chat_that_edits_its_status_sees_each_commands_output_in_one_bounded_bubble(
        hermes, monkeypatch, tmp_path):
    """A chat platform that edits a status message in place (Telegram) shows a running
    command's last lines in one bubble per command, edited while it runs; 5 MB of output is a
    few edits of a few lines, and no message per line is ever posted. With ``show_reasoning``
    the answer is led by codex's reasoning summary."""
    from test_gateway_chat_approvals import Chat

    chat = Chat(tmp_path / "sessions", _editing_adapter_class())
    monkeypatch.setenv("TELEGRAM_ALLOWED_USERS", chat.user)
    monkeypatch.setenv("TERMINAL_CWD", str(hermes.workdir))
    config = hermes.configure()
    config["display"] = {"show_reasoning": True}  # the answer is led by codex's reasoning
    write_config(hermes.home, config)
    hermes.provider.enqueue(mp.exec_command(TICKS), mp.exec_command(FLOOD),
                            mp.text("Done.", reasoning="Counted and flooded."))

    def answered() -> list[str]:
        return [m for m in chat.adapter.sent if m.endswith("Done.")]

    async def conversation() -> None:
        await chat.say("work")
        await chat.wait_for(answered, 90, "the answer")

    try:
        asyncio.run(conversation())
    finally:
        chat.close()
    [answer] = answered()
    assert "Counted and flooded." in answer, answer  # Hermes' `show_reasoning`
    posted = [m for m in chat.adapter.sent if "tick-" in m or "xxxxxxxxxx" in m]
    assert posted == [], posted  # no message per line
    bubbles = {key: edits for key, edits in chat.adapter.bubbles.items()
               if key.startswith("codex-output:")}
    assert len(bubbles) == 2, chat.adapter.bubbles.keys()  # one per command
    ticks, flood = bubbles.values()
    assert "running" in ticks[0][1] and "tick-" in ticks[0][1], ticks
    assert "✓ exit code 0" in ticks[-1][1] and "tick-6" in ticks[-1][1], ticks
    assert ticks[-1][0] - ticks[0][0] >= 1.5, ticks  # shown while it ran, not at the end
    assert len(flood) <= 10 and max(len(text) for _, text in flood) <= 1600, \
        [len(text) for _, text in flood]
    print(f"\nbubble edits: ticks {len(ticks)}, 5 MB flood {len(flood)} "
          f"(at most {max(len(text) for _, text in flood)} characters)")
