"""Remote app-servers: two real ``codex app-server --listen ws://127.0.0.1:PORT`` processes with
codex's own capability-token auth stand in for two machines. Sessions are placed on the endpoint
with the fewest sessions and stay there; a resume goes to the server that holds the thread; a
vanished server means a fresh, seeded thread elsewhere (said to the user); a wrong token or a
refused connection is one clear message."""

from __future__ import annotations

import socket

import pytest
from support import Agent, shut_down

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.pool import EndpointSpec, Placement
from hermes_codex_runtime.protocol import FailureKind
from hermes_codex_runtime.session import SessionSettings
from hermes_codex_runtime.testing.remote_server import RemoteAppServer


def echo(body):
    last = body.get("input", [])[-1] if body.get("input") else {}
    text = ""
    for part in last.get("content") or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            text = part["text"]
    return mp.text(f"echo: {text}")


@pytest.fixture
def machines(tmp_path, mock_provider, codex_binary):
    """Two ws app-servers, each with its own codex home and token."""
    servers = []
    try:
        for name in ("east", "west"):
            servers.append(RemoteAppServer(tmp_path / name, mock_provider.base_url,
                                           codex_bin=codex_binary.path))
        yield servers
    finally:
        for server in servers:
            server.stop()


def endpoints_settings(make_runtime, *specs: EndpointSpec) -> SessionSettings:
    return SessionSettings(codex_bin=make_runtime.settings_defaults["codex_bin"],
                           cwd=str(make_runtime.workdir), turn_timeout=60.0,
                           app_server=Placement("endpoints", endpoints=specs))


def spec(server: RemoteAppServer) -> EndpointSpec:
    return EndpointSpec(server.url, token_file=str(server.token_file))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_sessions_are_spread_over_the_endpoints_and_stay_on_theirs(make_runtime, mock_provider,
                                                                   machines):
    mock_provider.set_default(echo)
    east, west = machines
    runtime, host = make_runtime(endpoints_settings(make_runtime, spec(east), spec(west)),
                                 per_agent=True)
    agents = [Agent(f"a{i}") for i in range(4)]
    first = {a.name: runtime.run_turn(a, f"hello {a.name}") for a in agents}
    for agent in agents:
        turn = first[agent.name]
        assert turn.ok and turn.final_text == f"echo: hello {agent.name}", turn.error
        assert turn.endpoint in (east.url, west.url)
    placed = [first[a.name].endpoint for a in agents]
    assert placed.count(east.url) == 2 and placed.count(west.url) == 2  # fewest sessions first
    for agent in agents:
        again = runtime.run_turn(agent, f"again {agent.name}")
        assert again.ok and again.endpoint == first[agent.name].endpoint
        assert again.thread_id == first[agent.name].thread_id
    # the binding carries the endpoint with the thread id
    assert set(host.endpoints) == {east.url, west.url}
    assert make_runtime.connections == []  # no local codex process was started


def test_a_resume_in_a_new_process_goes_to_the_server_that_holds_the_thread(
        make_runtime, mock_provider, machines):
    mock_provider.set_default(echo)
    east, west = machines
    settings = endpoints_settings(make_runtime, spec(east), spec(west))
    runtime, host = make_runtime(settings, per_agent=True)
    # occupy east so a fresh placement picks west, then bind a thread on west
    runtime.run_turn(Agent("filler"), "hello filler")
    mine = Agent("mine")
    turn = runtime.run_turn(mine, "hello mine")
    assert turn.ok and turn.endpoint == west.url
    stored = host.by_agent[id(mine)]
    shut_down(runtime)
    assert (stored.thread_id, stored.endpoint) == (turn.thread_id, west.url)

    later, later_host = make_runtime(settings, stored=stored)
    resumed = later.run_turn(Agent("mine again"), "hello again")
    assert resumed.ok and resumed.thread_origin == "resumed"
    assert resumed.thread_id == turn.thread_id and resumed.endpoint == west.url
    assert later_host.seed_requests == 0


def test_a_vanished_server_means_a_fresh_seeded_thread_elsewhere_and_the_user_is_told(
        make_runtime, mock_provider, machines):
    mock_provider.set_default(echo)
    east, west = machines
    runtime, host = make_runtime(endpoints_settings(make_runtime, spec(east), spec(west)))
    agent = Agent("traveller")
    turn = runtime.run_turn(agent, "hello one")
    assert turn.ok and turn.endpoint == east.url
    east.kill()  # the machine is gone
    history = [{"role": "user", "content": "hello one"},
               {"role": "assistant", "content": "echo: hello one"}]
    after = runtime.run_turn(agent, "hello two", history)
    assert after.ok, after.error
    assert after.endpoint == west.url and after.thread_origin == "seeded"
    assert host.seed_requests == 2  # the first thread's start, and the fresh one on west
    notices = [e.text for e in host.events if e.kind == "notice"]
    assert len(notices) == 1 and east.url in notices[0] and "fresh thread" in notices[0]
    # the seed carried the conversation to the new server
    assert any("echo: hello one" in text for _, text in mock_provider.request_texts(-1))


def test_a_wrong_token_is_one_clear_message_and_the_token_is_never_shown(
        make_runtime, mock_provider, machines, tmp_path):
    east, _west = machines
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token-42\n")
    runtime, _host = make_runtime(endpoints_settings(
        make_runtime, EndpointSpec(east.url, token_file=str(wrong))))
    turn = runtime.run_turn(Agent(), "hello")
    assert not turn.ok and turn.failure is not None
    assert turn.failure.kind is FailureKind.SETUP and turn.failure.source == "app_server"
    assert "401" in turn.error and str(wrong) in turn.error
    assert "not-the-token-42" not in turn.error and east.token not in turn.error
    assert mock_provider.requests == []


def test_a_refused_connection_names_the_endpoint(make_runtime, mock_provider):
    url = f"ws://127.0.0.1:{free_port()}"
    runtime, _host = make_runtime(endpoints_settings(make_runtime, EndpointSpec(url)))
    turn = runtime.run_turn(Agent(), "hello")
    assert not turn.ok and turn.failure.kind is FailureKind.SETUP
    assert turn.failure.source == "app_server" and url in turn.error
    assert "refused" in turn.error.lower()


def test_doctor_reaches_each_endpoint_with_its_token(machines, tmp_path):
    from hermes_codex_runtime.doctor import FAIL, OK, check_app_servers

    east, west = machines
    wrong = tmp_path / "wrong"
    wrong.write_text("nope-nope-nope\n")
    gone = f"ws://127.0.0.1:{free_port()}"
    placement = Placement("endpoints", endpoints=(
        spec(east), EndpointSpec(west.url, token_file=str(wrong)), EndpointSpec(gone)))
    good, bad, refused = check_app_servers(placement, fix="check the endpoint setting")
    assert good.status == OK and east.url in good.detail and "token accepted" in good.detail
    assert bad.status == FAIL and "401" in bad.detail and bad.fix == "check the endpoint setting"
    assert "nope-nope-nope" not in bad.detail and west.token not in bad.detail
    assert refused.status == FAIL and "refused" in refused.detail
