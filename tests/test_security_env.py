"""No host credential reaches codex's commands: a real ``hermes chat`` with a realistic
``~/.hermes/.env`` (every secret Hermes' own config knows, plus password-manager, cloud and database
credentials), the real codex binary, and a model that runs ``env``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from hermes_env import base_config, chat_finished, hermes_env, write_hermes_home

from hermes_codex_runtime.continuity import Binding
from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.offline.codex_home import prepare_codex_home

pytestmark = pytest.mark.real_hermes
HERMES = str(Path(sys.executable).with_name("hermes"))
PROVIDER_KEY_NAME = "HCR_MOCK_PROVIDER_KEY"
# Beyond Hermes' own list: what a gateway host's .env also tends to hold.
EXTRA_SECRETS = ("OP_SERVICE_ACCOUNT_TOKEN", "BWS_ACCESS_TOKEN", "DATABASE_URL",
                 "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "OPENAI_API_KEY", "STRIPE_SECRET_KEY", "SENTRY_DSN", "REDIS_URL")


def hermes_secret_names() -> list[str]:
    """Every credential Hermes' own config.yaml/.env schema marks as a password."""
    from hermes_cli.config import OPTIONAL_ENV_VARS

    names = [name for name, spec in OPTIONAL_ENV_VARS.items() if spec.get("password")]
    assert len(names) > 50, "Hermes' list of credentials shrank: check the probe"
    return sorted(set(names) | set(EXTRA_SECRETS))


def codex_environ(codex_home: Path) -> dict[str, str]:
    """The environment of the live codex app-server that runs on ``codex_home``."""
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if len(cmdline) < 2 or "app-server" not in cmdline or \
                os.path.basename(cmdline[0]) != "codex":
            continue
        try:
            raw = Path(f"/proc/{proc.pid}/environ").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        environ = dict(entry.split("=", 1) for entry in raw.split("\0") if "=" in entry)
        if environ.get("CODEX_HOME") == str(codex_home):
            return environ
    raise AssertionError("no live codex app-server found for this codex home")


def test_a_model_run_env_shows_no_host_credential(hermes_base, tmp_path, codex_binary,
                                                  mock_provider):
    secrets = {name: f"secret-{index:03d}-{os.urandom(6).hex()}"
               for index, name in enumerate(hermes_secret_names())}
    secrets["DATABASE_URL"] = f"postgres://app:pw-{os.urandom(6).hex()}@127.0.0.1/prod"
    provider_key = "sk-mock-provider-" + os.urandom(8).hex()
    mock_provider.required_key = provider_key
    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path, env_key=PROVIDER_KEY_NAME)
    home = tmp_path / "hermes-home"
    config = base_config(codex_home=str(codex_home),
                         codex_env_passthrough=["HCR_FOR_CODEX_ONLY"],
                         codex_command_env_passthrough=["HCR_FOR_COMMANDS"])
    write_hermes_home(home, config)
    dotenv = {**secrets, PROVIDER_KEY_NAME: provider_key,
              "HCR_FOR_CODEX_ONLY": "codex-only-value", "HCR_FOR_COMMANDS": "command-value"}
    (home / ".env").write_text("".join(f"{k}={v}\n" for k, v in dotenv.items()))

    seen: dict[str, dict[str, str]] = {}

    def run_env(body):
        seen["codex"] = codex_environ(codex_home)
        return mp.exec_command("env")

    mock_provider.enqueue(run_env, mp.text("env listed"))
    env = hermes_env(home)
    for name in dotenv:
        env.pop(name, None)  # only Hermes' .env provides them, as for a user
    done = subprocess.run([HERMES, "chat", "-Q", "-q", "list the environment"], env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=str(home))
    assert chat_finished(done), done.stderr
    assert "env listed" in done.stdout, done.stdout + done.stderr
    assert mock_provider.refused_unauthenticated == 0  # the provider key reached codex

    outputs = [item.get("output") for item in mock_provider.requests[1]["input"]
               if isinstance(item, dict) and item.get("type") == "function_call_output"]
    command_output = json.dumps(outputs)
    assert "PATH=" in command_output and "HOME=" in command_output  # it did run `env`
    leaked_to_commands = sorted(n for n, v in secrets.items() if v in command_output)
    assert leaked_to_commands == []
    assert provider_key not in command_output  # not even the key codex itself uses
    assert "codex-only-value" not in command_output
    assert "HCR_FOR_COMMANDS=command-value" in command_output

    codex_env = seen["codex"]
    assert sorted(set(secrets) & set(codex_env)) == []
    assert codex_env[PROVIDER_KEY_NAME] == provider_key
    assert codex_env["HCR_FOR_CODEX_ONLY"] == "codex-only-value"
    assert codex_env["HCR_FOR_COMMANDS"] == "command-value"
    print(f"\n{len(secrets)} credential names tried: 0 reached a command, 0 reached codex")


def test_commands_of_a_resumed_thread_inherit_no_credential(make_runtime, mock_provider):
    """The command policy travels with every thread/start AND thread/resume: even a codex
    process that holds a secret (here: an explicit environment, used as given) keeps it from
    the commands of a thread resumed by a new process."""
    import dataclasses

    from support import Agent, shut_down

    secret = "resume-secret-" + os.urandom(6).hex()
    _, host = make_runtime()
    settings = dataclasses.replace(host.settings, env={**os.environ, "HCR_SECRET": secret})
    runtime, _ = make_runtime(settings)
    mock_provider.enqueue(mp.text("first"))
    first = runtime.run_turn(Agent(), "hello")
    assert first.ok
    shut_down(runtime)

    again, _ = make_runtime(settings, stored=Binding(first.thread_id))
    mock_provider.enqueue(mp.exec_command("env"), mp.text("listed"))
    second = again.run_turn(Agent(), "list the environment")
    assert second.ok and second.thread_origin == "resumed"
    output = json.dumps([item.get("output") for item in mock_provider.requests[-1]["input"]
                         if isinstance(item, dict) and item.get("type") == "function_call_output"])
    assert "PATH=" in output and secret not in output
