"""A new user, from the README alone: their own Hermes in a clean venv (the layout of Hermes'
installer, ``hermes`` on ``PATH`` through ``~/.local/bin``), their own ``~/.hermes`` and
``~/.codex``; then the README's "Installing into your Hermes" commands exactly as written
(read from the marked block, so the README and this test cannot drift apart), a turn through
``hermes chat``, and doctor green — on whichever host line this cell runs.

Nothing leaves the machine: pip installs from the wheelhouse ``make test`` downloads first
(``PIP_NO_INDEX``), and codex talks to the mock provider on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hermes_codex_runtime.offline import provider as mp

pytestmark = [pytest.mark.real_hermes, pytest.mark.real_codex]
ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = ROOT / ".tools" / "wheelhouse"


def readme_install_lines() -> list[str]:
    """The commands of the README's marked install block, comments and blank lines aside."""
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- BEGIN install")[1].split("<!-- END install -->")[0]
    code = re.search(r"```sh\n(.*?)```", block, re.S)
    assert code is not None, "the README's install block has no ```sh code"
    return [line for line in code.group(1).splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def host_requirement() -> str:
    from hermes_codex_runtime.hermes.symbols.probe import find_host

    host = find_host()
    assert host is not None and host.distribution, "no Hermes distribution in this cell"
    return f"{host.distribution}=={host.version}"


def test_the_readme_install_works_word_for_word_in_a_clean_hermes(tmp_path):
    from hermes_codex_runtime.hermes.commands.offline import write_offline_caches
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home
    from hermes_codex_runtime.wire import resolve_codex_binary

    requirement = host_requirement()
    if not any(WHEELHOUSE.glob(requirement.split("==")[0].replace("-", "_") + "-*.whl")):
        message = f"no {requirement} in {WHEELHOUSE}: run `make wheelhouse-019 wheelhouse-022`"
        if os.environ.get("HCR_REQUIRE_REAL"):
            pytest.fail(message)
        pytest.skip(message)
    user = tmp_path / "user"
    venv = user / ".hermes" / "hermes-agent" / "venv"  # where Hermes' installer puts it
    base_python = getattr(sys, "_base_executable", sys.executable)
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE),
               "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CODEX_", "HERMES_", "HCR_", "PYTHON", "VIRTUAL_ENV", "PIP_"))}
    user_bin = user / ".local" / "bin"
    ours = str(Path(sys.executable).parent)  # the test's own venv is not the user's
    env.update(offline, HOME=str(user), NO_COLOR="1", HERMES_DISABLE_LAZY_INSTALLS="1",
               PATH=os.pathsep.join([str(user_bin), *(p for p in env["PATH"].split(os.pathsep)
                                                      if p != ours)]))
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, timeout=120)
    host = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           requirement], env=env, capture_output=True, text=True, timeout=900)
    assert host.returncode == 0, host.stdout + host.stderr
    user_bin.mkdir(parents=True)
    (user_bin / "hermes").symlink_to(venv / "bin" / "hermes")

    # what a Hermes user has already: their config.yaml — with comments, on another provider
    # with a vendor/model name, its key in .env — and codex's config (here: the mock, which
    # wants the codex login's key as its bearer token)
    key = "sk-new-user-" + os.urandom(6).hex()
    hermes_home = user / ".hermes"
    write_offline_caches(hermes_home)
    (hermes_home / "config.yaml").write_text(
        "# my Hermes\nmodel:\n  provider: openrouter   # the key is in .env\n"
        "  default: anthropic/claude-sonnet-4\n  context_length: 200000\n"
        "security:\n  allow_lazy_installs: false\ndisplay:\n  skin: default\n"
        "telemetry:\n  shared_metrics: {enabled: false, send: false, offer_version: 2}\n")
    (hermes_home / ".env").write_text("OPENROUTER_API_KEY=sk-or-not-used-offline\n")
    bundled = resolve_codex_binary(None, environ={"PATH": ""})
    with mp.MockResponsesProvider(required_key=key) as provider:
        prepare_codex_home(user / ".codex", provider.base_url, codex_bin=bundled.path,
                           requires_openai_auth=True)
        lines = readme_install_lines()
        logins = [i for i, line in enumerate(lines) if re.search(r"\bcodex login\b", line)]
        assert len(logins) == 1, lines
        # the browser sign-in, as the mock takes it: the API key on stdin
        lines[logins[0]] = lines[logins[0]].replace("codex login", "codex login --with-api-key", 1)
        script = "set -euo pipefail\n" + "".join(f"echo '+ {i}'\n{line}\n"
                                                 for i, line in enumerate(lines))
        proc = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, input=key + "\n",
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        provider.enqueue(mp.text("Installed, enabled and answering."))
        chat = subprocess.run(["hermes", "chat", "-Q", "-q", "hello"], env=env, cwd=str(user),
                              capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)
        assert "Installed, enabled and answering." in chat.stdout, chat.stdout + chat.stderr
        assert provider.refused_unauthenticated == 0  # the login reached the codex it runs
    python = str(venv / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip()
    assert (Path(site) / "hermes_codex_runtime.pth").is_file()  # the start-up hook (0.22's race)
    doctor = subprocess.run([python, "-m", "hermes_codex_runtime", "doctor", "--json"], env=env,
                            capture_output=True, text=True, timeout=180)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    not_ok = {name: c["status"] for name, c in checks.items() if c["status"] != "ok"}
    assert doctor.returncode == 0 and not_ok == {"workspace": "warn"}, checks  # as the README says
    assert str(venv) in checks["codex binary"]["detail"]  # the codex [codex] installed there
    config = yaml.safe_load((hermes_home / "config.yaml").read_text())
    assert config["display"] == {"skin": "default"}  # the user's own settings are kept
    # their provider and model: the fallback where a usage limit sends a turn
    assert config["fallback_providers"] == [{"provider": "openrouter",
                                             "model": "anthropic/claude-sonnet-4"}]
    assert config["model"]["provider"] == "openai-codex"
    assert "claude" not in config["model"]["default"]
    assert list(hermes_home.glob("config.yaml.bak-*"))

    # the README's other way in: the checkout itself
    again = subprocess.run([python, "-m", "pip", "install", "--quiet", "--force-reinstall",
                            "--no-deps", str(ROOT)], env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    version = subprocess.run([str(venv / "bin" / "hermes-codex-runtime"), "version"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and "codex 0.169.0" in version.stdout, version.stdout
