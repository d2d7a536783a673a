"""The environment a codex app-server child is spawned with.

Owns the scrub policy: codex is a model-driving executor that runs model-chosen shell commands, so
it receives the model-provider credentials it needs (``OPENAI_API_KEY``, Azure/AWS provider keys,
``CODEX_*``) but never the host's private secrets — chat-bot tokens, GitHub tokens, gateway relay
and dashboard/session secrets, side-LLM keys, anything named ``*_SECRET*`` or ``*_BOT_TOKEN``.
The caller can always pass an explicit environment instead; this is only the default.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping

# Host-private names that never reach codex, whatever their shape.
HOST_PRIVATE_NAMES: frozenset[str] = frozenset(
    {
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "GITHUB_APP_ID",
        "GITHUB_APP_PRIVATE_KEY_PATH",
        "GITHUB_APP_INSTALLATION_ID",
        "TELEGRAM_BOT_TOKEN",
        "DISCORD_BOT_TOKEN",
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "SLACK_SIGNING_SECRET",
        "MATTERMOST_TOKEN",
        "MATRIX_ACCESS_TOKEN",
        "GATEWAY_ALLOWED_USERS",
        "GATEWAY_ALLOW_ALL_USERS",
        "GATEWAY_RELAY_ID",
        "GATEWAY_RELAY_SECRET",
        "GATEWAY_RELAY_DELIVERY_KEY",
        "HASS_TOKEN",
        "EMAIL_PASSWORD",
        "HERMES_DASHBOARD_SESSION_TOKEN",
        "API_SERVER_KEY",
        "MODAL_TOKEN_ID",
        "MODAL_TOKEN_SECRET",
        "DAYTONA_API_KEY",
    }
)

# Shapes of host-private names (matched case-insensitively).
HOST_PRIVATE_PATTERNS: tuple[str, ...] = (
    "*SECRET*",
    "*_BOT_TOKEN",
    "*_APP_TOKEN",
    "GITHUB_*TOKEN*",
    "GH_*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*DASHBOARD*TOKEN*",
    "*SESSION_TOKEN",
    "*SESSION_SECRET*",
    "*WEBHOOK*",
    "AUXILIARY_*_API_KEY",
    "AUXILIARY_*_BASE_URL",
    "GATEWAY_RELAY_*_KEY",
    "GATEWAY_RELAY_*_TOKEN",
    "_HERMES_FORCE_*",
)

# Model-provider credentials codex may need: these flow even when a pattern above matches them.
PROVIDER_CREDENTIALS: frozenset[str] = frozenset(
    {
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_ORGANIZATION",
        "OPENAI_PROJECT",
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
        "AWS_PROFILE",
        "CODEX_API_KEY",
        "CODEX_HOME",
    }
)


def is_host_private(name: str) -> bool:
    """True when the variable ``name`` is a host secret that codex must not receive."""
    if name in PROVIDER_CREDENTIALS:
        return False
    if name in HOST_PRIVATE_NAMES:
        return True
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in HOST_PRIVATE_PATTERNS)


def scrubbed_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return ``base`` (default: ``os.environ``) without host-private secrets."""
    source = os.environ if base is None else base
    return {name: value for name, value in source.items() if not is_host_private(name)}


def spawn_environment(
    base: Mapping[str, str] | None = None,
    *,
    codex_home: str | None = None,
    path_prepend: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for ``codex app-server``.

    ``base`` is used as given when the caller passes one (the caller decides); otherwise the
    current environment is scrubbed. ``RUST_LOG`` defaults to ``warn``; ``CODEX_HOME`` is set when
    configured; ``path_prepend`` (the bundled binary's helper directory, which holds ``rg``) goes
    first on ``PATH``; ``extra`` is applied last.
    """
    env = scrubbed_environment() if base is None else dict(base)
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
