"""The story of the demo: a real ``AIAgent`` and real ``hermes chat`` processes playing it step
by step (:func:`play`), and how a step is printed and timed (:class:`Story`). The set-up and the
summary are :mod:`hermes_codex_runtime.hermes.commands.demo`'s."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.offline.chat import ChatCompletionsServer

STEP_TIMEOUT = 120.0


@dataclass(slots=True)
class StepResult:
    """One line of the final summary."""

    name: str
    ok: bool
    seconds: float
    note: str = ""


class Story:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.results: list[StepResult] = []
        self._streaming = False

    def say(self, text: str = "", end: str = "\n") -> None:
        if self._streaming and end == "\n":
            self.out.write("\n")
            self._streaming = False
        self.out.write(text + end)
        self.out.flush()

    def stream(self, text: str) -> None:
        if not self._streaming:
            self.out.write("   codex: ")
            self._streaming = True
        self.out.write(text)
        self.out.flush()

    def step(self, name: str, body: Callable[[], str]) -> None:
        self.say(f"\n== {name}")
        started = time.monotonic()
        try:
            note = body()
            ok = True
        except Exception as exc:  # a failed step is reported; the story goes on
            note = f"{type(exc).__name__}: {exc}"
            ok = False
            self.say(f"   FAILED: {note}")
        if self._streaming:
            self.say()
        self.results.append(StepResult(name, ok, time.monotonic() - started, note))


def thread_of(hermes_home: Path, session_id: str) -> str | None:
    """The codex thread bound to a Hermes session in ``state.db``."""
    with sqlite3.connect(hermes_home / "state.db") as db:
        row = db.execute("SELECT model_config FROM sessions WHERE id = ?",
                         (session_id,)).fetchone()
    return json.loads(row[0]).get("codex_thread_id") if row and row[0] else None


def compared(report: dict[str, Any]) -> str:
    """What the replay's report shows against the original, in one line — and an error when it
    shows nothing to compare (a demo replay that changed nothing would teach nothing)."""
    [variant] = report["variants"]
    turns = variant["turns"]
    changed = sum(1 for t in turns if t["similarity"] < 1.0)
    commands = [_command(c) for t in turns for c in t["tool_calls"]]
    originals = [_command(c) for t in turns for c in t["original_tool_calls"]]
    files = [f"{f['status']} {f['path']}" for f in variant["changes"]["files"]]
    if not changed or not commands or not files:
        raise RuntimeError(f"the replay shows no difference to compare: {changed} answer(s) "
                           f"changed, tool calls {commands}, files {files}")
    return (f"{changed} of {len(turns)} answers differ; its tool calls: {'; '.join(commands)} "
            f"(the original's: {'; '.join(originals) or 'none'}); its working copy: "
            f"{', '.join(files)}")


def _command(call: dict[str, Any]) -> str:
    """The command line of a shell tool call, else the tool's name."""
    try:
        arguments = json.loads(call.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    command = arguments.get("cmd") or arguments.get("command") if isinstance(
        arguments, dict) else None
    if not command:
        return str(call.get("name") or "?")
    try:
        words = shlex.split(str(command))
    except ValueError:
        return str(command)
    # codex records a shell's command line as `/bin/bash -c '…'`: the line is the '…'
    return words[2] if len(words) == 3 and words[1] in ("-c", "-lc") else str(command)


def play(story: Story, hermes_home: Path, project: Path, codex_home: Path,
         provider: mp.MockResponsesProvider | None, fallback: ChatCompletionsServer | None,
         live: bool) -> None:
    """Play the story (see :mod:`.demo`); Hermes is imported here, first."""
    import run_agent  # Hermes discovers the plugin here, from config.yaml + its entry point
    from hermes_cli.fallback_config import get_fallback_chain
    from hermes_cli.runtime_provider import resolve_runtime_provider
    from hermes_state import SessionDB
    from tools.terminal_tool import set_approval_callback

    from hermes_codex_runtime.hermes.registrations import REGISTRATIONS

    story.say(f"   Hermes loaded the plugin from its entry point: {bool(REGISTRATIONS)}")

    def progress(event: str, name: str, preview: Any = None, args: Any = None,
                 **kwargs: Any) -> None:
        if event == "tool.started":
            story.say(f"   [tool] {name}: {preview or ''}")
        elif event == "tool.completed":
            result = str(kwargs.get("result") or "").strip().replace("\n", " | ")
            story.say(f"   [done] {name}: {result[:100]}")

    def approve(command: str, description: str, **kwargs: Any) -> str:
        story.say(f"   ? Hermes asks: {command}")
        for line in description.splitlines():
            story.say(f"       {line}")
        story.say("   > once")
        return "once"

    runtime = resolve_runtime_provider(requested="openai-codex")  # as `hermes chat` does
    story.say(f"   resolved runtime: provider {runtime['provider']}, api_mode "
              f"{runtime['api_mode']} (no Hermes-side codex login needed)")
    # the toolsets `hermes chat` gives its agent: the session's codex thread then carries on in
    # the `hermes chat` processes of steps 5 (a thread keeps the tools it started with)
    toolsets = cli_toolsets()
    # a person at the prompt, as Hermes' CLI declares it before it builds its agent (its tools
    # depend on it: cronjob is offered to an interactive session)
    os.environ["HERMES_INTERACTIVE"] = "1"
    agent = run_agent.AIAgent(
        model="mock-model", provider=runtime["provider"], api_mode=runtime["api_mode"],
        api_key=runtime["api_key"], base_url=runtime["base_url"], platform="cli",
        enabled_toolsets=toolsets, quiet_mode=True, skip_context_files=True, skip_memory=True,
        session_db=SessionDB(),
        fallback_model=get_fallback_chain(yaml.safe_load(
            (hermes_home / "config.yaml").read_text())),
        tool_progress_callback=progress, stream_delta_callback=story.stream)
    agent.session_cwd = str(project)
    set_approval_callback(approve)
    history: list[dict[str, Any]] = []

    def turn(text: str) -> dict[str, Any]:
        story.say(f"   you: {text}")
        result = agent.run_conversation(text, conversation_history=list(history))
        history[:] = [{k: v for k, v in m.items() if not k.startswith("_")}
                      for m in result["messages"]]
        if not result.get("completed"):
            raise RuntimeError(result.get("final_response") or result.get("error"))
        return dict(result)

    def ask() -> str:
        if provider is not None:
            provider.enqueue(mp.text("Hello! I'm codex, answering inside Hermes. Your favourite "
                                     "colour, TEAL, is noted.", deltas=12,
                                     usage=mp.Usage(input=80, cached=20, output=25, reasoning=5,
                                                    reported_total=130)))
        result = turn("Hello! My favourite colour is TEAL.")
        return f"{len(result['final_response'])} chars streamed, thread " \
               f"…{result['codex_thread_id'][-8:]}"

    story.step("1. a question answered with a streamed reply", ask)
    if live:
        agent.close()
        return
    assert provider is not None and fallback is not None

    def command() -> str:
        provider.enqueue(mp.exec_command("echo the answer is $((6*7))", escalated=True,
                                         justification="you asked me to run it"),
                         mp.text("The command printed: the answer is 42.", deltas=6))
        turn("Run a shell command for me.")
        outputs = [json.dumps(r["input"][-1]) for r in provider.requests
                   if r["input"] and r["input"][-1].get("type") == "function_call_output"]
        if not outputs or "the answer is 42" not in outputs[-1]:  # what the command printed
            raise RuntimeError("the command did not run (its output never reached the model)")
        return "asked, approved once, output used"

    def file_change() -> str:
        provider.enqueue(mp.apply_patch(mp.add_file_patch("hello.txt", ["Hello from codex!",
                                                                         "Second line."])),
                         mp.text("I created hello.txt.", deltas=3))
        turn("Create hello.txt.")
        target = project / "hello.txt"
        if not target.exists():
            raise RuntimeError("hello.txt was not created")
        story.say(f"   hello.txt now holds: {target.read_text().splitlines()}")
        return "changeset shown, approved, file present"

    def tokens() -> str:
        compressor = agent.context_compressor
        story.say(f"   input {agent.session_prompt_tokens} (cached "
                  f"{agent.session_cache_read_tokens}, uncached {agent.session_input_tokens}), "
                  f"output {agent.session_output_tokens} (reasoning "
                  f"{agent.session_reasoning_tokens}), total {agent.session_total_tokens}, "
                  f"api calls {agent.session_api_calls}")
        window, last = compressor.context_length, compressor.last_prompt_tokens
        story.say(f"   context window: the last prompt used {last} of {window} tokens "
                  f"({100 * last / window:.2f}%)")
        if agent.session_cache_read_tokens != 20 or agent.session_prompt_tokens <= 0:
            raise RuntimeError("unexpected token accounting")
        return f"total {agent.session_total_tokens} tokens, cached counted once"

    story.step("2. a shell command that needs approval", command)
    story.step("3. a file change shown as a changeset", file_change)
    story.step("4. the token breakdown of the session", tokens)
    session_id = agent.session_id
    thread = thread_of(hermes_home, session_id)
    agent.close()  # the first process is done with codex: one writer per thread

    hermes_cli = str(Path(sys.executable).with_name("hermes"))

    def chat(question: str) -> str:
        proc = subprocess.run([hermes_cli, "chat", "-Q", "--resume", session_id, "-q", question],
                              env=dict(os.environ), capture_output=True, text=True,
                              timeout=STEP_TIMEOUT, stdin=subprocess.DEVNULL, cwd=str(project))
        if proc.returncode != 0:
            raise RuntimeError(f"hermes chat failed: {proc.stderr[-500:]}")
        answer = "\n".join(line for line in proc.stdout.strip().splitlines()
                           if not line.startswith("↪"))  # Hermes' "restored workspace" note
        story.say(f"   hermes chat --resume {session_id} -q {question!r}")
        story.say(f"   codex: {answer}")
        return answer

    def resume() -> str:
        provider.clear()
        provider.enqueue(mp.text("Your favourite colour is TEAL."))
        chat("What is my favourite colour?")
        same = thread_of(hermes_home, session_id)
        replayed = provider.saw_text("My favourite colour is TEAL.", role="user")
        story.say(f"   same codex thread: {same == thread} (…{str(same)[-8:]}); codex replayed "
                  f"the earlier turns itself: {replayed}")
        if same != thread or not replayed:
            raise RuntimeError("the second process did not resume the codex thread")
        return "resumed in a second process"

    def reseed() -> str:
        shutil.rmtree(codex_home / "sessions", ignore_errors=True)  # the stored thread is gone
        provider.clear()
        provider.enqueue(mp.text("From what we said before: TEAL."))
        chat("Remind me: what colour did I mention?")
        fresh = thread_of(hermes_home, session_id)
        seeded = provider.saw_text("My favourite colour is TEAL.", role="developer")
        story.say(f"   new codex thread: {fresh != thread} (…{str(fresh)[-8:]}); the model saw "
                  f"the history in its developer instructions: {seeded}")
        if fresh == thread or not seeded:
            raise RuntimeError("the third process did not start a seeded thread")
        return "fresh thread seeded with the history"

    story.step("5a. a second process resumes the same codex thread", resume)
    story.step("5b. a third process, whose thread is gone, starts fresh and seeded", reseed)

    def usage_limit() -> str:
        provider.enqueue(mp.usage_limit())
        again = run_agent.AIAgent(
            model="mock-model", provider=runtime["provider"], api_mode=runtime["api_mode"],
            api_key=runtime["api_key"], base_url=runtime["base_url"], platform="cli",
            enabled_toolsets=toolsets, quiet_mode=True, skip_context_files=True, skip_memory=True,
        session_db=SessionDB(),
            fallback_model=[{"provider": "custom", "model": "fallback-model",
                             "base_url": fallback.base_url, "api_key": "demo-key"}])
        try:
            story.say("   you: One more question, please.")
            result = again.run_conversation("One more question, please.")
        finally:
            again.close()
        story.say("   codex: usage limit reached -> Hermes' fallback provider")
        story.say(f"   fallback: {result['final_response']}")
        if not result.get("completed") or not fallback.chat_calls():
            raise RuntimeError("the fallback provider did not finish the turn")
        return "same turn completed on the fallback provider"

    story.step("6. a usage limit completes the same turn on a fallback provider", usage_limit)

    def replay() -> str:
        from hermes_codex_runtime.hermes.replay.context import replay_context
        from hermes_codex_runtime.offline.replay_script import agent as scripted
        from hermes_codex_runtime.replay.control import (
            RunRequest,
            create_run,
            describe_plan,
            prepare,
            run_view,
            spawn_runner,
        )

        provider.clear()
        provider.set_default(scripted)
        context = replay_context()
        transcript, plan = prepare(context, RunRequest(
            session_id, models=["mock-model-2"], baseline="empty", turns="1-3"))
        for line in describe_plan(transcript, plan, runs_dir=context.runs_dir).splitlines():
            story.say(f"   {line}")
        run = create_run(context, transcript, plan)
        spawn_runner(run)
        deadline = time.monotonic() + STEP_TIMEOUT
        view = run_view(context, run.id)
        while view["status"] not in ("completed", "failed", "cancelled", "interrupted"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replay did not finish in {STEP_TIMEOUT:g} s")
            time.sleep(0.3)
            view = run_view(context, run.id)
        for variant in view["variants"]:
            story.say(f"   {variant['name']}: {variant['status']}, {variant['turns_done']}/"
                      f"{variant['turns_total']} turns, {variant['tokens']} tokens")
        if view["status"] != "completed" or not view["report_html"]:
            raise RuntimeError(f"the replay ended {view['status']}: {view.get('error')}")
        differences = compared(json.loads((Path(view["run_dir"]) / "report.json").read_text()))
        story.say(f"   compared with the original: {differences}")
        # a name of its own, 0600, never a file (or a link) someone left at a fixed name
        fd, name = tempfile.mkstemp(prefix="hermes-codex-runtime-demo-replay-", suffix=".html")
        kept = Path(name)
        with os.fdopen(fd, "wb") as out, open(view["report_html"], "rb") as report:
            shutil.copyfileobj(report, out)
        story.say(f"   report: {kept}")
        return f"replayed on mock-model-2; HTML report at {kept}"

    story.step("7. the session replayed on a second model (Codex Replay)", replay)


def cli_toolsets() -> list[str] | None:
    """The toolsets Hermes' CLI enables for its agent on this config (``None``: Hermes'
    default, where this Hermes cannot say)."""
    from hermes_codex_runtime.hermes.symbols.probe import symbol

    platform_tools = symbol("hermes_cli.tools_config", "_get_platform_tools",
                            feature="the demo's agent gets the CLI's toolsets")
    load = symbol("hermes_cli.config", "load_config", feature="the demo's CLI toolsets")
    if not callable(platform_tools) or not callable(load):
        return None
    try:
        return sorted(platform_tools(load(), "cli"))
    except Exception:
        return None
