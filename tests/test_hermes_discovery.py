"""The real Hermes host (hermes-agent 0.19.0) finds and loads the plugin through its entry point.

Each check runs Hermes in a subprocess with its own HERMES_HOME: Hermes reads HERMES_HOME at
import time and caches its plugin manager, so in-process runs would leak between tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_hermes

PROBE = """
import json
from hermes_cli import plugins
plugins.discover_plugins()
import hermes_codex_runtime.hermes.registrations as adapter
ours = [p for p in plugins.get_plugin_manager().list_plugins() if p["key"] == "codex-runtime"]
print(json.dumps({"registrations": len(adapter.REGISTRATIONS), "entry": ours}))
"""


def hermes_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HERMES_HOME=str(home), HERMES_DISABLE_LAZY_INSTALLS="1")
    env.pop("HERMES_SAFE_MODE", None)
    return env


def probe(home: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE], env=hermes_env(home), text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hermes_agent_imports_with_the_plugin_enabled(tmp_path):
    (tmp_path / "config.yaml").write_text("plugins:\n  enabled: [codex-runtime]\n")
    code = ("import run_agent, hermes_codex_runtime.hermes.registrations as a; "
            "print(run_agent.AIAgent.__name__, len(a.REGISTRATIONS))")
    proc = subprocess.run([sys.executable, "-c", code], env=hermes_env(tmp_path), text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-2:] == ["AIAgent", "1"]


def test_enabled_through_the_hermes_cli_the_plugin_is_registered(tmp_path):
    hermes = Path(sys.executable).with_name("hermes")
    enable = subprocess.run([str(hermes), "plugins", "enable", "codex-runtime"],
                            env=hermes_env(tmp_path), text=True, capture_output=True,
                            timeout=120, stdin=subprocess.DEVNULL, check=False)
    output = enable.stdout + enable.stderr
    if enable.returncode != 0 and "install failed: download failed" in output:
        # The 0.22 line admits a plugin through its package manager, which provisions a managed
        # Python from the network first — impossible offline, for any plugin. What the command
        # would have written is the plugin's name in plugins.enabled (README: Installing).
        (tmp_path / "config.yaml").write_text("plugins:\n  enabled: [codex-runtime]\n")
        listed = subprocess.run([str(hermes), "plugins", "list"], env=hermes_env(tmp_path),
                                text=True, capture_output=True, timeout=120,
                                stdin=subprocess.DEVNULL, check=False)
        assert "codex-runtime" in listed.stdout, listed.stdout + listed.stderr
    else:
        assert enable.returncode == 0, output
    result = probe(tmp_path)
    assert result["registrations"] == 1
    [entry] = result["entry"]
    assert entry["enabled"] and entry["source"] == "entrypoint" and entry["error"] is None


def test_not_enabled_means_not_loaded(tmp_path):
    (tmp_path / "config.yaml").write_text("plugins:\n  enabled: []\n")
    result = probe(tmp_path)
    assert result["registrations"] == 0
    assert [e["enabled"] for e in result["entry"]] == [False]


SLOW_PLUGIN = '''
import time


def register(ctx):
    time.sleep(3)  # a plugin that takes its time, loaded before codex-runtime
'''


def test_a_one_shot_chat_is_on_codex_even_while_another_plugin_is_still_loading(
        tmp_path, codex_binary, mock_provider):
    """The 0.22 line loads plugins in a background thread and `hermes chat -q` resolves its
    runtime before waiting for them: the activation must already be there (the wheel's start-up
    hook), not only after the plugin's register() — which here runs seconds later."""
    from hermes_env import base_config, write_hermes_home
    from hermes_env import hermes_env as full_env

    from hermes_codex_runtime.offline import provider as mp
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    home = tmp_path / "hermes-home"
    config = base_config(codex_home=str(codex_home))
    config["plugins"]["enabled"].append("aaa-slow")
    write_hermes_home(home, config)
    slow = home / "plugins" / "aaa-slow"
    slow.mkdir(parents=True)
    (slow / "plugin.yaml").write_text("name: aaa-slow\nversion: 1.0.0\ndescription: slow\n"
                                      "author: tests\nkind: standalone\n")
    (slow / "__init__.py").write_text(SLOW_PLUGIN)
    hermes = Path(sys.executable).with_name("hermes")

    def chat(text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(hermes), "chat", "-Q", "-q", text], env=full_env(home),
                              capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL, cwd=str(tmp_path))

    # the first run on a new home fills Hermes' plugin caches (and waits for its plugins);
    # the runs after it take the quick path that races the background discovery
    for attempt in range(2):
        mock_provider.enqueue(mp.text(f"Answered by codex, not refused ({attempt})."))
        run = chat("hello")
        assert "No Codex credentials stored" not in run.stdout + run.stderr, attempt
        assert f"Answered by codex, not refused ({attempt})." in run.stdout, \
            run.stdout + run.stderr
