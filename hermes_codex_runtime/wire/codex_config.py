"""What codex's own ``config.toml`` says about credentials and its sandbox.

Owns two questions. :func:`sandbox_defaults`: the sandbox the user chose for codex itself
(``sandbox_mode``, a ``default_permissions`` profile of their own, ``[sandbox_workspace_write]``'s
network access and writable roots; the selected ``profile`` first). And
:func:`provider_credential_names`: for the active ``model_provider`` (the
override the host passes, else the selected ``profile``'s, else the top-level key, else codex's
default ``openai``), the names codex reads from its environment to authenticate — a custom
provider's ``env_key`` and ``env_http_headers``, ``OPENAI_API_KEY`` for the built-in OpenAI
provider, the AWS names for Amazon Bedrock. Those (and only those) are passed to the app-server.
And :func:`runtime_args`: the codex settings the runtime passes to every app-server it starts,
where the user's file leaves them open.
A missing or unreadable ``config.toml`` means codex's defaults. Read-only; never raises.
"""

from __future__ import annotations

import itertools
import logging
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_PROVIDER = "openai"
#: Built-in providers and the variables codex reads for them.
BUILTIN_PROVIDER_NAMES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_ORGANIZATION",
               "OPENAI_PROJECT"),
    "amazon-bedrock": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                       "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION", "AWS_DEFAULT_REGION",
                       "AWS_PROFILE"),
    "oss": ("CODEX_OSS_BASE_URL", "CODEX_OSS_PORT"),
    "ollama": ("CODEX_OSS_BASE_URL", "CODEX_OSS_PORT"),
    "lmstudio": ("CODEX_OSS_BASE_URL", "CODEX_OSS_PORT"),
}


def codex_home_path(codex_home: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The codex home codex itself will use: the setting, ``$CODEX_HOME``, then ``~/.codex``."""
    env = os.environ if environ is None else environ
    return Path(os.path.expanduser(codex_home or env.get("CODEX_HOME") or "~/.codex"))


def read_config(codex_home: str | None) -> dict[str, Any]:
    """``config.toml`` of the codex home as a dict (empty when missing or unreadable)."""
    path = codex_home_path(codex_home) / "config.toml"
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        log.warning("could not read %s (%s); assuming codex's default provider", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def chosen_provider(codex_home: str | None, override: str | None = None) -> str | None:
    """The provider the user's ``config.toml`` chooses; ``None`` when the file exists but cannot
    be parsed (what the user meant is unknown)."""
    if override:
        return override
    path = codex_home_path(codex_home) / "config.toml"
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return DEFAULT_PROVIDER
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return active_provider(data if isinstance(data, dict) else {})


def active_provider(config: Mapping[str, Any], override: str | None = None) -> str:
    """The ``model_provider`` codex will use for a thread."""
    if override:
        return override
    profile_name = config.get("profile")
    profiles = config.get("profiles")
    if isinstance(profile_name, str) and isinstance(profiles, Mapping):
        profile = profiles.get(profile_name)
        if isinstance(profile, Mapping) and isinstance(profile.get("model_provider"), str):
            return str(profile["model_provider"])
    provider = config.get("model_provider")
    return provider if isinstance(provider, str) and provider else DEFAULT_PROVIDER


def provider_credential_names(codex_home: str | None,
                              provider_override: str | None = None) -> tuple[str, ...]:
    """The environment variables the active model provider reads (see the module docstring)."""
    config = read_config(codex_home)
    provider = active_provider(config, provider_override)
    names: list[str] = []
    providers = config.get("model_providers")
    entry = providers.get(provider) if isinstance(providers, Mapping) else None
    if isinstance(entry, Mapping):
        env_key = entry.get("env_key")
        if isinstance(env_key, str) and env_key:
            names.append(env_key)
        headers = entry.get("env_http_headers")
        if isinstance(headers, Mapping):
            names.extend(v for v in headers.values() if isinstance(v, str) and v)
        aws = entry.get("aws")
        if isinstance(aws, Mapping) or provider == "amazon-bedrock":
            names.extend(BUILTIN_PROVIDER_NAMES["amazon-bedrock"])
    else:
        names.extend(BUILTIN_PROVIDER_NAMES.get(provider, ()))
    return tuple(dict.fromkeys(names))


def required_provider_key(codex_home: str | None,
                          provider_override: str | None = None) -> str | None:
    """The ``env_key`` a configured (custom) model provider cannot work without, if any. The
    built-in OpenAI provider has none: a ``codex login`` serves it."""
    config = read_config(codex_home)
    providers = config.get("model_providers")
    entry = providers.get(active_provider(config, provider_override)) \
        if isinstance(providers, Mapping) else None
    env_key = entry.get("env_key") if isinstance(entry, Mapping) else None
    return env_key if isinstance(env_key, str) and env_key else None


#: What the runtime sets on every app-server it starts (``-c key=value``), each unless the
#: user's ``config.toml`` decides that key itself:
#:
#: * ``features.unbounded_connection_retries=false`` — without it codex retries a provider it
#:   cannot reach forever ("Reconnecting... waiting for network"); with it, 5 retries (about
#:   25 s) and then a classified error;
#: * ``thread_unload_delay_secs=0`` — ``thread/unsubscribe`` of a thread nobody else watches
#:   unloads it at once (``thread/closed``), instead of after 1800 s (codex 0.163) or 60 s
#:   (0.171): a shared app-server's memory stays flat over thousands of sessions, and another
#:   process may resume the thread right away;
#: * ``features.shell_snapshot=false`` — no login shell per new thread (codex runs the user's
#:   shell profile to snapshot its environment: 9 processes per thread, and the whole profile's
#:   time — a slow one times out after 10 s, per thread).
RUNTIME_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("features.unbounded_connection_retries", "false"),
    ("thread_unload_delay_secs", "0"),
    ("features.shell_snapshot", "false"),
)
UNLOAD_AT_ONCE = ("-c", "thread_unload_delay_secs=0")


def _decided(config: Mapping[str, Any], dotted: str) -> bool:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def runtime_args(codex_home: str | None) -> tuple[str, ...]:
    """The app-server arguments for :data:`RUNTIME_OVERRIDES` that the user's ``config.toml``
    leaves to codex's defaults."""
    config = read_config(codex_home)
    args: list[str] = []
    for key, value in RUNTIME_OVERRIDES:
        if not _decided(config, key):
            args += ["-c", f"{key}={value}"]
    return tuple(args)


def unloads_at_once(args: Sequence[str]) -> bool:
    """True when an app-server started with ``args`` unloads an unsubscribed thread at once."""
    return any(pair == UNLOAD_AT_ONCE for pair in itertools.pairwise(args))


@dataclass(frozen=True, slots=True)
class SandboxDefaults:
    """The sandbox settings of the user's ``config.toml`` (``None``/empty: codex's defaults)."""

    mode: str | None = None  # sandbox_mode
    profile: str | None = None  # default_permissions (their own permission profile)
    network_access: bool = False  # [sandbox_workspace_write] network_access
    writable_roots: tuple[str, ...] = ()  # [sandbox_workspace_write] writable_roots


def sandbox_defaults(codex_home: str | None) -> SandboxDefaults:
    """What the user's ``config.toml`` says about codex's sandbox; the selected ``profile``'s
    ``sandbox_mode`` / ``default_permissions`` win over the top-level keys, as in codex."""
    config = read_config(codex_home)
    layers: list[Mapping[str, Any]] = [config]
    profile_name = config.get("profile")
    profiles = config.get("profiles")
    if isinstance(profile_name, str) and isinstance(profiles, Mapping) \
            and isinstance(profiles.get(profile_name), Mapping):
        layers.insert(0, profiles[profile_name])

    def first(key: str) -> str | None:
        for layer in layers:
            value = layer.get(key)
            if isinstance(value, str) and value:
                return value
        return None

    workspace: Mapping[str, Any] = next((layer["sandbox_workspace_write"] for layer in layers
                                         if isinstance(layer.get("sandbox_workspace_write"),
                                                       Mapping)), {})
    roots = workspace.get("writable_roots")
    return SandboxDefaults(
        mode=first("sandbox_mode"), profile=first("default_permissions"),
        network_access=workspace.get("network_access") is True,
        writable_roots=tuple(os.path.expanduser(r) for r in roots if isinstance(r, str))
        if isinstance(roots, list) else ())
