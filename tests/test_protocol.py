"""The pure protocol layer: input mapping, answers, failure classification, scope, builders."""

from __future__ import annotations

import pytest

from hermes_codex_runtime.protocol import (
    Decision,
    Failure,
    FailureKind,
    InputError,
    answer_for,
    approval_kind,
    classify,
    classify_error_notification,
    safe_answer,
    scope_of,
    thread_resume_params,
    thread_start_params,
    to_user_input,
    turn_start_params,
)

PNG_DATA_URL = "data:image/png;base64,iVBORw0KGgo="


# ---------------------------------------------------------------- inputs


def test_images_stay_images_in_every_host_shape(tmp_path):
    picture = tmp_path / "shot.png"
    picture.write_bytes(b"\x89PNG")
    items = to_user_input([
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": PNG_DATA_URL, "detail": "high"}},
        {"type": "input_image", "image_url": "https://example.com/a.png"},
        {"type": "image_url", "image_url": {"url": f"file://{picture}"}},
        {"type": "input_image", "image_url": "shot.png"},
    ], base_dir=str(tmp_path))
    assert items == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "url": PNG_DATA_URL, "detail": "high"},
        {"type": "image", "url": "https://example.com/a.png"},
        {"type": "localImage", "path": str(picture)},
        {"type": "localImage", "path": str(picture)},
    ]


def test_attached_images_follow_the_text(tmp_path):
    picture = tmp_path / "p.jpg"
    picture.write_bytes(b"x")
    assert to_user_input("look", images=[str(picture)]) == [
        {"type": "text", "text": "look"},
        {"type": "localImage", "path": str(picture)},
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty"),
        ([], "empty"),
        ([{"type": "audio_blob", "data": "..."}], "unsupported type 'audio_blob'"),
        ([{"type": "image_url", "image_url": {"url": "/nonexistent/x.png"}}], "does not exist"),
        ([{"type": "image_url", "image_url": {"url": "data:text/plain;base64,AA=="}}],
         "data:image"),
        ([{"type": "image_url", "image_url": {"url": "https://"}}], "no host"),
        ([{"type": "image_url"}], "no URL or path"),
        ([42], "not an object"),
        (3.5, "cannot send a float"),
    ],
)
def test_bad_input_is_a_clear_error(content, message):
    with pytest.raises(InputError, match=message):
        to_user_input(content)


def test_text_with_nul_bytes_and_unusual_unicode_is_kept_verbatim():
    text = "a\x00b \u202e\U0001f600 \ud7ff"
    assert to_user_input(text) == [{"type": "text", "text": text}]


# ---------------------------------------------------------------- answers


def test_every_known_server_request_has_a_fail_closed_answer():
    assert safe_answer("item/commandExecution/requestApproval") == {"decision": "decline"}
    assert safe_answer("item/fileChange/requestApproval") == {"decision": "decline"}
    # permissions answer with a granted subset, never with {"decision": ...}
    assert safe_answer("item/permissions/requestApproval") == {"permissions": {}}
    assert safe_answer("mcpServer/elicitation/request") == {
        "action": "decline", "content": None, "_meta": None}
    assert safe_answer("item/tool/requestUserInput") == {"answers": {}}
    assert safe_answer("item/tool/call") == {"contentItems": [], "success": False}
    assert safe_answer("account/chatgptAuthTokens/refresh") is None  # → -32601


def test_safe_answers_are_fresh_copies():
    first = safe_answer("item/tool/call")
    assert first is not None
    first["contentItems"].append("mutated")
    assert safe_answer("item/tool/call") == {"contentItems": [], "success": False}


def test_permissions_accept_grants_what_was_requested_with_a_scope():
    requested = {"network": {"enabled": True}, "fileSystem": {"write": ["/w"]}}
    answer = answer_for("item/permissions/requestApproval", Decision.ACCEPT_FOR_SESSION,
                        {"permissions": requested})
    assert answer == {"permissions": requested, "scope": "session"}
    assert answer["permissions"] is not requested
    assert answer_for("item/permissions/requestApproval", Decision.ACCEPT,
                      {"permissions": requested})["scope"] == "turn"


def test_elicitation_decisions_map_to_actions():
    method = "mcpServer/elicitation/request"
    assert answer_for(method, Decision.ACCEPT)["action"] == "accept"
    assert answer_for(method, Decision.ACCEPT)["content"] == {}
    assert answer_for(method, Decision.CANCEL)["action"] == "cancel"
    assert answer_for(method, Decision.DECLINE)["action"] == "decline"


def test_mcp_tool_approvals_are_recognised_inside_elicitations():
    params = {"_meta": {"codex_approval_kind": "mcp_tool_call"}}
    assert approval_kind("mcpServer/elicitation/request", params) == "mcp_tool_call"
    assert approval_kind("mcpServer/elicitation/request", {}) == "elicitation"
    assert approval_kind("item/fileChange/requestApproval") == "file_change"
    assert approval_kind("something/else") == "unknown"


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("info", "kind"),
    [
        ("usageLimitExceeded", FailureKind.USAGE_LIMIT),
        ("unauthorized", FailureKind.AUTH),
        ("contextWindowExceeded", FailureKind.CONTEXT_WINDOW),
        ("rateLimitExceeded", FailureKind.RATE_LIMIT),
        ("internalServerError", FailureKind.SERVICE),
        ("serverOverloaded", FailureKind.OVERLOADED),
        ({"responseTooManyFailedAttempts": {"httpStatusCode": 429}}, FailureKind.RATE_LIMIT),
        ({"httpConnectionFailed": {"httpStatusCode": 401}}, FailureKind.AUTH),
        ({"responseStreamDisconnected": {"httpStatusCode": None}}, FailureKind.SERVICE),
        ("modelNotFound", FailureKind.BAD_REQUEST),
        ("someFutureVariant", FailureKind.OTHER),
    ],
)
def test_codex_error_info_decides_the_kind(info, kind):
    assert classify(info, "whatever the text says").kind is kind


def test_usage_limit_is_failover_class_and_auth_asks_for_codex_login():
    usage = classify("usageLimitExceeded", "You've hit your usage limit.")
    assert usage.failover and not usage.retire_session
    auth = classify(None, "Your access token could not be refreshed because your refresh token "
                          "was already used.")
    assert auth.kind is FailureKind.AUTH and auth.reauth and auth.retire_session
    assert "codex login" in auth.describe()


def test_an_unrelated_401_in_stderr_does_not_mask_the_primary_error():
    stderr = ["ERROR plugin prewarm: 401 Unauthorized"]
    assert classify("contextWindowExceeded", "too long", stderr=stderr).kind is \
        FailureKind.CONTEXT_WINDOW
    assert classify(None, "stream disconnected before completion", stderr=stderr).kind is \
        FailureKind.OTHER
    # With no primary error at all, stderr is the only evidence there is.
    assert classify(None, "", stderr=stderr).kind is FailureKind.AUTH


def test_error_notifications_report_will_retry():
    failure, will_retry = classify_error_notification({
        "error": {"message": "Reconnecting... 1/5", "codexErrorInfo": {
            "responseStreamDisconnected": {"httpStatusCode": 502}}}, "willRetry": True})
    assert will_retry and failure.kind is FailureKind.SERVICE and failure.retryable


# ---------------------------------------------------------------- scope


def test_scope_reads_every_place_codex_puts_it():
    assert scope_of({"threadId": "t", "turnId": "u"}).belongs_to("t", "u")
    assert not scope_of({"threadId": "other", "turnId": "u"}).belongs_to("t", "u")
    assert not scope_of({"threadId": "t", "turn": {"id": "v"}}).belongs_to("t", "u")
    assert scope_of({"thread": {"id": "t"}}).belongs_to("t", "u")
    assert scope_of({}).belongs_to("t", "u")  # unscoped: e.g. account/rateLimits/updated


# ---------------------------------------------------------------- builders


def test_builders_drop_nones_and_refuse_removed_or_unknown_values():
    params = thread_start_params(cwd="/w", developer_instructions="be brief")
    assert params == {"cwd": "/w", "developerInstructions": "be brief", "personality": "none"}
    with pytest.raises(ValueError, match="on-failure"):
        thread_start_params(approval_policy="on-failure")
    with pytest.raises(ValueError, match="sandbox"):
        thread_start_params(sandbox="yolo")
    with pytest.raises(ValueError, match="thread id"):
        thread_resume_params("")
    with pytest.raises(ValueError, match="input"):
        turn_start_params("t", [])


def test_text_over_codex_input_limit_is_refused_before_sending():
    from hermes_codex_runtime.protocol.inputs import MAX_INPUT_CHARS

    assert to_user_input("x" * MAX_INPUT_CHARS)[0]["text"] == "x" * MAX_INPUT_CHARS
    with pytest.raises(InputError, match="at most 1,048,576"):
        to_user_input([{"type": "text", "text": "x" * MAX_INPUT_CHARS}, "y"])


def test_no_failure_hint_gives_another_host_hermes_advice():
    """Hermes' keys and commands come from the Hermes adapter, not from the protocol layer."""
    for kind in FailureKind:
        text = Failure(kind, "something broke").describe().lower()
        for hermes_word in ("hermes", "config.yaml", "model.", "/codex-runtime", "/compress",
                            "fallback_providers"):
            assert hermes_word not in text, (kind, text)


# ---------------------------------------------------------------- schema types


def _pinned_codex() -> str:
    """The codex the package pins (the bundled one, whatever ``CODEX_BIN`` says)."""
    from hermes_codex_runtime.testing.protocol_types import pinned_codex

    try:
        return pinned_codex()
    except LookupError as exc:
        pytest.fail(f"the pinned codex is needed to check schema_types.py: {exc}")


def test_schema_types_are_what_the_pinned_codex_schema_generates(codex_binary):
    from hermes_codex_runtime.testing import protocol_types as _generate

    committed = _generate.MODULE.read_text()
    delta = _generate.diff(committed, _generate.module_text(_pinned_codex(), committed))
    assert not delta, ("schema_types.py's generated block differs from what the pinned codex's "
                       "schema gives; run `python -m hermes_codex_runtime.testing.protocol_types`, "
                       "never edit the block by hand:\n" + delta)


def test_the_codex_in_use_keeps_every_schema_type_the_runtime_uses(codex_binary, tmp_path):
    """On another codex (CODEX_BIN), the types generated from the pinned one still hold: nothing
    the runtime sends, answers or reads is gone, retyped or newly required there."""
    from hermes_codex_runtime.testing import protocol_types as _generate

    _generate.generate_schema(_pinned_codex(), tmp_path / "pinned")
    version = _generate.generate_schema(codex_binary.path, tmp_path / "used")
    breaking, _ = _generate.incompatibilities(_generate.model(tmp_path / "pinned"),
                                              _generate.model(tmp_path / "used"))
    assert not breaking, f"codex {version} changed types the runtime uses: {breaking}"
