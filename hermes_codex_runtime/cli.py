"""The ``hermes-codex-runtime`` console script.

Sub-commands: ``demo`` (the real codex binary on the bundled mock provider, offline) and
``version``. Each returns a process exit status; nothing here is imported by the plugin itself.
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
    sub.add_parser("version", help="print the plugin version and the codex binary in use")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from hermes_codex_runtime.demo import run_demo

        return run_demo(keep=args.keep)
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
