"""``status``: which codex thread each recent Hermes session is bound to, the sessions' token
breakdown, the codex binary in use, and the codex processes running for this HERMES_HOME — from
``state.db`` (read-only), the binding file and the process registry."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from typing import Any

from hermes_codex_runtime.bindings import ThreadBindings
from hermes_codex_runtime.hermes.config.paths import app_servers_dir, bindings_path, registry_path
from hermes_codex_runtime.hermes.config.settings import hermes_home

_COLUMNS = ("id", "source", "model", "started_at", "input_tokens", "output_tokens",
            "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "model_config")


def _rows(limit: int, session: str | None) -> list[dict[str, Any]]:
    path = hermes_home() / "state.db"
    if not path.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        db.row_factory = sqlite3.Row
        available = {row[1] for row in db.execute("PRAGMA table_info(sessions)")}
        columns = [c for c in _COLUMNS if c in available]
        if "id" not in columns:
            return []
        query = f"SELECT {', '.join(columns)} FROM sessions"
        args: tuple[Any, ...] = ()
        if session:
            query += " WHERE id = ?"
            args = (session,)
        query += " ORDER BY started_at DESC LIMIT ?" if "started_at" in columns else " LIMIT ?"
        return [dict(row) for row in db.execute(query, (*args, limit))]


def collect(limit: int = 10, session: str | None = None) -> dict[str, Any]:
    """Everything ``status`` shows, as data."""
    from hermes_codex_runtime.hermes.config.settings import SettingError, plugin_settings
    from hermes_codex_runtime.wire import WireError, probe_version, resolve_codex_binary

    binary: dict[str, Any]
    try:
        settings = plugin_settings()
        resolved = resolve_codex_binary(settings.codex_bin)
        binary = {"path": resolved.path, "source": resolved.source,
                  "version": ".".join(map(str, probe_version(resolved)))}
    except (WireError, SettingError) as exc:
        binary = {"error": str(exc)}
    bindings = ThreadBindings(bindings_path())
    sessions = []
    for row in _rows(limit, session):
        config: dict[str, Any] = {}
        with contextlib.suppress(TypeError, ValueError):
            config = json.loads(row.get("model_config") or "{}") or {}
        thread = config.get("codex_thread_id") or bindings.get(str(row["id"]))
        cached = int(row.get("cache_read_tokens") or 0)
        uncached = int(row.get("input_tokens") or 0)
        sessions.append({
            "session_id": row["id"], "source": row.get("source"), "model": row.get("model"),
            "codex_thread_id": thread,
            "tokens": {"input": uncached + cached, "cached": cached, "uncached": uncached,
                       "output": int(row.get("output_tokens") or 0),
                       "reasoning": int(row.get("reasoning_tokens") or 0)},
        })
    if session and not sessions:
        thread = bindings.get(session)
        if thread:
            sessions.append({"session_id": session, "codex_thread_id": thread, "tokens": None})
    from hermes_codex_runtime.wire.registry import ProcessRegistry

    processes = ProcessRegistry(registry_path()).live()
    return {"hermes_home": str(hermes_home()), "codex": binary, "sessions": sessions,
            "codex_processes": processes, "app_servers": app_servers(processes)}


def app_servers(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each running Hermes process published about its app-servers (local and remote):
    sessions and threads per server, with the local ones' RSS from the process registry. Files
    of Hermes processes that are gone are removed."""
    import psutil

    rss = {p["pid"]: p["rss_mib"] for p in processes}
    out: list[dict[str, Any]] = []
    directory = app_servers_dir()
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            host_pid = int(data["host_pid"])
            servers = list(data["servers"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not psutil.pid_exists(host_pid):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        for server in servers:
            if isinstance(server, dict):
                out.append({**server, "host_pid": host_pid,
                            "rss_mib": rss.get(server.get("pid"))})
    return out


def render(data: dict[str, Any]) -> str:
    """The terminal view."""
    codex = data["codex"]
    lines = [f"HERMES_HOME  {data['hermes_home']}",
             "codex        " + (f"{codex['version']} ({codex['source']}: {codex['path']})"
                                if "path" in codex else f"unavailable — {codex['error']}")]
    processes = data.get("codex_processes") or []
    lines.append(f"processes    {len(processes)} live codex app-server(s)"
                 + (f", {sum(p['rss_mib'] for p in processes):.0f} MiB" if processes else ""))
    for proc in processes:
        owner = "running" if proc["owner_alive"] else "GONE (reaped at the next start)"
        lines.append(f"  pid {proc['pid']}  {proc['rss_mib']} MiB  host pid {proc['owner_pid']} "
                     f"{owner}")
    for server in data.get("app_servers") or []:
        where = server.get("endpoint") or f"pid {server.get('pid')}"
        memory = f", {server['rss_mib']} MiB" if server.get("rss_mib") else ""
        lines.append(f"  app-server {where} ({server.get('kind')}{memory}): "
                     f"{server.get('sessions')} session(s), {server.get('threads')} thread(s) "
                     f"active, {server.get('threads_left_loaded')} left loaded — Hermes pid "
                     f"{server.get('host_pid')}")
    if not data["sessions"]:
        lines.append("no Hermes sessions yet")
    for entry in data["sessions"]:
        thread = entry.get("codex_thread_id") or "— (not on codex)"
        lines.append(f"\nsession {entry['session_id']}  [{entry.get('source') or '?'}]  "
                     f"model {entry.get('model') or '?'}")
        lines.append(f"  codex thread  {thread}")
        tokens = entry.get("tokens")
        if tokens:
            lines.append(f"  tokens        input {tokens['input']} (cached {tokens['cached']}, "
                         f"uncached {tokens['uncached']}), output {tokens['output']} "
                         f"(reasoning {tokens['reasoning']})")
    return "\n".join(lines)
