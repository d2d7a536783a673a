"""Approvals on Hermes' OpenAI-compatible API server as the official ``openai`` SDK meets them: a
real ``hermes gateway run`` on 127.0.0.1 whose turns run on the real codex binary, the model
played by the mock provider, with manual approvals and a turn that asks to run a command outside
the sandbox.

The SDK makes a chunk of every SSE event that carries data, whatever its name: the README's
snippet (run here as written) must never raise, see the approval where the stream carries one
(streaming chat completions on the 0.22 line), answer it and get the final answer; a client
that leaves at the approval must not keep its session busy; where no client can answer
(``/v1/responses``, 0.19.0's chat completions) the request is declined at once, or as
``approvals.unattended_mode`` says on the 0.22 line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_gateway_clients import api_server, configure
from test_side_tasks_e2e import last_user_text

from hermes_codex_runtime.offline import provider as mp

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "\n## API-server clients and approvals\n"
COMMAND = "echo ran-outside-the-sandbox"
SNIPPET_WAIT = 120.0  # the snippet's whole run: a first turn builds an agent and starts codex
TIMEOUT = 60  # approvals.timeout: what a request nobody answers would wait


def readme_snippet() -> str:
    """The README's Python snippet for API-server clients, exactly as written there."""
    text = README.read_text()
    section = text[text.index(SECTION):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("\n```", start)]


def host_source(module: str) -> str:
    """The source of one of Hermes' modules, read without importing Hermes here (the test's own
    process has no Hermes home to import it with)."""
    spec = importlib.util.find_spec("gateway")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations)), *module.split(".")[1:])
    file = path.with_suffix(".py")
    return file.read_text() if file.is_file() else ""


def chat_stream_approvals() -> bool:
    """Whether this host's streaming chat completions carry approvals (the 0.22 line)."""
    return "_register_stream_approval" in host_source(
        "gateway.platforms.api_server_openai_routes")


def keepalive_seconds() -> float:
    """How long Hermes' chat stream stays silent before it writes (and so notices a closed
    stream): 30 s on 0.19.0, 10 s on the 0.22 line."""
    found = re.search(r"^CHAT_COMPLETIONS_SSE_KEEPALIVE_SECONDS\s*=\s*([\d.]+)",
                      host_source("gateway.platforms.api_server"), re.MULTILINE)
    assert found, "Hermes' API server names no keepalive interval"
    return float(found.group(1))


def ran(provider: mp.MockResponsesProvider) -> bool:
    """Whether the command's output reached the model (it ran: approved)."""
    outputs = [item for body in provider.requests for item in body.get("input", [])
               if isinstance(item, dict) and item.get("type") == "function_call_output"]
    return any("ran-outside-the-sandbox" in json.dumps(item.get("output")) for item in outputs)


def escalating(answer: str, later: dict[str, str] | None = None):
    """The mock model: ``deploy it`` asks to run :data:`COMMAND` outside the sandbox, then
    answers ``answer`` once the command's outcome is back; other messages get ``later``'s."""
    def reply(body: dict[str, Any]) -> mp.Reply:
        last = body["input"][-1]
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            return mp.text(answer)
        said = last_user_text(body)
        if said == "deploy it":
            return mp.exec_command(COMMAND, escalated=True)
        return mp.text((later or {}).get(said, "an answer"))
    return reply


def test_an_approval_chunk_is_one_the_sdk_validates():
    """The chunk an approval becomes passes the SDK's own (strict) model, and the payload rides
    along whole."""
    from openai.types.chat import ChatCompletionChunk

    from hermes_codex_runtime.hermes.approvals.api_stream import approval_chunk

    event = {"event": "approval.request", "run_id": "chatcmpl-1", "request_id": "r1",
             "command": "rm -rf build", "choices": ["once", "session", "always", "deny"]}
    data = approval_chunk(event, completion_id="chatcmpl-1", created=1, model="hermes-agent")
    chunk = ChatCompletionChunk.model_validate(data)
    assert chunk.choices[0].delta.content is None and chunk.choices[0].finish_reason is None
    assert chunk.model_extra == {"event": "approval.request", "run_id": "chatcmpl-1",
                                 "request_id": "r1", "command": "rm -rf build",
                                 "approval": event}


@pytest.mark.real_hermes
def test_the_readme_snippet_answers_an_approval_on_a_streaming_chat_completion(
        home, mock_provider):
    configure(home, approvals={"mode": "manual", "timeout": TIMEOUT})
    mock_provider.set_default(escalating("Deployed."))
    with api_server(home) as (gateway, _, _):
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-c", readme_snippet()], input="once\n", capture_output=True,
            text=True, timeout=SNIPPET_WAIT, stdin=None,
            env={**os.environ, "HERMES_API_BASE": f"http://127.0.0.1:{gateway.port}/v1",
                 "API_SERVER_KEY": gateway.key})
        took = time.monotonic() - started
    assert run.returncode == 0, run.stderr[-3000:]  # the SDK's stream never raised
    assert run.stdout.rstrip().endswith("Deployed."), run.stdout
    if chat_stream_approvals():
        # the client saw the approval (the command, the answers), answered once, and it ran
        assert COMMAND in run.stdout and "answer (once/session/always/deny): " in run.stdout
        assert ran(mock_provider)
    else:
        # 0.19.0: its chat stream has no approval channel — declined at once, nothing to answer
        assert "answer (" not in run.stdout and not ran(mock_provider)
        assert took < TIMEOUT, took
    print(f"\nthe README snippet ran in {took:.1f} s:\n{run.stdout}")


@pytest.mark.real_hermes
def test_a_client_that_leaves_at_an_approval_leaves_its_session_free(home, mock_provider):
    """The client closes its stream at the approval (0.19.0: where it would be asked, the
    command's tool event): the session's next request is answered well before Hermes' next
    keepalive write would have noticed the closed stream, and the command never ran."""
    configure(home, approvals={"mode": "manual", "timeout": 120})
    mock_provider.set_default(escalating("Not deployed.", {"and now?": "Here now."}))
    header = {"X-Hermes-Session-Id": "a-client-that-leaves"}
    with api_server(home) as (_, client, model):
        stream = client.chat.completions.create(
            model=model, stream=True, extra_headers=header,
            messages=[{"role": "user", "content": "deploy it"}])
        seen: dict[str, Any] = {}
        for chunk in stream:
            extra = chunk.model_extra or {}
            if chat_stream_approvals() and extra.get("approval"):
                seen = extra["approval"]
                break
            if not chat_stream_approvals() and extra.get("status") == "running":
                seen = extra
                break
        stream.close()  # the client goes away
        left = time.monotonic()
        answer = client.with_options(timeout=TIMEOUT).chat.completions.create(
            model=model, extra_headers=header,
            messages=[{"role": "user", "content": "and now?"}])
        waited = time.monotonic() - left
    assert seen, "the stream ended without the approval"
    assert answer.choices[0].message.content == "Here now."
    assert not ran(mock_provider)
    assert waited < keepalive_seconds(), waited
    print(f"\nthe next request was answered {waited:.1f} s after the client left "
          f"(Hermes writes a keepalive after {keepalive_seconds():.0f} s)")


@pytest.mark.real_hermes
def test_a_streaming_response_carries_no_approval_and_declines_at_once(home, mock_provider):
    configure(home, approvals={"mode": "manual", "timeout": TIMEOUT})
    mock_provider.set_default(escalating("It was not allowed."))
    with api_server(home) as (_, client, model):
        started = time.monotonic()
        events = list(client.responses.create(model=model, input="deploy it", stream=True))
        took = time.monotonic() - started
    assert events[-1].type == "response.completed", [e.type for e in events]
    assert events[-1].response.output_text == "It was not allowed."
    assert not [e for e in events if "approval" in e.type or "approval" in (e.model_extra or {})]
    assert not ran(mock_provider)
    assert took < TIMEOUT, took  # declined at once: nobody can answer there


@pytest.mark.real_hermes
def test_unattended_mode_decides_a_request_no_client_can_answer(home, mock_provider):
    """``approvals.unattended_mode: approve`` (the 0.22 line) accepts what reaches a surface no
    client can answer — as Hermes' gate does for its own tools there; 0.19.0 has no such key and
    declines."""
    configure(home, approvals={"mode": "manual", "timeout": TIMEOUT,
                               "unattended_mode": "approve"})
    mock_provider.set_default(escalating("Done."))
    with api_server(home) as (_, client, model):
        response = client.responses.create(model=model, input="deploy it")
    assert response.output_text == "Done."
    assert ran(mock_provider) is chat_stream_approvals()  # the 0.22 line has the key
