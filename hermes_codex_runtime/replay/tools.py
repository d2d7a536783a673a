"""The replay operations as tools with JSON schemas — one table shared by the MCP server
(:mod:`.mcp`) and the web controller (:mod:`.controller`).

Starting a run takes two calls, so whoever starts one has seen what it will do:
``plan_replay`` returns the plan and a ``plan_token``; ``start_replay`` with the same arguments
and that token starts it. The token is an HMAC (with a secret of this server process) over the
request and a digest of the recorded session's turns, so a plan cannot be started with other
arguments, nor after the session changed, nor by another server.

A server that owns its runs (the web controller) answers only for the runs it started: a run
another server started is refused by every tool that names one (``get_run``, ``cancel_run``,
``get_report``) and left out of its list; the MCP server and the CLI see every run.

Every failure is a :class:`ToolError` with a message for the caller; a tool never raises anything
else for bad input.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from hermes_codex_runtime.replay.control import (
    ReplayContext,
    ReplayError,
    RunRequest,
    cancel_run,
    create_run,
    describe_plan,
    get_report,
    prepare,
    reconcile,
    run_view,
    spawn_runner,
)
from hermes_codex_runtime.replay.sources import SourceError, Transcript
from hermes_codex_runtime.replay.store import ACTIVE, StoreError

_RUN_ARGS: dict[str, Any] = {
    "source": {"type": "string", "description": "a session id of the host (or unique prefix), an "
                                                "export file path (FILE#ID), or a Claude Code "
                                                ".jsonl path"},
    "models": {"type": "array", "items": {"type": "string"}, "maxItems": 8,
               "description": "codex models, one variant each (default: the configured one)"},
    "effort": {"type": "string", "enum": ["none", "minimal", "low", "medium", "high", "xhigh"]},
    "turns": {"type": "string", "description": "which user turns: A-B, A-, N or A,B"},
    "mode": {"type": "string", "enum": ["turns", "single-prompt"]},
    "baseline": {"type": "string", "description": "HEAD, a commit, or empty"},
    "repo": {"type": "string"},
    "parallel": {"type": "integer", "minimum": 1, "maximum": 8},
    "budget_tokens": {"type": "integer", "minimum": 1},
    "network": {"type": "boolean"},
}
_RUN_ID = {"run_id": {"type": "string", "description": "a replay run id"}}


class ToolError(ValueError):
    """A tool call that cannot be done; the message is for the caller."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: its name, description, input schema and function."""

    name: str
    description: str
    schema: dict[str, Any]
    call: Callable[[dict[str, Any]], dict[str, Any]]

    def spec(self) -> dict[str, Any]:
        """The MCP ``tools/list`` entry."""
        return {"name": self.name, "description": self.description, "inputSchema": self.schema}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": False}


def _check(arguments: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """Validate ``arguments`` against a flat object schema of this module."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolError("arguments must be an object")
    properties = schema["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise ToolError(f"unknown argument(s): {', '.join(unknown)}")
    for name in schema["required"]:
        if name not in arguments:
            raise ToolError(f"missing argument: {name}")
    kinds = {"string": str, "integer": int, "boolean": bool, "array": list}
    for name, value in arguments.items():
        spec = properties[name]
        kind = kinds[spec["type"]]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ToolError(f"{name} must be a{'n' if spec['type'][0] in 'aei' else ''} "
                            f"{spec['type']}")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise ToolError(f"{name} must be a list of strings")
        if isinstance(value, int) and not spec.get("minimum", value) <= value <= spec.get(
                "maximum", value):
            raise ToolError(f"{name} must be between {spec.get('minimum', '…')} and "
                            f"{spec.get('maximum', '…')}")
        if "enum" in spec and value not in spec["enum"]:
            raise ToolError(f"{name} must be one of {', '.join(spec['enum'])}")
    return arguments


def _request(arguments: dict[str, Any]) -> RunRequest:
    values = {k: v for k, v in arguments.items() if k in _RUN_ARGS}
    values["models"] = list(values.get("models") or [])
    return RunRequest(**values)


def _digest(transcript: Transcript) -> str:
    body = json.dumps([[t.index, t.user_text] for t in transcript.turns], ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


class ReplayTools:
    """The tools of one server process (``controller`` names it as the owner of its runs)."""

    def __init__(self, context: ReplayContext, *, controller: str | None = None,
                 own_runs_only: bool = False) -> None:
        self.context = context
        self.controller = controller
        self.own_runs_only = own_runs_only
        #: The runs this server started.
        self.started: set[str] = set()
        self._secret = secrets.token_bytes(32)
        plan_schema = _object(_RUN_ARGS, ("source",))
        start_schema = _object({**_RUN_ARGS, "plan_token": {"type": "string"}},
                               ("source", "plan_token"))
        self.tools: dict[str, Tool] = {t.name: t for t in (
            Tool("list_sessions", "Recorded sessions that can be replayed (newest first).",
                 _object({"search": {"type": "string"},
                          "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                          "offset": {"type": "integer", "minimum": 0}}), self.list_sessions),
            Tool("plan_replay", "What a replay would do (source, turns, variants, baseline); "
                                "returns the plan_token start_replay needs.", plan_schema,
                 self.plan_replay),
            Tool("start_replay", "Start a planned replay (same arguments as plan_replay, plus "
                                 "its plan_token); returns the run id.", start_schema,
                 self.start_replay),
            Tool("get_run", "A run's status, per-variant progress and log tail.",
                 _object(_RUN_ID, ("run_id",)), self.get_run),
            Tool("cancel_run", "Cancel a run: it stops at once and its processes are killed.",
                 _object(_RUN_ID, ("run_id",)), self.cancel_run),
            Tool("get_report", "A finished run's report: the parsed JSON, or with format "
                               "json|html the file's content.",
                 _object({**_RUN_ID, "format": {"type": "string", "enum": ["json", "html"]}},
                         ("run_id",)), self.get_report),
        )}

    def call(self, name: Any, arguments: Any) -> dict[str, Any]:
        """Run tool ``name``; :class:`ToolError` for anything the caller got wrong."""
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise ToolError(f"unknown tool {name!r}")
        checked = _check(arguments, tool.schema)
        try:
            return tool.call(checked)
        except (ReplayError, SourceError, StoreError) as exc:
            raise ToolError(str(exc)) from exc

    # ------------------------------------------------------------------ tools

    def list_sessions(self, args: dict[str, Any]) -> dict[str, Any]:
        """One page of sessions."""
        return self.context.sources.list(args.get("search"),
                             int(args.get("limit", 20)), int(args.get("offset", 0)))

    def _token(self, request: RunRequest, transcript: Transcript) -> str:
        material = json.dumps([asdict(request), _digest(transcript)], sort_keys=True)
        return hmac.new(self._secret, material.encode(), hashlib.sha256).hexdigest()

    def plan_replay(self, args: dict[str, Any]) -> dict[str, Any]:
        """The plan, in words and as data, and its token."""
        request = _request(args)
        transcript, plan = prepare(self.context, request)
        return {"plan": plan.to_json(),
                "description": describe_plan(transcript, plan, runs_dir=self.context.runs_dir),
                "source": {"kind": transcript.kind, "ref": transcript.ref,
                           "title": transcript.title, "turns": len(transcript.turns)},
                "plan_token": self._token(request, transcript)}

    def start_replay(self, args: dict[str, Any]) -> dict[str, Any]:
        """Start the planned run."""
        token = args.pop("plan_token")
        request = _request(args)
        transcript, plan = prepare(self.context, request)
        if not hmac.compare_digest(token, self._token(request, transcript)):
            raise ToolError("plan_token does not match these arguments (or the session changed "
                            "since): call plan_replay again")
        run = create_run(self.context, transcript, plan, controller=self.controller)
        self.started.add(run.id)
        spawn_runner(run)
        return {"run_id": run.id, "status": "pending", "run_dir": str(run.dir)}

    def _owned(self, run_id: Any) -> None:
        """For a server that owns its runs: refuse a run another one started (one rule for
        every tool that names a run, and so for every page and file of the controller)."""
        if not self.own_runs_only:
            return
        state = self.context.store.run(run_id).state()
        if state.get("controller") != self.controller:
            raise ToolError(f"run {run_id} belongs to another controller (every run is shown "
                            f"by `hermes-codex-runtime replay show {run_id}`)")

    def get_run(self, args: dict[str, Any]) -> dict[str, Any]:
        """A run's progress."""
        self._owned(args["run_id"])
        return run_view(self.context, args["run_id"])

    def cancel_run(self, args: dict[str, Any]) -> dict[str, Any]:
        """Cancel a run (own runs only, for a controller)."""
        self._owned(args["run_id"])
        return cancel_run(self.context, args["run_id"])

    def get_report(self, args: dict[str, Any]) -> dict[str, Any]:
        """The report or one of its files."""
        self._owned(args["run_id"])
        return get_report(self.context, args["run_id"], args.get("format"))

    # ------------------------------------------------------------------ for the controller

    def recent_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """This controller's runs (all runs when it does not own runs), newest first."""
        reconcile(self.context)
        out = []
        for run in self.context.store.runs():
            try:
                state = run.state()
            except StoreError:
                continue
            if self.own_runs_only and state.get("controller") != self.controller:
                continue
            out.append({"run_id": run.id, "status": state.get("status"),
                        "source": state.get("source"),
                        "variants": sorted(state.get("variants") or {})})
            if len(out) >= limit:
                break
        return out

    def active_runs(self) -> int:
        """How many of this controller's runs are pending or running."""
        return sum(1 for r in self.recent_runs(1000) if r["status"] in ACTIVE)
