"""Hermes' side tasks — titles, the approval judge, summaries — on a codex-only login: real
Hermes (its own title generator, auxiliary client, approval judge and accounting) on the real
codex binary and the mock provider, with no Hermes-side credential and no ``OPENAI_*``."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import pytest
from hermes_env import bind_session_key, unbind_session_key

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes
#: What codex still offers a side thread (both refuse to act there, see session/side_task.py).
INERT = {"request_user_input", "apply_patch"}
TITLE = "Tea Preferences"


def developer_text(body: dict[str, Any]) -> str:
    return json.dumps([item for item in body.get("input", []) if item.get("role") == "developer"])


def tools_of(body: dict[str, Any]) -> set[str]:
    return {tool.get("name") or tool.get("type") for tool in body.get("tools", [])}


def is_judge(body: dict[str, Any]) -> bool:
    return "security reviewer" in developer_text(body)


def is_title(body: dict[str, Any]) -> bool:
    text = developer_text(body).lower()
    return ((body.get("text") or {}).get("format") or {}).get("type") == "json_schema" or \
        ("title" in text and "security reviewer" not in text and len(text) < 4000)


def side_task_router(verdict: str = "APPROVE", turn: mp.ReplySource | None = None):
    """The mock model: Hermes' title prompt gets a title, its approval judge ``verdict``, and
    everything else (the session's own turns) ``turn`` or a plain answer."""
    def reply(body: dict[str, Any]) -> mp.Reply:
        if is_judge(body):
            return mp.text(verdict, usage=mp.Usage(input=30, output=1))
        if is_title(body):
            json_title = ((body.get("text") or {}).get("format") or {}).get("type")
            return mp.text(json.dumps({"title": TITLE}) if json_title else TITLE,
                           usage=mp.Usage(input=40, cached=8, output=6, reasoning=2))
        if turn is None:
            return mp.text("an answer")
        return turn(body) if callable(turn) else turn
    return reply


def wait_until(what: str, check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g}s"
        time.sleep(0.2)


def hosts_title_every_turn() -> bool:
    """The 0.22 line titles a session at the start of any turn; 0.19.0 only after the first
    exchange of its interactive CLI and of chat platforms (``maybe_auto_title``)."""
    from hermes_codex_runtime.hermes.symbols.probe import present

    return present("agent.turn_context", "_maybe_title_session_at_turn_start")


@pytest.fixture
def codex_only(hermes, monkeypatch):
    """The harness with only a codex login: no Hermes auth.json, no OPENAI_* variable."""
    for name in [n for n in __import__("os").environ if n.startswith("OPENAI")]:
        monkeypatch.delenv(name)
    assert not (hermes.home / "auth.json").exists()
    return hermes


def codex_only_agent(hermes, **overrides):
    """An AIAgent built the way Hermes builds one when only `codex login` was done."""
    from hermes_cli.runtime_provider import resolve_runtime_provider

    from hermes_codex_runtime.hermes.config.activation import PLACEHOLDER_KEY

    runtime = resolve_runtime_provider()
    assert runtime["api_key"] == PLACEHOLDER_KEY
    return hermes.agent(provider=runtime["provider"], api_mode=runtime["api_mode"],
                        base_url=runtime["base_url"], api_key=runtime["api_key"], **overrides)


def main_runtime(agent) -> dict[str, Any]:
    return {k: getattr(agent, k) for k in ("model", "provider", "base_url", "api_key",
                                           "api_mode")}


def aux_rows(agent) -> dict[str, tuple[Any, ...]]:
    with sqlite3.connect(agent._session_db.db_path) as db:
        rows = db.execute("SELECT task, model, input_tokens, cache_read_tokens, output_tokens, "
                          "reasoning_tokens, api_call_count FROM session_model_usage "
                          "WHERE session_id = ? AND task != ''", (agent.session_id,)).fetchall()
    return {row[0]: row[1:] for row in rows}


def test_a_title_is_made_on_codex_and_counted_as_hermes_side_task_usage(codex_only):
    hermes = codex_only
    config = hermes.configure()
    config["auxiliary"] = {"title_generation": {"model": "title-model"}}
    from hermes_env import write_config

    write_config(hermes.home, config)
    hermes.provider.set_default(side_task_router())
    agent = codex_only_agent(hermes)
    first = agent.run_conversation("I always drink green tea.")
    turn_tokens = agent.session_prompt_tokens
    if not hosts_title_every_turn():  # 0.19.0: its CLI titles after the first exchange
        from agent.title_generator import maybe_auto_title

        maybe_auto_title(agent._session_db, agent.session_id, "I always drink green tea.",
                         first["final_response"], first["messages"],
                         main_runtime=main_runtime(agent))
    title = wait_until("the title", lambda: agent._session_db.get_session(
        agent.session_id)["title"])
    assert title == TITLE
    [request] = [b for b in hermes.provider.requests if is_title(b)]
    assert request["model"] == "title-model"  # auxiliary.title_generation.model
    assert tools_of(request) <= INERT  # no Hermes tool, nothing that acts
    assert [item["role"] for item in request["input"]] == ["developer", "developer", "user"]
    # Hermes' aux accounting has it by task; the turn's own counters do not
    rows = wait_until("the accounting", lambda: aux_rows(agent).get("title_generation"))
    assert rows == ("title-model", 32, 8, 6, 2, 1)
    assert agent.session_prompt_tokens == turn_tokens
    from hermes_codex_runtime.hermes.commands.slash import codex_status_text

    assert "side tasks:    title_generation 1 call(s), input 40 (cached 8), output 6 " \
        "(reasoning 2)" in codex_status_text(agent)


def test_side_task_failures_are_the_kind_hermes_falls_back_or_times_out_on(codex_only):
    import agent.auxiliary_client as aux

    hermes = codex_only
    config = hermes.configure()
    config["auxiliary"] = {"transient_retries": 0}  # a timeout is not retried on codex first
    from hermes_env import write_config

    write_config(hermes.home, config)
    agent = codex_only_agent(hermes)
    hermes.provider.set_default(mp.text("warm"))
    agent.run_conversation("hello")

    def ask(**extra):
        return aux.call_llm(task="title_generation", main_runtime=main_runtime(agent),
                            messages=[{"role": "user", "content": "name this"}], **extra)

    hermes.provider.set_default(mp.usage_limit())  # also on the fallback (the main model)
    with pytest.raises(Exception) as limited:
        ask()
    assert aux._is_rate_limit_error(limited.value)  # Hermes' fallback chain took it
    hermes.provider.set_default(mp.text("too late", delay=5))
    with pytest.raises(Exception) as late:
        ask(timeout=1.5)
    assert aux._is_timeout_error(late.value)
    hermes.provider.set_default(mp.text("an answer"))
    with pytest.raises(Exception, match="tools"):
        ask(tools=[{"type": "function", "function": {"name": "terminal", "parameters": {}}}])
    assert not [b for b in hermes.provider.requests if "terminal" in tools_of(b)]
    hermes.provider.set_default(mp.text("the turn is fine"))
    assert agent.run_conversation("and you?")["final_response"] == "the turn is fine"


def test_with_a_hermes_codex_login_hermes_keeps_its_own_side_task_route(codex_only):
    import agent.auxiliary_client as aux
    from test_hermes_activation import _hermes_codex_login

    _hermes_codex_login(codex_only.home)
    try:
        client, _model = aux.resolve_provider_client("openai-codex", "mock-model",
                                                     api_mode="codex_app_server")
    finally:
        (codex_only.home / "auth.json").unlink()
    assert type(client) is aux.CodexAuxiliaryClient  # Hermes' own, on Hermes' login
    client, _model = aux.resolve_provider_client("openai-codex", "mock-model",
                                                 api_mode="codex_app_server")
    assert isinstance(client, aux.CodexAuxiliaryClient) and \
        type(client).__name__ == "CodexSideTaskClient"


def run_command_turn(hermes, agent, command="echo judged-output"):
    calls = iter([mp.exec_command(command, escalated=True, justification="needed")])

    def turn(body):
        return next(calls, None) or mp.text("finished")

    hermes.provider.set_default(side_task_router(turn=turn, verdict=hermes.verdict))
    result = agent.run_conversation(f"run {command}")
    tool = [m for m in result["messages"] if m["role"] == "tool"][-1]
    return tool["content"]


@pytest.mark.parametrize(("verdict", "ran", "asked"),
                         [("APPROVE", True, False), ("DENY", False, False),
                          ("ESCALATE", True, True)])
def test_smart_approvals_are_decided_by_hermes_judge_on_codex(codex_only, monkeypatch, verdict,
                                                              ran, asked):
    monkeypatch.setenv("HERMES_INTERACTIVE", "1")  # as Hermes' CLI sets it
    from tools.terminal_tool import set_approval_callback

    hermes = codex_only
    config = hermes.configure(approvals={"mode": "smart"})
    config["auxiliary"] = {"approval": {"model": "judge-model", "reasoning_effort": "low"}}
    from hermes_env import write_config

    write_config(hermes.home, config)
    hermes.verdict = verdict
    prompts = []
    set_approval_callback(lambda command, description, **kw: prompts.append(command) or "once")
    agent = codex_only_agent(hermes)
    token = bind_session_key(agent.session_id)
    try:
        output = run_command_turn(hermes, agent)
    finally:
        set_approval_callback(None)
        unbind_session_key(token)
    assert ("judged-output" in output) is ran
    assert bool(prompts) is asked  # a person is asked only when the judge escalates
    [judge] = [b for b in hermes.provider.requests if is_judge(b)]
    assert judge["model"] == "judge-model" and judge["reasoning"]["effort"] == "low"
    assert tools_of(judge) <= INERT
    assert "echo judged-output" in json.dumps(judge["input"])
    hooks = [(h["hook"], h.get("surface"), h.get("choice")) for h in hermes.hooks()
             if "approval" in h["hook"]]
    if asked:  # the judge's question, then the person's (each once)
        assert hooks[0] == ("pre_approval_request", "smart", None) and len(hooks) == 3
    else:
        assert hooks == [("pre_approval_request", "smart", None),
                         ("post_approval_response", "smart", f"smart_{verdict.lower()}")]
    assert "approval" in aux_rows(agent)
