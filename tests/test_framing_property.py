"""The framing reader against arbitrary byte streams: valid messages arrive whole and in order,
anything else becomes a diagnostic, nothing raises. `cat` plays the server (it echoes what the
test writes), so the real reader thread and pipes are exercised."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_codex_runtime.wire import AppServerConnection

_names = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd")), min_size=1, max_size=8)
_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20)),
                       lambda inner: st.one_of(st.lists(inner, max_size=3),
                                               st.dictionaries(_names, inner, max_size=3)),
                       max_leaves=8)
_notification = st.builds(lambda method, params: {"method": f"test/{method}", "params": params},
                          _names, st.dictionaries(_names, _values, max_size=4))
_request = st.builds(lambda method, rid, params: {"id": rid, "method": f"ask/{method}",
                                                  "params": params},
                     _names, st.one_of(st.integers(min_value=0), st.text(min_size=1, max_size=6)),
                     st.dictionaries(_names, _values, max_size=3))
_garbage = st.one_of(
    st.binary(max_size=40).map(lambda b: b"\xff" + b.replace(b"\n", b"")),  # invalid UTF-8
    st.text(max_size=40).map(lambda t: ("not json: " + t.replace("\n", "")).encode()),
    st.just(b"[1, 2, 3]"), st.just(b'{"method": 7}'), st.just(b'{"partial": '),
    st.just(b'"a bare string"'), st.just(b"42"), st.just(b"null"),
)
# Hostile replies and requests: ids that are lists, objects, booleans or floats, replies to ids
# nobody asked — each a diagnostic; none may kill the reader or steal a pending reply.
_bad_ids = st.one_of(st.lists(st.integers(), max_size=2), st.dictionaries(_names, _values,
                                                                          max_size=2),
                     st.booleans(), st.floats(allow_nan=False, allow_infinity=False))
_hostile = st.one_of(
    st.builds(lambda rid, result: {"id": rid, "result": result}, _bad_ids,
              st.dictionaries(_names, _values, max_size=2)),
    st.builds(lambda rid: {"id": rid, "error": {"code": -1, "message": "x"}}, _bad_ids),
    st.builds(lambda rid: {"id": rid, "result": {}},
              st.integers(min_value=10**12, max_value=10**13)),  # nobody asked
    st.builds(lambda rid, method: {"id": rid, "method": f"ask/{method}", "params": {}},
              _bad_ids, _names),
).map(lambda m: json.dumps(m).encode())


@pytest.fixture(scope="module")
def echo():
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    conn = AppServerConnection(proc)
    yield conn
    conn.close()


_counter = iter(range(10**9))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_notification.map(lambda m: ("ok", m)),
                          _request.map(lambda m: ("ok", m)),
                          _garbage.map(lambda g: ("junk", g)),
                          _hostile.map(lambda g: ("junk", g))), max_size=25))
def test_any_byte_stream_is_framed_without_loss_or_crash(echo, stream):
    marker = next(_counter)
    before = len(echo.diagnostics())
    data = b""
    for kind, item in stream:
        data += (json.dumps(item).encode() if kind == "ok" else item) + b"\n"
    data += json.dumps({"method": "test/end", "params": {"marker": marker}}).encode() + b"\n"
    echo._stdin.write(data)
    echo._stdin.flush()
    received = []
    while True:
        message = echo.next_inbound(timeout=10)
        assert message is not None, "the stream stalled"
        if message.method == "test/end" and message.params == {"marker": marker}:
            break
        received.append({"method": message.method, "params": message.params,
                         **({"id": message.id} if message.is_request else {})})
    expected = [{"method": m["method"], "params": m["params"],
                 **({"id": m["id"]} if "id" in m else {})} for kind, m in stream if kind == "ok"]
    assert received == expected
    junk = sum(1 for kind, _ in stream if kind == "junk")
    assert len(echo.diagnostics()) == min(100, before + junk)  # a bounded tail
    assert echo.is_alive()
    assert_a_pending_request_still_gets_its_reply(echo, marker)


def assert_a_pending_request_still_gets_its_reply(echo, marker):
    """`cat` echoes our request back as a server request; we answer it with the reply line."""
    replies: list = []
    asking = threading.Thread(target=lambda: replies.append(
        echo.request("probe/pending", {"marker": marker}, timeout=10)))
    asking.start()
    echoed = echo.next_inbound(timeout=10)
    assert echoed is not None and echoed.method == "probe/pending"
    echo._stdin.write(json.dumps({"id": echoed.id, "result": {"marker": marker}}).encode()
                      + b"\n")
    echo._stdin.flush()
    asking.join(timeout=10)
    assert replies == [{"marker": marker}]
