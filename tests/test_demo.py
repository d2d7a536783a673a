"""The README's first command on this machine: a real Hermes turn through the real codex binary
on the bundled mock provider, eight steps (the last a Codex Replay of the demo's own session), a
summary, and the exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What a machine without the tests' tools lacks, and what would install system packages.
ABSENT = ("chromium", "chromium-browser", "tmux")
RECORDED = ("apt-get", "apt", "dpkg", "sudo", "snap")


def machine_without_chromium(tmp_path: Path) -> tuple[str, Path]:
    """A ``PATH`` with every command of this one except chromium and tmux, where the package
    managers only write down that they were called; and that record."""
    bin_dir, record = tmp_path / "bin", tmp_path / "installers-called"
    bin_dir.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        folder = Path(entry)
        if not folder.is_dir():
            continue
        for command in folder.iterdir():
            target = bin_dir / command.name
            if command.name in ABSENT or target.exists() or target.is_symlink():
                continue
            if command.is_file() and os.access(command, os.X_OK):
                target.symlink_to(command)
    for name in RECORDED:
        shim = bin_dir / name
        if shim.is_symlink() or shim.exists():
            shim.unlink()
        shim.write_text(f"#!/bin/sh\necho {name} \"$@\" >> {record}\nexit 1\n")
        shim.chmod(0o755)
    return str(bin_dir), record


def test_the_demo_plays_every_step(codex_binary, hermes_base, tmp_path):
    """``make demo`` as the README has it, as root on a machine without chromium: it installs
    nothing outside the checkout (the venv is this cell's own, already set up)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_HOME", "CODEX_HOME")}
    env["TMPDIR"] = str(tmp_path)  # where the demo keeps the replay's report
    env["PATH"], installers = machine_without_chromium(tmp_path)
    # another local user's link where a report with a fixed name would go
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n")
    (tmp_path / "hermes-codex-runtime-demo-replay.html").symlink_to(victim)
    venv = Path(sys.executable).parent.parent
    proc = subprocess.run(["make", "--no-print-directory", "-o", f"{venv}/.installed-test",
                           "demo", f"VENV={venv}"], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False, env=env, cwd=str(ROOT))
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert not installers.exists(), installers.read_text()  # no package manager was run
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
