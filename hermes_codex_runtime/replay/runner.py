"""The runner process of one replay run: ``python -m hermes_codex_runtime.replay.runner RUN_DIR``.

Started by :func:`~.control.spawn_runner` in a session of its own, with stdout and stderr
appended to the run's ``run.log``. It records its own identity, runs the plan
(:class:`~.engine.Runner`) and exits 0 whatever the run's outcome (the outcome is in the state).
SIGTERM (a cancel, or the machine shutting down) stops it at once: running turns are
interrupted and its app-servers closed.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from types import FrameType

from hermes_codex_runtime.replay.store import Run, RunClosed, StoreError, identity


def main(argv: list[str] | None = None) -> int:
    """Run the run in ``argv[0]`` (its directory); the exit status says only whether it could
    be started."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m hermes_codex_runtime.replay.runner RUN_DIR", file=sys.stderr)
        return 2
    folder = Path(args[0])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s [runner] %(levelname)s %(name)s: %(message)s")
    try:
        run = Run(folder.parent, folder.name)
        run.update(lambda s: s.update(runner=identity()))
    except RunClosed:
        return 0  # cancelled before it started
    except StoreError as exc:
        print(f"[runner] {exc}", file=sys.stderr)
        return 2
    from hermes_codex_runtime.replay.engine import Runner

    runner = Runner(run)

    def on_term(signum: int, _frame: FrameType | None) -> None:
        runner.stop()
        runner.close()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        status = runner.execute()
    except Exception as exc:
        logging.getLogger(__name__).exception("the replay runner crashed")
        run.finish("failed", error=f"the runner crashed: {type(exc).__name__}: {exc}")
        return 1
    run.log("controller", f"runner finished: {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
