"""What a codex turn does to a real Hermes ``AIAgent`` (hermes-agent 0.19.0): each test builds a
real agent and runs real turns through the plugin on the real codex binary + mock provider."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time

import psutil
import pytest
from hermes_env import bind_session_key, unbind_session_key
from support import APP_SERVER_MODE

from hermes_codex_runtime.offline import provider as mp


def db_messages(agent):
    rows = agent._session_db.get_messages(agent.session_id)
    return [(row["role"], row["content"]) for row in rows]


def test_result_has_the_chat_shape_and_the_user_message_appears_once(hermes):
    hermes.provider.enqueue(mp.exec_command("echo hello-from-codex", escalated=True),
                            mp.text("It printed hello.", deltas=2))
    agent = hermes.agent()
    result = agent.run_conversation("say hello with the shell")
    assert result["completed"] is True and result["partial"] is False
    assert result["error"] is None and result["agent_persisted"] is True
    assert result["final_response"] == "It printed hello."
    assert result["codex_thread_id"] and result["codex_turn_id"]
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]  # the user message once
    assert result["messages"][1]["tool_calls"][0]["function"]["name"] == "exec_command"
    assert "hello-from-codex" in result["messages"][2]["content"]
    stored = db_messages(agent)
    assert [role for role, _ in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[0][1] == "say hello with the shell"


def test_token_accounting_counts_cached_tokens_once(hermes):
    hermes.provider.enqueue(mp.text("done", usage=mp.Usage(
        input=80, cached=20, output=25, reasoning=5, reported_total=130)))
    agent = hermes.agent()
    result = agent.run_conversation("hello")
    assert result["api_calls"] == 1
    assert (result["prompt_tokens"], result["input_tokens"], result["cache_read_tokens"]) == \
        (80, 60, 20)
    assert (result["completion_tokens"], result["reasoning_tokens"], result["total_tokens"]) == \
        (25, 5, 130)
    assert result["cache_write_tokens"] == 0 and result["last_prompt_tokens"] == 80
    assert agent.session_api_calls == 1
    assert (agent.session_prompt_tokens, agent.session_input_tokens,
            agent.session_cache_read_tokens) == (80, 60, 20)
    assert (agent.session_completion_tokens, agent.session_total_tokens,
            agent.session_reasoning_tokens) == (25, 130, 5)
    compressor = agent.context_compressor
    assert (compressor.last_prompt_tokens, compressor.last_completion_tokens,
            compressor.last_total_tokens) == (80, 25, 130)
    # the window Hermes pinned for this agent's route wins over codex's 190,000; the 0.22 line
    # pins model.context_length only for the configured provider's own route, which this
    # directly built agent is not on, so there codex's window is the one
    assert compressor.context_length == (agent._config_context_length or 190_000)
    row = agent._session_db.get_session(agent.session_id)
    assert row["input_tokens"] == 60 and row["cache_read_tokens"] == 20


def test_native_compaction_is_recorded_with_an_event(hermes):
    hermes.configure(codex_toml_extra="model_auto_compact_token_limit = 5000")
    events = []
    agent = hermes.agent(event_callback=lambda name, data: events.append((name, data)))
    hermes.provider.enqueue(mp.text("first", usage=mp.Usage(input=9000, output=10)),
                            mp.text("SUMMARY"), mp.text("second"))
    filled = agent.run_conversation("fill the context")
    before = agent.context_compressor.compression_count
    result = agent.run_conversation("and now?", conversation_history=filled["messages"])
    assert result["completed"] and result["final_response"] == "second"
    assert agent.context_compressor.compression_count == before + 1
    [(_name, data)] = [e for e in events if e[0] == "session:compress"]
    assert data["runtime"] == "codex_app_server" and data["in_place"] is False
    assert data["thread_id"] == result["codex_thread_id"]
    assert data["turn_id"] == result["codex_turn_id"]
    assert data["compression_count"] == before + 1


class _RecordingMemory:
    def __init__(self):
        self.synced = []

    def sync_all(self, user_content, assistant_content, **kwargs):
        self.synced.append((user_content, assistant_content, kwargs))

    def queue_prefetch_all(self, *args, **kwargs):
        pass

    def __getattr__(self, name):  # every other memory-manager call is a no-op here
        return lambda *a, **k: None



def interrupt_at_first_text(agent):
    """A stream callback that interrupts ``agent`` (from another thread, as a user would) once
    the answer has begun to stream: mid-turn, however long the turn took to start."""
    streaming = threading.Event()
    threading.Thread(target=lambda: streaming.wait(60) and agent.interrupt(),
                     daemon=True).start()
    return lambda *_args, **_kwargs: streaming.set()

def test_external_memory_syncs_completed_turns_only(hermes):
    agent = hermes.agent()
    memory = _RecordingMemory()
    agent._memory_manager = memory
    hermes.provider.enqueue(mp.text("remembered"))
    agent.run_conversation("remember this")
    [(user, assistant, kwargs)] = memory.synced
    assert (user, assistant) == ("remember this", "remembered")
    assert kwargs["session_id"] == agent.session_id
    assert [m["role"] for m in kwargs["messages"]] == ["user", "assistant"]

    hermes.provider.enqueue(mp.text("word " * 200, deltas=200, delta_delay=0.02))
    agent.stream_delta_callback = interrupt_at_first_text(agent)
    result = agent.run_conversation("talk for a long time")
    assert result["interrupted"] and result["partial"]
    assert len(memory.synced) == 1  # interrupted turns are not synced


def test_nudges_tick_and_the_background_review_fires_above_threshold(hermes):
    agent = hermes.agent()
    reviews = []
    agent._spawn_background_review = lambda **kwargs: reviews.append(kwargs)
    agent._skill_nudge_interval = 2
    agent.valid_tool_names = set(agent.valid_tool_names) | {"skill_manage"}
    hermes.provider.enqueue(mp.exec_command("echo one", escalated=True), mp.text("one"))
    first = agent.run_conversation("first")
    assert agent._iters_since_skill == 1 and reviews == []
    hermes.provider.enqueue(mp.exec_command("echo two", escalated=True), mp.text("two"))
    agent.run_conversation("second", conversation_history=first["messages"])
    [review] = reviews
    assert review["review_skills"] is True and review["review_memory"] is False
    assert agent._iters_since_skill == 0
    snapshot_roles = [m["role"] for m in review["messages_snapshot"]]
    assert snapshot_roles.count("user") == 2 and snapshot_roles[-1] == "assistant"


def test_with_a_hermes_credential_the_review_fork_keeps_hermes_own_route(hermes):
    agent = hermes.agent()  # api_key: a Hermes-side credential
    hermes.provider.enqueue(mp.text("ok"))
    agent.run_conversation("a codex turn wires the host")
    from agent.background_review import _resolve_review_runtime

    assert _resolve_review_runtime(agent)["api_mode"] == "codex_responses"


def _codex_only_agent(hermes, **overrides):
    """An AIAgent built the way Hermes builds one when only `codex login` was done."""
    from hermes_cli.runtime_provider import resolve_runtime_provider

    from hermes_codex_runtime.hermes.config.activation import PLACEHOLDER_KEY

    runtime = resolve_runtime_provider()
    assert runtime["api_key"] == PLACEHOLDER_KEY  # Hermes holds no credential of its own
    return hermes.agent(provider=runtime["provider"], api_mode=runtime["api_mode"],
                        base_url=runtime["base_url"], api_key=runtime["api_key"], **overrides)


def _codex_app_servers() -> list[psutil.Process]:
    out = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "app-server" in child.cmdline():
                out.append(child)
    return out


def test_the_background_review_runs_through_codex_with_a_codex_only_login(hermes):
    from hermes_env import write_config

    config = hermes.configure()
    config["memory"] = {"memory_enabled": True, "nudge_interval": 1}
    write_config(hermes.home, config)
    agent = _codex_only_agent(hermes, skip_memory=False)
    summaries: list[str] = []
    agent.background_review_callback = summaries.append
    hermes.provider.enqueue(
        mp.text("Noted: green tea."),
        # the review: codex calls Hermes' memory tool, then says what it did
        mp.tool_call("memory", {"action": "add", "target": "memory",
                                "content": "User always drinks green tea."}),
        mp.text("Saved the preference."))
    result = agent.run_conversation("I always drink green tea.")
    assert result["final_response"] == "Noted: green tea."
    reviews = [t for t in threading.enumerate() if t.name == "bg-review"]
    assert reviews, "Hermes did not start its background review"
    for thread in reviews:
        thread.join(90)
        assert not thread.is_alive()
    # The review really ran, on codex, and Hermes' own memory tool wrote the entry.
    assert len(hermes.provider.requests) == 3
    review_request = hermes.provider.requests[1]
    offered = {tool.get("name") for tool in review_request.get("tools", [])}
    assert {"memory", "skill_manage"} <= offered
    assert hermes.provider.saw_text("I always drink green tea.")  # the conversation, seeded
    memory = (hermes.home / "memories" / "MEMORY.md").read_text()
    assert "User always drinks green tea." in memory
    # Hermes' own summary line (0.22.2.post1 ships no locale catalog: there it is the raw key)
    assert summaries and ("Self-improvement review" in summaries[0]
                          or "display.review.summary_callback" in summaries[0])
    # The fork left the parent's session alone: nothing of the review in state.db, and the
    # parent's codex thread is still the one its next turn resumes.
    stored = agent._session_db.get_messages(agent.session_id)
    assert [row["role"] for row in stored] == ["user", "assistant"]
    assert len(_codex_app_servers()) == 1  # the review's own codex process was closed
    agent._memory_nudge_interval = 0  # no second review
    hermes.provider.enqueue(mp.text("still here"))
    again = agent.run_conversation("next", conversation_history=result["messages"])
    assert again["final_response"] == "still here"
    assert again["codex_thread_id"] == result["codex_thread_id"]
    assert not [t for t in threading.enumerate() if t.name == "bg-review"]


def test_host_hooks_fire_for_codex_turns(hermes):
    hermes.provider.enqueue(mp.text("hooked"))
    agent = hermes.agent()
    agent.run_conversation("hi hooks")
    hooks = hermes.hooks()
    names = [h["hook"] for h in hooks]
    assert "pre_llm_call" in names  # fired by Hermes itself before the hand-over
    [post] = [h for h in hooks if h["hook"] == "post_llm_call"]
    assert post["assistant_response"] == "hooked" and post["user_message"] == "hi hooks"
    assert post["session_id"] == agent.session_id
    [end] = [h for h in hooks if h["hook"] == "on_session_end"]
    assert end["completed"] is True and end["interrupted"] is False


def test_progress_reaches_the_agent_callbacks(hermes):
    progress, deltas = [], []
    hermes.provider.enqueue(mp.exec_command("echo progress", escalated=True),
                            mp.apply_patch(mp.add_file_patch("p.txt", ["x"])),
                            mp.text("done streaming", deltas=3))
    agent = hermes.agent(tool_progress_callback=lambda *a, **k: progress.append((a, k)),
                         stream_delta_callback=deltas.append)
    agent.run_conversation("show progress")
    started = [(a[1], a[2]) for a, _ in progress if a[0] == "tool.started"]
    assert started[0][0] == "exec_command" and "echo progress" in started[0][1]
    assert started[1][0] == "apply_patch" and started[1][1].endswith("p.txt")
    completed = [(a[1], k) for a, k in progress if a[0] == "tool.completed"]
    assert [name for name, _ in completed] == ["exec_command", "apply_patch"]
    assert "progress" in completed[0][1]["result"] and completed[0][1]["is_error"] is False
    assert "".join(deltas) == "done streaming"


def test_interrupt_and_close_reach_the_codex_session(hermes):
    import psutil

    hermes.configure(codex_app_server_grace=0)  # the process ends with its last session
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("word " * 300, deltas=300, delta_delay=0.02))
    agent.stream_delta_callback = interrupt_at_first_text(agent)
    started = time.monotonic()
    result = agent.run_conversation("go on and on")
    assert time.monotonic() - started < 8
    assert result["interrupted"] is True and result["completed"] is False
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

    session = shared_runtime().session_for(agent)
    pid = session.connection.pid
    assert psutil.pid_exists(pid)
    agent.close()
    assert shared_runtime().session_for(agent) is None
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_the_system_prompt_is_sent_as_developer_instructions(hermes):
    hermes.provider.enqueue(mp.text("ok"))
    agent = hermes.agent(ephemeral_system_prompt=None)
    agent.run_conversation("who are you?")
    prompt = agent._cached_system_prompt
    assert prompt
    developer = [t for r, t in hermes.provider.request_texts(0) if r == "developer"]
    assert any(prompt.strip()[:200] in t for t in developer)


def test_the_ephemeral_system_prompt_reaches_codex_once_and_a_changed_one_replaces_it(hermes):
    """An API client's system message becomes the agent's ephemeral system prompt, which Hermes'
    own loop adds to every call: on codex it rides in the developer instructions, once. The
    next request's agent (same session) with another one gets a fresh, seeded thread — codex
    would otherwise resume the thread with the instructions it started with."""
    hermes.provider.enqueue(mp.text("Arr."))
    first = hermes.agent(ephemeral_system_prompt="Talk like a pirate, PIRATE-11.")
    r1 = first.run_conversation("remember KIWI-5")
    developer = " ".join(t for r, t in hermes.provider.request_texts(0) if r == "developer")
    assert developer.count("PIRATE-11") == 1
    assert first._cached_system_prompt.strip()[:200] in developer
    history = [{"role": m["role"], "content": m["content"]} for m in r1["messages"]]

    hermes.provider.clear()
    hermes.provider.enqueue(mp.text("Indeed."))
    same = hermes.agent(session_id=first.session_id,
                        ephemeral_system_prompt="Talk like a pirate, PIRATE-11.")
    r2 = same.run_conversation("and now?", conversation_history=history)
    assert r2["codex_thread_id"] == r1["codex_thread_id"]  # same prompt: resumed

    hermes.provider.clear()
    hermes.provider.enqueue(mp.text("Certainly."))
    changed = hermes.agent(session_id=first.session_id,
                           ephemeral_system_prompt="Talk like a butler, BUTLER-12.")
    r3 = changed.run_conversation("what did I ask you to remember?",
                                  conversation_history=history)
    assert r3["completed"] and r3["codex_thread_id"] != r1["codex_thread_id"]
    developer = " ".join(t for r, t in hermes.provider.request_texts(0) if r == "developer")
    assert developer.count("BUTLER-12") == 1 and "PIRATE-11" not in developer
    assert "KIWI-5" in developer  # the conversation carried over in the seed


def test_a_context_plugins_recall_reaches_codex_with_the_users_message_once(hermes):
    """Hermes composes the turn's memory recall and ``pre_llm_call`` plugin context into the user
    message it sends; on codex the same text goes, once, and the transcript keeps the clean
    message."""
    hermes.provider.enqueue(mp.text("Teal it is."), mp.text("Noted."))
    agent = hermes.agent()
    result = agent.run_conversation("What is my favourite colour?")
    sent = [t for r, t in hermes.provider.request_texts(0) if r == "user"]
    assert sum(t.count("KIT-RECALL") for t in sent) == 1
    assert any("What is my favourite colour?" in t and "KIT-RECALL" in t for t in sent)
    [user] = [m for m in result["messages"] if m["role"] == "user"]
    assert user["content"] == "What is my favourite colour?"
    # a turn the plugin adds nothing to gets nothing stale
    agent.run_conversation("Thanks.", conversation_history=result["messages"])
    assert sum(t.count("KIT-RECALL") for r, t in hermes.provider.request_texts(1)) == 1


def test_an_agent_that_skips_the_background_review_starts_none(hermes):
    """Cron's agents say ``skip_background_review`` (on the 0.22 line): a codex turn that would
    nudge a review starts none."""
    from hermes_env import write_config

    config = hermes.configure()
    config["memory"] = {"memory_enabled": True, "nudge_interval": 1}
    write_config(hermes.home, config)
    agent = _codex_only_agent(hermes, skip_memory=False)
    agent.skip_background_review = True
    hermes.provider.enqueue(mp.text("Noted: green tea."))
    before = {t.ident for t in threading.enumerate() if t.name == "bg-review"}
    result = agent.run_conversation("I always drink green tea.")
    assert result["final_response"] == "Noted: green tea."
    assert {t.ident for t in threading.enumerate() if t.name == "bg-review"} <= before
    assert len(hermes.provider.requests) == 1  # no review request went to the model


def test_resume_in_a_new_agent_uses_the_stored_thread(hermes):
    hermes.provider.enqueue(mp.text("first answer"))
    first = hermes.agent()
    r1 = first.run_conversation("remember BLUE-7")
    session_id = first.session_id
    first.close()
    row = first._session_db.get_session(session_id)
    assert json.loads(row["model_config"])["codex_thread_id"] == r1["codex_thread_id"]
    hermes.provider.clear()
    hermes.provider.enqueue(mp.text("second answer"))
    history = [{"role": m["role"], "content": m["content"]} for m in r1["messages"]]
    second = hermes.agent(session_id=session_id)
    r2 = second.run_conversation("what did I say?", conversation_history=history)
    assert r2["codex_thread_id"] == r1["codex_thread_id"]
    texts = [t for _, t in hermes.provider.request_texts(0)]
    assert any("remember BLUE-7" in t for t in texts)  # codex's own history of the thread
    assert not any("already happened" in t for t in texts)  # ...not a seed


def test_an_unresumable_thread_is_replaced_by_a_seeded_one(hermes):
    agent = hermes.agent()
    from hermes_codex_runtime.bindings import ThreadBindings

    ThreadBindings(hermes.home / "codex-runtime" / "threads.json").set(
        agent.session_id, "00000000-0000-0000-0000-00000000dead")
    hermes.provider.enqueue(mp.text("fresh"))
    history = [{"role": "user", "content": "my code word is MANGO-3"},
               {"role": "assistant", "content": "noted"}]
    result = agent.run_conversation("code word?", conversation_history=history)
    assert result["completed"]
    assert result["codex_thread_id"] != "00000000-0000-0000-0000-00000000dead"
    assert hermes.provider.saw_text("MANGO-3", role="developer")


def test_hermes_compress_command_compacts_the_codex_thread(hermes):
    events = []
    agent = hermes.agent(event_callback=lambda name, data: events.append((name, data)))
    hermes.provider.enqueue(mp.text("some history"))
    result = agent.run_conversation("make some history")
    before = agent.context_compressor.compression_count
    hermes.provider.enqueue(mp.text("SUMMARY OF THE THREAD"))
    messages, _prompt = agent._compress_context(result["messages"], None, force=True)
    assert messages == result["messages"]  # codex owns the context; Hermes' mirror is kept
    assert agent.context_compressor.compression_count == before + 1
    [(_, data)] = [e for e in events if e[0] == "session:compress"]
    assert data["runtime"] == "codex_app_server" and data["thread_id"] == \
        result["codex_thread_id"]
    assert len(hermes.provider.requests) == 2  # codex asked the model for the summary


def test_compress_before_a_new_agents_first_turn_compacts_the_stored_thread(hermes):
    """A resumed process (or the gateway's throwaway compaction agent) compresses before its
    agent ran any codex turn: the stored thread is resumed and compacted, and the next turn
    goes on from codex's summary on the same thread."""
    hermes.provider.enqueue(mp.text("Noted PLUM-4."))
    first = hermes.agent()
    r1 = first.run_conversation("remember PLUM-4")
    first.close()
    history = [{"role": m["role"], "content": m["content"]} for m in r1["messages"]]
    second = hermes.agent(session_id=first.session_id)
    before = second.context_compressor.compression_count
    hermes.provider.enqueue(mp.text("SUMMARY-OF-PLUM"), mp.text("Carrying on."))
    second._cached_system_prompt = second._build_system_prompt(None)  # as its turn does first
    second._compress_context(history, None, force=True)
    assert second.context_compressor.compression_count == before + 1
    r2 = second.run_conversation("and now?", conversation_history=history)
    assert r2["final_response"] == "Carrying on."
    assert r2["codex_thread_id"] == r1["codex_thread_id"]
    _, compact, turn = hermes.provider.requests
    assert "remember PLUM-4" in json.dumps(compact["input"])  # the stored thread, summarised
    sent = json.dumps(turn["input"])
    assert "SUMMARY-OF-PLUM" in sent and "Noted PLUM-4." not in sent


def test_codex_status_command_reports_on_the_session(hermes):
    import hermes_cli.commands  # noqa: F401  (what dispatches a slash command imports first)
    from hermes_cli.plugins import get_plugin_command_handler, get_plugin_commands

    # registered through Hermes' own ctx, once Hermes' command registry is imported
    assert "codex-status" in get_plugin_commands()
    hermes.provider.enqueue(mp.text("status please", usage=mp.Usage(
        input=80, cached=20, output=25, reasoning=5, reported_total=130)))

    agent = hermes.agent()
    result = agent.run_conversation("hi")
    token = bind_session_key(agent.session_id)  # as the CLI binds its session
    try:
        text = get_plugin_command_handler("codex-status")("")
    finally:
        unbind_session_key(token)
    assert "this session:  on codex app-server" in text
    assert "next message:  codex app-server" in text
    assert result["codex_thread_id"] in text
    assert "codex 0.163" in text or "codex 0." in text
    assert "input 80 (cached 20, uncached 60)" in text
    window = agent._config_context_length or 190_000  # Hermes' pin for this route, else codex's
    assert "context:" in text and str(window) in text
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

    pid = shared_runtime().session_for(agent).connection.pid
    assert re.search(rf"app-server: +local pid {pid}: \d+ session\(s\), \d+ thread\(s\) "
                     "active", text), text


def test_the_model_codex_ran_is_recorded_not_hermes_configured_name(hermes, caplog):
    import sqlite3

    hermes.configure(codex_model="mock-model")  # model.codex_model overrides Hermes' choice
    agent = hermes.agent(model="name-hermes-was-configured-with")
    hermes.provider.enqueue(mp.text("hi", usage=mp.Usage(input=50, output=5)))
    with caplog.at_level("INFO", logger="hermes_codex_runtime.runtime"):
        result = agent.run_conversation("which model?")
    assert hermes.provider.requests[-1]["model"] == "mock-model"
    assert result["model"] == "mock-model"
    with sqlite3.connect(hermes.tmp / "state.db") as db:
        [(model,)] = db.execute("SELECT model FROM sessions WHERE id = ?", (agent.session_id,))
    assert model == "mock-model"
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("codex turn")]
    assert result["codex_thread_id"] in line and "completed" in line and "mock-model" in line
    assert "tokens in 50" in line


@pytest.mark.parametrize(("mode", "written"), [(None, False), ("auto", True),
                                               ("approval-required", False)])
def test_hermes_terminal_security_mode_chooses_codex_sandbox(hermes, monkeypatch, mode, written):
    if mode is None:
        monkeypatch.delenv("HERMES_TERMINAL_SECURITY_MODE", raising=False)
    else:
        monkeypatch.setenv("HERMES_TERMINAL_SECURITY_MODE", mode)
    hermes.configure(approvals={"mode": "manual"})  # nobody answers: only the sandbox decides
    hermes.provider.enqueue(mp.exec_command("touch made-by-codex.txt"), mp.text("tried"))
    hermes.agent().run_conversation("make a file")
    assert (hermes.workdir / "made-by-codex.txt").exists() is written


@pytest.mark.parametrize(("hermes_effort", "codex_effort"), [("high", "high"),
                                                             ("max", "xhigh"), (None, None)])
def test_hermes_reasoning_effort_reaches_codex(hermes, hermes_effort, codex_effort):
    config = {"enabled": True, "effort": hermes_effort} if hermes_effort else None
    hermes.provider.enqueue(mp.text("thought about it"))
    result = hermes.agent(reasoning_config=config).run_conversation("think")
    assert result["final_response"] == "thought about it"
    sent = (hermes.provider.requests[-1].get("reasoning") or {}).get("effort")
    if codex_effort is None:
        assert sent != "xhigh"  # codex's own default, untouched
    else:
        assert sent == codex_effort


def test_status_lists_the_live_codex_processes(hermes):
    import os

    from hermes_codex_runtime.hermes.commands import status
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

    hermes.configure(codex_app_server_grace=0)
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("hi"))
    agent.run_conversation("hello")
    pid = shared_runtime().session_for(agent).connection.pid
    data = status.collect()
    [mine] = [p for p in data["codex_processes"] if p["pid"] == pid]
    assert mine["owner_pid"] == os.getpid() and mine["owner_alive"] and mine["rss_mib"] > 1
    assert f"pid {pid}" in status.render(data)
    # the app-server this Hermes process published: its sessions and threads
    [server] = [s for s in data["app_servers"] if s["pid"] == pid]
    assert server["kind"] == "local" and server["host_pid"] == os.getpid()
    assert server["sessions"] == 1 and server["threads"] == 1 and server["rss_mib"] > 1
    assert f"app-server pid {pid} (local" in status.render(data)
    agent.close()
    after = status.collect()
    assert pid not in [p["pid"] for p in after["codex_processes"]]
    assert pid not in [s["pid"] for s in after["app_servers"]]


def test_hermes_model_choice_and_model_switch_choose_codex_model(hermes):
    """model.default and /model pick the model codex runs (turn/start carries it), unless
    model.codex_model pins one; another vendor's model fails the turn before codex sees it."""
    agent = hermes.agent(model="gpt-from-hermes-config")
    hermes.provider.enqueue(mp.text("one"), mp.text("two"), mp.text("three"))
    first = agent.run_conversation("one")
    assert hermes.provider.requests[-1]["model"] == "gpt-from-hermes-config"
    assert first["model"] == "gpt-from-hermes-config"
    # /model switches the agent the way Hermes' CLI does (same provider, codex runtime)
    agent.switch_model("gpt-switched-by-slash-model", agent.provider, api_key=agent.api_key,
                       base_url=agent.base_url, api_mode="codex_app_server")
    second = agent.run_conversation("two", conversation_history=first["messages"])
    assert hermes.provider.requests[-1]["model"] == "gpt-switched-by-slash-model"
    assert second["model"] == "gpt-switched-by-slash-model"
    assert second["final_response"] == "two"
    agent.model = "anthropic/claude-something"  # another vendor's: the turn fails with the fix
    before = len(hermes.provider.requests)
    third = agent.run_conversation("three", conversation_history=second["messages"])
    assert len(hermes.provider.requests) == before  # nothing reached codex's provider
    assert "'anthropic/claude-something' is not an OpenAI model" in str(third)


def test_an_agent_the_host_drops_without_closing_it_is_collected_and_its_session_closed(
        hermes):
    """The gateway's API server makes an agent per run and never closes it. The session the
    process-wide runtime keeps for it must not keep the agent (and its whole conversation)
    alive: found as a gateway growing ~1 MiB per session over a thousand sessions."""
    import gc
    import weakref

    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

    runtime = shared_runtime()

    def seated() -> int:
        return sum(server["sessions"] for server in runtime.pool.snapshot())

    before = seated()
    agents, sessions = [], []
    for i in range(3):
        agent = hermes.agent()
        hermes.agents.remove(agent)  # the host will not close it
        hermes.provider.enqueue(mp.text(f"answer {i}"))
        assert agent.run_conversation(f"run {i}")["final_response"] == f"answer {i}"
        agents.append(weakref.ref(agent))
        sessions.append(runtime.session_for(agent))
        del agent
    # all but the newest: the 0.22 line's own turn-lease timer holds the latest agent until the
    # next turn cancels it — one agent, never a pile of them
    older, older_sessions = agents[:-1], sessions[:-1]
    deadline = time.monotonic() + 20
    while any(ref() is not None for ref in older):
        assert time.monotonic() < deadline, "the dropped agents were never collected"
        gc.collect()
        time.sleep(0.1)
    while not all(session.retired for session in older_sessions):  # closed off the collector
        assert time.monotonic() < deadline, "the dropped agents' sessions were not closed"
        time.sleep(0.05)
    assert seated() <= before + 1  # their seats on the shared app-server are free again


def test_a_program_embedding_the_agent_ends_the_idle_app_server_at_once(hermes):
    """``agent.close()`` leaves the shared app-server up for the grace (the next agent starts
    warm); ``end_idle_app_servers()`` ends it now, and the next turn starts a fresh one."""
    import psutil

    import hermes_codex_runtime.hermes as plugin
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

    hermes.configure(codex_app_server_grace=300)
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("hi"))
    agent.run_conversation("hello")
    process = psutil.Process(shared_runtime().session_for(agent).connection.pid)
    agent.close()
    if APP_SERVER_MODE == "per-session":  # its own process ends with it: nothing waits
        process.wait(10)
    else:
        assert process.is_running() and process.status() != "zombie"  # waiting out the grace
        assert plugin.end_idle_app_servers() == 1
        process.wait(10)
    assert plugin.end_idle_app_servers() == 0
    again = hermes.agent()
    hermes.provider.enqueue(mp.text("fresh"))
    assert again.run_conversation("and now?")["final_response"] == "fresh"
    assert shared_runtime().session_for(again).connection.pid != process.pid
    again.close()
    plugin.end_idle_app_servers()
