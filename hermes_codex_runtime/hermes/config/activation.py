"""Making ``model.openai_runtime: codex_app_server`` actually take effect.

Every place Hermes builds an ``AIAgent`` (CLI, gateway, cron, TUI, ACP, one-shot, ``/model``)
calls ``hermes_cli.runtime_provider.resolve_runtime_provider`` through a function-local import, so
wrapping that one module attribute reaches all of them. Hermes 0.19.0 honours ``openai_runtime``
only for ``openai-codex`` on its credential-pool path; the wrapper makes it hold for:

* ``provider: openai-codex`` on every path (pool, explicit, auth store) — and when Hermes holds
  no codex login at all ("No Codex credentials stored"): codex owns its own login;
* ``provider: openai-api``, and ``provider: openai`` (which 0.19.0 rejects as unknown);
* ``model.api_mode: codex_app_server`` set directly (a common spelling of the same wish).

Only the primary resolution is rewritten: fallback entries (another ``requested`` provider, or an
explicit base URL) keep their own api_mode, so a fallback provider really is a different one.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from hermes_codex_runtime.hermes.config.settings import (
    RUNTIME_VALUE,
    SettingError,
    hermes_home,
    model_section,
    runtime_requested,
)
from hermes_codex_runtime.hermes.symbols.patch import wrap_in_place, wrapped

log = logging.getLogger("hermes_codex_runtime.hermes")

CODEX_PROVIDERS = frozenset({"openai", "openai-codex", "codex", "openai-api"})
PLACEHOLDER_KEY = "codex-app-server-owns-auth"
#: Each provider's own default route, where Hermes' registry does not say: the base URL Hermes'
#: route scoping compares with (the 0.22 line honours ``model.context_length`` only for the
#: configured provider's own route).
DEFAULT_ROUTES = {"openai-codex": "https://chatgpt.com/backend-api/codex",
                  "openai-api": "https://api.openai.com/v1"}


def _applies(requested: str | None, explicit_base_url: str | None,
             model: Mapping[str, Any]) -> bool:
    if explicit_base_url:
        return False
    configured = str(model.get("provider") or "").strip().lower()
    asked = str(requested or "").strip().lower()
    if asked and configured and asked != configured:
        return False  # resolving a fallback entry or an explicit /model switch
    provider = asked or configured
    if model.get("api_mode") == RUNTIME_VALUE:
        return True  # the user said so explicitly, for whatever provider
    return provider in CODEX_PROVIDERS


def runtime_applies(provider: str | None, model: Mapping[str, Any]) -> bool:
    """Whether a turn for ``provider`` (``None``: the configured one) runs on codex when the
    runtime is switched on."""
    return _applies(provider, None, model)


def provider_route(provider: str, base_url: Any) -> str:
    """The base URL a codex-run runtime reports: ``model.base_url`` when set, else the
    provider's own default route (Hermes' provider registry, else :data:`DEFAULT_ROUTES`)."""
    if isinstance(base_url, str) and base_url.strip():
        return base_url.strip()
    from hermes_codex_runtime.hermes.symbols.probe import symbol

    registry = symbol("hermes_cli.auth", "PROVIDER_REGISTRY",
                      feature="the provider's own route (model.context_length on 0.22)")
    entry = registry.get(provider) if isinstance(registry, Mapping) else None
    route = getattr(entry, "inference_base_url", None)
    if isinstance(route, str) and route:
        return route
    return DEFAULT_ROUTES.get(provider, DEFAULT_ROUTES["openai-api"])


def _synthesised(requested: str | None, model: Mapping[str, Any]) -> dict[str, Any]:
    provider = str(requested or model.get("provider") or "openai-codex").strip().lower()
    if provider in ("openai", "codex"):
        provider = "openai-codex"
    return {
        "provider": provider,
        "api_mode": RUNTIME_VALUE,
        "base_url": provider_route(provider, model.get("base_url")),
        "api_key": PLACEHOLDER_KEY,
        "source": "codex-runtime (codex owns authentication)",
        "requested_provider": requested or model.get("provider"),
    }


_told: set[tuple[str, str]] = set()


def _tell_once(message: str) -> None:
    """An activation problem where the user sees it — stderr (the CLI, a service's journal) and
    the WARNING log — once per state of config.yaml, as Hermes does for a config.yaml it cannot
    parse. No agent exists yet when a runtime is resolved, so there is no chat to tell."""
    path = hermes_home() / "config.yaml"
    try:
        info = path.stat()
        state = f"{info.st_mtime_ns}:{info.st_size}"
    except OSError:
        state = "missing"
    key = (message, state)
    if key in _told:
        return
    _told.add(key)
    log.warning("%s", message)
    with contextlib.suppress(Exception):
        print(f"⚠ {message}", file=sys.stderr, flush=True)


def wrap_resolver(original: Callable[..., Any]) -> Callable[..., Any]:
    """``resolve_runtime_provider`` with the codex runtime applied when config.yaml asks."""
    return wrapped(original, _applying)


def _applying(original: Callable[..., Any]) -> Callable[..., Any]:
    def resolve_runtime_provider(*args: Any, **kwargs: Any) -> Any:
        requested = kwargs.get("requested")
        explicit_base_url = kwargs.get("explicit_base_url")
        try:
            model = model_section()
            wanted = runtime_requested(model) and _applies(requested, explicit_base_url, model)
        except SettingError as exc:
            _tell_once(f"codex-runtime: {exc} — the codex runtime stays off until it is fixed "
                       f"in {hermes_home() / 'config.yaml'}.")
            wanted = False
        except Exception:
            log.debug("codex-runtime: could not read config.yaml", exc_info=True)
            wanted = False
        if not wanted:
            return original(*args, **kwargs)
        try:
            runtime = original(*args, **kwargs)
        except Exception as exc:
            # 0.19.0: "Unknown provider 'openai'", "No Codex credentials stored". codex
            # authenticates on its own (codex login / CODEX_HOME): Hermes needs no credential.
            # the text, not the exception: a record keeps its arguments, and the exception's
            # traceback holds the frames that built the agent (and so the agent) alive
            log.info("codex-runtime: Hermes could not resolve %r (%s); codex owns the login",
                     requested or model.get("provider"), str(exc))
            return _synthesised(requested, model)
        if not isinstance(runtime, dict):
            return runtime
        patched = dict(runtime)
        patched["api_mode"] = RUNTIME_VALUE
        if not patched.get("api_key"):
            patched["api_key"] = PLACEHOLDER_KEY
        if not patched.get("base_url"):
            patched["base_url"] = provider_route(str(patched.get("provider") or ""),
                                                 model.get("base_url"))
        return patched

    return resolve_runtime_provider


def install_activation() -> bool:
    """Wrap the host's resolver in place. False (with one log line) when it is missing."""
    return wrap_in_place("hermes_cli.runtime_provider", "resolve_runtime_provider", _applying,
                         feature="model.openai_runtime activation")
