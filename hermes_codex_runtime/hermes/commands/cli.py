"""The ``hermes-codex-runtime`` console script (also ``hermes codex-plugin …`` inside Hermes).

Sub-commands:

* ``enable`` / ``disable`` — switch the plugin and the codex runtime on or off in config.yaml
  (a backup first; ``--print`` shows the lines instead of writing them);
* ``codex ARGS…`` — run exactly the codex binary, with exactly the ``CODEX_HOME``, that the
  plugin uses (``… codex login``, ``… codex app-server --listen …``);
* ``doctor`` — why doesn't it work here? (``--json`` for scripts);
* ``try`` — a playground: a scratch Hermes home on the bundled mock model, for your own
  ``hermes chat`` or gateway, offline;
* ``demo`` — a real Hermes turn through the real codex binary on the mock provider;
* ``status`` — codex threads of recent Hermes sessions; ``replay`` — Codex Replay;
  ``version``.

Each returns a process exit status. Nothing here is imported by the plugin inside Hermes,
except :func:`main` for ``hermes codex-plugin``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from hermes_codex_runtime import __version__

PROG = "hermes-codex-runtime"


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (``codex`` takes everything after it verbatim)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Run Hermes Agent turns through OpenAI's codex app-server.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, text in (("enable", "switch the plugin and the codex runtime on in config.yaml"),
                       ("disable", "switch them off again (before you uninstall, too)")):
        switch = sub.add_parser(name, help=text, description=text)
        switch.add_argument("--print", dest="print_only", action="store_true",
                            help="show what would change in config.yaml; change nothing")
        if name == "enable":
            switch.add_argument("--provider", action="store_true",
                                help="also move model.provider (and a non-OpenAI "
                                "model.default) to codex, keeping them as your fallback "
                                "provider; `disable` puts them back")
    sub.add_parser("codex", help="run the codex binary (and CODEX_HOME) the plugin uses, e.g. "
                   "`codex login`", add_help=False)
    doctor = sub.add_parser("doctor", help="check codex, the login, config and Hermes")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.add_argument("--codex-only", action="store_true", help="skip the Hermes checks")
    trial = sub.add_parser("try", help="a playground on the bundled mock model for your own "
                           "`hermes chat` or gateway (offline), until Ctrl-C")
    trial.add_argument("--dir", help="keep the playground in this directory (reused if it "
                       "exists) instead of a temporary one")
    demo = sub.add_parser("demo", help="watch the real codex binary work, offline")
    demo.add_argument("--keep", action="store_true", help="keep the temporary directories")
    demo.add_argument("--live", action="store_true",
                      help="run the first step against your own codex login (uses the network)")
    status = sub.add_parser("status", help="codex threads and tokens of recent Hermes sessions")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--session", help="one Hermes session id")
    status.add_argument("--limit", type=int, default=10, help="how many recent sessions")
    sub.add_parser("version", help="print the plugin version and the codex binary in use")
    from hermes_codex_runtime.replay.cli import add_parser as add_replay

    add_replay(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen sub-command. A reader that closes the pipe early
    (``doctor --json | head``) ends the output quietly, never with a traceback."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        status = _dispatch(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["help"]:
        argv = ["--help", *argv[1:]]
    if argv[:1] == ["codex"]:
        from hermes_codex_runtime.hermes.commands.codex_command import run_codex

        return run_codex(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command
    if command is None:
        parser.print_help()
        return 0
    if command in ("enable", "disable"):
        from hermes_codex_runtime.hermes.commands import switch

        return switch.enable(args.print_only, args.provider) if command == "enable" \
            else switch.disable(args.print_only)
    if command == "doctor":
        from hermes_codex_runtime.hermes.commands import doctor

        return doctor.run(as_json=args.json, hermes=not args.codex_only)
    if command == "try":
        from hermes_codex_runtime.hermes.commands.trial import run_trial

        return run_trial(args.dir)
    if command == "replay":
        from hermes_codex_runtime.hermes.replay.context import replay_context
        from hermes_codex_runtime.replay.cli import main as replay_main

        return replay_main(args, replay_context)
    if command == "status":
        import json

        from hermes_codex_runtime.hermes.commands import status as status_module

        data = status_module.collect(limit=max(1, args.limit), session=args.session)
        print(json.dumps(data, indent=2) if args.json else status_module.render(data))
        return 0
    if command == "demo":
        from hermes_codex_runtime.hermes.commands.demo import run_demo

        return run_demo(keep=args.keep, live=args.live)
    return _version()


def _version() -> int:
    from hermes_codex_runtime.wire import WireError, probe_version, resolve_codex_binary

    print(f"{PROG} {__version__}")
    try:
        binary = resolve_codex_binary(_configured_binary())
        version = ".".join(map(str, probe_version(binary)))
        print(f"codex {version} ({binary.source}: {binary.path})")
    except WireError as exc:
        print(f"codex: not usable — {exc}")
        return 1
    return 0


def _configured_binary() -> str | None:
    from hermes_codex_runtime.hermes.config.settings import SettingError, plugin_settings

    try:
        return plugin_settings().codex_bin
    except SettingError:
        return None


if __name__ == "__main__":
    sys.exit(main())
