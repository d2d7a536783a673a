"""``enable --provider`` and its undo in ``disable``: a config.yaml that runs on another provider
moved onto codex — with the user's consent — without losing that provider.

Codex turns need ``model.provider`` openai-codex (or openai-api, openai) and an OpenAI model.
Most existing Hermes configs name another provider (``openrouter`` with
``anthropic/claude-sonnet-4``); ``enable`` alone then says what it would take and changes
nothing. ``--provider`` takes it:

* ``model.provider`` becomes openai-codex;
* the previous provider with its model and endpoint keys (``base_url``, ``api_key``,
  ``key_env``) becomes the first entry of ``fallback_providers`` — where Hermes finishes a turn
  when codex hits its usage limit — unless an entry already names that provider and model;
* a ``model.default`` of another vendor becomes Hermes' default model for openai-codex (or is
  removed, leaving codex's own default, on a Hermes without one);
* what was replaced is recorded in ``$HERMES_HOME/codex-runtime/enabled-from.json``, and
  ``disable`` puts it back (only where the config still says what ``enable`` wrote).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_codex_runtime.hermes.config.activation import CODEX_PROVIDERS
from hermes_codex_runtime.hermes.config.model_names import foreign_vendor
from hermes_codex_runtime.hermes.config.settings import hermes_home
from hermes_codex_runtime.hermes.symbols.probe import symbol

CODEX_PROVIDER = "openai-codex"
ENDPOINT_KEYS = ("base_url", "api_key", "key_env")
RECORD = "enabled-from.json"


@dataclass(frozen=True, slots=True)
class Mismatch:
    """What in ``model`` keeps turns off codex: another provider, another vendor's model."""

    provider: str | None
    model: str | None

    def __bool__(self) -> bool:
        return bool(self.provider or self.model)


def model_of(data: dict[str, Any]) -> dict[str, Any]:
    """``data["model"]`` as a mapping (a bare model name becomes ``default``), created if absent."""
    model = data.get("model")
    if not isinstance(model, dict):
        model = data["model"] = {} if not model else {"default": model}
    return model


def mismatch(data: dict[str, Any]) -> Mismatch:
    """What ``--provider`` would change in this config."""
    raw = data.get("model")
    model = raw if isinstance(raw, dict) else {"default": raw} if isinstance(raw, str) else {}
    provider = str(model.get("provider") or "").strip()
    default = model.get("default")
    return Mismatch(provider if provider and provider not in CODEX_PROVIDERS else None,
                    default if isinstance(default, str) and foreign_vendor(default) else None)


def default_codex_model() -> str | None:
    """Hermes' own default model for openai-codex (what ``hermes model`` offers first)."""
    pick = symbol("hermes_cli.models", "get_default_model_for_provider",
                  feature="enable --provider: Hermes' default codex model")
    try:
        name = pick(CODEX_PROVIDER) if callable(pick) else None
    except Exception:
        return None
    return name.strip() if isinstance(name, str) and name.strip() else None


def what_it_takes(found: Mismatch, new_model: str | None) -> str:
    """One paragraph: why turns would not run on codex, and what ``--provider`` changes."""
    why = []
    if found.provider:
        why.append(f"model.provider is {found.provider!r}, which Hermes runs on its own "
                   "chat-completions runtime, never on codex")
    if found.model:
        why.append(f"model.default {found.model!r} is not an OpenAI model")
    return "; ".join(why) + ". " + changes_sentence(found, new_model)


def changes_sentence(found: Mismatch, new_model: str | None) -> str:
    """What ``--provider`` sets and keeps."""
    parts = [f"model.provider: {CODEX_PROVIDER}"] if found.provider else []
    if found.model:
        parts.append(f"model.default: {new_model}" if new_model else "model.default removed "
                     "(codex's own default model)")
    text = "--provider sets " + " and ".join(parts)
    if found.provider:
        text += (f", and keeps {found.provider!r}"
                 + (f" with {found.model!r}" if found.model else "")
                 + " as your fallback provider (Hermes finishes a turn there when codex hits "
                 "its usage limit)")
    return text + "; `disable` puts it back."


def provider_edit(data: dict[str, Any], record: dict[str, Any],
                  new_model: str | None) -> list[str]:
    """``--provider``'s change to ``data`` (lines to show); ``record`` gets what it replaced."""
    found = mismatch(data)
    model = model_of(data)
    lines: list[str] = []
    if found.provider:
        record["provider"] = found.provider
        entry = {"provider": found.provider}
        if isinstance(model.get("default"), str) and model["default"].strip():
            entry["model"] = model["default"]
        for key in ENDPOINT_KEYS:
            if model.get(key) is not None:
                record[key] = entry[key] = model.pop(key)
                lines.append(f"model.{key}: moved to the fallback entry")
        chain = data.get("fallback_providers")
        chain = chain if isinstance(chain, list) else []
        if not any(isinstance(e, dict) and e.get("provider") == entry["provider"]
                   and e.get("model") == entry.get("model") for e in chain):
            data["fallback_providers"] = [entry, *chain]
            record["fallback"] = entry
            lines.append(f"fallback_providers: + {entry['provider']}"
                         + (f" ({entry['model']})" if "model" in entry else ""))
        model["provider"] = CODEX_PROVIDER
        lines.insert(0, f"model.provider: {found.provider} → {CODEX_PROVIDER}")
    elif not model.get("provider"):
        model["provider"] = CODEX_PROVIDER
        record["provider"] = None
        lines.append(f"model.provider: {CODEX_PROVIDER}")
    if found.model:
        record["default"] = found.model
        if new_model:
            model["default"] = new_model
            lines.append(f"model.default: {found.model} → {new_model}")
        else:
            del model["default"]
            lines.append(f"model.default: {found.model} removed (codex's own default)")
    return lines


def restore_edit(data: dict[str, Any], record: dict[str, Any]) -> list[str]:
    """``disable``: put back what ``provider_edit`` replaced, where the config still says what
    it wrote."""
    model = data.get("model")
    if not isinstance(model, dict) or model.get("provider") != CODEX_PROVIDER \
            or "provider" not in record:
        return []
    lines = []
    if record["provider"] is None:
        del model["provider"]
        lines.append(f"model.provider: {CODEX_PROVIDER} removed (enable had added it)")
    else:
        model["provider"] = record["provider"]
        lines.append(f"model.provider: {CODEX_PROVIDER} → {record['provider']}")
        for key in ENDPOINT_KEYS:
            if key in record and key not in model:
                model[key] = record[key]
                lines.append(f"model.{key}: restored")
    if "default" in record:
        model["default"] = record["default"]
        lines.append(f"model.default: {record['default']}")
    chain = data.get("fallback_providers")
    if "fallback" in record and isinstance(chain, list) and record["fallback"] in chain:
        chain.remove(record["fallback"])
        lines.append(f"fallback_providers: - {record['fallback']['provider']}")
    return lines


def record_path() -> Path:
    """Where ``enable --provider`` keeps what it replaced."""
    return hermes_home() / "codex-runtime" / RECORD


def save_record(record: dict[str, Any]) -> None:
    """Keep ``record`` for ``disable`` (mode 0600: it may hold an ``api_key``)."""
    path = record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(record, out)


def load_record() -> dict[str, Any]:
    """What ``enable --provider`` replaced ({} when nothing)."""
    try:
        record = json.loads(record_path().read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def forget_record() -> None:
    """After ``disable`` restored it."""
    with contextlib.suppress(OSError):
        record_path().unlink()
