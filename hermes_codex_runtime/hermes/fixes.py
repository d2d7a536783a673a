"""The commands and places a fix names, as they work on THIS installation.

The plugin is not on PyPI and its console script lives in Hermes' own environment, which is often
not on ``PATH`` (``hermes`` is a symlink into it). So a fix never says a bare ``codex login`` or
``pip install 'hermes-codex-runtime[codex]'``: it names the plugin's own command where it really
is, the Python Hermes runs on, and the real ``config.yaml`` (``HERMES_HOME`` may be anywhere).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from importlib import metadata

SCRIPT = "hermes-codex-runtime"
#: The codex the ``[codex]`` extra installs (``openai-codex-cli-bin``), when metadata says none.
CODEX_PACKAGE = "openai-codex-cli-bin"


def own_command() -> str:
    """How to run ``hermes-codex-runtime`` here: its name when ``PATH`` finds this very script,
    else its full path beside this Python, else ``python -m hermes_codex_runtime``."""
    beside = os.path.join(os.path.dirname(sys.executable), SCRIPT)
    found = shutil.which(SCRIPT)
    if found and os.path.exists(beside) and os.path.samefile(found, beside):
        return SCRIPT
    if os.path.exists(beside):
        return shlex.quote(beside)
    if found:
        return SCRIPT
    return f"{shlex.quote(sys.executable)} -m hermes_codex_runtime"


def codex_command(args: str = "") -> str:
    """``hermes-codex-runtime codex ARGS``: exactly the codex binary and ``CODEX_HOME`` the plugin
    uses."""
    return f"{own_command()} codex{' ' + args if args else ''}"


def login_command() -> str:
    """The command that logs in the codex the plugin runs."""
    return codex_command("login")


def codex_requirement() -> str:
    """The pinned requirement of the ``[codex]`` extra (``openai-codex-cli-bin==X``)."""
    try:
        for line in metadata.requires("hermes-codex-runtime") or ():
            name, _, marker = line.partition(";")
            if CODEX_PACKAGE in name and re.search(r"extra\s*==\s*['\"]codex['\"]", marker):
                return name.strip().replace(" ", "")
    except metadata.PackageNotFoundError:
        pass
    return CODEX_PACKAGE


def install_codex_command() -> str:
    """Installs the tested codex binary into the environment Hermes (and the plugin) run in."""
    return pip_command(f"install {shlex.quote(codex_requirement())}")


def pip_command(args: str) -> str:
    """``pip ARGS`` for the environment Hermes runs in."""
    return f"{shlex.quote(sys.executable)} -m pip {args}"


def config_ref(key: str) -> str:
    """```key``` in the real config.yaml, e.g. ``model.codex_bin`` in /srv/hermes/config.yaml."""
    from hermes_codex_runtime.hermes.config.file import config_path

    return f"`{key}` in {config_path()}"
