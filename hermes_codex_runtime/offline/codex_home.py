"""A temporary ``CODEX_HOME`` that points the real codex binary at the mock provider.

Writes the offline configuration of ``shared/docs/codex-offline.md``: the mock provider with
retries off, plugins off, unbounded connection retries off, and a model catalog derived at run time
from ``codex debug models --bundled`` (renamed to the mock model, ``apply_patch`` freeform, MCP
tools listed directly) so codex offers the tools the tests need. :func:`verify_codex_home` spawns
codex once and refuses a configuration codex calls invalid (codex would otherwise silently fall
back to its defaults — and to the real OpenAI provider).
"""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hermes_codex_runtime.wire import AppServerConnection, SpawnOptions, TransportClosed

MOCK_MODEL = "mock-model"
MOCK_PROVIDER = "mock"
MOCK_CONTEXT_WINDOW = 200_000
_PREFERRED_TEMPLATES = ("gpt-5.5", "gpt-5.6-terra")
#: CLI overrides that keep codex offline even when config.toml is invalid (codex then falls back
#: to its defaults, which would try plugin syncs over the network).
OFFLINE_OVERRIDES: tuple[str, ...] = (
    "-c", "features.plugins=false",
    "-c", "features.unbounded_connection_retries=false",
    "-c", "check_for_update_on_startup=false",
)


class CodexConfigError(RuntimeError):
    """codex reported the generated configuration as invalid."""


def scratch_environment() -> dict[str, str]:
    """The environment for codex helper commands: a throwaway CODEX_HOME, so the harness never
    creates or touches the user's ``~/.codex``."""
    import tempfile

    env = dict(os.environ)
    env["CODEX_HOME"] = tempfile.mkdtemp(prefix="codex-scratch-")
    return env


@functools.lru_cache(maxsize=8)
def _bundled_models(codex_bin: str, timeout: float = 60.0) -> tuple[str, ...]:
    """The binary's bundled model catalog; a :class:`CodexConfigError` saying what the binary
    did instead (failed, hung, printed something else)."""
    what = "`codex debug models --bundled`"
    env = scratch_environment()
    try:
        proc = subprocess.run(
            [codex_bin, "debug", "models", "--bundled"],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise CodexConfigError(f"{what} did not answer within {timeout:g}s") from None
    finally:
        import shutil

        shutil.rmtree(env["CODEX_HOME"], ignore_errors=True)
    if proc.returncode != 0:
        raise CodexConfigError(f"{what} failed ({proc.returncode}): {proc.stderr[-500:]}")
    try:
        data = json.loads(proc.stdout)
        models = data["models"] if isinstance(data, dict) else data
        return tuple(json.dumps(dict(model)) for model in models)
    except (ValueError, KeyError, TypeError):
        shown = " ".join(proc.stdout.split())[:80] or "nothing"
        raise CodexConfigError(f"{what} printed no model catalog ({shown!r})") from None


def model_catalog(codex_bin: str, model: str = MOCK_MODEL,
                  context_window: int = MOCK_CONTEXT_WINDOW,
                  extra_models: Sequence[str] = (),
                  catalog_timeout: float = 60.0) -> dict[str, Any]:
    """A catalog derived from the binary's bundled catalog: ``model`` (and ``extra_models``,
    e.g. a second mock model for replay variants), each a renamed copy of one bundled entry."""
    models = [json.loads(entry) for entry in _bundled_models(codex_bin, catalog_timeout)]
    if not models:
        raise CodexConfigError("codex has no bundled model catalog to derive the mock model from")
    by_slug = {m.get("slug"): m for m in models}
    template = next((by_slug[s] for s in _PREFERRED_TEMPLATES if s in by_slug), models[0])
    entry = copy.deepcopy(template)
    entry.update(
        {
            "slug": model,
            "display_name": model,
            "description": "Mock model served by hermes-codex-runtime's test provider.",
            "apply_patch_tool_type": "freeform",
            "supports_search_tool": False,
            "context_window": context_window,
            "max_context_window": context_window,
            "visibility": "list",
            "priority": 1,
            "upgrade": None,
            "availability_nux": None,
        }
    )
    if "experimental_supported_tools" in entry:
        entry["experimental_supported_tools"] = []
    if "model_messages" in entry:
        entry["model_messages"] = None
    entries = [entry]
    for index, extra in enumerate(extra_models, 2):
        other = copy.deepcopy(entry)
        other.update({"slug": extra, "display_name": extra, "priority": index})
        entries.append(other)
    return {"models": entries}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def prepare_codex_home(
    directory: str | os.PathLike[str],
    base_url: str,
    *,
    codex_bin: str,
    model: str = MOCK_MODEL,
    approval_policy: str = "on-request",
    sandbox_mode: str = "read-only",
    features: Mapping[str, bool] | None = None,
    mcp_servers: Mapping[str, Mapping[str, Any]] | None = None,
    extra_toml: str = "",
    context_window: int = MOCK_CONTEXT_WINDOW,
    env_key: str | None = None,
    extra_models: Sequence[str] = (),
    requires_openai_auth: bool = False,
    catalog_timeout: float = 60.0,
) -> Path:
    """Write ``config.toml`` (and the model catalog) into ``directory`` and return it.

    ``approval_policy = "untrusted"`` is refused here: in config.toml it makes the app-server
    exit before answering ``initialize`` — pass it on ``thread/start`` instead. ``env_key``
    names the environment variable holding the provider's API key (sent as a bearer token);
    ``requires_openai_auth`` makes the provider want a codex login (its API key or ChatGPT
    token is then the bearer), as OpenAI's own provider does. ``catalog_timeout`` bounds the
    binary's answer for its bundled catalog.
    """
    if approval_policy == "untrusted":
        raise ValueError("approval_policy 'untrusted' in config.toml makes codex exit at start-up;"
                         " pass approvalPolicy='untrusted' on thread/start instead")
    home = Path(directory)
    home.mkdir(parents=True, exist_ok=True)
    catalog_path = home / "mock-model-catalog.json"
    catalog_path.write_text(json.dumps(model_catalog(codex_bin, model, context_window,
                                                     extra_models, catalog_timeout)))
    feature_table = {"plugins": False, "unbounded_connection_retries": False}
    feature_table.update(features or {})
    lines = [
        f"model = {_toml_value(model)}",
        f"model_provider = {_toml_value(MOCK_PROVIDER)}",
        f"approval_policy = {_toml_value(approval_policy)}",
        f"sandbox_mode = {_toml_value(sandbox_mode)}",
        "check_for_update_on_startup = false",
        f"model_catalog_json = {_toml_value(str(catalog_path))}",
        "",
        f"[model_providers.{MOCK_PROVIDER}]",
        f"name = {_toml_value(MOCK_PROVIDER)}",
        f"base_url = {_toml_value(base_url)}",
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        *([f"env_key = {_toml_value(env_key)}"] if env_key else []),
        *(["requires_openai_auth = true"] if requires_openai_auth else []),
        "",
        "[features]",
        *(f"{name} = {_toml_value(bool(on))}" for name, on in feature_table.items()),
        "",
    ]
    for name, server in (mcp_servers or {}).items():
        lines.append(f"[mcp_servers.{name}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in server.items())
        lines.append("")
    if extra_toml:
        lines.append(extra_toml)
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    return home


def config_warnings(conn: AppServerConnection, settle: float = 0.3) -> list[dict[str, Any]]:
    """Drain ``configWarning`` notifications that arrive within ``settle`` s of the handshake."""
    warnings: list[dict[str, Any]] = []
    while True:
        try:
            message = conn.next_inbound(timeout=settle)
        except TransportClosed:
            break
        if message is None:
            break
        if message.method == "configWarning":
            warnings.append(message.params)
    return warnings


def invalid_config_warnings(warnings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The texts of warnings that mean "Invalid configuration; using defaults"."""
    from hermes_codex_runtime.protocol import invalid_configuration

    found = (invalid_configuration(dict(warning)) for warning in warnings)
    return [text for text in found if text]


def verify_codex_home(codex_bin: str, codex_home: str | os.PathLike[str],
                      env: Mapping[str, str] | None = None) -> None:
    """Spawn codex once on ``codex_home``; raise :class:`CodexConfigError` on an invalid config."""
    conn = AppServerConnection.spawn(
        SpawnOptions(codex_bin=codex_bin, codex_home=os.fspath(codex_home), env=env,
                     extra_args=OFFLINE_OVERRIDES)
    )
    try:
        problems = invalid_config_warnings(config_warnings(conn))
    finally:
        conn.close()
    if problems:
        raise CodexConfigError("codex rejected the test configuration: " + "; ".join(problems))
