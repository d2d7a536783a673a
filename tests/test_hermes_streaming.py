"""What a Hermes user sees while codex works: every streamed character reaches the display, even
when the display lags far behind codex."""

from __future__ import annotations

import time

from hermes_codex_runtime.testing import mock_provider as mp


def test_a_50000_delta_flood_reaches_the_stream_callback_whole(hermes):
    agent = hermes.agent()
    text = "".join(f"w{i} " for i in range(50_000))
    hermes.provider.enqueue(mp.text(text, deltas=50_000))
    shown: list[str] = []

    def lagging_display(delta):
        if not shown:
            time.sleep(2.0)  # a slow terminal or chat edit: codex runs far ahead meanwhile
        shown.append(delta)

    result = agent.run_conversation("flood me", stream_callback=lagging_display)
    assert result["final_response"] == text
    delivered = "".join(shown)
    assert len(delivered) == len(text) and delivered == text
    print(f"\n{len(text):,} characters in 50,000 deltas: {len(shown)} display calls, "
          f"{len(delivered):,} characters delivered")
