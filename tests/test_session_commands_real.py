"""The codex thread holds the conversation the host holds, after the host edits it: turns undone
or retried are cut from the thread (``thread/revert``), turns another provider answered are given
to it (``thread/inject_items``), a new conversation starts a thread that knows nothing — in one
process and across processes, on the REAL codex binary with the mock provider. What counts is
what the model receives: the next request's input."""

from __future__ import annotations

import dataclasses
import threading

from support import Agent, shut_down, wait_for

from hermes_codex_runtime.offline import provider as mp


class Chat:
    """A host conversation: each turn sends ``text`` with the history so far and keeps the
    exchange, as a host's transcript would."""

    def __init__(self, runtime, mock_provider, agent=None) -> None:
        self.runtime, self.provider = runtime, mock_provider
        self.agent = agent or Agent()
        self.history: list[dict[str, str]] = []

    def say(self, text: str):
        self.provider.enqueue(mp.text(f"ANSWER-{text}"))
        turn = self.runtime.run_turn(self.agent, text, list(self.history))
        assert turn.ok, turn.error
        self.history += [{"role": "user", "content": text},
                         {"role": "assistant", "content": turn.final_text}]
        return turn

    def undo(self, n: int = 1) -> str:
        """Drop the last ``n`` user turns (what Hermes' /undo does); the last one's text."""
        users = [i for i, m in enumerate(self.history) if m["role"] == "user"]
        text = self.history[users[-n]]["content"]
        del self.history[users[-n]:]
        return text

    def seen(self) -> str:
        """Everything the model received in the last request."""
        return "\n".join(self.messages())

    def messages(self) -> list[str]:
        """The texts of the messages the model received in the last request."""
        return [text for _, text in self.provider.request_texts(-1)]


def _sent(make_runtime, method: str) -> list[dict]:
    return [m for conn in make_runtime.connections for m in conn.sent if m.get("method") == method]


def test_undo_cuts_the_undone_turns_from_the_same_thread(make_runtime, mock_provider):
    runtime, _host = make_runtime()
    chat = Chat(runtime, mock_provider)
    first = chat.say("UNDO-ONE")
    chat.say("UNDO-TWO")
    chat.say("UNDO-THREE")
    chat.undo(2)
    after = chat.say("UNDO-FOUR")
    seen = chat.seen()
    assert "UNDO-ONE" in seen and "ANSWER-UNDO-ONE" in seen and "UNDO-FOUR" in seen
    assert "UNDO-TWO" not in seen and "UNDO-THREE" not in seen
    # codex's own operation on the same thread: its earlier items kept, nothing re-seeded
    assert after.thread_id == first.thread_id
    assert "already happened" not in seen
    assert len(_sent(make_runtime, "thread/revert")) == 1
    chat.say("UNDO-FIVE")  # the thread now matches: it simply goes on
    assert len(_sent(make_runtime, "thread/revert")) == 1
    assert "ANSWER-UNDO-FOUR" in chat.seen() and "UNDO-TWO" not in chat.seen()


def test_retry_sends_the_users_message_once(make_runtime, mock_provider):
    runtime, _host = make_runtime()
    chat = Chat(runtime, mock_provider)
    chat.say("RETRY-ONE")  # the only turn: undoing it leaves nothing before the retry
    again = chat.undo()
    chat.say(again)
    assert chat.messages().count("RETRY-ONE") == 1
    assert "ANSWER-RETRY-ONE" not in chat.seen()
    chat.say("RETRY-TWO")
    again = chat.undo()
    chat.say(again)
    seen = chat.messages()
    assert seen.count("RETRY-TWO") == 1 and seen.count("RETRY-ONE") == 1
    assert "ANSWER-RETRY-ONE" in seen and "ANSWER-RETRY-TWO" not in seen


def test_a_new_conversation_on_the_same_agent_knows_nothing_of_the_last(make_runtime,
                                                                         mock_provider):
    runtime, _host = make_runtime()
    chat = Chat(runtime, mock_provider)
    old = chat.say("NEW-SECRET-ONE")
    chat.history = []  # what Hermes' /new hands the next turn
    fresh = chat.say("NEW-HELLO")
    assert "NEW-SECRET-ONE" not in chat.seen() and "NEW-HELLO" in chat.seen()
    assert fresh.thread_id != old.thread_id


def test_turns_another_provider_answered_reach_codex_in_order(make_runtime, mock_provider):
    runtime, _host = make_runtime()
    chat = Chat(runtime, mock_provider)
    first = chat.say("ELSE-ONE")
    chat.history += [{"role": "user", "content": "ELSE-ASKED-ELSEWHERE"},
                     {"role": "assistant", "content": "ELSE-ANSWERED-ELSEWHERE"}]
    back = chat.say("ELSE-BACK")
    seen = chat.seen()
    assert back.thread_id == first.thread_id and "already happened" not in seen
    order = [seen.index(t) for t in ("ELSE-ONE", "ELSE-ASKED-ELSEWHERE",
                                     "ELSE-ANSWERED-ELSEWHERE", "ELSE-BACK")]
    assert order == sorted(order)
    chat.say("ELSE-AGAIN")  # given once: the next turn does not add them again
    assert chat.messages().count("ELSE-ASKED-ELSEWHERE") == 1


def test_a_later_process_resumes_the_thread_and_cuts_what_was_undone(make_runtime,
                                                                      mock_provider):
    runtime, host = make_runtime()
    chat = Chat(runtime, mock_provider)
    first = chat.say("ACROSS-ONE")
    chat.say("ACROSS-TWO")
    shut_down(runtime)

    later, _ = make_runtime(stored=host.stored)
    chat.runtime, chat.agent = later, Agent()
    chat.undo()
    resumed = chat.say("ACROSS-THREE")
    seen = chat.seen()
    assert resumed.thread_id == first.thread_id and resumed.thread_origin == "resumed"
    assert "ACROSS-ONE" in seen and "ACROSS-TWO" not in seen and "already happened" not in seen


def test_two_requests_on_one_conversation_never_share_the_thread_mid_turn(make_runtime,
                                                                          mock_provider):
    """Two agents for one conversation (an API server's second request with the same session
    header) — the second waits for the first's turn, then both answers are whole."""
    runtime, host = make_runtime()
    chat = Chat(runtime, mock_provider)
    chat.say("BUSY-ONE")
    mock_provider.enqueue(mp.text("BUSY-SLOW-ANSWER", delay=1.5), mp.text("BUSY-QUICK-ANSWER"))
    history = list(chat.history)
    results = {}

    def run(name: str, text: str) -> None:
        results[name] = runtime.run_turn(Agent(name), text, history)

    slow = threading.Thread(target=run, args=("slow", "BUSY-SLOW"))
    slow.start()
    assert wait_for(lambda: len(mock_provider.requests) >= 2, timeout=30)  # slow is at the model
    run("quick", "BUSY-QUICK")
    slow.join(timeout=60)
    assert not slow.is_alive()
    assert results["slow"].ok and results["slow"].final_text == "BUSY-SLOW-ANSWER"
    assert results["quick"].ok and results["quick"].final_text == "BUSY-QUICK-ANSWER"
    # the quick request's conversation did not have the slow turn: neither had its model
    assert "BUSY-ONE" in chat.messages() and "BUSY-SLOW" not in chat.messages()
    assert host.bound[-1] == results["quick"].thread_id


def test_a_branch_forks_the_thread_and_the_original_conversation_keeps_its_own(make_runtime,
                                                                                mock_provider):
    """A conversation branched off another on the same agent (Hermes' /branch: a new session
    with the same history) runs on a fork of the thread — its earlier items kept, nothing
    seeded — and the original conversation, taken up again, never sees the branch's turns."""
    runtime, host = make_runtime()
    host.settings = dataclasses.replace(host.settings, conversation="trunk")
    chat = Chat(runtime, mock_provider)
    trunk = chat.say("BRANCH-ONE")
    host.settings = dataclasses.replace(host.settings, conversation="branch")
    trunk_history = list(chat.history)
    branched = chat.say("BRANCH-ONLY-HERE")
    assert branched.thread_id != trunk.thread_id and branched.thread_origin == "forked"
    assert "BRANCH-ONE" in chat.messages() and "already happened" not in chat.seen()
    chat.undo()  # the branch's own turns can be undone on the fork like any others
    chat.say("BRANCH-AFTER-UNDO")
    assert "BRANCH-ONLY-HERE" not in chat.seen() and "BRANCH-ONE" in chat.messages()
    assert len(_sent(make_runtime, "thread/start")) == 1  # the fork was mended, not replaced

    host.settings = dataclasses.replace(host.settings, conversation="trunk")  # /resume trunk
    chat.history = trunk_history
    back = chat.say("BRANCH-TRUNK-AGAIN")
    assert back.thread_id == trunk.thread_id
    assert "BRANCH-ONE" in chat.messages()
    assert not any("BRANCH-ONLY-HERE" in t or "AFTER-UNDO" in t for t in chat.messages())
