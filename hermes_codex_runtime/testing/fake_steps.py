"""The fake app-server's turn steps: how :class:`~.fake_app_server.FakeAppServer` plays one
scripted turn (``message``, ``command``, ``file_change``, ``lost_completion``, … — the list is in
:mod:`.fake_app_server`'s docstring), as a mixin over the server's own notify/request methods.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from hermes_codex_runtime.wire.proctree import started

JsonObject = dict[str, Any]


class Interrupted(Exception):
    """The turn was interrupted (``turn/interrupt``, or a cancelled approval)."""


class TurnSteps:
    """Playing a turn's script; the server supplies notify, requests and the turn's state."""

    state: Path
    cwd: str
    active: tuple[str, str] | None
    _interrupt: threading.Event

    # what the server provides (:class:`~.fake_app_server.FakeAppServer`)
    def log(self, entry: JsonObject) -> None:
        raise NotImplementedError
    def send(self, message: JsonObject) -> None:
        raise NotImplementedError
    def notify(self, method: str, params: JsonObject) -> None:
        raise NotImplementedError
    def stderr(self, *lines: str) -> None:
        raise NotImplementedError
    def _write_raw(self, data: bytes) -> None:
        raise NotImplementedError
    def _check_outbound(self, message: JsonObject) -> None:
        raise NotImplementedError
    def _scope(self, thread_id: str, turn_id: str, **extra: Any) -> JsonObject:
        raise NotImplementedError
    def _now_ms(self) -> int:
        raise NotImplementedError
    def _record(self, thread_id: str, turn_id: str) -> JsonObject:
        raise NotImplementedError
    def _status(self, thread_id: str, kind: str) -> None:
        raise NotImplementedError
    def _item_started(self, thread_id: str, turn_id: str, item: JsonObject) -> None:
        raise NotImplementedError
    def _item_completed(self, thread_id: str, turn_id: str, item: JsonObject) -> None:
        raise NotImplementedError
    def _complete(self, thread_id: str, turn_id: str, status: str,
                  error: JsonObject | None = None) -> None:
        raise NotImplementedError
    def _lose_completion(self, thread_id: str, turn_id: str, spec: JsonObject) -> str:
        raise NotImplementedError
    def _register_request(self, request: JsonObject) -> JsonObject:
        raise NotImplementedError
    def _server_request(self, method: str, params: JsonObject, timeout: float) -> JsonObject:
        raise NotImplementedError

    def _check_interrupt(self) -> None:
        if self._interrupt.is_set():
            raise Interrupted

    def _run_turn(self, thread_id: str, turn_id: str, script: list[JsonObject]) -> None:
        self._record(thread_id, turn_id)
        self._status(thread_id, "active")
        self.notify("turn/started", {"threadId": thread_id,
                                     "turn": {"id": turn_id, "items": [],
                                              "status": "inProgress"}})
        ended = False
        try:
            for step in script:
                self._check_interrupt()
                outcome = self._step(thread_id, turn_id, step)
                if outcome == "ended":
                    ended = True
                    break
                if outcome == "silent_end":
                    self.active = None
                    return
            if not ended:
                self._complete(thread_id, turn_id, "completed")
        except Interrupted:
            self._complete(thread_id, turn_id, "interrupted")
        except Exception as exc:  # a bug in the fake must fail the test, not hang it
            self.log({"dir": "fake", "kind": "fake_error", "error": repr(exc)})
            self._complete(thread_id, turn_id, "failed", {"message": f"fake error: {exc!r}"})
        finally:
            if self.active == (thread_id, turn_id):
                self.active = None

    def _wait_interruptible(self, seconds: float) -> None:
        if self._interrupt.wait(seconds):
            raise Interrupted

    def _step(self, thread_id: str, turn_id: str, step: JsonObject) -> str | None:
        scope = (thread_id, turn_id)
        if "sleep" in step:
            self._wait_interruptible(float(step["sleep"]))
        if "stderr" in step:
            self.stderr(*step["stderr"])
        if "garbage" in step:
            self._write_raw(str(step["garbage"]).encode() + b"\n")
        if "partial_json" in step:
            self._write_raw(b'{"method":"item/agentMessage/delta","params":{"threadId"')
            self._write_raw(b"\n")
        if "message" in step or "partial" in step:
            text = str(step.get("message", step.get("partial", "")))
            item_id = step.get("id") or f"msg_{uuid.uuid4().hex[:8]}"
            self._item_started(*scope, {"type": "agentMessage", "id": item_id, "text": ""})
            for piece in _pieces(text, int(step.get("deltas", 1))):
                self._check_interrupt()
                self.notify("item/agentMessage/delta", self._scope(*scope, itemId=item_id,
                                                                   delta=piece))
                if step.get("delta_delay"):
                    self._wait_interruptible(float(step["delta_delay"]))
            if "message" in step:
                self._item_completed(*scope, {"type": "agentMessage", "id": item_id,
                                              "text": text})
        if "flood" in step:
            # Benchmarks: N deltas as fast as the pipe takes them. One is schema-checked; the rest
            # are the same bytes with a counter, written in large chunks.
            item_id = f"msg_{uuid.uuid4().hex[:8]}"
            piece = str(step.get("flood_delta", "tok "))
            self._item_started(*scope, {"type": "agentMessage", "id": item_id, "text": ""})
            self.notify("item/agentMessage/delta", self._scope(*scope, itemId=item_id,
                                                               delta=piece))
            count = int(step["flood"])
            line = json.dumps({"method": "item/agentMessage/delta",
                               "params": self._scope(*scope, itemId=item_id, delta=piece)})
            data = (line + "\n").encode()
            batch = data * 1000
            remaining = count - 1
            while remaining > 0:
                self._check_interrupt()
                n = min(1000, remaining)
                self._write_raw(batch if n == 1000 else data * n)
                remaining -= n
            self._item_completed(*scope, {"type": "agentMessage", "id": item_id,
                                          "text": piece * count})
        if "huge_delta" in step:
            item_id = f"msg_{uuid.uuid4().hex[:8]}"
            text = "x" * int(step["huge_delta"])
            self._item_started(*scope, {"type": "agentMessage", "id": item_id, "text": ""})
            self.notify("item/agentMessage/delta", self._scope(*scope, itemId=item_id,
                                                               delta=text))
            self._item_completed(*scope, {"type": "agentMessage", "id": item_id, "text": text})
        if "turn_aborted" in step:
            item_id = f"msg_{uuid.uuid4().hex[:8]}"
            self._item_started(*scope, {"type": "agentMessage", "id": item_id, "text": ""})
            self.notify("item/agentMessage/delta", self._scope(*scope, itemId=item_id,
                                                               delta="<turn_aborted>"))
            return "silent_end"
        if "reasoning" in step:
            item_id = f"rs_{uuid.uuid4().hex[:8]}"
            text = str(step["reasoning"])
            self._item_started(*scope, {"type": "reasoning", "id": item_id, "summary": [],
                                        "content": []})
            self.notify("item/reasoning/summaryTextDelta",
                        self._scope(*scope, itemId=item_id, delta=text, summaryIndex=0))
            self._item_completed(*scope, {"type": "reasoning", "id": item_id,
                                          "summary": [text], "content": []})
        if "command" in step:
            return self._command(scope, step)
        if "file_change" in step:
            return self._file_change(scope, step)
        if "permissions" in step:
            self._server_request("item/permissions/requestApproval", self._scope(
                *scope, itemId=f"perm_{uuid.uuid4().hex[:8]}", cwd=self.cwd,
                permissions=step["permissions"], reason="needs more access",
                startedAtMs=self._now_ms()), float(step.get("timeout", 60)))
        if "elicitation" in step:
            params = {"threadId": thread_id, "turnId": turn_id, "serverName": "fake",
                      "mode": "form", "message": str(step["elicitation"]),
                      "requestedSchema": {"type": "object", "properties": {}},
                      "_meta": step.get("meta")}
            self._server_request("mcpServer/elicitation/request", params,
                                 float(step.get("timeout", 60)))
        if "request" in step:
            request = step["request"]
            self._server_request(request["method"], request.get("params", {}),
                                 float(step.get("timeout", 60)))
        if "usage" in step:
            u = step["usage"]
            last = _breakdown(u)
            usage: JsonObject = {"last": last, "total": (step.get("total") and
                                 _breakdown(step["total"])) or last}
            if "window" in u:
                usage["modelContextWindow"] = u["window"]
            self.notify("thread/tokenUsage/updated", self._scope(*scope, tokenUsage=usage))
        if "notify" in step:  # any notification, scoped to this turn (schema-checked)
            note = step["notify"]
            self.notify(note["method"], self._scope(*scope, **note.get("params", {})))
        if "compaction" in step:
            item_id = f"cc_{uuid.uuid4().hex[:8]}"
            self._item_started(*scope, {"type": "contextCompaction", "id": item_id})
            self._item_completed(*scope, {"type": "contextCompaction", "id": item_id})
        if "error" in step:
            e = step["error"]
            self.notify("error", self._scope(*scope, willRetry=bool(e.get("will_retry")),
                                             error={"message": e.get("message", "error"),
                                                    "codexErrorInfo": e.get("info"),
                                                    "additionalDetails": e.get("details")}))
        if "complete_then_requests" in step:
            # turn/completed and server requests in ONE write (the client reads them in one
            # burst), then more requests ``later`` seconds after (between turns).
            spec = step["complete_then_requests"]
            turn = {"id": turn_id, "items": [], "status": "completed"}
            lines: list[JsonObject] = [{"method": "turn/completed",
                                        "params": {"threadId": thread_id, "turn": turn},
                                        "emittedAtMs": self._now_ms()}]
            lines += [self._register_request(r) for r in spec.get("now", ())]
            for message in lines:
                self._check_outbound(message)
            self._write_raw(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            later = spec.get("later", ())
            if later:
                def send_later() -> None:
                    time.sleep(float(spec.get("after", 0.3)))
                    for request in later:
                        self.send(self._register_request(request))

                threading.Thread(target=send_later, daemon=True).start()
            return "ended"
        if "lost_completion" in step:
            return self._lose_completion(thread_id, turn_id, dict(step["lost_completion"]))
        if "complete_twice" in step:
            self._complete(thread_id, turn_id, "completed")
            self._complete(thread_id, turn_id, "completed")  # a duplicated turn/completed
            return "ended"
        if "stderr_flood_mb" in step:
            flood_line = ("W" * 1023 + "\n").encode()
            chunk = flood_line * 1024  # 1 MiB
            for _ in range(int(step["stderr_flood_mb"])):
                sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.flush()
        if "fail" in step:
            f = step["fail"]
            self._complete(thread_id, turn_id, "failed", {
                "message": f.get("message", "failed"), "codexErrorInfo": f.get("info"),
                "additionalDetails": None})
            return "ended"
        if step.get("grandchild") in ("sandboxed", "sandboxed-launcher-stays"):
            start_sandboxed_helper(self.state,
                                   launcher_stays=step["grandchild"].endswith("stays"))
        elif "grandchild" in step:
            start_grandchild(self.state, own_session=step["grandchild"] != "helper")
        if "foreign" in step:
            other_thread = str(uuid.uuid4())
            other_turn = str(uuid.uuid4())
            item_id = f"msg_{uuid.uuid4().hex[:8]}"
            self._item_started(other_thread, other_turn, {"type": "agentMessage", "id": item_id,
                                                          "text": ""})
            self.notify("item/agentMessage/delta", self._scope(other_thread, other_turn,
                                                               itemId=item_id,
                                                               delta="FOREIGN"))
            self._complete(other_thread, other_turn, "completed")
            self._item_started(thread_id, other_turn, {"type": "agentMessage", "id": item_id,
                                                       "text": ""})
            self.notify("item/agentMessage/delta", self._scope(thread_id, other_turn,
                                                               itemId=item_id,
                                                               delta="OTHER-TURN"))
        if "crash" in step:
            self.stderr(*step.get("crash_stderr", []))
            sys.stdout.flush()
            os._exit(int(step["crash"]))
        if step.get("hang") or step.get("no_complete"):
            while not self._interrupt.wait(0.05):
                pass
            if step.get("no_complete"):
                self.active = None
                return "silent_end"
            raise Interrupted
        return None

    def _command(self, scope: tuple[str, str], step: JsonObject) -> str | None:
        item_id = step.get("id") or f"call_{uuid.uuid4().hex[:8]}"
        command = str(step["command"])
        item: JsonObject = {"type": "commandExecution", "id": item_id, "command": command,
                "cwd": self.cwd, "status": "inProgress", "commandActions": []}
        self._item_started(*scope, item)
        decision: Any = "accept"
        if step.get("approval"):
            reply = self._server_request("item/commandExecution/requestApproval", self._scope(
                *scope, itemId=item_id, command=command, cwd=self.cwd,
                reason=step.get("reason", "needs approval"), startedAtMs=self._now_ms()),
                float(step.get("timeout", 60)))
            decision = (reply.get("result") or {}).get("decision", "decline")
        if decision == "cancel":
            raise Interrupted
        done = dict(item)
        if decision in ("accept", "acceptForSession") or isinstance(decision, dict):
            output = str(step.get("output", ""))
            if output:
                self.notify("item/commandExecution/outputDelta",
                            self._scope(*scope, itemId=item_id, delta=output))
            done.update(status="completed", aggregatedOutput=output,
                        exitCode=int(step.get("exit_code", 0)))
        else:
            done.update(status="declined")
        self._item_completed(*scope, done)
        return None

    def _file_change(self, scope: tuple[str, str], step: JsonObject) -> str | None:
        item_id = step.get("id") or f"patch_{uuid.uuid4().hex[:8]}"
        change = step["file_change"]
        changes = [{"path": change.get("path", "f.txt"), "diff": change.get("diff", "+x\n"),
                    "kind": {"type": change.get("kind", "add")}}]
        item: JsonObject = {"type": "fileChange", "id": item_id, "changes": changes,
                            "status": "inProgress"}
        self._item_started(*scope, item)
        decision: Any = "accept"
        if step.get("approval", True):
            reply = self._server_request("item/fileChange/requestApproval", self._scope(
                *scope, itemId=item_id, reason=step.get("reason"), startedAtMs=self._now_ms()),
                float(step.get("timeout", 60)))
            decision = (reply.get("result") or {}).get("decision", "decline")
        if decision == "cancel":
            raise Interrupted
        done = dict(item)
        done["status"] = "completed" if decision in ("accept", "acceptForSession") else "declined"
        self._item_completed(*scope, done)
        return None


def _breakdown(u: JsonObject) -> JsonObject:
    inp = int(u.get("input", 0))
    out = int(u.get("output", 0))
    return {"inputTokens": inp, "cachedInputTokens": int(u.get("cached", 0)),
            "outputTokens": out, "reasoningOutputTokens": int(u.get("reasoning", 0)),
            "totalTokens": int(u.get("total", inp + out))}


def _pieces(text: str, count: int) -> list[str]:
    if count <= 1 or len(text) <= 1:
        return [text]
    count = min(count, len(text))
    size = -(-len(text) // count)
    return [text[i:i + size] for i in range(0, len(text), size)]


def start_grandchild(state: Path, *, own_session: bool) -> None:
    """Start a process that outlives the fake unless its client reaps it, recorded in
    ``grandchildren.txt``: in a session of its own (an MCP server), or — ``own_session`` false —
    in the fake's process group (a helper such as the sandbox's file-system helper)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        start_new_session=own_session, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    created = started(child.pid)
    with open(state / "grandchildren.txt", "a", encoding="utf-8") as fh:
        fh.write(f"{child.pid} {created!r}\n")


#: Starts the helper (``argv[2:]``) in a session of its own and prints its PID; then ends at
#: once, in a process group of its own (``argv[1]`` "gone"), or stays in the fake's ("stays").
_LAUNCHER = ("import os, subprocess, sys, time\n"
             "gone = sys.argv[1] == 'gone'\n"
             "if gone: os.setpgid(0, 0)\n"
             "print(subprocess.Popen(sys.argv[2:], start_new_session=True, "
             "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "
             "stderr=subprocess.DEVNULL).pid, flush=True)\n"
             "if not gone: time.sleep(600)\n")


def start_sandboxed_helper(state: Path, *, launcher_stays: bool) -> None:
    """What codex's sandbox starts: a launcher (``codex-linux-sandbox``, in codex's group) and
    the wrapper it runs in a session of its own (``bwrap … -- codex --codex-run-as-fs-helper``),
    which runs this very binary. The launcher either ends at once, in a group of its own — the
    wrapper is then an orphan of init in nobody's group — or stays, so that ending it orphans
    the wrapper. The wrapper is recorded in ``grandchildren.txt``."""
    binary = os.environ.get("FAKE_CODEX_BINARY", "")
    launcher = subprocess.Popen(
        [sys.executable, "-c", _LAUNCHER, "stays" if launcher_stays else "gone", sys.executable,
         "-c", "import time; time.sleep(600)", "--", binary, "--codex-run-as-fs-helper"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert launcher.stdout is not None
    pid = int(launcher.stdout.readline())
    if not launcher_stays:
        launcher.wait(30)
    created = started(pid)
    with open(state / "grandchildren.txt", "a", encoding="utf-8") as fh:
        fh.write(f"{pid} {created!r}\n")
