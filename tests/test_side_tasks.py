"""A host's side task on the real codex binary (no host): a short-lived thread on the sessions'
shared app-server that can touch nothing, bounded in time and in how many run at once."""

from __future__ import annotations

import json
import threading
import time

import pytest
from support import APP_SERVER_MODE, Agent

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.session.side_task import (
    SIDE_TASK_CONFIG,
    SideTask,
    SideTaskFailed,
    run_side_task,
)

INERT = {"request_user_input", "apply_patch"}


def settings_for(make_runtime):
    from hermes_codex_runtime.pool import Placement
    from hermes_codex_runtime.session import SessionSettings

    return SessionSettings(**make_runtime.settings_defaults, cwd=str(make_runtime.workdir),
                           turn_timeout=60.0, app_server=Placement(APP_SERVER_MODE))


def sent(make_runtime, method):
    return [m for conn in make_runtime.connections for m in conn.sent if m.get("method") == method]


def test_a_side_task_runs_on_the_sessions_app_server_and_can_touch_nothing(make_runtime,
                                                                          mock_provider):
    runtime, _host = make_runtime()
    mock_provider.enqueue(mp.text("the session's answer"))
    assert runtime.run_turn(Agent(), "hello").ok  # a session keeps the shared app-server up
    mock_provider.enqueue(
        mp.apply_patch(mp.add_file_patch("owned.txt", ["written by a side task"])),
        mp.exec_command("touch owned-too.txt"),
        mp.text("A Title", usage=mp.Usage(input=40, cached=8, output=6, reasoning=2)))
    reply = run_side_task(runtime.pool, settings_for(make_runtime), SideTask(
        "Name this conversation.", instructions="You name conversations.", model="mock-model",
        effort="low", timeout=30))
    assert reply.text == "A Title" and reply.model == "mock-model"
    assert reply.usage.output_tokens == 6 + 10 + 10  # the thread's three responses
    assert not list(make_runtime.workdir.iterdir())  # nothing was written
    # on the session's own app-server (with a process per session: one of its own)
    assert len(make_runtime.connections) == (1 if APP_SERVER_MODE == "shared" else 2)
    side = [r for r in mock_provider.requests[1:]]
    assert all(set(t.get("name") for t in r.get("tools", [])) <= INERT for r in side)
    first = side[0]
    assert [(i["role"], i["content"][0]["text"]) for i in first["input"]][1:] == [
        ("developer", "You name conversations."), ("user", "Name this conversation.")]
    assert first["reasoning"]["effort"] == "low"
    outputs = json.dumps([r["input"][-1] for r in side[1:]])
    assert "patch rejected" in outputs and "unsupported call" in outputs
    [start] = [m["params"] for m in sent(make_runtime, "thread/start") if m["params"].get(
        "ephemeral")]
    assert (start["sandbox"], start["approvalPolicy"]) == ("read-only", "never")
    assert SIDE_TASK_CONFIG.items() <= start["config"].items()
    [turn] = [m["params"] for m in sent(make_runtime, "turn/start")][1:]
    [unsubscribed] = [m["params"] for m in sent(make_runtime, "thread/unsubscribe")]
    assert unsubscribed["threadId"] == turn["threadId"]
    assert not [m for conn in make_runtime.connections for m in conn.server_requests.values()]


def test_an_output_schema_reaches_the_model_as_its_answer_format(make_runtime, mock_provider):
    runtime, _host = make_runtime()
    schema = {"type": "object", "properties": {"title": {"type": "string"}},
              "required": ["title"], "additionalProperties": False}
    mock_provider.enqueue(mp.text('{"title": "Tea"}'))
    reply = run_side_task(runtime.pool, settings_for(make_runtime),
                          SideTask("name it", output_schema=schema, timeout=30))
    assert json.loads(reply.text) == {"title": "Tea"}
    answer_format = mock_provider.requests[-1]["text"]["format"]
    assert answer_format["type"] == "json_schema" and answer_format["schema"] == schema


def test_side_tasks_are_bounded_in_time_and_in_how_many_run_at_once(make_runtime,
                                                                   mock_provider, monkeypatch):
    import hermes_codex_runtime.session.side_task as side_task

    monkeypatch.setattr(side_task, "MAX_IN_FLIGHT", 1)
    import dataclasses

    from hermes_codex_runtime.pool import Placement

    runtime, _host = make_runtime()
    # one shared app-server (with a process per session each task has one of its own)
    settings = dataclasses.replace(settings_for(make_runtime), app_server=Placement("shared"))
    arrived: list[float] = []

    def slow(body):
        arrived.append(time.monotonic())
        return mp.text("slow answer", delay=1.5)

    mock_provider.set_default(slow)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(run_side_task(
        runtime.pool, settings, SideTask("first", timeout=30)))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 2 and len(arrived) == 2
    assert arrived[1] - arrived[0] >= 1.4  # the second waited for the first's slot
    with pytest.raises(SideTaskFailed) as late:
        run_side_task(runtime.pool, settings, SideTask("too slow", timeout=0.8))
    assert late.value.failure.kind.value == "timeout"
    mock_provider.set_default(mp.usage_limit())
    with pytest.raises(SideTaskFailed) as limited:
        run_side_task(runtime.pool, settings, SideTask("limited", timeout=30))
    assert limited.value.failure.kind.value == "usage_limit"


def test_a_side_task_goes_to_the_remote_app_server_the_sessions_use(make_runtime, mock_provider,
                                                                    tmp_path, codex_binary):
    from hermes_codex_runtime.pool import EndpointSpec, Placement
    from hermes_codex_runtime.session import SessionSettings
    from hermes_codex_runtime.testing.remote_server import RemoteAppServer

    remote = RemoteAppServer(tmp_path / "remote", mock_provider.base_url,
                             codex_bin=codex_binary.path)
    try:
        settings = SessionSettings(
            codex_bin=codex_binary.path, cwd=str(make_runtime.workdir), turn_timeout=60.0,
            app_server=Placement("endpoints", endpoints=(
                EndpointSpec(remote.url, token_file=str(remote.token_file)),)))
        runtime, _host = make_runtime(settings)
        mock_provider.enqueue(mp.text("the session's answer"), mp.text("Remote Title"))
        assert runtime.run_turn(Agent(), "hello").endpoint == remote.url
        reply = run_side_task(runtime.pool, settings, SideTask("name it", timeout=30))
        assert reply.text == "Remote Title"
        assert [s["endpoint"] for s in runtime.pool.snapshot()] == [remote.url]
    finally:
        remote.stop()



def test_a_side_task_the_provider_never_answers_points_at_the_network(make_runtime,
                                                                      mock_provider):
    """The network down: nothing comes back from the provider before the task's deadline. The
    failure says so (check the network), not only that a time budget ran out."""
    runtime, _host = make_runtime()
    mock_provider.set_default(mp.text("too late", delay=20))
    with pytest.raises(SideTaskFailed) as failed:
        run_side_task(runtime.pool, settings_for(make_runtime), SideTask("name it", timeout=1.5))
    said = failed.value.failure.describe()
    assert "sent nothing back" in said and "check the network" in said, said
