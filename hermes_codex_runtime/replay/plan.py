"""What a replay run is, fixed when it is created: the variants, the turns, the baseline.

Owns :class:`Plan` (stored as ``state["plan"]``), :class:`Variant`, the ``--turns`` syntax
(:func:`parse_turns`), where the variants run (the host's placement, stored as plain data:
:func:`placement_json`) and what each variant's working copy changed (:func:`variant_changes`).
The engine runs a plan; the report shows one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hermes_codex_runtime.pool import EndpointSpec, Placement, PoolLimits
from hermes_codex_runtime.replay.sources import Transcript
from hermes_codex_runtime.replay.store import Run
from hermes_codex_runtime.replay.workspace import Baseline, WorkspaceError, changes


@dataclass(frozen=True, slots=True)
class Variant:
    """One way of replaying: a codex model (``None``: codex's default) and a reasoning effort."""

    name: str
    model: str | None = None
    effort: str | None = None

    def describe(self) -> str:
        """One line for the plan."""
        return f"{self.name}: model {self.model or '(codex default)'}" + (
            f", effort {self.effort}" if self.effort else "")


@dataclass(slots=True)
class Plan:
    """Everything a runner needs, fixed when the run is created (``state["plan"]``)."""

    turns: list[int]  # 1-based indices into the transcript
    mode: str  # "turns" | "single-prompt"
    baseline: Baseline
    variants: list[Variant]
    parallel: int = 2
    budget_tokens: int | None = None
    network: bool = False
    judge: str | None = None
    codex_bin: str | None = None
    codex_home: str | None = None
    model_provider: str | None = None
    turn_timeout: float = 600.0
    registry_path: str | None = None
    #: Where the host's sessions run (:func:`placement_json`); ``None``: a shared local
    #: app-server.
    app_server: dict[str, Any] | None = None

    def placement(self) -> Placement | None:
        """The placement the variants' sessions get."""
        return placement_from_json(self.app_server)

    def describe_placement(self) -> str:
        """Where the variants run, for the plan."""
        placement = self.placement()
        if placement is None or placement.mode == "shared":
            return "one shared local codex app-server"
        if placement.mode == "per-session":
            return "a local codex app-server per variant"
        return "the remote codex app-server(s) " + ", ".join(
            spec.url for spec in placement.endpoints)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        data = asdict(self)
        data["baseline"] = self.baseline.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        """The inverse of :meth:`to_json`."""
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["baseline"] = Baseline.from_json(dict(data["baseline"]))
        values["variants"] = [Variant(**v) for v in data["variants"]]
        return cls(**values)

    def prompts(self, transcript: Transcript) -> list[tuple[int, str]]:
        """``(index, text)`` of each prompt to send: the chosen turns, or (single-prompt) one
        prompt that joins them."""
        chosen = [t for t in transcript.turns if t.index in set(self.turns)]
        if self.mode == "single-prompt":
            return [(1, "\n\n".join(t.user_text for t in chosen))]
        return [(t.index, t.user_text) for t in chosen]


def placement_json(placement: Placement | None) -> dict[str, Any] | None:
    """A placement as plain data for the plan (token files by path, never their tokens)."""
    if placement is None:
        return None
    return {"mode": placement.mode, "endpoints": [asdict(e) for e in placement.endpoints],
            "limits": asdict(placement.limits)}


def placement_from_json(data: Mapping[str, Any] | None) -> Placement | None:
    """The inverse of :func:`placement_json`."""
    if not data:
        return None
    fields = {f.name for f in dataclasses.fields(PoolLimits)}
    limits = PoolLimits(**{k: v for k, v in dict(data.get("limits") or {}).items()
                           if k in fields})
    endpoints = tuple(EndpointSpec(**{k: v for k, v in dict(e).items()
                                      if k in ("url", "token_file", "token_env")})
                      for e in data.get("endpoints") or [])
    return Placement(str(data.get("mode") or "shared"), endpoints=endpoints, limits=limits)


def parse_turns(spec: str | None, count: int) -> list[int]:
    """``A-B``, ``A-``, ``N`` or ``A,B,C`` (1-based) → the turn indices; ``None``: all."""
    if count < 1:
        raise ValueError("the session has no user turns to replay")
    if spec is None or not spec.strip():
        return list(range(1, count + 1))
    chosen: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        try:
            if "-" in part:
                low, _, high = part.partition("-")
                first = int(low) if low.strip() else 1
                last = int(high) if high.strip() else count
            else:
                first = last = int(part)
        except ValueError:
            raise ValueError(f"--turns takes A-B, A-, N or A,B (got {spec!r})") from None
        if not 1 <= first <= last <= count:
            raise ValueError(f"--turns {part} is outside 1-{count} (the session has {count} "
                             f"user turns)")
        chosen.update(range(first, last + 1))
    return sorted(chosen)


def variant_changes(run: Run, variants: Sequence[Variant]) -> dict[str, dict[str, Any]]:
    """What each variant's copy changed against the baseline."""
    out = {}
    for variant in variants:
        copy = run.dir / "workspaces" / variant.name
        try:
            out[variant.name] = changes(copy) if copy.exists() else {
                "files": [], "diff": "", "truncated": False}
        except WorkspaceError as exc:
            out[variant.name] = {"files": [], "diff": "", "truncated": False,
                                 "error": str(exc)}
    return out
