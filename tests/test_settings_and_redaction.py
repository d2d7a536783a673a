"""Bad values for every config key the plugin reads get one clear message naming the key, and
every secret shape is redacted before anyone sees it."""

from __future__ import annotations

import pytest

from hermes_codex_runtime.hermes.config.settings import (
    SettingError,
    plugin_settings,
    runtime_requested,
)
from hermes_codex_runtime.wire.redact import redact


@pytest.mark.parametrize(("model", "key"), [
    ({"codex_bin": 42}, "model.codex_bin"),
    ({"codex_bin": "   "}, "model.codex_bin"),
    ({"codex_home": ["/a"]}, "model.codex_home"),
    ({"codex_turn_timeout": -5}, "model.codex_turn_timeout"),
    ({"codex_turn_timeout": "soon"}, "model.codex_turn_timeout"),
    ({"codex_turn_timeout": True}, "model.codex_turn_timeout"),
    ({"codex_turn_timeout": float("inf")}, "model.codex_turn_timeout"),  # YAML .inf
    ({"codex_turn_timeout": float("nan")}, "model.codex_turn_timeout"),
    ({"codex_turn_timeout": 10**12}, "model.codex_turn_timeout"),
    ({"codex_env_passthrough": "A B"}, "model.codex_env_passthrough"),
    ({"codex_command_env_passthrough": [1]}, "model.codex_command_env_passthrough"),
    ({"codex_sandbox": "yolo"}, "model.codex_sandbox"),
    ({"codex_model": ""}, "model.codex_model"),
    ({"codex_model_provider": 3}, "model.codex_model_provider"),
    ({"codex_app_server": 5}, "model.codex_app_server"),
    ({"codex_app_server": "http://127.0.0.1:4500"}, "model.codex_app_server"),
    ({"codex_app_server": "ws://127.0.0.1"}, "model.codex_app_server"),  # no port
    ({"codex_app_server": "ws://bob:secret@127.0.0.1:4500"}, "model.codex_app_server"),
    ({"codex_app_server": []}, "model.codex_app_server"),
    ({"codex_app_server": ["ws://127.0.0.1:1", "ws://127.0.0.1:1"]}, "model.codex_app_server"),
    ({"codex_app_server": {"url": "ws://127.0.0.1:1", "tokn": "x"}}, "model.codex_app_server"),
    ({"codex_app_server": "shard"}, "model.codex_app_server"),
    ({"codex_app_server_threads": 0}, "model.codex_app_server_threads"),
    ({"codex_app_server_threads": 2.5}, "model.codex_app_server_threads"),
    ({"codex_app_server_token_file": 7}, "model.codex_app_server_token_file"),
    ({"codex_app_server_max_processes": 0}, "model.codex_app_server_max_processes"),
    ({"codex_app_server_idle": -1}, "model.codex_app_server_idle"),
    ({"codex_app_server_idle": float("inf")}, "model.codex_app_server_idle"),
    ({"codex_app_server_grace": -5}, "model.codex_app_server_grace"),
    ({"codex_app_server_grace": "5m"}, "model.codex_app_server_grace"),
])
def test_each_bad_value_names_its_key(model, key):
    with pytest.raises(SettingError, match=key.replace(".", r"\.")):
        plugin_settings({"model": model})


def test_app_server_values_become_placements(tmp_path):
    from hermes_codex_runtime.pool import PER_SESSION, SHARED

    default = plugin_settings({"model": {}}).app_server
    assert default.mode == SHARED and default.limits.idle_grace == 300  # kept warm for 5 min
    assert plugin_settings({"model": {"codex_app_server_grace": 0}}).app_server.limits \
        .idle_grace == 0
    assert plugin_settings({"model": {"codex_app_server": "per-session"}}).app_server.mode == \
        PER_SESSION
    shared = plugin_settings({"model": {"codex_app_server_threads": 4,
                                        "codex_app_server_max_processes": 3,
                                        "codex_app_server_idle": 0}}).app_server
    assert shared.mode == SHARED and shared.limits.threads_per_process == 4
    assert shared.limits.max_processes == 3 and shared.limits.idle_session == 0
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    remote = plugin_settings({"model": {
        "codex_app_server": ["ws://127.0.0.1:4500", {"url": "unix:///run/codex.sock"}],
        "codex_app_server_token_file": str(token)}}).app_server
    assert remote.mode == "endpoints"
    assert [(e.url, e.token_file) for e in remote.endpoints] == [
        ("ws://127.0.0.1:4500", str(token)), ("unix:///run/codex.sock", str(token))]


def test_a_token_file_that_does_not_exist_is_named(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(SettingError, match=f"token file {missing} for ws://127.0.0.1:4500"):
        plugin_settings({"model": {"codex_app_server": "ws://127.0.0.1:4500",
                                   "codex_app_server_token_file": str(missing)}})


@pytest.mark.parametrize("value", [5, ["codex_app_server"], {"a": 1}])
def test_a_malformed_openai_runtime_names_the_key(value):
    with pytest.raises(SettingError, match=r"model\.openai_runtime"):
        runtime_requested({"openai_runtime": value})


def test_good_values_are_accepted(tmp_path):
    settings = plugin_settings({"model": {"codex_bin": "~/bin/codex", "codex_home": str(tmp_path),
                                          "codex_turn_timeout": 30, "codex_sandbox": "read-only",
                                          "codex_model": "gpt-5.5"}})
    assert settings.codex_bin.endswith("/bin/codex") and not settings.codex_bin.startswith("~")
    assert settings.turn_timeout == 30.0 and settings.codex_model == "gpt-5.5"
    assert runtime_requested({"openai_runtime": "codex-app-server"})
    assert not runtime_requested({"openai_runtime": "auto", "api_mode": False})


@pytest.mark.parametrize(("text", "secret"), [
    ("Authorization: Bearer abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
    ("using key sk-proj-AbCdEf0123456789xyz", "sk-proj-AbCdEf0123456789xyz"),
    ("OPENAI_API_KEY=sk-live-0123456789abcdef", "sk-live-0123456789abcdef"),
    ("cloning https://bob:hunter2secret@git.example.com/repo", "hunter2secret"),
    ('{"refresh_token": "rt_0123456789abcdef"}', "rt_0123456789abcdef"),
    ("token ghp_0123456789abcdefghijklmnopqrstuv", "ghp_0123456789abcdefghijklmnopqrstuv"),
    ("slack xoxb-0123456789-abcdefghij", "xoxb-0123456789-abcdefghij"),
    ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
    ("jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f", "SflKxwRJSMeKKF2QT4f"),
    ("password: correct-horse-battery", "correct-horse-battery"),
])
def test_secrets_are_redacted(text, secret):
    shown = redact(text)
    assert secret not in shown and "[REDACTED]" in shown


def test_ordinary_text_is_left_alone():
    text = "ERROR codex_core: 401 Unauthorized while fetching https://example.com/v1/models"
    assert redact(text) == text
