"""A Hermes agent on codex keeps its tools: real ``AIAgent`` turns on the real codex binary, a mock
model that calls tools by name (through Hermes' Tool Search bridge where Hermes lists a tool
behind it, as the 0.22 line does), and each call run by Hermes' own dispatcher inside the agent —
memory, todo, skills, session search, plugin tools — with codex's own shell and file tools not
duplicated, disabled toolsets not offered, and a changed tool list reaching the next turn."""

from __future__ import annotations

import json
import threading

from hermes_env import calls_hermes_tool, hermes_tool, reachable_tools

from hermes_codex_runtime.offline import provider as mp

#: Hermes tools codex has its own sandboxed form of: never offered to codex.
CODEX_OWNED = {"terminal", "process", "process_manage", "read_file", "write_file", "patch",
               "search_files", "execute_code", "web_search"}


def offered(provider, index: int = 0) -> set[str]:
    """The tools (functions and namespaces) request ``index`` offered the model."""
    return {tool.get("name") for tool in provider.requests[index].get("tools", [])
            if tool.get("name")}


def outputs(provider, index: int) -> list[str]:
    """The tool outputs the model was shown in request ``index``."""
    return [str(item.get("output")) for item in provider.requests[index].get("input", [])
            if item.get("type") == "function_call_output"]


def test_the_agents_hermes_tools_are_offered_on_the_first_turn_without_codex_duplicates(hermes):
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("hello"))
    agent.run_conversation("hi")
    tools = offered(hermes.provider)
    hermes_side = set(agent.valid_tool_names) - CODEX_OWNED
    expected = {hermes_tool(name) for name in ("memory", "todo", "session_search", "skill_view",
                                               "skills_list", "clarify", "delegate_task",
                                               "kit_echo")}
    assert expected <= reachable_tools(agent, tools)
    assert hermes_side <= tools
    assert not tools & CODEX_OWNED, "Hermes' shell and file tools duplicate codex's own"
    assert "exec_command" in tools  # codex's own stay
    # the codex tools Hermes' todo and delegate_task replace are switched off for the thread
    assert "update_plan" not in tools
    assert not [name for name in tools if name.startswith("multi_agent")], tools


def test_disabled_toolsets_are_not_offered(hermes):
    agent = hermes.agent(disabled_toolsets=["skills", "tool_kit"])
    hermes.provider.enqueue(mp.text("hello"))
    agent.run_conversation("hi")
    tools = reachable_tools(agent, offered(hermes.provider))
    assert hermes_tool("todo") in tools and "memory" in tools
    assert not tools & {"skills_list", "skill_view", "skill_manage", "kit_echo", "kit_raises"}


def test_a_plugin_tool_runs_with_the_models_arguments_and_shows_and_is_stored_as_hermes_does(
        hermes):
    agent = hermes.agent()
    progress: list[tuple[str, str]] = []
    agent.tool_progress_callback = lambda event, name, *a, **k: progress.append((event, name))
    hermes.provider.enqueue(calls_hermes_tool("kit_echo", {"word": "tabs", "count": 3}),
                            mp.text("echoed"))
    result = agent.run_conversation("echo it")
    assert result["final_response"] == "echoed"
    assert outputs(hermes.provider, 1) == ['{"echoed": {"word": "tabs", "count": 3}}']
    assert ("tool.started", "kit_echo") in progress and ("tool.completed", "kit_echo") in progress
    rows = agent._session_db.get_messages(agent.session_id)
    assert [row["role"] for row in rows] == ["user", "assistant", "tool", "assistant"]
    calls = rows[1]["tool_calls"]
    calls = json.loads(calls) if isinstance(calls, str) else calls
    direct = "kit_echo" in offered(hermes.provider)  # else through Hermes' bridge, as Hermes'
    assert calls[0]["function"]["name"] == ("kit_echo" if direct else "tool_call")
    assert rows[2]["tool_name"] == "kit_echo"
    assert "tabs" in rows[2]["content"]


def test_a_raising_tool_and_bad_arguments_are_failed_results_and_the_turn_completes(hermes):
    agent = hermes.agent()
    hermes.provider.enqueue(calls_hermes_tool("kit_raises", {"word": "x"}),
                            mp.tool_call("memory", ["not", "an", "object"]),
                            mp.text("survived"))
    result = agent.run_conversation("break things")
    assert result["final_response"] == "survived"
    assert result["completed"] is True
    failed = outputs(hermes.provider, 1)[0]
    assert "broke on purpose" in failed
    refused = outputs(hermes.provider, 2)[-1]
    assert "Invalid tool arguments" in refused


def test_hermes_pre_tool_call_policy_blocks_a_call_before_it_runs(hermes):
    agent = hermes.agent()
    hermes.provider.enqueue(calls_hermes_tool("kit_echo", {"word": "forbidden"}),
                            mp.text("blocked"))
    assert agent.run_conversation("try it")["final_response"] == "blocked"
    [shown] = outputs(hermes.provider, 1)
    assert "the kit's policy blocks that" in shown and "echoed" not in shown


def test_memory_added_on_codex_is_in_hermes_store_and_a_new_sessions_first_request(hermes):
    from hermes_env import write_config

    config = hermes.configure()
    config["memory"] = {"memory_enabled": True, "nudge_interval": 0}
    write_config(hermes.home, config)
    fact = "User prefers tabs over spaces (memory test)."
    agent = hermes.agent(skip_memory=False)
    hermes.provider.enqueue(
        mp.tool_call("memory", {"action": "add", "target": "memory", "content": fact}),
        mp.text("Remembered."))
    assert agent.run_conversation("remember that I prefer tabs")["final_response"] == \
        "Remembered."
    assert fact in (hermes.home / "memories" / "MEMORY.md").read_text()
    assert agent._turns_since_memory == 0  # the nudge counter Hermes' loop resets
    fresh = hermes.agent(skip_memory=False)
    hermes.provider.enqueue(mp.text("hi again"))
    fresh.run_conversation("what do you know about me?")
    first = len(hermes.provider.requests) - 1
    assert any(fact in text for _, text in hermes.provider.request_texts(first))


def test_todo_persists_across_turns_and_shows_as_the_plan(hermes):
    statuses: list[tuple[str, str]] = []
    agent = hermes.agent(status_callback=lambda kind, message: statuses.append((kind, message)))
    todos = [{"id": "1", "content": "water the ferns", "status": "pending"}]
    hermes.provider.enqueue(calls_hermes_tool("todo", {"todos": todos}), mp.text("Planned."))
    first = agent.run_conversation("plan my day")
    hermes.provider.enqueue(calls_hermes_tool("todo", {}), mp.text("Still planned."))
    agent.run_conversation("what is on my list?", conversation_history=first["messages"])
    assert "water the ferns" in outputs(hermes.provider, 3)[-1]
    assert any(item.get("content") == "water the ferns"
               for item in agent._todo_store.read())
    # the list is the plan codex's own plan tool would have shown: one checklist per change
    assert [message for kind, message in statuses if kind == "codex-plan"] == [
        "📋 plan 0/1 done\n  ○ water the ferns"]


def test_skill_view_returns_an_installed_skills_body(hermes):
    skill = hermes.home / "skills" / "testing" / "fern-care"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(
        "---\nname: fern-care\ndescription: How to care for ferns.\n---\n\n"
        "# Fern care\nMist the fronds every morning (skill body marker).\n")
    agent = hermes.agent()
    hermes.provider.enqueue(mp.tool_call("skill_view", {"name": "fern-care"}), mp.text("Read."))
    agent.run_conversation("how do I care for ferns?")
    assert "skill body marker" in outputs(hermes.provider, 1)[0]


def test_session_search_finds_an_earlier_session(hermes):
    earlier = hermes.agent()
    hermes.provider.enqueue(mp.text("Noted."))
    earlier.run_conversation("The launch word is pelican-42.")
    later = hermes.agent()
    hermes.provider.enqueue(calls_hermes_tool("session_search", {"query": "pelican"}),
                            mp.text("Found it."))
    later.run_conversation("what was the launch word?")
    found = outputs(hermes.provider, 2)[0]
    assert "pelican-42" in found, found


def test_an_interrupt_during_a_hermes_tool_reaches_the_tool_and_ends_the_turn(hermes):
    agent = hermes.agent()
    started = threading.Event()
    agent.tool_progress_callback = lambda event, name, *a, **k: (
        started.set() if (event, name) == ("tool.started", "kit_wait") else None)
    hermes.provider.enqueue(calls_hermes_tool("kit_wait", {}), mp.text("never"))
    box: dict = {}
    runner = threading.Thread(target=lambda: box.update(agent.run_conversation("wait")))
    runner.start()
    assert started.wait(60), "the tool never started"
    agent.interrupt("stop")
    runner.join(30)
    assert not runner.is_alive(), "the turn did not end after the interrupt"
    assert box.get("final_response") != "never"
    assert box.get("interrupted") or not box.get("completed")


def test_a_tool_switched_on_mid_session_is_offered_next_turn_on_a_fresh_seeded_thread(hermes):
    agent = hermes.agent(disabled_toolsets=["skills"])
    hermes.provider.enqueue(mp.text("first answer"))
    first = agent.run_conversation("remember the word heron")
    assert "skills_list" not in offered(hermes.provider, 0)
    # what Hermes does when a toolset is switched on mid-session: the agent's tools rebuilt
    agent.tools = hermes.agent().tools
    agent.valid_tool_names = {t["function"]["name"] for t in agent.tools}
    hermes.provider.enqueue(mp.text("second answer"))
    second = agent.run_conversation("and now?", conversation_history=first["messages"])
    assert second["final_response"] == "second answer"
    assert "skills_list" in offered(hermes.provider, 1)
    assert second["codex_thread_id"] != first["codex_thread_id"]  # codex keeps a thread's tools
    assert any("remember the word heron" in text
               for _, text in hermes.provider.request_texts(1))  # the conversation, seeded


def test_a_tool_switched_off_mid_session_keeps_the_thread_and_a_call_to_it_is_refused(hermes):
    agent = hermes.agent()
    hermes.provider.enqueue(mp.text("first answer"))
    first = agent.run_conversation("remember the word ibis")
    agent.tools = [t for t in agent.tools if not t["function"]["name"].startswith("skill")]
    agent.valid_tool_names = {t["function"]["name"] for t in agent.tools}
    hermes.provider.enqueue(mp.tool_call("skills_list", {}), mp.text("second answer"))
    second = agent.run_conversation("list my skills", conversation_history=first["messages"])
    assert second["final_response"] == "second answer"
    assert second["codex_thread_id"] == first["codex_thread_id"]  # the conversation goes on
    assert outputs(hermes.provider, 2) == ["Unknown tool 'skills_list'."]


def test_a_stored_thread_lacking_a_tool_is_not_resumed_in_a_new_process(hermes):
    # Hermes offers ``cronjob`` by what the process's environment says, remembered for a minute
    # ("transient"): left in, another test's environment could change the tools between agents
    agent = hermes.agent(disabled_toolsets=["skills", "cronjob"])
    hermes.provider.enqueue(mp.text("first answer"))
    first = agent.run_conversation("remember the word egret")
    agent.close()
    # the same session in a new process, with the toolset enabled since
    later = hermes.agent(session_id=agent.session_id, disabled_toolsets=["cronjob"])
    hermes.provider.enqueue(mp.text("second answer"))
    second = later.run_conversation("and now?", conversation_history=first["messages"])
    assert second["final_response"] == "second answer"
    assert second["codex_thread_id"] != first["codex_thread_id"]
    assert "skills_list" in offered(hermes.provider, 1)
    assert any("remember the word egret" in text
               for _, text in hermes.provider.request_texts(1))
    # fewer tools than the thread has (the toolset off again): resumed, not replaced
    later.close()
    again = hermes.agent(session_id=agent.session_id, disabled_toolsets=["skills", "cronjob"])
    hermes.provider.enqueue(mp.text("third answer"))
    third = again.run_conversation("still there?", conversation_history=second["messages"])
    assert third["codex_thread_id"] == second["codex_thread_id"]
