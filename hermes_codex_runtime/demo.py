"""``hermes-codex-runtime demo``: watch the real codex binary work, offline, in one command.

Starts the bundled mock model provider on 127.0.0.1, prepares a temporary ``CODEX_HOME`` pointing
the REAL codex binary at it, and plays a short story through the plugin's wire layer, printing
each step as it happens (streamed text, approvals asked and answered, the changeset, token usage).
It ends with a summary and exits non-zero when any step failed. No credentials, no network.

The story grows with the runtime: the Hermes steps (a real ``AIAgent`` turn, resume across
processes, fallback on a usage limit) join as the session layer and the Hermes adapter land.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from hermes_codex_runtime.protocol import (
    Decision,
    answer_for,
    approval_kind,
    thread_start_params,
    to_user_input,
    turn_start_params,
)
from hermes_codex_runtime.testing import mock_provider as mp
from hermes_codex_runtime.testing.codex_home import prepare_codex_home
from hermes_codex_runtime.wire import (
    AppServerConnection,
    Inbound,
    SpawnOptions,
    WireError,
    probe_version,
    resolve_codex_binary,
)

STEP_BUDGET = 60.0


@dataclass(slots=True)
class StepResult:
    """One line of the final summary."""

    name: str
    ok: bool
    seconds: float
    note: str = ""


class _Story:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.results: list[StepResult] = []

    def say(self, text: str = "", end: str = "\n") -> None:
        self.out.write(text + end)
        self.out.flush()

    def step(self, name: str, body: Callable[[], str]) -> None:
        self.say(f"\n== {name}")
        started = time.monotonic()
        try:
            note = body()
            ok = True
        except Exception as exc:  # a failed step is reported, the story goes on
            note = f"{type(exc).__name__}: {exc}"
            ok = False
            self.say(f"   FAILED: {note}")
        self.results.append(StepResult(name, ok, time.monotonic() - started, note))


def _run_turn(story: _Story, conn: AppServerConnection, thread_id: str,
              text: str) -> list[Inbound]:
    turn = conn.request("turn/start", turn_start_params(thread_id, to_user_input(text)))["turn"]
    story.say(f"   you: {text}")
    seen: list[Inbound] = []
    streaming = False
    changes: dict[str, Any] = {}
    deadline = time.monotonic() + STEP_BUDGET
    while time.monotonic() < deadline:
        message = conn.next_inbound(timeout=max(0.01, deadline - time.monotonic()))
        if message is None:
            break
        seen.append(message)
        params = message.params
        if message.method == "item/agentMessage/delta":
            if not streaming:
                story.say("   codex: ", end="")
                streaming = True
            story.say(params.get("delta", ""), end="")
            continue
        if streaming:
            story.say()
            streaming = False
        if message.method == "item/started":
            item = params.get("item", {})
            if item.get("type") == "commandExecution":
                story.say(f"   [tool] exec_command: {item.get('command')}")
            elif item.get("type") == "fileChange":
                changes[item.get("id", "")] = item.get("changes", [])
                story.say("   [tool] apply_patch")
        elif message.method == "item/completed":
            item = params.get("item", {})
            if item.get("type") == "commandExecution":
                output = (item.get("aggregatedOutput") or "").strip()
                story.say(f"   [done] {item.get('status')}, exit {item.get('exitCode')}: {output}")
            elif item.get("type") == "fileChange":
                story.say(f"   [done] file change {item.get('status')}")
        elif message.id is not None:
            kind = approval_kind(message.method, params)
            if kind == "command":
                story.say(f"   ? approve command `{params.get('command')}` "
                          f"({params.get('reason')})")
            elif kind == "file_change":
                for change in changes.get(params.get("itemId", ""), []):
                    kind_name = (change.get("kind") or {}).get("type", "?")
                    story.say(f"   ? approve {kind_name} {change.get('path')}:")
                    for line in str(change.get("diff", "")).splitlines():
                        story.say(f"       {line}")
            answer = answer_for(message.method, Decision.ACCEPT, params)
            if answer is None:
                conn.respond_error(message.id, -32601, f"method not found: {message.method}")
            else:
                conn.respond(message.id, answer)
                story.say("   > approved (the demo answers yes; Hermes asks you)")
        elif message.method == "turn/completed" and params["turn"]["id"] == turn["id"]:
            status = params["turn"]["status"]
            if status != "completed":
                raise RuntimeError(f"turn ended {status}: {params['turn'].get('error')}")
            return seen
    raise TimeoutError(f"the turn did not complete within {STEP_BUDGET:g}s")


def run_demo(out: TextIO = sys.stdout, keep: bool = False) -> int:
    """Play the story; return the process exit status (0 when every step passed)."""
    story = _Story(out)
    workdir = Path(tempfile.mkdtemp(prefix="hcr-demo-"))
    story.say("hermes-codex-runtime demo — the real codex binary, a mock model on 127.0.0.1")
    try:
        binary = resolve_codex_binary()
        version = ".".join(map(str, probe_version(binary)))
    except WireError as exc:
        story.say(f"codex is not available: {exc}")
        return 2
    story.say(f"codex {version} ({binary.source}: {binary.path})")
    usage_seen: list[dict[str, Any]] = []
    with mp.MockResponsesProvider() as provider:
        home = prepare_codex_home(workdir / "codex-home", provider.base_url,
                                  codex_bin=binary.path)
        project = workdir / "project"
        project.mkdir()
        conn = AppServerConnection.spawn(SpawnOptions(codex_bin=binary.path,
                                                      codex_home=str(home)))
        try:
            thread_id = conn.request("thread/start", thread_start_params(
                cwd=str(project), approval_policy="on-request", approvals_reviewer="user",
                sandbox="read-only",
                developer_instructions="You are running inside the hermes-codex-runtime demo."),
            )["thread"]["id"]
            story.say(f"thread {thread_id}")

            def collect(messages: list[Inbound]) -> None:
                for message in messages:
                    if message.method == "thread/tokenUsage/updated":
                        usage_seen.append(message.params.get("tokenUsage", {}))

            def ask() -> str:
                provider.enqueue(mp.text(
                    "Hello! I am codex, answering through the app-server wire.", deltas=8,
                    usage=mp.Usage(input=80, cached=20, output=25, reasoning=5)))
                collect(_run_turn(story, conn, thread_id, "Say hello."))
                return "streamed reply"

            def command() -> str:
                provider.enqueue(
                    mp.exec_command("echo the answer is $((6*7))", escalated=True,
                                    justification="The user asked to run it."),
                    mp.text("The command printed: the answer is 42.", deltas=4))
                messages = _run_turn(story, conn, thread_id, "Run a shell command.")
                collect(messages)
                outputs = [m.params["item"].get("aggregatedOutput", "") for m in messages
                           if m.method == "item/completed"
                           and m.params["item"]["type"] == "commandExecution"]
                if not any("the answer is 42" in out for out in outputs):
                    raise RuntimeError("the command's output did not come back")
                return "approved, output used"

            def file_change() -> str:
                provider.enqueue(
                    mp.apply_patch(mp.add_file_patch("hello.txt",
                                                     ["Hello from codex!", "Second line."])),
                    mp.text("I created hello.txt.", deltas=3))
                collect(_run_turn(story, conn, thread_id, "Create hello.txt."))
                target = project / "hello.txt"
                if not target.exists():
                    raise RuntimeError("hello.txt was not created")
                story.say(f"   hello.txt now holds: {target.read_text().splitlines()}")
                return "changeset shown, approved, file present"

            def tokens() -> str:
                if not usage_seen:
                    raise RuntimeError("codex reported no token usage")
                total = usage_seen[-1].get("total", {})
                window = usage_seen[-1].get("modelContextWindow")
                cached = int(total.get("cachedInputTokens", 0))
                inp = int(total.get("inputTokens", 0))
                story.say(f"   input {inp} (of which cached {cached}, uncached {inp - cached}), "
                          f"output {total.get('outputTokens')} (reasoning "
                          f"{total.get('reasoningOutputTokens')}), "
                          f"total {total.get('totalTokens')}")
                last_prompt = int(usage_seen[-1].get("last", {}).get("inputTokens", 0))
                if window:
                    story.say(f"   context window {window}: the last prompt ({last_prompt} "
                              f"tokens) used {100 * last_prompt / int(window):.2f}%")
                return f"total {total.get('totalTokens')} tokens"

            story.step("1. a question answered with a streamed reply", ask)
            story.step("2. a shell command that needs approval", command)
            story.step("3. a file change shown as a changeset", file_change)
            story.step("4. the token breakdown", tokens)
        finally:
            conn.close()
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    story.say("\n== summary")
    for result in story.results:
        mark = "ok    " if result.ok else "FAILED"
        story.say(f"   {mark} {result.seconds * 1000:7.0f} ms  {result.name}"
                  + (f"  ({result.note})" if result.note else ""))
    failed = [r for r in story.results if not r.ok]
    story.say(f"\n{len(story.results) - len(failed)} of {len(story.results)} steps ok")
    return 1 if failed else 0
