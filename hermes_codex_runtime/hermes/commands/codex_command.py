"""``hermes-codex-runtime codex ARGS…``: run exactly the codex the plugin runs.

The ``[codex]`` extra puts codex inside Hermes' environment, not on ``PATH``, and the plugin may
use a codex home other than ``~/.codex`` (``model.codex_home``, ``$CODEX_HOME``). So ``codex
login`` typed in a shell can log in another codex, or none at all. This command resolves the
binary and the home exactly as a turn does, then replaces itself with codex (``execve``): the
terminal, signals and exit status are codex's own.
"""

from __future__ import annotations

import os
import sys

from hermes_codex_runtime.hermes import fixes
from hermes_codex_runtime.hermes.config.file import ConfigFileError, read_config_file
from hermes_codex_runtime.hermes.config.settings import SettingError, plugin_settings
from hermes_codex_runtime.wire import CodexBinaryError, resolve_codex_binary
from hermes_codex_runtime.wire.codex_config import codex_home_path


def _say(text: str) -> None:
    print(f"{fixes.SCRIPT}: {text}", file=sys.stderr, flush=True)


def run_codex(args: list[str]) -> int:
    """Run codex with ``args``; returns only when codex could not be started."""
    try:
        read_config_file()
        settings = plugin_settings()
    except (ConfigFileError, SettingError) as exc:
        _say(f"{exc}\nFix config.yaml first: it says which codex home to use.")
        return 2
    try:
        binary = resolve_codex_binary(settings.codex_bin)
    except CodexBinaryError as exc:
        _say(f"{exc.problem}\nInstall the tested codex with `{fixes.install_codex_command()}`, "
             f"or set {fixes.config_ref('model.codex_bin')}.")
        return 127
    explicit = settings.codex_home or os.environ.get("CODEX_HOME")
    home = codex_home_path(settings.codex_home)
    env = dict(os.environ)
    if explicit:
        env["CODEX_HOME"] = str(home)
        if not home.exists():
            if args[:1] != ["login"]:
                _say(f"the codex home {home} does not exist yet; `{fixes.login_command()}` "
                     "creates it")
                return 2
            home.mkdir(mode=0o700, parents=True)  # codex refuses a CODEX_HOME that is missing
            _say(f"created the codex home {home}")
    if binary.path_prepend:
        env["PATH"] = os.pathsep.join(p for p in (binary.path_prepend, env.get("PATH")) if p)
    _say(f"{binary.path} (from {binary.source}), CODEX_HOME={home}")
    try:
        os.execve(binary.path, [binary.path, *args], env)
    except OSError as exc:
        _say(f"{binary.path} could not be started: {exc}")
        return 126
    return 0  # pragma: no cover - execve does not return
