"""The ``hermes-codex-runtime`` console script.

Sub-commands: ``demo`` (a real Hermes turn through the real codex binary on the bundled mock
provider, offline), ``doctor`` (why doesn't it work here?), ``status`` (codex threads of recent
Hermes sessions), ``replay`` (re-run a recorded session through codex and compare; see
:mod:`hermes_codex_runtime.replay`) and ``version``. Each returns a process exit status;
nothing here is imported by the plugin itself.
"""

from __future__ import annotations

import argparse
import sys

from hermes_codex_runtime import __version__


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen sub-command."""
    parser = argparse.ArgumentParser(
        prog="hermes-codex-runtime",
        description="Run Hermes Agent turns through OpenAI's codex app-server.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="watch the real codex binary work, offline")
    demo.add_argument("--keep", action="store_true", help="keep the temporary directories")
    demo.add_argument("--live", action="store_true",
                      help="run the first step against your own `codex login` (uses the network)")
    doctor = sub.add_parser("doctor", help="check codex, the login, config and Hermes")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.add_argument("--codex-only", action="store_true", help="skip the Hermes checks")
    status = sub.add_parser("status", help="codex threads and tokens of recent Hermes sessions")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--session", help="one Hermes session id")
    status.add_argument("--limit", type=int, default=10, help="how many recent sessions")
    sub.add_parser("version", help="print the plugin version and the codex binary in use")
    from hermes_codex_runtime.replay.cli import add_parser as add_replay

    add_replay(sub)
    args = parser.parse_args(argv)
    if args.command == "replay":
        from hermes_codex_runtime.hermes.replay_context import replay_context
        from hermes_codex_runtime.replay.cli import main as replay_main

        return replay_main(args, replay_context)
    if args.command == "doctor":
        from hermes_codex_runtime import doctor as doctor_module

        return doctor_module.run(as_json=args.json, hermes=not args.codex_only)
    if args.command == "status":
        import json

        from hermes_codex_runtime.hermes import status as status_module

        data = status_module.collect(limit=max(1, args.limit), session=args.session)
        print(json.dumps(data, indent=2) if args.json else status_module.render(data))
        return 0
    if args.command == "demo":
        from hermes_codex_runtime.demo import run_demo

        return run_demo(keep=args.keep, live=args.live)
    if args.command == "version":
        from hermes_codex_runtime.wire import WireError, probe_version, resolve_codex_binary

        print(f"hermes-codex-runtime {__version__}")
        try:
            binary = resolve_codex_binary()
            version = ".".join(map(str, probe_version(binary)))
            print(f"codex {version} ({binary.source}: {binary.path})")
        except WireError as exc:
            print(f"codex: not usable — {exc}")
            return 1
        return 0
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse exits
    return 2


if __name__ == "__main__":
    sys.exit(main())
