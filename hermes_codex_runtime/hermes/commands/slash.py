"""What a Hermes user types: ``/codex-status`` in a session, ``/codex-runtime`` where the host has
none of its own, and ``hermes codex-plugin doctor|status`` in a terminal.

Registered through ``ctx`` at plugin load; each registration is feature-probed and a name Hermes
already uses is left alone (0.19.0 has a built-in ``/codex-runtime`` that sets
``model.openai_runtime`` — exactly the key the plugin honours).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import symbol
from hermes_codex_runtime.hermes.turn.runtime import current_agent

log = logging.getLogger("hermes_codex_runtime.hermes")
CLI_NAME = "codex-plugin"


def codex_status_text(agent: Any) -> str:
    """The ``/codex-status`` answer for ``agent`` (or for no agent yet): what this session ran
    on, and what the NEXT message runs on — decided from config.yaml exactly as activation will
    decide it when Hermes resolves the configured provider for that message — with the tokens
    of the session's turns and, apart, of its side tasks (Hermes' auxiliary usage)."""
    from hermes_codex_runtime.hermes.commands.switch import next_runtime
    from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

    lines = [f"next message:  {next_runtime()}"]
    if agent is None:
        lines.insert(0, "this session:  no codex turn yet")
        return "\n".join(lines)
    mode = getattr(agent, "api_mode", None)
    lines.insert(0, "this session:  " + ("on codex app-server" if mode == "codex_app_server"
                                         else f"on Hermes' own runtime (api_mode {mode!r}; a "
                                         "fallback may be active)"))
    session = shared_runtime().session_for(agent)
    if session is not None and session.thread_id:
        lines.append(f"codex thread:  {session.thread_id} ({session.thread_origin})")
        conn = session.connection
        if conn is not None and conn.server is not None:
            version = ".".join(map(str, conn.server.version or ())) or "?"
            where = conn.binary.path if conn.binary else "?"
            lines.append(f"codex binary:  {where} (codex {version}, pid {conn.pid})")
    else:
        lines.append("codex thread:  none yet")
    for server in shared_runtime().pool.snapshot():
        where = server["endpoint"] or f"local pid {server['pid']}"
        lines.append(f"app-server:    {where}: {server['sessions']} session(s), "
                     f"{server['threads']} thread(s) active, {server['threads_left_loaded']} "
                     "left loaded")
    prompt = getattr(agent, "session_prompt_tokens", 0)
    cached = getattr(agent, "session_cache_read_tokens", 0)
    lines.append(
        f"tokens:        input {prompt} (cached {cached}, uncached "
        f"{getattr(agent, 'session_input_tokens', 0)}), output "
        f"{getattr(agent, 'session_output_tokens', 0)} (reasoning "
        f"{getattr(agent, 'session_reasoning_tokens', 0)}), total "
        f"{getattr(agent, 'session_total_tokens', 0)}, api calls "
        f"{getattr(agent, 'session_api_calls', 0)}")
    from hermes_codex_runtime.hermes.turn.accounting import side_task_usage

    tasks = side_task_usage(agent)
    if tasks:
        lines.append("side tasks:    " + "; ".join(
            f"{task} {u['calls']} call(s), input {u['input'] + u['cached']} (cached "
            f"{u['cached']}), output {u['output']} (reasoning {u['reasoning']})"
            for task, u in tasks.items()))
    compressor = getattr(agent, "context_compressor", None)
    window = getattr(compressor, "context_length", 0) if compressor is not None else 0
    last = getattr(compressor, "last_prompt_tokens", 0) if compressor is not None else 0
    if window and last and last > 0:
        lines.append(f"context:       {last} of {window} tokens ({100 * last / window:.1f}%)")
    return "\n".join(lines)


def _codex_status_command(raw_args: str = "") -> str:
    return codex_status_text(current_agent())


def _codex_runtime_command(raw_args: str = "") -> str:
    """``/codex-runtime [auto|codex_app_server]`` for hosts without a built-in one."""
    from hermes_codex_runtime.hermes.commands.switch import runtime_switch

    choice = (raw_args or "").strip().lower()
    if choice not in ("", "auto", "codex_app_server"):
        return "usage: /codex-runtime [auto|codex_app_server]"
    lines, _, _ = runtime_switch({}, choice or None)
    return "\n".join(lines)


def _setup_cli(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("arguments", nargs=argparse.REMAINDER,
                        help="a hermes-codex-runtime command: enable, disable, codex ARGS, "
                        "doctor, try, status, replay, version (none: the full help)")


def _run_cli(args: argparse.Namespace) -> int:
    from hermes_codex_runtime.hermes.commands.cli import main

    return main(list(getattr(args, "arguments", None) or []))


def register_commands(ctx: Any) -> dict[str, bool]:
    """Register what this host accepts; returns what took. The slash commands wait until Hermes'
    command registry (``hermes_cli.commands``) is imported — everything that dispatches a slash
    command imports it first, and on the 0.19 line it costs ~0.1 s (the terminal UI toolkit) that
    a gateway run, a cron job or a library agent would otherwise pay for the plugin alone."""
    done: dict[str, bool] = {}
    register = getattr(ctx, "register_command", None)
    if callable(register):
        from hermes_codex_runtime.hermes.after_import import after_import

        after_import("hermes_cli.commands", lambda: _register_slash(register))
        done["slash commands (once the registry loads)"] = True
    register_cli = getattr(ctx, "register_cli_command", None)
    if callable(register_cli):
        try:
            register_cli(CLI_NAME, "codex runtime: enable, disable, codex login, doctor, try, "
                         "status, replay", _setup_cli, _run_cli,
                         description="The hermes-codex-runtime command, inside Hermes "
                         "(`hermes codex-plugin` alone prints its help).")
            done[CLI_NAME] = True
        except Exception:
            log.warning("codex-runtime: registering `hermes %s` failed", CLI_NAME, exc_info=True)
    return done


def _register_slash(register: Any) -> None:
    """``/codex-status``, and ``/codex-runtime`` where Hermes has none of its own."""
    try:
        register("codex-status", _codex_status_command,
                 description="codex runtime: thread, binary, tokens, context use")
        resolve = symbol("hermes_cli.commands", "resolve_command", feature="slash commands")
        if not (callable(resolve) and resolve("codex-runtime") is not None):
            register("codex-runtime", _codex_runtime_command,
                     description="switch the OpenAI runtime (auto | codex_app_server)",
                     args_hint="auto|codex_app_server|status")
    except Exception:
        log.warning("codex-runtime: registering slash commands failed", exc_info=True)
