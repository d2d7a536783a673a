"""Which Hermes tools a codex thread is offered, under which names (pure: tool definitions in,
host tools out — the real-codex side is tests/test_hermes_tools.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hermes_codex_runtime.hermes.tools import offer as tool_offer


def definition(name: str, description: str = "does a thing") -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}


def test_codex_keeps_its_shell_file_and_code_tools_and_the_rest_is_offered():
    built = tool_offer.build([definition(n) for n in (
        "terminal", "process", "read_file", "write_file", "patch", "search_files",
        "execute_code", "web_search", "memory", "web_extract", "kit_echo")])
    assert [tool.name for tool in built.tools] == ["memory", "web_extract", "kit_echo"]
    assert all(tool.host_name == "" for tool in built.tools)
    assert built.config == {}


def test_todo_and_delegate_task_switch_off_the_codex_tools_they_replace():
    built = tool_offer.build([definition("todo"), definition("delegate_task")])
    assert built.config == {"tools.update_plan.enabled": False, "features.multi_agent": False}
    assert tool_offer.build([definition("memory")]).config == {}


@pytest.mark.parametrize(("hermes_name", "codex_name"), [
    ("mcp__notes__lookup", "mcp_notes__lookup"),  # codex reserves the mcp__ prefix
    ("view_image", None),  # one of codex's own tools
    ("notes.lookup", None),  # not a Responses function name
    ("x" * 80, None),  # too long
])
def test_a_name_codex_refuses_is_offered_under_an_alias_that_runs_the_hermes_tool(
        hermes_name, codex_name):
    built = tool_offer.build([definition(hermes_name)])
    [tool] = built.tools
    assert tool.host_name == hermes_name
    if codex_name is not None:
        assert tool.name == codex_name
    else:
        assert tool.name.startswith("hermes_") and len(tool.name) <= 64
    assert not tool.name.startswith("mcp__")
    assert built.hermes_name(tool.name) == hermes_name
    assert tool_offer.build([definition(hermes_name)]).tools == built.tools  # stable


def test_two_names_that_would_alias_alike_stay_apart():
    built = tool_offer.build([definition("mcp_notes__lookup"), definition("mcp__notes__lookup")])
    first, second = built.tools
    assert first.name == "mcp_notes__lookup" and first.host_name == ""
    assert second.name != first.name and second.host_name == "mcp__notes__lookup"
    assert built.hermes_name(second.name) == "mcp__notes__lookup"


def test_malformed_definitions_and_duplicates_are_skipped():
    built = tool_offer.build([definition("memory"), definition("memory", "again"), {},
                              {"function": {"name": ""}}, "not a definition",
                              {"function": {"name": "bare"}}])
    assert [tool.name for tool in built.tools] == ["memory", "bare"]
    assert built.tools[1].input_schema == {"type": "object", "properties": {}}


class Agent:
    def __init__(self, tools):
        self.tools = tools


def test_the_offer_is_built_again_only_when_the_agents_tools_change():
    agent = Agent([definition("memory"), definition("todo")])
    first = tool_offer.offered(agent)
    assert tool_offer.offered(agent) is first
    agent.tools = [definition("memory")]  # a toolset switched off: the list is rebuilt
    second = tool_offer.offered(agent)
    assert [tool.name for tool in second.tools] == ["memory"]
    assert tool_offer.offered(Agent(None)).tools == ()
    # an agent that cannot be weakly referenced gets its offer built each time
    assert [t.name for t in tool_offer.offered(SimpleNamespace(tools=agent.tools)).tools] == \
        ["memory"]


def test_tools_behind_hermes_tool_search_bridge_switch_off_what_they_replace():
    built = tool_offer.build([definition("tool_search"), definition("tool_call")],
                             behind_bridge=frozenset({"todo_list", "session_search"}))
    assert [tool.name for tool in built.tools] == ["tool_search", "tool_call"]
    assert built.config == {"tools.update_plan.enabled": False}


@pytest.mark.parametrize(("name", "arguments", "shown"), [
    ("tool_call", '{"name": "todo_list", "arguments": {"todos": []}}',
     ("todo_list", {"todos": []})),
    ("tool_call", {"calls": [{"name": "cronjob_manage", "arguments": {"a": 1}}]},
     ("cronjob_manage", {"a": 1})),
    ("tool_call", {"calls": [{"name": "a"}, {"name": "b"}]},  # a batch
     ("tool_call", {"calls": [{"name": "a"}, {"name": "b"}]})),
    ("tool_call", "not json", ("tool_call", "not json")),
    ("kit_echo", {"name": "other"}, ("kit_echo", {"name": "other"})),
])
def test_a_call_through_the_bridge_is_named_for_the_tool_it_calls(name, arguments, shown):
    from hermes_codex_runtime.hermes.tools.bridge import called

    assert called(name, arguments) == shown
