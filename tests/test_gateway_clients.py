"""Hermes' OpenAI-compatible API server as its clients use it: the official ``openai`` SDK (the
version Hermes pins) against a real ``hermes gateway run`` whose turns run on the real codex
binary — a client's system message, a session's lifetime and its codex process, the context
window the user configured."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import psutil
import pytest
from hermes_env import Gateway, base_config, write_config
from test_hermes_side_tasks import is_title, side_task_router
from test_side_tasks_e2e import OUTGROWN_CHAT, last_user_text, outgrown_chat_turn

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes




def configure(home: Path, grace: float | None = 0, **changes: Any) -> None:
    """config.yaml for the gateway; ``grace=None`` leaves the app-server grace at its default."""
    model = changes.pop("model", {})
    config = base_config(codex_home=str(home.parent / "codex-home"), **model)
    if grace is None:
        del config["model"]["codex_app_server_grace"]
    else:
        config["model"]["codex_app_server_grace"] = grace
    config.update(changes)
    write_config(home, config)


@contextlib.contextmanager
def api_server(home: Path) -> Iterator[tuple[Gateway, Any, str]]:
    gateway = Gateway(home)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{gateway.port}/v1",
                               api_key=gateway.key, max_retries=0, timeout=90)
        model = client.models.list().data[0].id
        yield gateway, client, model
    finally:
        gateway.stop()


def app_servers(gateway: Gateway) -> list[int]:
    """The codex app-server processes the gateway runs now."""
    out = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(gateway.proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "app-server" in child.cmdline():
                    out.append(child.pid)
    return out


def turn_request(provider: mp.MockResponsesProvider, said: str) -> dict[str, Any]:
    """The one request of the session's turn that answered ``said`` (not a side task's)."""
    [body] = [b for b in provider.requests if not is_title(b) and last_user_text(b) == said]
    return body


def times(body: dict[str, Any], marker: str) -> int:
    """How often ``marker`` reached the model in one request (instructions and input)."""
    return json.dumps(body).count(marker)


def test_a_clients_system_message_reaches_the_model_exactly_once(home, mock_provider):
    configure(home)
    mock_provider.set_default(side_task_router(turn=mp.text("noted")))
    with api_server(home) as (_, client, model):
        system = "SYSTEM-ALPHA: answer like a pirate."
        client.chat.completions.create(model=model, messages=[
            {"role": "system", "content": system}, {"role": "user", "content": "first question"}])
        first = turn_request(mock_provider, "first question")
        assert times(first, "SYSTEM-ALPHA") == 1
        # the next request of the same conversation, with the system message the user changed
        client.chat.completions.create(model=model, messages=[
            {"role": "system", "content": "SYSTEM-BRAVO: answer like a poet."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": "second question"}])
        second = turn_request(mock_provider, "second question")
        assert (times(second, "SYSTEM-BRAVO"), times(second, "SYSTEM-ALPHA")) == (1, 0)
        assert times(second, "first question") == 1  # the conversation came along, once

        # /v1/responses: `instructions`, then a changed one continuing the same conversation
        opened = client.responses.create(model=model, instructions="SYSTEM-CHARLIE: be brief.",
                                         input="third question")
        third = turn_request(mock_provider, "third question")
        assert times(third, "SYSTEM-CHARLIE") == 1
        client.responses.create(model=model, instructions="SYSTEM-DELTA: be thorough.",
                                input="fourth question", previous_response_id=opened.id)
        fourth = turn_request(mock_provider, "fourth question")
        assert (times(fourth, "SYSTEM-DELTA"), times(fourth, "SYSTEM-CHARLIE")) == (1, 0)
        # the conversation came along, once (Hermes' response store keeps that user turn twice)
        assert times(fourth, "third question") == 1


def test_a_regenerated_or_edited_answer_starts_from_the_conversation_the_client_sent(
        home, mock_provider):
    """A chat front-end regenerates an answer by sending the conversation again without it, and
    an edit by cutting the conversation at the edited message. The API server keys the session
    on the system message and the first user message, so the request lands on the same
    session — whose codex thread has seen the turns the client dropped."""
    configure(home)
    replies = iter(["Paris.", "Berlin.", "Still Berlin."])
    mock_provider.set_default(side_task_router(turn=lambda body: mp.text(next(replies))))
    with api_server(home) as (_, client, model):
        system = {"role": "system", "content": "You answer geography questions."}
        ask = {"role": "user", "content": "capital of France?"}
        client.chat.completions.create(model=model, messages=[system, ask])
        follow = {"role": "user", "content": "and of Germany?"}
        client.chat.completions.create(model=model, messages=[
            system, ask, {"role": "assistant", "content": "Paris."}, follow])
        # regenerate the second answer: the same conversation, without "Berlin."
        regenerated = client.chat.completions.create(model=model, messages=[
            system, ask, {"role": "assistant", "content": "Paris."}, follow])
        assert regenerated.choices[0].message.content == "Still Berlin."
    last = mock_provider.requests[-1] if not is_title(mock_provider.requests[-1]) else \
        [b for b in mock_provider.requests if not is_title(b)][-1]
    assert times(last, "and of Germany?") == 1  # not the thread's copy and the new one
    assert "Berlin." not in json.dumps(last)  # the dropped answer is gone


def test_a_disconnected_client_leaves_no_codex_process_once_the_grace_has_passed(
        home, mock_provider):
    configure(home, grace=2)
    mock_provider.set_default(side_task_router(
        turn=mp.text("word " * 400, deltas=400, delta_delay=0.05)))  # ~20 s of streaming
    with api_server(home) as (gateway, client, model):
        stream = client.chat.completions.create(
            model=model, stream=True, messages=[{"role": "user", "content": "tell a long story"}])
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
        assert app_servers(gateway), "the turn ran on no codex app-server"
        stream.close()  # the client goes away mid-stream
        left = time.monotonic()
        deadline = left + 2 + 12  # the grace, then the turn's interrupt and the process's exit
        while app_servers(gateway) and time.monotonic() < deadline:
            time.sleep(0.1)
        remaining = app_servers(gateway)
        gone_in = time.monotonic() - left
    assert not remaining, f"codex app-servers still running {gone_in:.1f} s after the disconnect"
    print(f"\nno codex process {gone_in:.1f} s after the disconnect (grace 2 s)")


def test_sequential_runs_reuse_one_warm_app_server(home, mock_provider):
    configure(home, grace=None, model={"codex_app_server": "shared"})  # the defaults
    mock_provider.set_default(side_task_router(turn=mp.text("done")))
    seen: list[list[int]] = []
    with api_server(home) as (gateway, client, model):
        for index in range(4):
            reply = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": f"run {index}"}])
            assert reply.choices[0].message.content == "done"
            seen.append(app_servers(gateway))
    assert all(len(pids) == 1 for pids in seen), seen
    assert len({pids[0] for pids in seen}) == 1, seen  # the same process served every run


def test_the_configured_context_length_holds_and_compression_fires_on_the_next_request(
        home, mock_provider):
    configure(home, model={"context_length": 80000},
              compression={"enabled": True, "codex_app_server_auto": "hermes"})
    # ~68k tokens: over the 64,000 threshold, within the window with the instructions and tools
    mock_provider.set_default(side_task_router(turn=outgrown_chat_turn))
    with api_server(home) as (_, client, model):
        opened = client.responses.create(model=model, input="write a lot")
        before = len(mock_provider.requests)
        going_on = client.responses.create(model=model, input="and now?",
                                           previous_response_id=opened.id)
    assert going_on.output_text == "Carrying on."
    log = (home / "logs" / "agent.log").read_text()
    assert "ctx 80,000" in log and "Preflight compression" in log  # the user's window, not codex's
    resumed = [b for b in mock_provider.requests[before:] if not is_title(b)]
    [compact] = [b for b in resumed if last_user_text(b) not in OUTGROWN_CHAT]
    after = turn_request(mock_provider, "and now?")
    assert resumed.index(compact) < resumed.index(after)  # compacted before the turn went on
    sent = json.dumps(after["input"])
    assert "SUMMARY-OF-THE-LOREM" in sent and "lorem ipsum dolor" not in sent


def test_two_requests_on_one_conversation_at_once_both_answer_in_full(home, mock_provider):
    """Two clients send on one API-server conversation (``X-Hermes-Session-Id``) at the same
    time: they never share its codex thread mid-turn — the second waits for the first — and
    both get their whole answer."""
    configure(home)

    def reply(body: dict[str, Any]) -> mp.Reply:
        said = last_user_text(body)
        return mp.text(f"answer to {said}", delay=2.0 if said == "slow question" else 0.0)

    mock_provider.set_default(side_task_router(turn=reply))
    header = {"X-Hermes-Session-Id": "one-conversation"}
    with api_server(home) as (_, client, model):
        client.chat.completions.create(model=model, extra_headers=header, messages=[
            {"role": "user", "content": "first question"}])
        answers: dict[str, str | None] = {}

        def ask(question: str) -> None:
            done = client.chat.completions.create(model=model, extra_headers=header, messages=[
                {"role": "user", "content": question}])
            answers[question] = done.choices[0].message.content

        slow = threading.Thread(target=ask, args=("slow question",))
        slow.start()
        deadline = time.monotonic() + 30
        while not any(last_user_text(b) == "slow question" for b in mock_provider.requests
                      if not is_title(b)) and time.monotonic() < deadline:
            time.sleep(0.05)
        ask("quick question")
        slow.join(timeout=90)
        assert not slow.is_alive()
    assert answers == {"slow question": "answer to slow question",
                       "quick question": "answer to quick question"}
