"""A real operator's first hour, as they meet it: their own config.yaml (and its mistakes),
the plugin's commands as installed, a codex that is not logged in or cannot reach its
provider, and the playground — through real processes on the real codex binary and Hermes."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hermes_env import Gateway, base_config, chat_finished, hermes_env, write_config

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes
BIN = Path(sys.executable).parent
SCRIPT = str(BIN / "hermes-codex-runtime")
HERMES = str(BIN / "hermes")


def run(*args: str, home: Path, timeout: float = 120, **env: str):
    return subprocess.run([SCRIPT, *args], env=hermes_env(home, **env), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def checks_of(proc) -> dict[str, dict]:
    return {check["name"]: check for check in json.loads(proc.stdout)["checks"]}


# ------------------------------------------------------------------ config.yaml


BROKEN = "model:\n  provider: openai-codex\n  openai_runtime: codex_app_server\n   bad: [1\n"


def test_an_unparsable_config_is_shown_where_it_breaks_and_nothing_rewrites_it(home):
    (home / "config.yaml").write_text(BROKEN)
    doctor = run("doctor", "--json", home=home)
    assert doctor.returncode == 1
    checks = checks_of(doctor)
    assert list(checks) == ["config.yaml"]  # nothing judged from settings it could not read
    broken = checks["config.yaml"]
    assert broken["status"] == "fail"
    assert f"{home / 'config.yaml'}:4:7" in broken["detail"]
    assert "mapping values are not allowed" in broken["detail"]  # the parser's own words
    assert "hermes plugins enable" not in broken["fix"] and "enable`" not in broken["fix"]
    for command in (("enable",), ("disable",), ("enable", "--print")):
        proc = run(*command, home=home)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "config.yaml:4:7" in proc.stdout and "nothing was changed" in proc.stdout
    assert (home / "config.yaml").read_text() == BROKEN
    assert sorted(p.name for p in home.iterdir() if p.name.startswith("config.yaml")) == \
        ["config.yaml"]  # no backup either: nothing was written


def test_doctor_into_a_pipe_closed_early_ends_without_a_traceback(home):
    """`doctor --json | head -1`: the reader has gone before doctor writes."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([SCRIPT, "doctor", "--json"], env=hermes_env(home),
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(("approvals", "model", "check", "words"), [
    ({"timeout": -1}, {}, "approvals", "approvals.timeout must be a number of seconds"),
    ({"timeout": "abc"}, {}, "approvals", "got 'abc'"),
    ({"mode": "manul"}, {}, "approvals", "did you mean 'manual'?"),
    ({}, {"openai_runtime": "codex_appserver"}, "openai_runtime",
     "did you mean 'codex_app_server'?"),
    ({}, {"codex_app_server": "sharde"}, "plugin settings", "did you mean 'shared'?"),
    ({}, {"codex_turn_timout": 60}, "plugin settings",
     "did you mean 'model.codex_turn_timeout'?"),
    ({}, {"default": "anthropic/claude-sonnet-4"}, "model", "is not an OpenAI model"),
])
def test_each_bad_value_is_named_with_its_near_miss_and_the_real_file(home, approvals, model,
                                                                      check, words):
    config = base_config(codex_home=str(home.parent / "codex-home"), **model)
    config["approvals"].update(approvals)
    write_config(home, config)
    proc = run("doctor", "--json", home=home)
    assert proc.returncode == 1
    found = checks_of(proc)[check]
    assert found["status"] == "fail" and words in found["detail"], found
    assert str(home / "config.yaml") in found["fix"]  # HERMES_HOME is not ~/.hermes here
    assert "~/.hermes" not in proc.stdout


def test_a_wrong_codex_bin_is_one_clear_line_whose_fix_is_the_bundled_codex(home):
    write_config(home, base_config(codex_home=str(home.parent / "codex-home"),
                                   codex_bin="/nonexistent/codex"))
    proc = run("doctor", "--json", home=home)
    checks = checks_of(proc)
    binary = checks["codex binary"]
    assert binary["status"] == "fail" and "/nonexistent/codex" in binary["detail"]
    # the codex the plugin finds by itself (the bundled one; $CODEX_BIN's in the npm cells)
    assert binary["fix"].startswith("Remove `model.codex_bin`") and " codex at /" \
        in binary["fix"] and "pip install" not in binary["fix"]
    assert checks["sandbox walls"]["status"] == "warn"  # not a second report of the same cause
    assert proc.stderr.strip() == "", proc.stderr


def chat_once(home: Path, **model: object) -> subprocess.CompletedProcess[str]:
    """``hermes chat -Q -q hello`` on the test config with ``model`` keys changed."""
    write_config(home, base_config(codex_home=str(home.parent / "codex-home"), **model))
    return subprocess.run([HERMES, "chat", "-Q", "-q", "hello"], env=hermes_env(home),
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=str(home))


def test_a_runtime_typo_is_told_when_a_turn_would_silently_use_another_runtime(home):
    proc = chat_once(home, openai_runtime="codex_appserver")
    assert "model.openai_runtime is 'codex_appserver'" in proc.stderr
    assert "did you mean 'codex_app_server'?" in proc.stderr


# ------------------------------------------------------------------ enable / disable


def test_enable_and_disable_change_only_their_keys_and_keep_a_backup(tmp_path):
    home = tmp_path / "hermes-home"
    home.mkdir()
    original = ("# my settings\nmodel:\n  default: gpt-5.5\n  provider: openai-codex\n"
                "display:\n  skin: mono\nplugins:\n  enabled: [other-plugin]\n")
    (home / "config.yaml").write_text(original)
    os.chmod(home / "config.yaml", 0o640)

    shown = run("enable", "--print", home=home)
    assert shown.returncode == 0 and "plugins.enabled: add codex-runtime" in shown.stdout
    assert (home / "config.yaml").read_text() == original  # --print writes nothing

    enabled = run("enable", home=home)
    assert enabled.returncode == 0, enabled.stdout + enabled.stderr
    data = yaml.safe_load((home / "config.yaml").read_text())
    assert data["plugins"]["enabled"] == ["other-plugin", "codex-runtime"]
    assert data["model"] == {"default": "gpt-5.5", "provider": "openai-codex",
                             "openai_runtime": "codex_app_server"}
    assert data["display"] == {"skin": "mono"}
    assert (home / "config.yaml").stat().st_mode & 0o777 == 0o640
    [backup] = home.glob("config.yaml.bak-*")
    assert backup.read_text() == original and str(backup) in enabled.stdout
    assert "keeps the comments" in enabled.stdout
    assert "codex login" in enabled.stdout  # what to do next, as a command that works here

    again = run("enable", home=home)
    assert "nothing to change" in again.stdout and len(list(home.glob("config.yaml.bak-*"))) == 1

    disabled = run("disable", home=home)
    assert disabled.returncode == 0
    data = yaml.safe_load((home / "config.yaml").read_text())
    assert data["plugins"]["enabled"] == ["other-plugin"]
    assert data["model"]["openai_runtime"] == "auto"
    assert "Hermes' own runtime" in disabled.stdout and "pip uninstall" in disabled.stdout


OPENROUTER = ("# my Hermes, on OpenRouter\nmodel:\n  provider: openrouter  # my key is in .env\n"
              "  default: anthropic/claude-sonnet-4\n  base_url: https://openrouter.ai/api/v1\n"
              "display:\n  skin: mono\n")


def test_enable_on_another_provider_asks_consent_and_disable_puts_it_back(tmp_path):
    """Most operators have a provider set. ``enable`` alone says what codex takes and changes
    nothing; ``--provider`` takes it (the old provider and model kept as the fallback), doctor
    then passes its config checks; ``disable`` restores what it replaced."""
    home = tmp_path / "hermes-home"
    home.mkdir()
    (home / "config.yaml").write_text(OPENROUTER)
    refused = run("enable", home=home)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "nothing changed" in refused.stdout and "'openrouter'" in refused.stdout
    assert "enable --provider" in refused.stdout and "new messages run on codex" \
        not in refused.stdout
    assert (home / "config.yaml").read_text() == OPENROUTER and not list(home.glob("*.bak-*"))

    taken = run("enable", "--provider", home=home)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    data = yaml.safe_load((home / "config.yaml").read_text())
    model = data["model"]
    assert model["provider"] == "openai-codex" and model["openai_runtime"] == "codex_app_server"
    assert model["default"] and "claude" not in model["default"]  # Hermes' own codex default
    assert "base_url" not in model
    assert data["fallback_providers"][0] == {"provider": "openrouter",
                                             "model": "anthropic/claude-sonnet-4",
                                             "base_url": "https://openrouter.ai/api/v1"}
    assert f"model.default: anthropic/claude-sonnet-4 → {model['default']}" in taken.stdout
    doctor = checks_of(run("doctor", "--json", home=home))
    assert doctor["activation"]["status"] == "ok" and doctor["model"]["status"] == "ok", doctor

    disabled = run("disable", home=home)
    assert disabled.returncode == 0, disabled.stdout
    data = yaml.safe_load((home / "config.yaml").read_text())
    assert data["model"] == {"provider": "openrouter", "default": "anthropic/claude-sonnet-4",
                             "base_url": "https://openrouter.ai/api/v1",
                             "openai_runtime": "auto"}
    assert not data.get("fallback_providers") and "codex-runtime" not in data["plugins"]["enabled"]


def test_a_non_openai_model_fails_the_codex_turn_at_once_with_the_fix(home):
    """Hermes strips ``anthropic/`` on openai-codex: codex would be sent ``claude-sonnet-4``."""
    proc = chat_once(home, default="anthropic/claude-sonnet-4")
    told = proc.stdout + proc.stderr
    assert "'anthropic/claude-sonnet-4' is not an OpenAI model" in told, told[-3000:]
    assert "model.codex_model" in told


# ------------------------------------------------------------------ codex: login, network


def test_without_a_codex_login_a_turn_fails_at_once_and_the_named_command_fixes_it(
        hermes, codex_binary):
    """A provider that needs an OpenAI login, on a codex home with none: the turn fails at once
    (not "Reconnecting... waiting for network" until the budget) naming a command, and that
    command — run as the user would — logs in the very home the next turn uses."""
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    key = "sk-login-" + os.urandom(6).hex()
    with mp.MockResponsesProvider(required_key=key) as provider:
        prepare_codex_home(hermes.codex_home, provider.base_url, codex_bin=codex_binary.path,
                           requires_openai_auth=True)
        hermes.configure(codex_turn_timeout=60)
        started = time.monotonic()
        first = hermes.agent().run_conversation("hello")
        seconds = time.monotonic() - started
        said = first["final_response"]
        assert "codex is not logged in" in said, said
        assert seconds < 15, seconds
        command = re.search(r"Run `([^`]+ codex login)`", said).group(1)
        assert provider.requests == []  # nothing was sent

        login = subprocess.run([*command.split(), "--with-api-key"], input=key + "\n",
                               env=hermes_env(hermes.home), capture_output=True, text=True,
                               timeout=60)
        assert login.returncode == 0, login.stdout + login.stderr
        assert (hermes.codex_home / "auth.json").exists()  # the home the plugin's turns use
        provider.enqueue(mp.text("Logged in and answering."))
        second = hermes.agent().run_conversation("hello again")
        assert second["final_response"] == "Logged in and answering.", second
        assert provider.refused_unauthenticated == 0


def test_an_unreachable_provider_fails_the_turn_in_bounded_time_with_a_visible_status(
        hermes, tmp_path):
    config = hermes.codex_home / "config.toml"
    text = config.read_text().replace("unbounded_connection_retries = false\n", "")
    text = re.sub(r'base_url = "[^"]+"', 'base_url = "http://127.0.0.1:9/v1"', text)
    config.write_text(text.replace("stream_max_retries = 0", "stream_max_retries = 1"))
    hermes.configure(codex_turn_timeout=60)
    shown: list[str] = []
    agent = hermes.agent(status_callback=lambda kind, message: shown.append(message))
    started = time.monotonic()
    result = agent.run_conversation("hello")
    assert time.monotonic() - started < 20  # codex's own bounded retries, not the 60 s budget
    assert result["completed"] is False
    assert "could not reach the model provider" in result["final_response"]
    assert any("Reconnecting" in message for message in shown), shown


def test_the_missing_codex_error_says_each_thing_once_with_a_command_that_works(hermes,
                                                                                  tmp_path):
    hermes.configure(codex_bin=str(tmp_path / "nowhere" / "codex"))
    result = hermes.agent().run_conversation("hello")
    text = result["final_response"]
    assert "does not exist" in text
    assert text.lower().count("install") == 2, text  # "install the tested codex: `pip install`"
    assert "or npm" not in text  # the host-neutral install hint is not said a second time
    assert f"{sys.executable} -m pip install openai-codex-cli-bin==" in text
    assert "hermes-codex-runtime[codex]" not in text  # not on PyPI


# ------------------------------------------------------------------ commands


def test_bare_hermes_codex_plugin_prints_the_commands(home):
    proc = subprocess.run([HERMES, "codex-plugin"], env=hermes_env(home), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    for command in ("enable", "disable", "codex", "doctor", "try"):
        assert command in proc.stdout
    assert "error:" not in proc.stderr


def start_playground(env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen, list[str]]:
    """``hermes-codex-runtime try`` as a user starts it, and what it printed up to "Ctrl-C"."""
    proc = subprocess.Popen([SCRIPT, "try"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                            cwd=str(cwd), start_new_session=True)
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 90
    while not any("Ctrl-C" in line for line in lines):
        if time.monotonic() > deadline or proc.poll() is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(lines)
        lines.append(proc.stdout.readline())
    return proc, lines


def close_playground(proc: subprocess.Popen) -> str:
    """Ctrl-C the playground; what it printed after."""
    os.killpg(proc.pid, signal.SIGINT)
    rest = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0 and "playground closed" in rest, rest
    return rest


def exported(lines: list[str]) -> dict[str, str]:
    """The variables it told to ``export``."""
    words = [word for line in lines if line.strip().startswith("export ")
             for word in shlex.split(line)[1:]]
    return dict(word.split("=", 1) for word in words)


def cd_to(lines: list[str]) -> Path:
    """The folder it told to ``cd`` to."""
    [line] = [line for line in lines if line.strip().startswith("cd ")]
    return Path(line.strip()[len("cd "):])


def test_try_serves_a_playground_for_your_own_hermes_chat(tmp_path):
    proc, lines = start_playground(hermes_env(tmp_path / "unused"), tmp_path)
    try:
        playground_home = Path(exported(lines)["HERMES_HOME"])
        assert playground_home.is_dir()
        env = hermes_env(playground_home)
        chat = subprocess.run([HERMES, "chat", "-Q", "-q", "hello playground"], env=env,
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, cwd=str(tmp_path))
        assert "You said: hello playground" in chat.stdout, chat.stdout + chat.stderr
        # a command that asks first, where no prompt can be shown: declined at once, and the
        # model's answer says so
        asked = subprocess.run([HERMES, "chat", "-Q", "-q", "run touch made-it"], env=env,
                               capture_output=True, text=True, timeout=100,
                               stdin=subprocess.DEVNULL, cwd=str(tmp_path))
        assert "It was declined, so nothing ran" in asked.stdout, asked.stdout + asked.stderr
        assert "cannot show an approval prompt" in asked.stderr
    finally:
        close_playground(proc)
    assert not playground_home.parent.exists()  # the scratch directory is gone


def files_under(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and modification time."""
    found = {}
    for path in [root, *root.rglob("*")]:
        stat = path.lstat()
        found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


def test_a_gateway_and_a_chat_on_the_playground_work_in_its_project_and_never_in_your_home(
        tmp_path):
    """As a user: ``try`` started in their home, a gateway started there too with what ``try``
    told to export (no ``TERMINAL_CWD``: the gateway finds its workspace in the playground's
    config.yaml), and ``hermes chat`` run as told. A command and a file change happen in the
    playground's project, and the home — a temporary one here — gets nothing."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes-of-the-user.txt").write_text("mine\n")
    (tmp_path / "tmp").mkdir()
    # the user's environment: their HOME, no cache or state directory of their own (the
    # defaults are under HOME), no workspace variable
    user = {"HOME": str(home), "TMPDIR": str(tmp_path / "tmp"), "XDG_CACHE_HOME": "",
            "XDG_STATE_HOME": ""}
    env = hermes_env(tmp_path / "unused", **user)
    for name in ("HERMES_HOME", "TERMINAL_CWD"):
        env.pop(name, None)
    before = files_under(home)
    proc, lines = start_playground(env, home)
    try:
        user.update(exported(lines))
        playground_home = Path(user.pop("HERMES_HOME"))
        project = playground_home.parent / "project"
        gateway = Gateway(playground_home, own_workspace=False, cwd=home, **user)
        try:
            for said in ("create hello.txt", "run pwd > where.txt && ls -la >> where.txt"):
                run_id = gateway.call("POST", "/v1/runs", {"input": said})["run_id"]
                events = []
                for event in gateway.events(run_id):
                    events.append(event)
                    if event.get("event") == "approval.request":
                        gateway.call("POST", f"/v1/runs/{run_id}/approval", {"choice": "once"})
                assert events[-1].get("event") == "run.completed", events[-3:]
                assert "Done" in json.dumps(events[-1]), events[-1]
        finally:
            gateway.stop()
        assert (project / "hello.txt").read_text() == "created by the playground\n"
        where, *listing = (project / "where.txt").read_text().splitlines()
        assert where == str(project)
        assert any(line.endswith(" hello.txt") for line in listing), listing
        assert not any("notes-of-the-user" in line for line in listing), listing
        # hermes chat, started where the playground said (`-q` shows no prompt: --yolo)
        chat = subprocess.run([HERMES, "chat", "--yolo", "-Q", "-q", "run pwd > from-chat.txt"],
                              env=hermes_env(playground_home, **user), capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL,
                              cwd=str(cd_to(lines)))
        assert chat_finished(chat), chat.stderr[-3000:]
        assert (project / "from-chat.txt").read_text().strip() == str(project), chat.stderr
    finally:
        close_playground(proc)
    assert files_under(home) == before
