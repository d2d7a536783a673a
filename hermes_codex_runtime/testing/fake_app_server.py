"""A fake ``codex app-server`` for faults the real binary cannot be made to produce.

Run as ``python -m hermes_codex_runtime.testing.fake_app_server app-server`` (the launcher written
by :class:`hermes_codex_runtime.testing.fake.FakeCodex` does this). It speaks newline-delimited
JSON-RPC on stdio like codex, and:

* validates every client request, notification and reply to its server requests against the
  schema the INSTALLED codex binary generates (``$FAKE_CODEX_SCHEMA``; once a client opted in
  with ``capabilities.experimentalApi``, the schema with codex's experimental API,
  ``$FAKE_CODEX_SCHEMA_EXPERIMENTAL``), rejecting what codex would reject with codex's error
  shape and recording fields codex would silently ignore;
* validates its own outbound messages against the same schema (``self_errors`` in the log), so the
  fake never teaches the client a shape codex does not send;
* plays scripted turns from ``$FAKE_CODEX_STATE/scenario.json`` and keeps state across processes
  (known threads, the position in the turn script, spawned grandchildren), so resume and
  cross-process tests work.

Turn steps (a list of one-key-ish objects per ``turn/start``): ``message``, ``partial``, ``flood``,
``reasoning``, ``command``, ``file_change``, ``permissions``, ``elicitation``, ``request``,
``usage``, ``error``, ``fail``, ``crash``, ``hang``, ``no_complete``, ``turn_aborted``,
``garbage``, ``huge_delta``, ``grandchild`` (in a session of its own; ``"helper"``: in the
fake's process group), ``foreign``, ``sleep``, ``stderr``, and
``lost_completion`` (codex records the turn completed and the thread goes idle, but its
``turn/completed`` comes ``after`` seconds, or never). Like codex, a turn's thread reports
``thread/status/changed`` active and idle around it, and ``thread/turns/list`` answers from the
turns the fake recorded. ``helper_at_eof`` in the scenario starts a helper in its process group
as its input closes (as codex may while it shuts down).
Standard library and the stdlib-only schema validator.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from hermes_codex_runtime.testing.fake_steps import Interrupted, TurnSteps, start_grandchild
from hermes_codex_runtime.testing.schema import ProtocolSchema, Verdict

JsonObject = dict[str, Any]


class FakeAppServer(TurnSteps):
    """The fake's state machine (its turns' steps: :class:`~.fake_steps.TurnSteps`). One
    instance per process."""

    def __init__(self, state_dir: Path, schema: ProtocolSchema | None,
                 experimental: ProtocolSchema | None = None) -> None:
        self.state = state_dir
        self.schema = schema
        self._experimental = experimental  # the schema once the client opts in
        self.scenario: JsonObject = self._read_json("scenario.json", {})
        self.version = str(self.scenario.get("version", "0.163.0"))
        self._out_lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._server_ids = itertools.count(0)
        self._waiting: dict[int, tuple[str, threading.Event, list[JsonObject]]] = {}
        self._waiting_lock = threading.Lock()
        self._overloaded: dict[str, int] = {}  # scenario "overload": {method: times}
        self.initialized = False
        self.opted_out: frozenset[str] = frozenset()  # initialize's optOutNotificationMethods
        self.active: tuple[str, str] | None = None  # (thread id, turn id)
        self._interrupt = threading.Event()
        self._turn_thread: threading.Thread | None = None
        self.cwd = os.getcwd()
        self._records: dict[str, list[JsonObject]] = {}  # thread id → its turns, oldest first

    # ------------------------------------------------------------------ persistence

    def _read_json(self, name: str, default: Any) -> Any:
        try:
            return json.loads((self.state / name).read_text())
        except (OSError, ValueError):
            return default

    def _write_json(self, name: str, value: Any) -> None:
        tmp = self.state / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(value))
        os.replace(tmp, self.state / name)

    def log(self, entry: JsonObject) -> None:
        entry = {"pid": os.getpid(), "t": time.time(), **entry}
        line = json.dumps(entry, default=str)
        with self._log_lock, open(self.state / "log.jsonl", "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def _known_threads(self) -> list[str]:
        return list(self._read_json("threads.json", []))

    def _add_thread(self, thread_id: str) -> None:
        threads = self._known_threads()
        if thread_id not in threads:
            threads.append(thread_id)
            self._write_json("threads.json", threads)

    def _next_turn_script(self) -> list[JsonObject]:
        turns = self.scenario.get("turns", [])
        counter = self._read_json("turn_counter.json", 0)
        self._write_json("turn_counter.json", counter + 1)
        if counter < len(turns):
            return list(turns[counter])
        return list(self.scenario.get("default_turn", [{"message": "ok"}]))

    # ------------------------------------------------------------------ output

    def _write_raw(self, data: bytes) -> None:
        with self._out_lock:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    def send(self, message: JsonObject) -> None:
        self._check_outbound(message)
        self._write_raw(json.dumps(message).encode() + b"\n")

    def notify(self, method: str, params: JsonObject) -> None:
        if method in self.opted_out:
            return  # as codex: a client that opted out never sees it
        self.send({"method": method, "params": params,
                   "emittedAtMs": int(time.time() * 1000)})

    def _check_outbound(self, message: JsonObject) -> None:
        if self.schema is None:
            return
        method = message.get("method")
        verdict: Verdict | None = None
        if isinstance(method, str) and "id" in message:
            verdict = self.schema.check_server_request(method, message.get("params"))
        elif isinstance(method, str):
            verdict = self.schema.check_server_notification(method, message.get("params"))
        elif "result" in message and isinstance(message.get("_method"), str):
            verdict = self.schema.check_response(message.pop("_method"), message["result"])
        message.pop("_method", None)
        if verdict is not None and not verdict.ok:
            self.log({"dir": "out", "method": method, "self_errors": verdict.errors})

    def reply(self, rid: Any, method: str, result: JsonObject) -> None:
        self.send({"id": rid, "result": result, "_method": method})

    def reply_error(self, rid: Any, code: int, message: str) -> None:
        self.send({"id": rid, "error": {"code": code, "message": message}})

    def stderr(self, *lines: str) -> None:
        for line in lines:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    # ------------------------------------------------------------------ input

    def serve(self) -> None:
        self.stderr(*self.scenario.get("stderr_at_start", []))
        for raw in sys.stdin.buffer:
            line = raw.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                self.log({"dir": "in", "kind": "garbage", "line": line[:200].decode("utf-8",
                                                                                    "replace")})
                continue
            if self.scenario.get("hang_process"):
                self.log({"dir": "in", "kind": "ignored_while_hung",
                          "method": message.get("method")})
                continue
            self.handle(message)
        self.log({"dir": "in", "kind": "eof"})
        if self.scenario.get("helper_at_eof"):  # as codex may start one while it shuts down
            start_grandchild(self.state, own_session=False)
        if self.scenario.get("ignore_eof"):
            while True:  # a wedged codex: only a signal ends it
                time.sleep(3600)

    def handle(self, message: JsonObject) -> None:
        method = message.get("method")
        if method is None and "id" in message:
            self._handle_reply(message)
            return
        if not isinstance(method, str):
            self.log({"dir": "in", "kind": "invalid", "message": message})
            return
        params = message.get("params")
        if "id" not in message:
            verdict = (self.schema.check_client_notification(method, params)
                       if self.schema else Verdict())
            self.log({"dir": "in", "kind": "notification", "method": method,
                      "errors": verdict.errors, "ignored": verdict.ignored})
            if method == "initialized":
                self.initialized = True
            return
        rid = message["id"]
        verdict = self.schema.check_client_request(method, params) if self.schema else Verdict()
        self.log({"dir": "in", "kind": "request", "method": method, "id": rid,
                  "params": params, "errors": verdict.errors, "ignored": verdict.ignored})
        if verdict.errors:
            self.reply_error(rid, -32600, f"Invalid request: {verdict.errors[0]}")
            return
        params = params or {}
        handler = getattr(self, "_on_" + method.replace("/", "_"), None)
        if method != "initialize" and not self.initialized and not self.scenario.get(
                "lenient_initialized"):
            self.reply_error(rid, -32600, "Not initialized")
            return
        if handler is None:
            self.reply_error(rid, -32600, f"Invalid request: unsupported method `{method}`")
            return
        overload = self.scenario.get("overload") or {}
        if overload.get(method, 0) > self._overloaded.get(method, 0):
            self._overloaded[method] = self._overloaded.get(method, 0) + 1
            self.reply_error(rid, -32001, "Server overloaded; retry later.")
            return
        handler(rid, params)

    def _handle_reply(self, message: JsonObject) -> None:
        rid = message.get("id")
        with self._waiting_lock:
            waiting = self._waiting.pop(rid, None) if isinstance(rid, int) else None
        if waiting is None:
            self.log({"dir": "in", "kind": "late_or_unknown_reply", "id": rid,
                      "message": message})
            return
        method, event, box = waiting
        errors: list[str] = []
        ignored: list[str] = []
        if "result" in message and self.schema is not None:
            known = method in self.schema.server_request_methods
            if known:
                verdict = self.schema.check_reply_to_server_request(method, message["result"])
                errors, ignored = verdict.errors, verdict.ignored
        self.log({"dir": "in", "kind": "reply", "method": method, "id": rid,
                  "result": message.get("result"), "error": message.get("error"),
                  "errors": errors, "ignored": ignored})
        box.append(message)
        event.set()

    # ------------------------------------------------------------------ requests

    def _on_initialize(self, rid: Any, params: JsonObject) -> None:
        mode = self.scenario.get("initialize", "ok")
        if mode == "hang":
            return
        if mode == "exit":
            self.stderr("Error: invalid configuration: unknown variant `bogus` (fake)")
            sys.stdout.flush()
            os._exit(1)
        # codex usually writes its config warnings before the reply, but not always
        late = bool(self.scenario.get("config_warnings_late"))
        if not late:
            self._config_warnings()
        name = params.get("clientInfo", {}).get("name", "client")
        self.opted_out = frozenset((params.get("capabilities") or {}).get(
            "optOutNotificationMethods") or ())
        if (params.get("capabilities") or {}).get("experimentalApi") and \
                self._experimental is not None:
            self.schema = self._experimental  # as codex: experimental fields are accepted now
        self.reply(rid, "initialize", {
            "userAgent": f"{name}/{self.version} (Linux; x86_64) fake",
            "codexHome": str(self.state),
            "platformFamily": "unix",
            "platformOs": "linux",
        })
        if late:
            time.sleep(0.2)
            self._config_warnings()

    def _config_warnings(self) -> None:
        for warning in self.scenario.get("config_warnings", []):
            self.notify("configWarning", {"summary": warning.get("summary", ""),
                                          "details": warning.get("details")})

    def _thread_object(self, thread_id: str) -> JsonObject:
        now = int(time.time())
        return {
            "id": thread_id, "sessionId": thread_id, "cliVersion": self.version,
            "createdAt": now, "updatedAt": now, "cwd": self.cwd, "ephemeral": False,
            "modelProvider": "mock", "preview": "", "projectId": None,
            "source": "appServer", "status": {"type": "idle"}, "turns": [],
        }

    def _thread_response(self, thread_id: str, params: JsonObject) -> JsonObject:
        return {
            "thread": self._thread_object(thread_id),
            "model": params.get("model") or "mock-model",
            "modelProvider": params.get("modelProvider") or "mock",
            "cwd": params.get("cwd") or self.cwd,
            "approvalPolicy": params.get("approvalPolicy") or "on-request",
            "approvalsReviewer": params.get("approvalsReviewer") or "user",
            "sandbox": {"type": "readOnly"},
        }

    def _on_thread_start(self, rid: Any, params: JsonObject) -> None:
        mode = self.scenario.get("thread_start")
        if mode == "hang":
            return
        if isinstance(mode, dict):  # {"error": message}: codex refuses the thread
            self.reply_error(rid, -32603, str(mode.get("error")))
            return
        thread_id = str(uuid.uuid4())
        if not params.get("ephemeral"):
            self._add_thread(thread_id)
        self.reply(rid, "thread/start", self._thread_response(thread_id, params))
        self.notify("thread/started", {"thread": self._thread_object(thread_id)})

    def _on_thread_resume(self, rid: Any, params: JsonObject) -> None:
        thread_id = params["threadId"]
        mode = self.scenario.get("resume", "ok")
        if mode == "hang":
            return
        if mode == "no_rollout" or (mode == "ok" and thread_id not in self._known_threads()):
            self.reply_error(rid, -32600, f"no rollout found for thread id {thread_id}")
            return
        answered = str(uuid.uuid4()) if mode == "other_id" else thread_id
        self.reply(rid, "thread/resume", self._thread_response(answered, params))

    def _on_turn_start(self, rid: Any, params: JsonObject) -> None:
        if self.active is not None:
            self.reply_error(rid, -32600, "a turn is already running on this thread")
            return
        thread_id = params["threadId"]
        turn_id = str(uuid.uuid4())
        self.active = (thread_id, turn_id)
        self._interrupt.clear()
        self.reply(rid, "turn/start", {"turn": {"id": turn_id, "items": [],
                                                 "status": "inProgress"}})
        script = self._next_turn_script()
        self._turn_thread = threading.Thread(target=self._run_turn,
                                             args=(thread_id, turn_id, script), daemon=True)
        self._turn_thread.start()

    def _on_turn_interrupt(self, rid: Any, params: JsonObject) -> None:
        if self.scenario.get("interrupt") == "hang":
            return
        if self.active is None or self.active[1] != params["turnId"]:
            self.reply_error(rid, -32600, "no active turn to interrupt")
            return
        self.reply(rid, "turn/interrupt", {})
        self._interrupt.set()

    def _on_turn_steer(self, rid: Any, params: JsonObject) -> None:
        if self.active is None or self.active[1] != params["expectedTurnId"]:
            self.reply_error(rid, -32600, "Invalid request")
            return
        self.reply(rid, "turn/steer", {"turnId": self.active[1]})

    def _on_thread_compact_start(self, rid: Any, params: JsonObject) -> None:
        thread_id = params["threadId"]
        self.reply(rid, "thread/compact/start", {})
        turn_id = str(uuid.uuid4())
        self.active = (thread_id, turn_id)
        self._interrupt.clear()
        script = list(self.scenario.get("compaction_turn", [{"compaction": True}]))
        self._turn_thread = threading.Thread(target=self._run_turn,
                                             args=(thread_id, turn_id, script), daemon=True)
        self._turn_thread.start()

    # ------------------------------------------------------------------ turns

    def _scope(self, thread_id: str, turn_id: str, **extra: Any) -> JsonObject:
        return {"threadId": thread_id, "turnId": turn_id, **extra}

    def _now_ms(self) -> int:
        return int(time.time() * 1000)

    def _item_started(self, thread_id: str, turn_id: str, item: JsonObject) -> None:
        self.notify("item/started", self._scope(thread_id, turn_id, item=item,
                                                startedAtMs=self._now_ms()))

    def _item_completed(self, thread_id: str, turn_id: str, item: JsonObject) -> None:
        self._record(thread_id, turn_id)["items"].append(item)
        self.notify("item/completed", self._scope(thread_id, turn_id, item=item,
                                                  completedAtMs=self._now_ms()))

    def _record(self, thread_id: str, turn_id: str) -> JsonObject:
        turns = self._records.setdefault(thread_id, [])
        if not turns or turns[-1]["id"] != turn_id:
            turns.append({"id": turn_id, "items": [], "status": "inProgress"})
        return turns[-1]

    def _status(self, thread_id: str, kind: str) -> None:
        status: JsonObject = {"type": kind}
        if kind == "active":
            status["activeFlags"] = []
        self.notify("thread/status/changed", {"threadId": thread_id, "status": status})

    def _complete(self, thread_id: str, turn_id: str, status: str,
                  error: JsonObject | None = None) -> None:
        turn: JsonObject = {"id": turn_id, "items": [], "status": status}
        if error is not None:
            turn["error"] = error
        self._record(thread_id, turn_id).update(status=status, error=error)
        self._status(thread_id, "idle")
        self.notify("turn/completed", {"threadId": thread_id, "turn": turn})

    def _lose_completion(self, thread_id: str, turn_id: str, spec: JsonObject) -> str:
        """codex's bug: the turn is over (recorded, the thread idle), no turn/completed yet.
        ``unsent``: items codex recorded without telling the client."""
        record = self._record(thread_id, turn_id)
        record["items"].extend(spec.get("unsent", ()))
        record["status"] = "completed"
        if spec.get("idle", True):
            self._status(thread_id, "idle")
        after = spec.get("after")
        if after is not None:
            def late() -> None:
                time.sleep(float(after))
                self.notify("turn/completed", {"threadId": thread_id, "turn": {
                    "id": turn_id, "items": [], "status": "completed"}})

            threading.Thread(target=late, daemon=True).start()
        return "silent_end"

    def _on_thread_turns_list(self, rid: Any, params: JsonObject) -> None:
        turns = list(reversed(self._records.get(params["threadId"], [])))
        if params.get("sortDirection") == "asc":
            turns.reverse()
        limit = params.get("limit")
        data = [dict(turn, itemsView=params.get("itemsView") or "summary")
                for turn in (turns[:int(limit)] if limit else turns)]
        self.reply(rid, "thread/turns/list", {"data": data, "nextCursor": None,
                                              "backwardsCursor": None})

    def _register_request(self, request: JsonObject) -> JsonObject:
        """A server request whose reply is recorded (logged as a reply) but not awaited."""
        rid = next(self._server_ids)
        with self._waiting_lock:
            self._waiting[rid] = (request["method"], threading.Event(), [])
        return {"id": rid, "method": request["method"], "params": request.get("params", {})}

    def _server_request(self, method: str, params: JsonObject, timeout: float) -> JsonObject:
        rid = next(self._server_ids)
        event = threading.Event()
        box: list[JsonObject] = []
        with self._waiting_lock:
            self._waiting[rid] = (method, event, box)
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while not event.wait(0.02):
            if self._interrupt.is_set():
                # Like codex: an interrupt does not cancel the pending request; the client must
                # drop its own prompt. A late answer is logged as late_or_unknown_reply.
                with self._waiting_lock:
                    self._waiting.pop(rid, None)
                self.log({"dir": "out", "kind": "request_abandoned", "id": rid,
                          "method": method})
                raise Interrupted
            if time.monotonic() > deadline:
                with self._waiting_lock:
                    self._waiting.pop(rid, None)
                return {}
        thread_id = params.get("threadId")
        if isinstance(thread_id, str):
            self.notify("serverRequest/resolved", {"threadId": thread_id, "requestId": rid})
        return box[0]

def main(argv: list[str] | None = None) -> int:
    """Entry point: ``--version`` or ``app-server``."""
    args = sys.argv[1:] if argv is None else argv
    state = Path(os.environ.get("FAKE_CODEX_STATE") or ".")
    scenario: JsonObject = {}
    with contextlib.suppress(OSError, ValueError):
        scenario = json.loads((state / "scenario.json").read_text())
    if args[:1] == ["--version"]:
        print(f"codex-cli {scenario.get('version', '0.163.0')}")
        return 0
    if args[:1] != ["app-server"]:
        print(f"fake codex: unsupported arguments {args}", file=sys.stderr)
        return 2
    if scenario.get("exit_at_start") is not None:
        print(scenario.get("exit_message", "Error: fake codex refused to start"),
              file=sys.stderr)
        return int(scenario["exit_at_start"])
    schema_dir = os.environ.get("FAKE_CODEX_SCHEMA")
    schema = ProtocolSchema(schema_dir) if schema_dir else None
    experimental_dir = os.environ.get("FAKE_CODEX_SCHEMA_EXPERIMENTAL")
    experimental = ProtocolSchema(experimental_dir) if experimental_dir and schema else None
    server = FakeAppServer(state, schema, experimental)
    server.log({"dir": "start", "argv": args, "env_keys": sorted(os.environ)})
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
