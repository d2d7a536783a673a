"""Token usage, normalised once, in one place.

codex reports ``thread/tokenUsage/updated{tokenUsage{last, total, modelContextWindow}}`` once per
model response. Its ``inputTokens`` INCLUDES cached (and cache-write) tokens; the uncached share is
the difference. Double counting cached tokens is the most reported accounting bug in every host,
so nothing outside this module does arithmetic on raw breakdowns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value == value:  # not NaN
        return max(0, int(value))
    return 0


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """One usage breakdown; ``input_tokens`` includes cached and cache-write tokens."""

    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def from_breakdown(cls, breakdown: Mapping[str, Any] | None) -> TokenUsage:
        """Parse codex's ``TokenUsageBreakdown`` (missing or malformed fields count as 0)."""
        if not isinstance(breakdown, Mapping):
            return cls()
        input_tokens = _int(breakdown.get("inputTokens"))
        output_tokens = _int(breakdown.get("outputTokens"))
        cached = min(_int(breakdown.get("cachedInputTokens")), input_tokens)
        cache_write = min(_int(breakdown.get("cacheWriteInputTokens")), input_tokens - cached)
        total = _int(breakdown.get("totalTokens"))
        return cls(
            input_tokens=input_tokens,
            cached_tokens=cached,
            cache_write_tokens=cache_write,
            output_tokens=output_tokens,
            reasoning_tokens=_int(breakdown.get("reasoningOutputTokens")),
            # The provider's total is passed through; derive it only when codex sent none.
            total_tokens=total if total else input_tokens + output_tokens,
        )

    @property
    def uncached_input_tokens(self) -> int:
        """Input tokens that were neither read from nor written to the cache."""
        return self.input_tokens - self.cached_tokens - self.cache_write_tokens

    @property
    def prompt_tokens(self) -> int:
        """The whole prompt as chat-completions hosts count it (cached included, once)."""
        return self.input_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.total_tokens + other.total_tokens,
        )


@dataclass(frozen=True, slots=True)
class UsageReport:
    """What one turn used: ``turn`` sums the model responses of the turn (each ``last``);
    ``last`` is the final response's breakdown (the current prompt size); ``thread_total`` is
    codex's running total for the thread; ``context_window`` is the model's usable window."""

    turn: TokenUsage
    last: TokenUsage
    thread_total: TokenUsage
    context_window: int | None
    responses: int
    model: str | None = None  # the model codex ran (from thread/start or thread/resume)

    @property
    def context_used_fraction(self) -> float | None:
        """How full the window is with the last prompt, 0..1 (``None`` without a window)."""
        if not self.context_window:
            return None
        return min(1.0, self.last.prompt_tokens / self.context_window)


class UsageAccumulator:
    """Folds the ``thread/tokenUsage/updated`` notifications of one turn into a report."""

    __slots__ = ("_last", "_responses", "_total", "_turn", "_window")

    def __init__(self) -> None:
        self._turn = TokenUsage()
        self._last: TokenUsage | None = None
        self._total = TokenUsage()
        self._window: int | None = None
        self._responses = 0

    def add(self, params: Mapping[str, Any]) -> None:
        """Fold one notification's params in."""
        usage = params.get("tokenUsage")
        if not isinstance(usage, Mapping):
            return
        last = TokenUsage.from_breakdown(usage.get("last"))
        self._last = last
        self._turn = self._turn + last
        self._total = TokenUsage.from_breakdown(usage.get("total"))
        window = usage.get("modelContextWindow")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            self._window = window
        self._responses += 1

    def report(self) -> UsageReport | None:
        """The turn's report, or ``None`` when codex reported no usage."""
        if self._last is None:
            return None
        return UsageReport(self._turn, self._last, self._total, self._window, self._responses)
