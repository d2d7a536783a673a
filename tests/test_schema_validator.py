"""The schema validator behind the fake app-server and the wire-clean checks, on the schema the
installed codex binary generates."""

from __future__ import annotations


def test_nested_unknown_fields_are_reported_as_ignored(protocol_schema):
    verdict = protocol_schema.check_client_request("turn/start", {
        "threadId": "t",
        "input": [{"type": "text", "text": "hi", "txet": "typo"}],
        "sandboxPolicy": {"type": "readOnly", "network": True},
    })
    assert verdict.ok
    assert sorted(verdict.ignored) == ["params.input[0].txet", "params.sandboxPolicy.network"]


def test_a_closed_object_rejects_unknown_fields(protocol_schema):
    # AskForApproval's granular form denies unknown fields (additionalProperties: false).
    verdict = protocol_schema.check_client_request("thread/start", {
        "approvalPolicy": {"granular": {"mcp_elicitations": True, "rules": True,
                                        "sandbox_approval": True}, "extra": 1}})
    assert not verdict.ok
    assert any("unknown field `extra`" in e for e in verdict.errors), verdict.errors
    assert verdict.ignored == []  # rejected, not dropped


def test_errors_name_the_field_and_the_expected_shape(protocol_schema):
    verdict = protocol_schema.check_client_request("turn/start", {"threadId": 7, "input": "hi"})
    assert "params.threadId: invalid type: number `7`, expected string" in verdict.errors
    assert "params.input: invalid type: string \"hi\", expected array" in verdict.errors
    # A tagged union: the error is the one of the variant the `type` tag names, though another
    # variant (`image`, which needs nothing but its tag) fails with fewer errors.
    tagged = protocol_schema.check_client_request(
        "turn/start", {"threadId": "t", "input": [{"type": "skill"}]})
    assert tagged.errors == ["params.input[0]: data did not match any variant of enum "
                             "(params.input[0]: missing field `name`)"]


def test_unknown_methods_and_enum_variants_are_named(protocol_schema):
    assert protocol_schema.check_client_request("thread/strat", {}).errors == [
        "unknown variant `thread/strat` (client request)"]
    [error] = protocol_schema.check_client_request("thread/start",
                                                   {"sandbox": "read-mostly"}).errors
    assert error.startswith("params.sandbox: ")
    assert "unknown variant `read-mostly`, expected one of `read-only`" in error
    assert protocol_schema.check_client_request("thread/start", {"sandbox": "read-only"}).clean


def test_what_the_fake_sends_is_checked_too(protocol_schema):
    assert protocol_schema.check_server_notification(
        "item/agentMessage/delta", {"threadId": "t", "turnId": "u", "itemId": "i",
                                     "delta": "hi"}).clean
    late = protocol_schema.check_server_notification(
        "item/agentMessage/delta", {"threadId": "t", "turnId": "u", "itemId": "i"})
    assert late.errors == ["params: missing field `delta`"]
    assert "result: missing field `thread`" in protocol_schema.check_response(
        "thread/start", {}).errors


def test_free_form_objects_are_not_flagged(protocol_schema):
    verdict = protocol_schema.check_client_request("thread/start", {
        "config": {"anything": {"goes": [1, 2]}}})
    assert verdict.clean


def test_replies_to_server_requests_are_checked_per_method(protocol_schema):
    assert protocol_schema.check_reply_to_server_request(
        "item/permissions/requestApproval", {"permissions": {}}).clean
    wrong = protocol_schema.check_reply_to_server_request(
        "item/permissions/requestApproval", {"decision": "decline"})
    assert "result: missing field `permissions`" in wrong.errors
    assert wrong.ignored == ["result.decision"]
    assert not protocol_schema.check_reply_to_server_request(
        "item/commandExecution/requestApproval", {"decision": "yes"}).ok
