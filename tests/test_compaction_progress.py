"""A session that has outgrown its model's window, compacted on codex before the next turn
(``compression.codex_app_server_auto: hermes``): Hermes sees the compaction shrink the session
and the turn goes on from codex's summary — in the process that ran the session, and in a new
one that resumes its thread. Real Hermes ``AIAgent``, real codex, the mock provider."""

from __future__ import annotations

import json
from typing import Any

from hermes_env import base_config, write_config

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.usage import TokenUsage, UsageAccumulator

WINDOW = 64_000
#: ~69k tokens of lorem ipsum by Hermes' estimate: over a 64,000-token window
LOREM = ("lorem ipsum dolor sit amet " * 10300).strip()
WRITE = mp.Usage(input=11_000, cached=3_000, output=58_000)
#: what codex's compaction request costs: the whole thread, most of it from the cache
COMPACT = mp.Usage(input=70_000, cached=40_000, output=900)
ON = mp.Usage(input=9_000, cached=4_000, output=20)
SPENT = (WRITE, COMPACT, ON)


def last_user_text(body: dict[str, Any]) -> str:
    last = body["input"][-1]
    parts = last.get("content") if last.get("role") == "user" else None
    return " ".join(p.get("text", "") for p in parts or () if isinstance(p, dict))


def outgrown(body: dict[str, Any]) -> mp.Reply:
    """The session's turns; any other prompt is codex's compaction prompt."""
    said = last_user_text(body)
    if said == "write a lot":
        return mp.text(LOREM, usage=WRITE)
    if said == "and now?":
        return mp.text("Carrying on.", usage=ON)
    return mp.text("SUMMARY-OF-THE-LOREM", usage=COMPACT)


def configure(hermes) -> None:
    config = base_config(codex_home=str(hermes.codex_home), context_length=WINDOW)
    config["compression"] = {"enabled": True, "codex_app_server_auto": "hermes"}
    write_config(hermes.home, config)


def agent_on_the_configured_route(hermes, **overrides: Any):
    """An agent on the configured provider's route, so the window the user set is its own."""
    return hermes.agent(provider="openai-codex", base_url="https://chatgpt.com/backend-api/codex",
                        **overrides)


def went_on_from_the_summary(hermes) -> None:
    requests = hermes.provider.requests
    [compact] = [b for b in requests if last_user_text(b) not in ("write a lot", "and now?")]
    [after] = [b for b in requests if last_user_text(b) == "and now?"]
    assert "lorem ipsum" in json.dumps(compact["input"])  # codex summarised the thread
    assert requests.index(compact) < requests.index(after)  # before the turn went on
    sent = json.dumps(after["input"])
    assert "SUMMARY-OF-THE-LOREM" in sent and "lorem ipsum dolor" not in sent


def books_count_each_request_once(agent) -> None:
    """The session's row: the three requests, each once, cached tokens once (the compacted
    context Hermes books for the compaction is a share of what it cost, not more)."""
    row = agent._session_db.get_session(agent.session_id)
    assert (row["api_call_count"], row["input_tokens"], row["cache_read_tokens"],
            row["output_tokens"]) == (3, sum(u.input - u.cached for u in SPENT),
                                      sum(u.cached for u in SPENT), sum(u.output for u in SPENT))


def test_a_session_past_its_window_is_compacted_and_the_turn_goes_on(hermes):
    configure(hermes)
    hermes.provider.set_default(outgrown)
    agent = agent_on_the_configured_route(hermes)
    first = agent.run_conversation("write a lot")
    assert first["completed"], first.get("error")
    assert agent.context_compressor.context_length == WINDOW
    second = agent.run_conversation("and now?", conversation_history=first["messages"])
    assert second["final_response"] == "Carrying on.", second.get("error")
    went_on_from_the_summary(hermes)
    assert agent.context_compressor.compression_count == 1
    assert (agent.session_api_calls, agent.session_prompt_tokens,
            agent.session_cache_read_tokens, agent.session_input_tokens,
            agent.session_output_tokens) == (
        3, sum(u.input for u in SPENT), sum(u.cached for u in SPENT),
        sum(u.input - u.cached for u in SPENT), sum(u.output for u in SPENT))
    books_count_each_request_once(agent)


def test_a_resumed_session_past_its_window_is_compacted_and_the_turn_goes_on(hermes):
    configure(hermes)
    hermes.provider.set_default(outgrown)
    first_agent = agent_on_the_configured_route(hermes)
    first = first_agent.run_conversation("write a lot")
    assert first["completed"], first.get("error")
    first_agent.close()
    agent = agent_on_the_configured_route(hermes, session_id=first_agent.session_id)
    history = [{"role": m["role"], "content": m["content"]} for m in first["messages"]]
    second = agent.run_conversation("and now?", conversation_history=history)
    assert second["final_response"] == "Carrying on.", second.get("error")
    assert second["codex_thread_id"] == first["codex_thread_id"]
    went_on_from_the_summary(hermes)
    books_count_each_request_once(agent)


def _report(last: tuple[int, int, int, int], total: int) -> dict[str, Any]:
    inputs, cached, output, last_total = last
    return {"tokenUsage": {"last": {"inputTokens": inputs, "cachedInputTokens": cached,
                                    "outputTokens": output, "totalTokens": last_total},
                           "total": {"totalTokens": total}, "modelContextWindow": 190_000}}


def test_a_turn_that_compacts_first_counts_its_requests_once():
    """What codex 0.163 and 0.171 report for a turn that compacts its thread before it answers:
    the thread's usage restated, the compaction's request, the compacted context (its size as
    ``totalTokens`` alone), then the answer."""
    usage = UsageAccumulator()
    for last, total in (((9_000, 1_000, 10, 9_010), 9_010), ((9_100, 2_000, 50, 9_150), 18_160),
                        ((0, 0, 0, 10_753), 18_160), ((700, 100, 7, 707), 18_867)):
        usage.add(_report(last, total))
    report = usage.report()
    assert report is not None and report.responses == 2
    turn = report.turn
    assert (turn.prompt_tokens, turn.cached_tokens, turn.output_tokens, turn.total_tokens) == \
        (9_800, 2_100, 57, 9_857)
    assert report.context.prompt_tokens == 700
    compaction = UsageAccumulator()
    for last, total in (((9_000, 1_000, 10, 9_010), 9_010), ((9_100, 2_000, 50, 9_150), 18_160),
                        ((0, 0, 0, 10_753), 18_160)):
        compaction.add(_report(last, total))
    report = compaction.report()
    assert report is not None and report.responses == 1 and report.turn.prompt_tokens == 9_100
    assert report.context == TokenUsage(input_tokens=10_753, total_tokens=10_753)
