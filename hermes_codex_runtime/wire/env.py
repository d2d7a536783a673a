"""The environments codex sees: the app-server process's, and the one its commands inherit.

Owns the credential policy, which is an **allow-list** in two places:

* **The app-server process** gets what a process needs to run (:data:`PROCESS_NAMES`,
  :data:`PROCESS_PATTERNS`: ``PATH``, ``HOME``, locale, terminal, temp dirs, proxies and CA bundles,
  toolchain locations, ``CODEX_*``, ``RUST_LOG``), plus the credential of the model provider codex
  is configured to use (:mod:`.codex_config` finds its name), plus the names the host passes
  through. Nothing else: a bot token, a password-manager token, another provider's key or a
  database URL in the host's environment never reaches codex.
* **Commands the model runs** get even less — codex's own ``shell_environment_policy`` is sent
  with every thread (:func:`command_env_policy`): the same process allow-list without any
  credential, not even the provider key codex itself uses, plus the names the host passes
  through for commands.

The caller can pass an explicit environment instead (tests, custom launchers); it is then used as
given. Names are matched case-sensitively; patterns are shell globs.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: What any process needs to run: identity, shell, locale, terminal, time zone, temp dirs.
PROCESS_NAMES: frozenset[str] = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "USERNAME", "SHELL", "LANG", "LANGUAGE", "TERM",
        "COLORTERM", "NO_COLOR", "TZ", "TMPDIR", "TEMP", "TMP", "PWD",
        # proxies and CA bundles (a corporate network needs them to reach anything)
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE",
        # where toolchains live (no credentials)
        "JAVA_HOME", "GOPATH", "GOROOT", "GOBIN", "CARGO_HOME", "RUSTUP_HOME", "PYENV_ROOT",
        "NVM_DIR", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "DOTNET_ROOT",
        "EDITOR", "VISUAL", "PAGER",
        # codex's own diagnostics
        "RUST_LOG", "RUST_BACKTRACE",
    }
)
#: Pattern-shaped names of the same kind.
PROCESS_PATTERNS: tuple[str, ...] = ("LC_*", "XDG_*")
#: codex's own settings (``CODEX_HOME``, ``CODEX_API_KEY``…): codex reads them, commands don't
#: need them.
CODEX_PATTERN = "CODEX_*"

_NAME = re.compile(r"^[A-Za-z_*][A-Za-z0-9_*]*$")


def valid_name_pattern(value: Any) -> bool:
    """True for an environment variable name, or a glob of one (``A_*``)."""
    return isinstance(value, str) and bool(_NAME.match(value)) and value.strip("*") != ""


def _matches(name: str, names: Iterable[str], patterns: Iterable[str]) -> bool:
    if name in names:
        return True
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _split(entries: Iterable[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    names = frozenset(e for e in entries if "*" not in e)
    patterns = tuple(e for e in entries if "*" in e)
    return names, patterns


def allowed_environment(
    source: Mapping[str, str] | None = None,
    *,
    provider_keys: Iterable[str] = (),
    passthrough: Iterable[str] = (),
) -> dict[str, str]:
    """The allow-listed part of ``source`` (default: ``os.environ``) for the app-server process:
    what a process needs, ``CODEX_*``, the model provider's credential names and ``passthrough``
    (names or globs the user chose)."""
    env = os.environ if source is None else source
    extra_names, extra_patterns = _split([*provider_keys, *passthrough])
    names = PROCESS_NAMES | extra_names
    patterns = (*PROCESS_PATTERNS, CODEX_PATTERN, *extra_patterns)
    return {name: value for name, value in env.items() if _matches(name, names, patterns)}


#: Set for every command: a shell level, so ``bash -c`` does not take itself for a shell started
#: by sshd and run the user's ``~/.bashrc`` first (it does when its standard input is a socket,
#: as under a permission profile: every command paid for the user's start-up — pyenv's rehash
#: waits 10 s on a stale lock of its own — docs/codex-facts.md).
COMMAND_SET = {"SHLVL": "1"}


def command_env_policy(passthrough: Iterable[str] = ()) -> dict[str, Any]:
    """codex's ``shell_environment_policy`` for the commands the model runs: they inherit only
    what a process needs, plus ``passthrough`` — never a credential, not even the provider key the
    app-server itself holds — and :data:`COMMAND_SET`. (codex adds its own
    ``CODEX_THREAD_ID``-style markers after this filter.)"""
    include = sorted({*PROCESS_NAMES, *COMMAND_SET}) + list(PROCESS_PATTERNS)
    include += [entry for entry in passthrough if entry not in include]
    return {"inherit": "all", "include_only": include, "set": dict(COMMAND_SET)}


def command_environment(source: Mapping[str, str],
                        passthrough: Iterable[str] = ()) -> dict[str, str]:
    """What :func:`command_env_policy` leaves of ``source`` (for display: doctor, tests)."""
    names, patterns = _split(command_env_policy(passthrough)["include_only"])
    return {name: value for name, value in source.items() if _matches(name, names, patterns)}


def spawn_environment(
    base: Mapping[str, str] | None = None,
    *,
    codex_home: str | None = None,
    path_prepend: str | None = None,
    extra: Mapping[str, str] | None = None,
    provider_keys: Iterable[str] = (),
    passthrough: Iterable[str] = (),
) -> dict[str, str]:
    """The environment for ``codex app-server``.

    ``base`` is used as given when the caller passes one (the caller decides); otherwise the
    current environment is allow-listed (:func:`allowed_environment`). ``RUST_LOG`` defaults to
    ``warn``; ``CODEX_HOME`` is set when configured; ``path_prepend`` (the bundled binary's helper
    directory, which holds ``rg``) goes first on ``PATH``; ``extra`` is applied last.
    """
    if base is None:
        env = allowed_environment(provider_keys=provider_keys, passthrough=passthrough)
    else:
        env = dict(base)
    env.setdefault("RUST_LOG", "warn")
    if codex_home:
        env["CODEX_HOME"] = os.fspath(codex_home)
    if path_prepend:
        current = env.get("PATH", "")
        parts = [p for p in current.split(os.pathsep) if p and p != path_prepend]
        env["PATH"] = os.pathsep.join([path_prepend, *parts])
    if extra:
        env.update(extra)
    return env
