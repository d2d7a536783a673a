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
explicit base URL) keep their own api_mode, so a fallback provider really is a different one —
with two exceptions that are not fallbacks:

* the CLI re-resolving, for every message, the runtime it was handed: after ``/model`` it passes
  that runtime's base URL and key back as explicit ones. A runtime the plugin issued is
  remembered (its route and a digest of its key, :func:`_remember`), and recognised when it comes
  back (:func:`_reissued`) — on 0.19.0 it otherwise resolved to ``codex_responses`` and the next
  message went to the codex backend with the placeholder key ("Connection error");
* a ``/model`` switch (``hermes_cli.model_switch.switch_model``: the CLI, the gateway, ``/new``'s
  reset): its target is the session's provider from then on, so a codex provider lands on codex
  (:func:`_switching_to_codex`), also where 0.19.0 let api.openai.com's mandated wire protocol
  replace the runtime.

A provider the plugin does not run on codex keeps its own api_mode, also where the 0.22 line's
own rule would hand a named custom provider to codex (``[model_providers.<id>]``): the plugin's
turns use codex's configured provider, so that turn would go there with the other provider's
model name (:func:`_codex_providers_only`).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from hermes_codex_runtime.hermes.after_import import after_import, watching
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


#: Set while Hermes resolves a ``/model`` switch (:func:`_switching_to_codex`).
_switching: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "hermes_codex_runtime_switching", default=False)


def _applies(requested: str | None, explicit_base_url: str | None,
             model: Mapping[str, Any], explicit_api_key: Any = None) -> bool:
    if explicit_base_url:
        # a fallback entry or a custom endpoint — or the CLI handing back a runtime of ours
        return _reissued(requested, explicit_base_url, explicit_api_key)
    configured = str(model.get("provider") or "").strip().lower()
    asked = str(requested or "").strip().lower()
    if asked and configured and asked != configured:
        # a fallback entry keeps its own api_mode; a /model switch's target is the session's
        # provider from now on
        return _switching.get() and asked in CODEX_PROVIDERS
    provider = asked or configured
    if model.get("api_mode") == RUNTIME_VALUE:
        return True  # the user said so explicitly, for whatever provider
    return provider in CODEX_PROVIDERS


#: The runtimes the plugin issued on codex: (route, digest of the key) → the provider names it
#: was issued for, the one issued least recently first (a session's runtime is issued again for
#: each of its messages). Hermes holds the key anyway; only its digest is kept here.
_issued: dict[tuple[str, str], frozenset[str]] = {}
_issued_lock = threading.Lock()
_ISSUED_MAX = 64


def _issue_key(base_url: Any, api_key: Any) -> tuple[str, str] | None:
    if not (isinstance(base_url, str) and base_url.strip() and isinstance(api_key, str)
            and api_key):
        return None
    return (base_url.strip().rstrip("/"), hashlib.sha256(api_key.encode()).hexdigest())


def _remember(runtime: Mapping[str, Any], requested: str | None) -> None:
    """Remember a runtime issued on codex, so its return as explicit credentials is known."""
    key = _issue_key(runtime.get("base_url"), runtime.get("api_key"))
    if key is None:
        return
    names = {str(name).strip().lower() for name in
             (runtime.get("provider"), runtime.get("requested_provider"), requested) if name}
    with _issued_lock:
        _issued[key] = _issued.pop(key, frozenset()) | names  # the latest last
        while len(_issued) > _ISSUED_MAX:
            del _issued[next(iter(_issued))]


def _reissued(requested: str | None, base_url: Any, api_key: Any) -> bool:
    """Whether ``base_url`` and ``api_key`` are those of a runtime the plugin issued on codex
    for ``requested`` (the CLI resolving again what ``/model`` handed it)."""
    key = _issue_key(base_url, api_key)
    if key is None:
        return False
    with _issued_lock:
        names = _issued.get(key)
    asked = str(requested or "").strip().lower()
    return names is not None and (not asked or asked in names)


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
            wanted = runtime_requested(model) and _applies(
                requested, explicit_base_url, model, kwargs.get("explicit_api_key"))
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
            synthesised = _synthesised(requested, model)
            _remember(synthesised, requested)
            return synthesised
        if not isinstance(runtime, dict):
            return runtime
        patched = dict(runtime)
        patched["api_mode"] = RUNTIME_VALUE
        if not patched.get("api_key"):
            patched["api_key"] = PLACEHOLDER_KEY
        if not patched.get("base_url"):
            patched["base_url"] = provider_route(str(patched.get("provider") or ""),
                                                 model.get("base_url"))
        _remember(patched, requested)
        return patched

    return resolve_runtime_provider


def _switching_to_codex(original: Callable[..., Any]) -> Callable[..., Any]:
    """``switch_model`` resolving its target as the session's provider (:func:`_applies`), and
    keeping the runtime where the resolver issued one on codex: 0.19.0 replaces the api_mode
    of an api.openai.com route by the wire protocol that host mandates (``codex_responses``),
    which the CLI would then set on the agent, and ``--global`` save to config.yaml."""
    def switch_model(*args: Any, **kwargs: Any) -> Any:
        token = _switching.set(True)
        try:
            result = original(*args, **kwargs)
        finally:
            _switching.reset(token)
        try:
            if getattr(result, "success", False) and \
                    getattr(result, "api_mode", None) != RUNTIME_VALUE and \
                    _reissued(getattr(result, "target_provider", None),
                              getattr(result, "base_url", None),
                              getattr(result, "api_key", None)):
                result.api_mode = RUNTIME_VALUE
        except Exception:
            log.warning("codex-runtime: could not keep the /model switch on codex",
                        exc_info=True)
        return result

    return switch_model


_declined: set[str] = set()


def _codex_providers_only(original: Callable[..., Any]) -> Callable[..., Any]:
    """Hermes' own ``model.openai_runtime`` rule, kept for the providers the plugin runs on codex
    (:data:`CODEX_PROVIDERS`, judged by the provider and the name asked for); any other keeps
    the api_mode of its own route. The 0.22 line also hands a named custom provider to codex,
    for codex's ``[model_providers.<id>]`` — which the plugin's turns do not select."""
    def maybe_apply(*args: Any, **kwargs: Any) -> Any:
        api_mode = original(*args, **kwargs)
        own = kwargs.get("api_mode")
        if api_mode != RUNTIME_VALUE or own == RUNTIME_VALUE or "api_mode" not in kwargs:
            return api_mode
        names = {str(kwargs.get(name) or "").strip().lower()
                 for name in ("provider", "requested_provider")}
        if names & CODEX_PROVIDERS:
            return api_mode
        shown = str(kwargs.get("requested_provider") or kwargs.get("provider") or "")
        if shown not in _declined:
            _declined.add(shown)
            log.info("codex-runtime: provider %r keeps its own api_mode (%s): the codex runtime "
                     "runs %s", shown, own, ", ".join(sorted(CODEX_PROVIDERS)))
        return own

    return maybe_apply


def install_activation() -> bool:
    """Wrap the host's resolver in place — and its own ``model.openai_runtime`` rule, and
    ``/model``'s ``switch_model`` once Hermes imports it. False (with one log line) when the
    resolver is missing; the other two are reported once each where they are."""
    took = wrap_in_place("hermes_cli.runtime_provider", "resolve_runtime_provider", _applying,
                         feature="model.openai_runtime activation")
    wrap_in_place("hermes_cli.runtime_provider", "_maybe_apply_codex_app_server_runtime",
                  _codex_providers_only,
                  feature="other providers kept off codex (Hermes' own rule applies)")
    if not watching("hermes_cli.model_switch"):
        after_import("hermes_cli.model_switch", _install_switch)
    return took


def _install_switch() -> None:
    try:
        wrap_in_place("hermes_cli.model_switch", "switch_model", _switching_to_codex,
                      feature="/model switches landing on codex")
    except Exception:
        log.warning("codex-runtime: could not follow /model switches", exc_info=True)
