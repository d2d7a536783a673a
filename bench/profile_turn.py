"""Where a warm turn's client time goes: a real Hermes ``AIAgent`` with the plugin enabled, on
the real codex binary and the mock model, its warm turns run under :mod:`cProfile`.

``python bench/profile_turn.py [--turns N] [--out FILE]`` (default 50 turns after 3 warm-up
turns; the report goes to stdout and, with ``--out``, to FILE). The report has:

* the client CPU time per turn (this process: user + system), and the wall time per turn;
* per turn, how often the plugin's settings path touched the disk (``config.yaml`` and
  ``config.toml`` reads, the ``~/.ssh`` listing) — counts, so they are the same on a busy
  machine and a quiet one;
* the functions of this project (``hermes_codex_runtime``) by cumulative time per turn, and the
  whole process's top functions by their own time.

The figures in seconds are the machine's: run it on a quiet machine to compare runs. The call
counts are not: they show work the plugin does per turn that it needn't.
"""

from __future__ import annotations

import argparse
import builtins
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


class DiskCounter:
    """Counts, while active, opens of ``config.yaml`` / ``config.toml`` and listings of
    ``~/.ssh`` (what the settings path reads)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.active = False
        self._open = builtins.open
        self._io_open = io.open
        self._scandir = os.scandir
        self._listdir = os.listdir

    def _note(self, path: Any) -> None:
        if not self.active:
            return
        name = os.path.basename(os.fspath(path)) if isinstance(path, str | os.PathLike) else ""
        if name in ("config.yaml", "config.toml"):
            self.counts[f"open {name}"] += 1
        elif name == ".ssh":
            self.counts["list ~/.ssh"] += 1

    def install(self) -> None:
        counter = self

        def counted_open(file: Any, *args: Any, **kwargs: Any) -> Any:
            counter._note(file)
            return counter._open(file, *args, **kwargs)

        def counted_scandir(path: Any = ".") -> Any:
            counter._note(path)
            return counter._scandir(path)

        def counted_listdir(path: Any = ".") -> Any:
            counter._note(path)
            return counter._listdir(path)

        builtins.open = counted_open
        io.open = counted_open
        os.scandir = counted_scandir  # type: ignore[assignment]
        os.listdir = counted_listdir


def profile(turns: int, warmup: int) -> str:
    import run as bench_run  # bench/run.py: the Hermes home the per-client bench uses

    from hermes_codex_runtime.offline import provider as mp
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home
    from hermes_codex_runtime.wire import resolve_codex_binary

    binary = resolve_codex_binary()
    counter = DiskCounter()
    with tempfile.TemporaryDirectory(prefix="hcr-profile-") as tmp, \
            mp.MockResponsesProvider() as provider:
        root = Path(tmp)
        provider.set_default(mp.text("ok"))
        codex_home = prepare_codex_home(root / "codex-home", provider.base_url,
                                        codex_bin=binary.path)
        home = bench_run.hermes_home(root, codex_home, True)
        cwd = root / "work"
        cwd.mkdir()
        os.environ.update(CODEX_HOME=str(codex_home), RUST_LOG="warn",
                          CODEX_RUNTIME_LOAD_PLUGINS="")
        import clients

        client = clients.AgentClient(binary.path, dict(os.environ), str(cwd), True, str(home))
        for k in range(warmup):
            client.turn("lazy", f"warm up {k}")
        counter.install()
        profiler = cProfile.Profile()
        wall: list[float] = []
        cpu_start = time.process_time()
        counter.active = True
        profiler.enable()
        for k in range(turns):
            started = time.perf_counter()
            client.turn("lazy", f"turn {k}")
            wall.append(time.perf_counter() - started)
        profiler.disable()
        counter.active = False
        cpu = time.process_time() - cpu_start
        client.close()
    return report(profiler, turns, wall, cpu, counter.counts)


def report(profiler: cProfile.Profile, turns: int, wall: list[float], cpu: float,
           counts: Counter[str]) -> str:
    wall.sort()
    lines = [f"# A warm turn, profiled ({turns} turns of a real AIAgent with the plugin, "
             "codex on the mock model)", "",
             f"- wall per turn: median {1000 * wall[len(wall) // 2]:.1f} ms",
             f"- client CPU per turn (user + system, profiler on): {1000 * cpu / turns:.2f} ms",
             "- disk reads by the settings path, per turn: "
             + (", ".join(f"{name} {n / turns:g}" for name, n in sorted(counts.items()))
                or "none")]
    stats = pstats.Stats(profiler)
    ours = []
    for (filename, line, name), (_cc, calls, _tt, cumulative, _callers) in \
            stats.stats.items():  # type: ignore[attr-defined]
        if "hermes_codex_runtime" in filename:
            short = filename.split("hermes_codex_runtime/", 1)[-1]
            ours.append((cumulative, calls, f"{short}:{line} {name}"))
    ours.sort(reverse=True)
    lines += ["", "## This project's functions, by cumulative time per turn", "",
              "| ms per turn | calls per turn | function |", "|---|---|---|"]
    lines += [f"| {1000 * cum / turns:.2f} | {calls / turns:g} | `{where}` |"
              for cum, calls, where in ours[:40]]
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    lines += ["", "## The whole process, by own time (cProfile)", "", "```",
              text.getvalue().strip(), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    text = profile(args.turns, args.warmup)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
