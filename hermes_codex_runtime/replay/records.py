"""What one replayed turn's record holds, and which failures are worth another attempt.

A record (``variants/<name>/turns/NNN.json``) is made from codex's :class:`TurnResult` when the
runner saw the turn end (:func:`turn_record`), or from codex's own history of the thread when the
runner died during it (:func:`recovered_record`, from :func:`thread_turns`). A turn that came back
``interrupted`` says how to rerun just it (:func:`rerun_hint`). No I/O here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from hermes_codex_runtime.protocol import Failure, FailureKind
from hermes_codex_runtime.values import TurnResult

#: A saved turn with this status is never sent again (unless a rerun is asked for).
DONE = ("completed", "interrupted")


def rerun_hint(run_id: str) -> str:
    """The command that reruns a run's interrupted turns, each alone."""
    return f"hermes-codex-runtime replay resume {run_id} --retry-interrupted"


def retryable(failure: Failure | None) -> bool:
    """Whether a failed turn is worth a fresh attempt: what may pass without any change (rate
    limit, overload, the provider's service) and a lost app-server. A bad request, a login, a
    policy refusal or a timeout would only fail again."""
    return failure is not None and (failure.retryable or failure.kind is FailureKind.TRANSPORT)


def tool_calls_of(result: TurnResult) -> list[dict[str, str]]:
    """``[{name, arguments}]`` of the tools codex ran in a turn."""
    calls = []
    for message in result.messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name"):
                arguments = function.get("arguments")
                calls.append({"name": str(function["name"]),
                              "arguments": str(arguments)[:2000] if arguments else ""})
    return calls


def usage_of(result: TurnResult) -> dict[str, int]:
    """The five token buckets of a turn (input split once: ordinary + cache read + cache
    write), plus ``total``."""
    turn = result.usage.turn if result.usage else None
    if turn is None:
        return {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0, "reasoning": 0,
                "total": 0}
    return {"input": turn.uncached_input_tokens, "cache_read": turn.cached_tokens,
            "cache_write": turn.cache_write_tokens, "output": turn.output_tokens,
            "reasoning": turn.reasoning_tokens, "total": turn.total_tokens}


def thread_turns(thread: Mapping[str, Any]) -> list[dict[str, Any]]:
    """codex's turns of a thread that carry a user message: ``[{user, text, status, id}]``."""
    out = []
    for turn in thread.get("turns") or []:
        if not isinstance(turn, Mapping):
            continue
        user, answer = None, ""
        for item in turn.get("items") or []:
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "userMessage":
                parts = [str(c.get("text") or "") for c in item.get("content") or []
                         if isinstance(c, Mapping) and c.get("type") == "text"]
                user = "\n".join(parts)
            elif item.get("type") == "agentMessage" and item.get("text"):
                answer = str(item["text"])
        if user is not None:
            out.append({"user": user, "text": answer, "status": turn.get("status"),
                        "id": turn.get("id")})
    return out


def turn_record(index: int, prompt: str, result: TurnResult, started_at: float,
                finished_at: float) -> dict[str, Any]:
    """The record of a turn the runner saw end."""
    status = "completed" if result.ok else ("interrupted" if result.interrupted else
                                            "timed_out" if result.timed_out else "failed")
    return {"index": index, "user_text": prompt, "status": status,
            "final_text": result.final_text, "tool_calls": tool_calls_of(result),
            "usage": usage_of(result), "elapsed": round(finished_at - started_at, 3),
            "turn_id": result.turn_id, "thread_id": result.thread_id,
            "model": result.model, "error": result.error,
            "failure": result.failure.kind.value if result.failure else None,
            "recovered": False, "started_at": started_at, "finished_at": finished_at}


def recovered_record(index: int, prompt: str, found: Mapping[str, Any], *, thread_id: str | None,
                     model: str | None) -> dict[str, Any]:
    """The record of a turn that was in flight when the runner died, from codex's own history of
    the thread (``found``, one of :func:`thread_turns`)."""
    status = "completed" if found.get("status") == "completed" else "interrupted"
    return {"index": index, "user_text": prompt, "status": status,
            "final_text": found.get("text") or "", "tool_calls": [],
            "usage": usage_of(TurnResult()), "elapsed": 0.0, "turn_id": found.get("id"),
            "thread_id": thread_id, "model": model,
            "error": None if status == "completed" else
            "the runner stopped during this turn; recovered from codex's thread history",
            "recovered": True, "started_at": None, "finished_at": time.time()}
