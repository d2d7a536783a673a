"""Tried as a user would: an interactive ``hermes`` in tmux, the plugin enabled, where codex's
command approvals appear as Hermes' normal approval prompt and keystrokes answer them."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from hermes_env import base_config, hermes_env, write_hermes_home
from tmux import Tmux

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes
HERMES = str(Path(sys.executable).with_name("hermes"))


def test_codex_approvals_are_answered_at_hermes_prompt(tmp_path, codex_binary, mock_provider):
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    home = tmp_path / "hermes-home"
    config = base_config(codex_home=str(codex_home))
    config["approvals"] = {"mode": "manual", "timeout": 60}
    write_hermes_home(home, config)
    mock_provider.enqueue(mp.exec_command("echo tmux-approved-once", escalated=True),
                          mp.text("First command done."),
                          mp.exec_command("echo tmux-should-not-run", escalated=True),
                          mp.text("Second command declined."),
                          mp.apply_patch(mp.add_file_patch("boxed.txt", ["one", "two"])),
                          mp.text("File written."))
    tmux = Tmux([HERMES, "chat"], hermes_env(home), tmp_path)
    try:
        tmux.wait_for("Type your message")
        tmux.say("Please run a command")
        screen = tmux.wait_for("Allow once")
        assert "echo tmux-approved-once" in screen and "Deny" in screen
        tmux.keys("Enter")  # 1. Allow once
        tmux.wait_for("First command done.")
        tmux.say("Run another one")
        screen = tmux.wait_for("Allow once", after=0)
        tmux.wait_for("tmux-should-not-run")
        tmux.keys("Down", "Down", "Down")  # 4. Deny
        time.sleep(0.3)
        tmux.keys("Enter")
        tmux.wait_for("Second command declined.")  # (did it run? the provider's log says, below)
        tmux.say("Write a file")
        tmux.wait_for("boxed.txt")
        screen = tmux.wait_for("Allow once", after=0)
        box = screen.splitlines()
        top = max(i for i, line in enumerate(box) if "╭" in line)
        bottom = next(i for i in range(top, len(box)) if "╰" in box[i])
        inside = [line.strip() for line in box[top + 1:bottom]]
        # the file change's prompt keeps its border: one field per line, no diff inside
        assert all(line.startswith("│") and line.endswith("│") for line in inside), screen
        assert any("boxed.txt" in line for line in inside), screen
        tmux.keys("Enter")  # 1. Allow once
        tmux.wait_for("File written.")
        tmux.keys("/exit", "Enter")
    finally:
        tmux.close()
    outputs = [json.dumps(r["input"][-1]) for r in mock_provider.requests
               if r["input"] and r["input"][-1].get("type") in ("function_call_output",
                                                                "custom_tool_call_output")]
    assert len(outputs) == 3
    assert "tmux-approved-once" in outputs[0]
    assert "tmux-should-not-run" not in outputs[1]


def test_the_cli_shows_live_output_reasoning_the_plan_and_two_texts(tmp_path, codex_binary,
                                                                    mock_provider):
    """In the interactive CLI: the reasoning summary in Hermes' reasoning box, closed before
    anything else prints; the plan as a checklist; a command's lines as it prints them — well
    before the tool's line; the commentary and the answer as two texts."""
    from test_hermes_live import scenario

    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    home = tmp_path / "hermes-home"
    config = base_config(codex_home=str(codex_home))
    # codex's own plan tool is the plan where Hermes' todo is not offered (it replaces it)
    config["agent"] = {"disabled_toolsets": ["todo"]}
    write_hermes_home(home, config)
    scenario(mock_provider)
    tmux = Tmux([HERMES, "chat"], hermes_env(home), tmp_path)
    first_seen: dict[str, float] = {}
    needles = ("tick-3", "tick-5", "exec_comm", "Done.")
    try:
        tmux.wait_for("Type your message")
        tmux.say("count the ticks")
        deadline = time.monotonic() + 90
        while "Done." not in first_seen and time.monotonic() < deadline:
            screen = tmux.screen()
            for needle in needles:
                if needle in screen:
                    first_seen.setdefault(needle, time.monotonic())
            time.sleep(0.05)
        screen = tmux.screen()
        tmux.keys("/exit", "Enter")
    finally:
        tmux.close()
    assert set(first_seen) == set(needles), screen
    # the lines, as the command printed them, before its tool line
    assert first_seen["exec_comm"] - first_seen["tick-3"] >= 1.0, (first_seen, screen)
    assert first_seen["tick-5"] - first_seen["tick-3"] >= 0.6, (first_seen, screen)
    # the reasoning box (its label is untranslated on the 0.22 line) holds the summary alone
    opened = screen.rindex("┌─", 0, screen.index("Planning the ticks."))
    closed = screen.index("└", opened)
    assert "┊" not in screen[opened:closed], screen
    # the plan as a checklist, after the box
    assert "📋 plan 0/2 done — two steps" in screen and "▸ count the ticks" in screen, screen
    assert screen.index("📋 plan") > closed, screen
    # the new file's diff as codex proposed it
    assert "✎ proposed:" in screen and "+six ticks" in screen, screen
    # commentary and the answer: two texts, the command's lines between them
    assert screen.index("Let me look.") < screen.index("tick-3") < screen.index("Done."), screen
    assert "Let me look.Done." not in screen
