"""The README's first command on this machine: a real Hermes turn through the real codex binary
on the bundled mock provider, eight steps (the last a Codex Replay of the demo's own session), a
summary, and the exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_demo_plays_every_step(codex_binary, hermes_base, tmp_path):
    script = Path(sys.executable).with_name("hermes-codex-runtime")
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_HOME", "CODEX_HOME")}
    env["TMPDIR"] = str(tmp_path)  # where the demo keeps the replay's report
    # another local user's link where a report with a fixed name would go
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n")
    (tmp_path / "hermes-codex-runtime-demo-replay.html").symlink_to(victim)
    proc = subprocess.run([str(script), "demo"], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False, env=env, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "8 of 8 steps ok" in out
    assert "Hermes loaded the plugin from its entry point: True" in out
    assert "? Hermes asks:" in out and "the answer is 42" in out  # approval asked, output used
    assert "Hello from codex!" in out  # the changeset was shown
    assert "cached 20" in out  # the token breakdown
    assert "same codex thread: True" in out
    assert "the model saw the history in its developer instructions: True" in out
    assert "fallback: The fallback provider finished this turn for codex." in out
    (report,) = tmp_path.glob("hermes-codex-runtime-demo-replay-*.html")  # a name of its own
    assert f"report: {report}" in out
    assert report.stat().st_mode & 0o777 == 0o600  # another local user reads none of it
    assert victim.read_text() == "not yours\n"  # and no link planted for it is followed
    page = report.read_text()
    assert "Codex Replay" in page and "[mock-model-2]" in page  # the second model's answers
    # …which do the work differently: changed text, other tool calls, another file on disk
    assert "compared with the original: 3 of 3 answers differ" in out
    assert "echo the answer is $(expr 6 '*' 7)" in out and "added hello.md" in out
    assert "I did the sum with expr instead; it printed: the answer is 42." in page
    assert "tools: exec_command" in page and "1 file(s) changed" in page
    assert "+# Hello" in page  # the working copy's diff
