"""``hermes-codex-runtime try``: a playground for your own ``hermes chat`` or gateway, offline.

It makes a scratch ``HERMES_HOME`` (the plugin enabled, the codex runtime on, approvals asked)
and a scratch ``CODEX_HOME`` pointed at the bundled mock model provider on 127.0.0.1, serves
the mock (:mod:`.playground` answers what you type) until Ctrl-C,
and prints the environment to run Hermes in. Everything stays in the scratch directory:

* the Hermes home's ``terminal.cwd`` is its project folder, so a gateway's commands and file
  changes happen there (without it, a gateway works in your home directory);
* ``hermes chat`` works in the folder it starts in, so the printed commands ``cd`` there first;
* what the plugin and Hermes keep per user — the sandbox probe's verdicts, the 0.22 line's
  host-wide gateway lock — goes there too (``XDG_CACHE_HOME``, ``XDG_STATE_HOME``): a
  playground gateway writes neither ``~/.cache`` nor ``~/.local/state``, and the lock it takes
  is not the one a gateway of yours holds.

Your ``~/.hermes`` and ``~/.codex`` are not used. The scratch directory goes away at the end,
unless you named it with ``--dir``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from hermes_codex_runtime.hermes import fixes
from hermes_codex_runtime.hermes.commands import playground
from hermes_codex_runtime.hermes.commands.offline import write_offline_caches
from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.offline.codex_home import prepare_codex_home
from hermes_codex_runtime.wire import WireError, resolve_codex_binary


def _config(codex_home: Path, project: Path) -> dict[str, Any]:
    """The playground's config.yaml: the plugin on, approvals asked, its project the workspace."""
    return {
        "plugins": {"enabled": ["codex-runtime"]},
        "security": {"allow_lazy_installs": False},
        "model": {"provider": "openai-codex", "default": "mock-model",
                  "openai_runtime": "codex_app_server", "codex_home": str(codex_home),
                  "context_length": 200000},
        "approvals": {"mode": "manual", "timeout": 120},
        # a gateway's workspace (without it, the home directory)
        "terminal": {"cwd": str(project)},
    }


def run_trial(directory: str | None = None) -> int:
    """Serve the playground until Ctrl-C or SIGTERM."""
    try:
        binary = resolve_codex_binary()
    except WireError as exc:
        print(f"{fixes.SCRIPT} try: {exc}", file=sys.stderr)
        return 127
    root = Path(directory).expanduser().resolve() if directory else \
        Path(tempfile.mkdtemp(prefix="hcr-try-"))
    keep = directory is not None
    hermes_home, codex_home, project = root / "hermes-home", root / "codex-home", root / "project"
    cache, state = root / "cache", root / "state"
    stop = threading.Event()
    provider = mp.MockResponsesProvider(default=playground.agent).start()
    try:
        for folder in (hermes_home, project, cache, state):
            folder.mkdir(parents=True, exist_ok=True)
        prepare_codex_home(codex_home, provider.base_url, codex_bin=binary.path)
        write_offline_caches(hermes_home)
        (hermes_home / "config.yaml").write_text(yaml.safe_dump(_config(codex_home, project),
                                                                sort_keys=False))
        hermes = os.path.join(os.path.dirname(sys.executable), "hermes")
        hermes = hermes if os.path.exists(hermes) else "hermes"
        print(f"A playground on the bundled mock model (no network, no credentials); "
              f"codex: {binary.path}", flush=True)
        print("In another terminal (a gateway works in the project folder, `hermes chat` where "
              "it starts):", flush=True)
        print(f"  cd {shlex.quote(str(project))}", flush=True)
        print(f"  export HERMES_HOME={shlex.quote(str(hermes_home))}", flush=True)
        print(f"  export XDG_CACHE_HOME={shlex.quote(str(cache))} "
              f"XDG_STATE_HOME={shlex.quote(str(state))}", flush=True)
        print(f"  {shlex.quote(hermes)} chat          # or: {shlex.quote(hermes)} gateway run",
              flush=True)
        print(f"Then {playground.HELP}.", flush=True)
        print(f"Ctrl-C ends it{'' if keep else ' and removes ' + str(root)}.", flush=True)
        previous = _on_signals(stop)
        try:
            while not stop.wait(0.5):
                pass
        finally:
            _restore(previous)
    finally:
        provider.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    print("playground closed", flush=True)
    return 0


_Handler = Any


def _on_signals(stop: threading.Event) -> dict[int, _Handler]:
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    return {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore(previous: dict[int, _Handler]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
