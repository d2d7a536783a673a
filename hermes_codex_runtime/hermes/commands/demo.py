"""``hermes-codex-runtime demo``: a real Hermes, turning through the real codex binary, offline.

It prepares a temporary ``HERMES_HOME`` (the plugin enabled in config.yaml, exactly as a user
enables it) and ``CODEX_HOME`` (codex pointed at the bundled mock model provider on 127.0.0.1),
imports Hermes — whose own loader discovers the plugin through its entry point — and plays a
story through a real ``AIAgent`` and real ``hermes chat`` processes, printing each step as it
happens: streamed text, codex tool progress, approvals as they are asked and answered, and last a
replay of the demo's own session on a second mock model (Codex Replay). It ends with a summary
(ok/failed and latency per step) and exits non-zero when any step failed.

``--live`` runs the first step against the user's own ``codex login`` instead of the mock.
No credentials, no network other than 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import yaml

from hermes_codex_runtime.hermes.commands.demo_story import Story, play
from hermes_codex_runtime.hermes.commands.offline import write_offline_caches
from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.offline.chat import ChatCompletionsServer
from hermes_codex_runtime.offline.codex_home import prepare_codex_home
from hermes_codex_runtime.wire import WireError, probe_version, resolve_codex_binary


def _hermes_config(codex_home: Path, fallback_url: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "plugins": {"enabled": ["codex-runtime"]},
        "security": {"allow_lazy_installs": False, "tirith_enabled": False},
        "model": {"provider": "openai-codex", "default": "mock-model",
                  "openai_runtime": "codex_app_server", "codex_home": str(codex_home),
                  "context_length": 200000},
        "approvals": {"mode": "manual", "timeout": 60},
        "display": {"show_commentary": False},
        # no session title: on a codex-only login it is a side task on codex, and the demo's
        # model plays a script (a title request would take the reply a step expects)
        "auxiliary": {"title_generation": {"enabled": False}},
    }
    if fallback_url:
        config["fallback_providers"] = [{"provider": "custom", "model": "fallback-model",
                                         "base_url": fallback_url, "api_key": "demo-key"}]
    return config


def run_demo(out: TextIO = sys.stdout, keep: bool = False, live: bool = False) -> int:
    """Play the story; return the exit status (0 when every step passed)."""
    story = Story(out)
    from hermes_codex_runtime.hermes.symbols.probe import find_host

    host = find_host()
    if host is None:
        story.say("The demo drives a real Hermes: install it with "
                  "`pip install 'hermes-codex-runtime[hermes,codex]'` (or `make demo`).")
        return 2
    try:
        binary = resolve_codex_binary()
        codex_version = ".".join(map(str, probe_version(binary)))
    except WireError as exc:
        story.say(f"codex is not available: {exc}")
        return 2
    if "run_agent" in sys.modules:
        story.say("run the demo in a fresh process (Hermes must be imported after set-up)")
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="hcr-demo-"))
    hermes_home = workdir / "hermes-home"
    project = workdir / "project"
    project.mkdir()
    story.say("hermes-codex-runtime demo: a real Hermes turn through the real codex binary")
    story.say(f"   {host.describe()}; codex {codex_version} ({binary.source})")
    story.say(f"   model provider: {'your codex login (live)' if live else 'mock on 127.0.0.1'}")
    provider = None if live else mp.MockResponsesProvider().start()
    fallback = None if live else ChatCompletionsServer(
        "The fallback provider finished this turn for codex.")
    try:
        if live:
            codex_home = Path(os.path.expanduser(os.environ.get("CODEX_HOME") or "~/.codex"))
        else:
            assert provider is not None
            codex_home = prepare_codex_home(workdir / "codex-home", provider.base_url,
                                            codex_bin=binary.path,
                                            extra_models=["mock-model-2"])
        write_offline_caches(hermes_home)  # no models.dev / PyPI lookups from the demo
        config = _hermes_config(codex_home, fallback.base_url if fallback else None)
        (hermes_home / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        os.environ.update(HERMES_HOME=str(hermes_home), HERMES_DISABLE_LAZY_INSTALLS="1",
                          TIRITH_ENABLED="0")

        play(story, hermes_home, project, codex_home, provider, fallback, live)
    finally:
        if provider is not None:
            provider.stop()
        if fallback is not None:
            fallback.close()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            story.say(f"kept {workdir}")
    story.say("\n== summary")
    for result in story.results:
        mark = "ok    " if result.ok else "FAILED"
        story.say(f"   {mark} {result.seconds * 1000:7.0f} ms  {result.name}"
                  + (f"  ({result.note})" if result.note else ""))
    failed = [r for r in story.results if not r.ok]
    story.say(f"\n{len(story.results) - len(failed)} of {len(story.results)} steps ok")
    return 1 if failed else 0
