"""Benchmark clients: one scenario, one client, one process; prints one JSON line of figures.

Usage: ``python bench/clients.py <client> <scenario> <config.json>``. Clients:

* ``raw`` — a minimal stdlib client (one reader thread, buffered reads, ``json.loads`` per
  line, approvals answered on the reader thread): the practical floor;
* ``ours`` — ``hermes_codex_runtime.session.CodexSession``;
* ``ours-agent`` — a real Hermes ``AIAgent.run_conversation`` with the plugin enabled;
* ``hermes`` — Hermes 0.19.0's own ``CodexAppServerSession``;
* ``hermes-agent`` — ``AIAgent.run_conversation`` on Hermes' own runtime (plugin not enabled);
* ``sdk`` — the official ``openai-codex`` SDK's ``CodexClient`` (runs in its own venv).

Scenarios: ``warm`` (20 trivial turns), ``stream`` (a 2,000-delta turn), ``approval`` (a turn with
one command approval; also the approval delay: request line read → reply written), ``output`` (a
turn whose command prints 5 MB as it runs), ``cold``
(spawn → initialize → thread → first turn), ``flood`` (a fake app-server writing 50,000 deltas),
``close`` (``close()`` with a grandchild in its own session). The raw and sdk clients import
nothing from this project.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

T0 = time.perf_counter()


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------------------- raw


class RawClient:
    """The floor: what any client must at least do."""

    def __init__(self, codex_bin: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([codex_bin, "app-server"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.next_id = 0
        self.pending: dict[int, queue.SimpleQueue[Any]] = {}
        self.events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.delays: list[float] = []
        self.streamed = 0  # characters of streamed text delivered to this client's consumer
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _write(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\n"
        with self.lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def _read(self) -> None:
        for line in self.proc.stdout:
            read_at = time.perf_counter()
            message = json.loads(line)
            if "method" in message and "id" in message:
                self._write({"id": message["id"], "result": {"decision": "accept"}})
                self.delays.append(time.perf_counter() - read_at)
            elif "method" in message:
                self.events.put(message)
            elif message.get("id") in self.pending:
                self.pending.pop(message["id"]).put(message)
        self.events.put(None)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        box: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.pending[self.next_id] = box
        self._write({"id": self.next_id, "method": method, "params": params})
        return box.get(timeout=60).get("result", {})

    def start(self, cwd: str) -> str:
        self.request("initialize", {"clientInfo": {"name": "raw", "version": "0"}})
        self._write({"method": "initialized"})
        return self.request("thread/start", {"cwd": cwd})["thread"]["id"]

    def turn(self, thread_id: str, text: str) -> int:
        turn_id = self.request("turn/start", {"threadId": thread_id, "input": [
            {"type": "text", "text": text}]})["turn"]["id"]
        deltas = 0
        while True:
            message = self.events.get(timeout=120)
            if message is None:
                raise RuntimeError("codex exited")
            if message["method"] == "item/agentMessage/delta":
                deltas += 1
                self.streamed += len(message["params"].get("delta") or "")
            elif message["method"] == "turn/completed" and \
                    message["params"]["turn"]["id"] == turn_id:
                return deltas

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------------------------------- sdk


def _delta_of(note: Any) -> str:
    """The text of an SDK ``item/agentMessage/delta`` notification (typed payload or dict)."""
    for name in ("payload", "params"):
        payload = getattr(note, name, None)
        delta = payload.get("delta") if isinstance(payload, dict) else getattr(payload, "delta",
                                                                               None)
        if isinstance(delta, str):
            return delta
    return ""


class SdkClient:
    """The official SDK's low-level client, with an approval handler."""

    def __init__(self, codex_bin: str, env: dict[str, str]) -> None:
        from openai_codex.client import CodexClient, CodexConfig

        self.delays: list[float] = []
        self.streamed = 0
        self.client = CodexClient(CodexConfig(codex_bin=codex_bin, env=env),
                                  approval_handler=self._approve)
        handle = self.client._handle_server_request
        write = self.client._write_message
        self._read_at: dict[Any, float] = {}

        def timed_handle(msg: dict[str, Any]) -> Any:
            self._read_at[msg.get("id")] = time.perf_counter()
            return handle(msg)

        def timed_write(payload: dict[str, Any]) -> None:
            write(payload)
            started = self._read_at.pop(payload.get("id"), None) if "result" in payload else None
            if started is not None:
                self.delays.append(time.perf_counter() - started)

        self.client._handle_server_request = timed_handle
        self.client._write_message = timed_write
        self.client.start()

    @staticmethod
    def _approve(method: str, params: Any) -> dict[str, Any]:
        return {"decision": "accept"}

    def start(self, cwd: str) -> str:
        from openai_codex.generated.v2_all import ThreadStartResponse

        self.client.initialize()
        return self.client.request("thread/start", {"cwd": cwd},
                                   response_model=ThreadStartResponse).thread.id

    def turn(self, thread_id: str, text: str) -> int:
        started = self.client.turn_start(thread_id, [{"type": "text", "text": text}])
        turn_id = started.turn.id
        self.client.register_turn_notifications(turn_id)
        deltas = 0
        try:
            while True:
                note = self.client.next_turn_notification(turn_id)
                if note.method == "item/agentMessage/delta":
                    deltas += 1
                    self.streamed += len(_delta_of(note))
                elif note.method == "turn/completed":
                    return deltas
        finally:
            self.client.unregister_turn_notifications(turn_id)

    def close(self) -> None:
        self.client.close()


# ---------------------------------------------------------------------------------------- ours


def time_our_approvals(delays: list[float]) -> None:
    """Patch AppServerConnection: the approval delay is request line read → reply written."""
    from hermes_codex_runtime.wire import AppServerConnection

    read_at: dict[Any, float] = {}
    dispatch, respond = AppServerConnection._dispatch_line, AppServerConnection.respond

    def timed_dispatch(conn: Any, line: bytes) -> None:
        if b"requestApproval" in line:
            read_at[json.loads(line)["id"]] = time.perf_counter()
        dispatch(conn, line)

    def timed_respond(conn: Any, request_id: Any, result: dict[str, Any]) -> None:
        respond(conn, request_id, result)
        started = read_at.pop(request_id, None)
        if started is not None:
            delays.append(time.perf_counter() - started)

    AppServerConnection._dispatch_line = timed_dispatch  # type: ignore[method-assign]
    AppServerConnection.respond = timed_respond  # type: ignore[method-assign]


def time_hermes_approvals(delays: list[float]) -> None:
    """Patch Hermes' CodexAppServerClient: request parsed → reply written."""
    from agent.transports import codex_app_server as transport

    read_at: dict[Any, float] = {}
    dispatch = transport.CodexAppServerClient._dispatch
    respond = transport.CodexAppServerClient.respond

    def timed_dispatch(client: Any, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:
            read_at[msg["id"]] = time.perf_counter()
        dispatch(client, msg)

    def timed_respond(client: Any, request_id: Any, result: dict[str, Any]) -> None:
        respond(client, request_id, result)
        started = read_at.pop(request_id, None)
        if started is not None:
            delays.append(time.perf_counter() - started)

    transport.CodexAppServerClient._dispatch = timed_dispatch
    transport.CodexAppServerClient.respond = timed_respond


class OursClient:
    """hermes_codex_runtime.session.CodexSession."""

    def __init__(self, codex_bin: str, env: dict[str, str], cwd: str) -> None:
        from hermes_codex_runtime.protocol import Decision
        from hermes_codex_runtime.session import CodexSession, SessionSettings
        from hermes_codex_runtime.wire import AppServerConnection

        self.delays: list[float] = []
        self.streamed = 0
        time_our_approvals(self.delays)
        self.session = CodexSession(
            SessionSettings(codex_bin=codex_bin, codex_home=env["CODEX_HOME"], cwd=cwd,
                            env=env),
            approve=lambda request: Decision.ACCEPT, on_event=self._on_event,
            connection_factory=AppServerConnection.spawn)
        self.cwd = cwd

    def _on_event(self, event: Any) -> None:
        if event.kind == "text_delta":
            self.streamed += len(event.text)

    def start(self, cwd: str) -> str:
        return self.session.ensure_started()

    def turn(self, thread_id: str, text: str) -> int:
        result = self.session.run_turn(text)
        if result.error:
            raise RuntimeError(result.error)
        return len(result.final_text)

    def close(self) -> None:
        self.session.close()


class HermesSessionClient:
    """Hermes 0.19.0's own CodexAppServerSession."""

    def __init__(self, codex_bin: str, env: dict[str, str], cwd: str) -> None:
        os.environ.update(env)
        from agent.transports.codex_app_server_session import (
            CodexAppServerSession,
            _ServerRequestRouting,
        )

        self.delays: list[float] = []
        self.streamed: int | None = None  # no streaming consumer in this API
        time_hermes_approvals(self.delays)
        self.session = CodexAppServerSession(
            cwd=cwd, codex_bin=codex_bin, codex_home=env["CODEX_HOME"],
            request_routing=_ServerRequestRouting(auto_approve_exec=True,
                                                  auto_approve_apply_patch=True))

    def start(self, cwd: str) -> str:
        return self.session.ensure_started()

    def turn(self, thread_id: str, text: str) -> int:
        result = self.session.run_turn(user_input=text)
        if result.error:
            raise RuntimeError(result.error)
        return len(result.final_text)

    def close(self) -> None:
        self.session.close()


class AgentClient:
    """A real Hermes AIAgent.run_conversation (the plugin on or off by config)."""

    def __init__(self, codex_bin: str, env: dict[str, str], cwd: str, plugin: bool,
                 hermes_home: str) -> None:
        os.environ.update(env)
        os.environ.update(HERMES_HOME=hermes_home, HERMES_DISABLE_LAZY_INSTALLS="1",
                          TIRITH_ENABLED="0", CODEX_BIN=codex_bin)
        # Hermes 0.19.0's own runtime runs the `codex` it finds on PATH.
        os.environ["PATH"] = os.path.dirname(codex_bin) + os.pathsep + os.environ["PATH"]
        import run_agent

        self.delays: list[float] = []
        (time_our_approvals if plugin else time_hermes_approvals)(self.delays)
        self.streamed = 0
        self.agent = run_agent.AIAgent(
            model="mock-model", provider="openai", api_mode="codex_app_server",
            api_key="sk-bench", base_url="http://127.0.0.1:9/v1", quiet_mode=True,
            skip_memory=True, skip_context_files=True, stream_delta_callback=self._delta)
        self.agent.session_cwd = cwd
        self.history: list[dict[str, Any]] = []

    def _delta(self, text: Any) -> None:
        if isinstance(text, str):
            self.streamed += len(text)

    def start(self, cwd: str) -> str:
        return "lazy"

    def turn(self, thread_id: str, text: str) -> int:
        result = self.agent.run_conversation(text, conversation_history=list(self.history))
        if not result.get("completed"):
            raise RuntimeError(str(result.get("error")))
        self.history = result["messages"]
        return len(result.get("final_response") or "")

    def close(self) -> None:
        self.agent.close()
        session = getattr(self.agent, "_codex_session", None)  # Hermes' own runtime
        if session is not None and hasattr(session, "close"):
            session.close()


# ---------------------------------------------------------------------------------------- main


def make(name: str, config: dict[str, Any], codex_bin: str) -> Any:
    env = dict(os.environ)
    env.update(CODEX_HOME=config["codex_home"], RUST_LOG="warn")
    cwd = config["cwd"]
    if name == "raw":
        return RawClient(codex_bin, env)
    if name == "sdk":
        return SdkClient(codex_bin, env)
    if name == "ours":
        return OursClient(codex_bin, env, cwd)
    if name == "hermes":
        return HermesSessionClient(codex_bin, env, cwd)
    if name in ("ours-agent", "hermes-agent"):
        home = config["hermes_home_plugin" if name == "ours-agent" else "hermes_home_plain"]
        return AgentClient(codex_bin, env, cwd, name == "ours-agent", home)
    raise SystemExit(f"unknown client {name}")


def main() -> None:
    name, scenario, config_path = sys.argv[1:4]
    with open(config_path) as fh:
        config = json.loads(fh.read())
    codex_bin = config["fake_codex"] if scenario in ("flood", "close") else config["codex_bin"]
    out: dict[str, Any] = {"client": name, "scenario": scenario}
    started = time.perf_counter()
    client = make(name, config, codex_bin)
    thread_id = client.start(config["cwd"])
    if scenario == "cold":
        client.turn(thread_id, "hello")
        out["cold_s"] = time.perf_counter() - started
        out["process_s"] = time.perf_counter() - T0
        out["cpu_ms"] = 1000 * time.process_time()  # the whole process: start-up and turn
    elif scenario == "warm":
        client.turn(thread_id, "warm up")
        times = []
        turns = int(config.get("warm_turns", 20))
        cpu = time.process_time()
        for i in range(turns):
            t = time.perf_counter()
            client.turn(thread_id, f"turn {i}")
            times.append(time.perf_counter() - t)
        out["cpu_ms"] = 1000 * (time.process_time() - cpu) / turns
        times.sort()
        out["turn_ms"] = 1000 * times[len(times) // 2]
        out["rss_mib"] = rss_mib()
    elif scenario in ("stream", "approval", "command", "output"):
        client.turn(thread_id, "warm up")
        walls, cpus = [], []
        for _ in range(1 if scenario == "output" else int(config.get("repeats", 1))):
            t = time.perf_counter()
            cpu = time.process_time()
            client.turn(thread_id, scenario)
            walls.append(1000 * (time.perf_counter() - t))
            cpus.append(1000 * (time.process_time() - cpu))
        out["turn_ms"] = statistics.median(walls)
        out["cpu_ms"] = statistics.median(cpus)
        if scenario == "approval":
            out["approval_delay_ms"] = [1000 * d for d in client.delays]
    elif scenario == "flood":
        client.turn(thread_id, "warm up")  # throughput, not start-up
        if client.streamed is not None:
            client.streamed = 0
        t = time.perf_counter()
        client.turn(thread_id, "flood")
        elapsed = time.perf_counter() - t
        out["deltas_per_s"] = config["flood"] / elapsed
        out["peak_rss_mib"] = peak_rss_mib()
        # what reached the client's stream consumer, against what codex sent
        out["expected_chars"] = config["flood"] * len(config["flood_delta"])
        if client.streamed is not None:
            out["delivered_chars"] = client.streamed
    elif scenario == "close":
        client.turn(thread_id, "spawn a grandchild")
        t = time.perf_counter()
        client.close()
        out["close_ms"] = 1000 * (time.perf_counter() - t)
        client = None
    if client is not None:
        client.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
