"""The README's first command works on this machine (real codex, mock provider, offline)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_demo_plays_every_step(codex_binary):
    script = Path(sys.executable).with_name("hermes-codex-runtime")
    proc = subprocess.run([str(script), "demo"], capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "4 of 4 steps ok" in out
    assert "the answer is 42" in out  # the approved command's output came back
    assert "? approve add" in out and "Hello from codex!" in out  # the changeset was shown
    assert "cached 20" in out
