"""The optional blind review (``--judge MODEL``): for each completed variant, a codex thread
compares the original with the replay without knowing which is which.

The two candidates are anonymised as A and B (a coin flip per variant, recorded in the state,
never shown to the reviewer): each is the replayed user turns with that side's answers and tool
names, in the same shape (the replay's file changes are left out: the original's are not
recorded, and a field only one side has would give the sides away). They are copied as
``candidate-a.json`` and ``candidate-b.json`` into an empty review workspace under the run
directory; the reviewer runs read-only in it, with no approvals and no network, answers a fixed
rubric as JSON, and the workspace is removed afterwards. Each check is Pass (1), Fail (0) or
N/A (null) per candidate; a ballot that is not valid JSON for the rubric is recorded as
``invalid`` with the reason, never guessed at.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hermes_codex_runtime.pool import ServerPool
from hermes_codex_runtime.replay.sources import Transcript
from hermes_codex_runtime.replay.store import Run
from hermes_codex_runtime.session import CodexSession
from hermes_codex_runtime.values import SessionSettings

#: The rubric: check id → what it asks. Fixed, so ballots compare across runs.
CHECKS: dict[str, str] = {
    "answers_the_request": "Answers what the user asked in each turn",
    "correct": "No factual or technical error is visible",
    "complete": "Does every step the user asked for",
    "changes_only_what_was_asked": "Changes on disk only what the user asked for",
    "concise": "No needless text or tool calls",
}
MARKER = "BLIND REVIEW"
MAX_CANDIDATE = 200_000  # characters of one candidate's JSON in the prompt


def candidate(transcript: Transcript, records: list[dict[str, Any]] | None,
              turns: list[int]) -> dict[str, Any]:
    """One side of the comparison, in the same shape for both sides (so the shape gives
    nothing away): the original (``records`` None) or a replay, on the replayed ``turns``. The
    files changed are left out — the host does not record the original's."""
    out = []
    if records is None:
        for turn in transcript.turns:
            if turn.index in turns:
                out.append({"user": turn.user_text, "answer": turn.original_text,
                            "tools": [c["name"] for c in turn.tool_calls]})
    else:
        for record in records:
            out.append({"user": record.get("user_text", ""),
                        "answer": record.get("final_text", ""),
                        "tools": [c.get("name") for c in record.get("tool_calls") or []]})
    return {"turns": out}


def prompt(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """The reviewer's instructions with both candidates."""
    rubric = "\n".join(f'- "{key}": {text}' for key, text in CHECKS.items())
    return (
        f"{MARKER}. Two agents (A and B) worked on the same user turns; their transcripts are "
        "in candidate-a.json and candidate-b.json in the current directory and below. Judge "
        "them only on what they show. For each check give 1 (pass), 0 (fail) or null (not "
        "applicable) for each candidate. Answer with ONE JSON object and nothing else:\n"
        '{"checks": {"<check>": {"a": 1|0|null, "b": 1|0|null}, ...}, '
        '"verdict": "A"|"B"|"tie", "summary": "<one sentence>"}\n'
        f"Checks:\n{rubric}\n\n"
        f"candidate-a.json:\n{json.dumps(a, ensure_ascii=False)[:MAX_CANDIDATE]}\n\n"
        f"candidate-b.json:\n{json.dumps(b, ensure_ascii=False)[:MAX_CANDIDATE]}\n")


def parse_ballot(text: str) -> dict[str, Any]:
    """The ballot in a reviewer's answer; ``ValueError`` saying what is wrong."""
    match = re.search(r"\{.*\}", text or "", re.S)
    if not match:
        raise ValueError("the reviewer's answer has no JSON object")
    try:
        data = json.loads(match.group(0))
    except ValueError as exc:
        raise ValueError(f"the reviewer's JSON does not parse ({exc})") from None
    checks = data.get("checks") if isinstance(data, dict) else None
    if not isinstance(checks, dict) or set(checks) != set(CHECKS):
        raise ValueError(f"the ballot must answer exactly the checks {sorted(CHECKS)}")
    for key, marks in checks.items():
        if not isinstance(marks, dict) or set(marks) != {"a", "b"} or any(
                v not in (0, 1, None) or isinstance(v, bool) for v in marks.values()):
            raise ValueError(f"check {key} must be {{\"a\": 1|0|null, \"b\": 1|0|null}}")
    if data.get("verdict") not in ("A", "B", "tie"):
        raise ValueError('the verdict must be "A", "B" or "tie"')
    return dict(data)


def score(marks: list[int | None]) -> float | None:
    """The share of applicable checks passed."""
    applicable = [m for m in marks if m is not None]
    return round(sum(applicable) / len(applicable), 4) if applicable else None


def review(run: Run, *, variant: str, model: str, transcript: Transcript,
           records: list[dict[str, Any]], turns: list[int],
           settings: SessionSettings, pool: ServerPool) -> dict[str, Any]:
    """Review one variant against the original; the outcome as stored in the state."""
    original_is_a = secrets.randbelow(2) == 0
    original = candidate(transcript, None, turns)
    replayed = candidate(transcript, records, turns)
    a, b = (original, replayed) if original_is_a else (replayed, original)
    mapping = {"A": "original" if original_is_a else variant,
               "B": variant if original_is_a else "original"}
    workspace = run.dir / "review-workspaces" / variant
    shutil.rmtree(workspace, ignore_errors=True)
    workspace.mkdir(parents=True)
    (workspace / "candidate-a.json").write_text(json.dumps(a, ensure_ascii=False, indent=1))
    (workspace / "candidate-b.json").write_text(json.dumps(b, ensure_ascii=False, indent=1))
    outcome: dict[str, Any] = {"model": model, "candidate_mapping": mapping}
    session = CodexSession(_reviewer(settings, workspace, model), pool=pool,
                           developer_instructions="You are a careful, impartial reviewer.")
    try:
        result = session.run_turn(prompt(a, b))
    finally:
        session.close()
        with contextlib.suppress(OSError):
            shutil.rmtree(workspace)
            if not any((run.dir / "review-workspaces").iterdir()):
                (run.dir / "review-workspaces").rmdir()
    if not result.ok:
        return {**outcome, "status": "failed", "error": result.error or "the review failed"}
    try:
        ballot = parse_ballot(result.final_text)
    except ValueError as exc:
        return {**outcome, "status": "invalid", "error": str(exc)}
    checks = [{"id": key, "label": label, "a": ballot["checks"][key]["a"],
               "b": ballot["checks"][key]["b"]} for key, label in CHECKS.items()]
    verdict = ballot["verdict"]
    return {**outcome, "status": "completed", "checks": checks, "verdict": verdict,
            "winner": "tie" if verdict == "tie" else mapping[verdict],
            "scores": {mapping["A"]: score([c["a"] for c in checks]),
                       mapping["B"]: score([c["b"] for c in checks])},
            "summary": str(ballot.get("summary") or "")[:500]}


def _reviewer(settings: SessionSettings, workspace: Path, model: str) -> SessionSettings:
    return SessionSettings(
        codex_bin=settings.codex_bin, codex_home=settings.codex_home, cwd=str(workspace),
        model=model, model_provider=settings.model_provider, effort="medium",
        approval_policy="never", approvals_reviewer="user", sandbox="read-only",
        config_overrides={"sandbox_workspace_write": {"network_access": False}},
        turn_timeout=settings.turn_timeout, registry_path=settings.registry_path,
        client_version="replay-review")
