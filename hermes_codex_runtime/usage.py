"""Token usage, normalised once, in one place.

codex reports ``thread/tokenUsage/updated{tokenUsage{last, total, modelContextWindow}}`` once per
model response. Its ``inputTokens`` INCLUDES cached (and cache-write) tokens; the uncached share is
the difference. Double counting cached tokens is the most reported accounting bug in every host,
so nothing outside this module does arithmetic on raw breakdowns.

Not every report is a model response. When codex compacts a thread (``thread/compact/start``, or
on its own before a turn) it first restates the thread's usage as it stood, then reports the
compaction's request, then the compacted context: a ``last`` of ``totalTokens`` alone
(``inputTokens`` 0), the thread's ``total`` unchanged (codex 0.163 and 0.171 alike). A turn's
usage counts the responses only; the compacted context is what its prompt now holds.
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

    @property
    def is_compacted_context(self) -> bool:
        """True for codex's report of a compacted context: its size as ``totalTokens`` alone."""
        return not self.input_tokens and not self.output_tokens and self.total_tokens > 0

    def less(self, share: TokenUsage) -> TokenUsage:
        """This usage without ``share`` (a part of it booked elsewhere): never below 0, cached
        and cache-write tokens still inside input."""
        input_tokens = max(0, self.input_tokens - share.input_tokens)
        cached = min(max(0, self.cached_tokens - share.cached_tokens), input_tokens)
        return TokenUsage(
            input_tokens=input_tokens,
            cached_tokens=cached,
            cache_write_tokens=min(max(0, self.cache_write_tokens - share.cache_write_tokens),
                                   input_tokens - cached),
            output_tokens=max(0, self.output_tokens - share.output_tokens),
            reasoning_tokens=max(0, self.reasoning_tokens - share.reasoning_tokens),
            total_tokens=max(0, self.total_tokens - share.total_tokens),
        )

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
    def context(self) -> TokenUsage:
        """The thread's prompt as it stands: the last response's usage, or after a compaction
        the compacted context (uncached input: codex reports its size alone)."""
        last = self.last
        if last.is_compacted_context:
            return TokenUsage(input_tokens=last.total_tokens, total_tokens=last.total_tokens)
        return last

    @property
    def context_used_fraction(self) -> float | None:
        """How full the window is with the thread's prompt, 0..1 (``None`` without a window)."""
        if not self.context_window:
            return None
        return min(1.0, self.context.prompt_tokens / self.context_window)


class UsageAccumulator:
    """Folds the ``thread/tokenUsage/updated`` notifications of one turn into a report: a
    response is a report that advanced the thread's total; the first of a turn counts unless
    it is the restatement that opens a compaction (it is followed by the compaction's response,
    then the compacted context)."""

    __slots__ = ("_reports", "_window")

    def __init__(self) -> None:
        self._reports: list[tuple[TokenUsage, TokenUsage]] = []  # (last, total) in order
        self._window: int | None = None

    def add(self, params: Mapping[str, Any]) -> None:
        """Fold one notification's params in."""
        usage = params.get("tokenUsage")
        if not isinstance(usage, Mapping):
            return
        self._reports.append((TokenUsage.from_breakdown(usage.get("last")),
                              TokenUsage.from_breakdown(usage.get("total"))))
        window = usage.get("modelContextWindow")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            self._window = window

    def report(self) -> UsageReport | None:
        """The turn's report, or ``None`` when codex reported no usage."""
        if not self._reports:
            return None
        responses = [last for index, (last, _) in enumerate(self._reports)
                     if self._is_response(index)]
        last, total = self._reports[-1]
        return UsageReport(sum(responses, TokenUsage()), last, total, self._window,
                           len(responses))

    def _is_response(self, index: int) -> bool:
        if index:
            return self._advanced(index)
        reports = self._reports
        return not (len(reports) > 2 and self._advanced(1) and not self._advanced(2)
                    and reports[2][0].is_compacted_context)

    def _advanced(self, index: int) -> bool:
        """Whether the thread's total moved (a codex reporting none: every report counts)."""
        total = self._reports[index][1].total_tokens
        return not total or total != self._reports[index - 1][1].total_tokens
