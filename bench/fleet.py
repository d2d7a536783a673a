"""Fleet benchmarks: many concurrent sessions, and what they cost in codex processes and memory.

Owns three scenarios, each measurement in its own process (so every RSS figure is clean), all on
the real codex binary and the loopback mock provider:

* ``agents`` — N concurrent real Hermes ``AIAgent.run_conversation`` turns in ONE Python process
  (one thread per agent), per layout: ``shared`` / ``per-session`` (the plugin enabled,
  ``model.codex_app_server``) and ``builtin`` (Hermes' own codex runtime, the plugin not
  enabled). Each agent runs ``BENCH_FLEET_WARMUP`` turns (all agents at once: the fleet's cold
  start), then ``BENCH_FLEET_TURNS`` measured turns, all agents at once again;
* ``gateway`` — a real ``hermes gateway run`` API server and N concurrent clients, each posting
  its turns to ``/v1/runs`` (with the conversation so far) and reading the run's event stream;
* ``remote`` — warm turn latency through ``CodexSession`` on a local (stdio) shared app-server
  against a ``codex app-server --listen ws://127.0.0.1`` endpoint, turns interleaved.

Per measurement: codex processes (descendants of the client named ``codex*``, sampled by the
parent every 0.2 s: the peak, and after the turns), their total RSS, the client's RSS, per-turn
latency p50/p95, errors. :func:`targets` turns a result into the issue's target checks (reported,
never asserted); :func:`render_lines` renders them for ``bench/run.py``'s table.

``python bench/fleet.py [--out FILE]`` runs the scenarios alone; ``BENCH_FLEET_N`` (default
``1,8,32``), ``BENCH_FLEET_LAYOUTS``, ``BENCH_FLEET_SCENARIOS`` (``agents,gateway,remote``),
``BENCH_FLEET_WARMUP`` (1), ``BENCH_FLEET_TURNS`` (2), ``BENCH_FLEET_DELAY_MS`` (the mock model's
time to first byte, 250), ``BENCH_REMOTE_TURNS`` (20) narrow or shape a run.
``python bench/fleet.py child <kind> <config.json>`` is one measurement (internal).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LAYOUTS = ("shared", "per-session", "builtin")
SCENARIOS = ("agents", "gateway", "remote")
MIB = 1024 * 1024
HERMES = str(Path(sys.executable).with_name("hermes"))
#: How long one measurement may take before its process tree is killed.
CHILD_TIMEOUT = 900.0
#: How long one client waits for one turn (the gateway's runs queue behind its executor).
TURN_WAIT = 300.0


# ------------------------------------------------------------------------------ measuring


def env_list(name: str, default: str) -> list[str]:
    """A comma-separated environment setting."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0–100) of ``values``; ``None`` for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def is_codex(proc: psutil.Process) -> bool:
    """A codex process (``codex``, ``codex-code-mode-host``…), by its name."""
    with contextlib.suppress(psutil.Error):
        return proc.name().startswith("codex")
    return False


@dataclass
class Snapshot:
    """One look at a client and its codex descendants."""

    codex_processes: int
    codex_rss_mib: float
    client_rss_mib: float
    codex_pss_mib: float | None = None

    def as_dict(self, suffix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {f"codex_processes{suffix}": self.codex_processes,
                               f"codex_rss{suffix}_mib": round(self.codex_rss_mib, 1),
                               f"client_rss{suffix}_mib": round(self.client_rss_mib, 1)}
        if self.codex_pss_mib is not None:
            out[f"codex_pss{suffix}_mib"] = round(self.codex_pss_mib, 1)
        return out


def snapshot(pid: int, *, pss: bool = False) -> Snapshot:
    """Now: ``pid``'s codex descendants (count, summed RSS — and PSS, which counts the pages
    they share once, when ``pss``) and ``pid``'s own RSS."""
    try:
        root = psutil.Process(pid)
        client = root.memory_info().rss / MIB
        children = root.children(recursive=True)
    except psutil.Error:
        return Snapshot(0, 0.0, 0.0)
    count, rss, shared = 0, 0.0, 0.0
    for child in children:
        if not is_codex(child):
            continue
        with contextlib.suppress(psutil.Error):
            rss += child.memory_info().rss / MIB
            count += 1
            if pss:
                shared += child.memory_full_info().pss / MIB
    return Snapshot(count, rss, client, shared if pss else None)


class Sampler:
    """Samples a process tree every ``interval`` s on a daemon thread: the peaks, and every
    descendant ever seen (so what outlives the measurement is ended by PID)."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = Snapshot(0, 0.0, 0.0)
        self.seen: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.pid).children(recursive=True):
                self.seen.setdefault(child.pid, child)
        now = snapshot(self.pid)
        self.peak = Snapshot(max(self.peak.codex_processes, now.codex_processes),
                             max(self.peak.codex_rss_mib, now.codex_rss_mib),
                             max(self.peak.client_rss_mib, now.client_rss_mib))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def end_leftovers(self) -> int:
        """SIGKILL every descendant seen that still runs (by PID; psutil checks it is the same
        process); how many there were."""
        ended = 0
        for proc in self.seen.values():
            with contextlib.suppress(psutil.Error):
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    proc.kill()
                    ended += 1
        return ended


def run_child(argv: Sequence[str], *, timeout: float = CHILD_TIMEOUT,
              env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run one measurement process, sampled from outside; its last JSON line, with the sampled
    peaks (``*_peak``), or ``{"error": ...}``. The process tree never outlives it."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True,
                            env=dict(env) if env is not None else None)
    sampler = Sampler(proc.pid).start()
    error: str | None = None
    out, err = "", ""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        error = f"timeout after {timeout:.0f} s"
        sampler.sample()
        proc.kill()
        sampler.end_leftovers()  # nothing may hold the pipes open
        with contextlib.suppress(subprocess.TimeoutExpired):
            out, err = proc.communicate(timeout=30)
    finally:
        sampler.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        leftovers = sampler.end_leftovers()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if error is None and (proc.returncode != 0 or not lines):
        error = f"exit {proc.returncode}: " + (err or out)[-600:]
    if error is not None:
        return {"error": error, **sampler.peak.as_dict("_peak")}
    result: dict[str, Any] = json.loads(lines[-1])
    result.update(sampler.peak.as_dict("_peak"))
    if leftovers:
        result["leftover_processes"] = leftovers
    return result


def latency_figures(turn_ms: Sequence[float], warm_ms: Sequence[float]) -> dict[str, Any]:
    """p50/p95 of the measured turns (and of the warm-up turns)."""
    out: dict[str, Any] = {"turns_ok": len(turn_ms)}
    for name, values in (("", turn_ms), ("warmup_", warm_ms)):
        p50, p95 = percentile(values, 50), percentile(values, 95)
        out[f"{name}p50_ms"] = round(p50, 1) if p50 is not None else None
        out[f"{name}p95_ms"] = round(p95, 1) if p95 is not None else None
    return out


class Turns:
    """Thread-safe collection of one measurement's turn latencies and errors."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.warm: list[float] = []
        self.measured: list[float] = []
        self.errors: list[str] = []

    def add(self, warm: bool, ms: float) -> None:
        with self.lock:
            (self.warm if warm else self.measured).append(ms)

    def fail(self, what: str) -> None:
        what = re.sub(r"/\S*/(codex-home|hermes|work)\b", r"<\1>", what)  # scratch paths
        with self.lock:
            self.errors.append(what[:300])

    def figures(self, expected: int) -> dict[str, Any]:
        with self.lock:
            out = latency_figures(self.measured, self.warm)
            out["turns"] = expected
            out["error_count"] = len(self.errors)
            out["errors"] = sorted(set(self.errors))[:3]
        return out


def tree_cpu(pid: int) -> tuple[float, dict[int, float]]:
    """CPU seconds (user + system) so far of ``pid`` itself (all its threads), and of each of
    its ``codex*`` descendants by PID."""
    try:
        root = psutil.Process(pid)
        times = root.cpu_times()
        own = times.user + times.system
        children = root.children(recursive=True)
    except psutil.Error:
        return 0.0, {}
    codex: dict[int, float] = {}
    for child in children:
        if is_codex(child):
            with contextlib.suppress(psutil.Error):
                t = child.cpu_times()
                codex[child.pid] = t.user + t.system
    return own, codex


class CpuSplit:
    """Where the measured turns' time goes: the client's CPU (Hermes and the plugin, every
    thread), codex's CPU (of the codex processes alive at the end: one that ended meanwhile, a
    short-lived probe, is not counted), and the wall time — per measured turn."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start: tuple[float, dict[int, float], float] | None = None
        self.began_at = 0.0  # the wall clock, for a profile of the same window

    def begin(self) -> None:
        self.start = (*tree_cpu(self.pid), time.monotonic())
        self.began_at = time.time()

    def figures(self, turns: int) -> dict[str, Any]:
        if self.start is None or turns <= 0:
            return {}
        own, codex_now = tree_cpu(self.pid)
        own_then, codex_then, started = self.start
        client = own - own_then
        codex = sum(cpu - codex_then.get(pid, 0.0) for pid, cpu in codex_now.items())
        wall = time.monotonic() - started
        cores = os.cpu_count() or 1
        return {"client_cpu_ms_per_turn": round(1000 * client / turns, 1),
                "codex_cpu_ms_per_turn": round(1000 * codex / turns, 1),
                "measured_wall_s": round(wall, 2),
                "cpu_busy_fraction": round((client + codex) / max(1e-9, wall * cores), 2),
                "measured_window": [self.began_at, time.time()]}


def run_clients(n: int, warmup: int, turns: int, turn: Callable[[int, int], None],
                results: Turns, deadline: float,
                on_measure: Callable[[], None] | None = None) -> None:
    """``n`` client threads: ``warmup`` turns each (all at once), then ``turns`` measured turns
    each (all at once, after every client warmed up; ``on_measure`` is called once just before);
    ``turn(client, k)`` runs one turn and raises on failure. Returns by ``deadline`` at the
    latest."""
    barrier = threading.Barrier(n, action=on_measure)

    def client(i: int) -> None:
        for k in range(warmup + turns):
            if k == warmup:
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=max(1.0, deadline - time.monotonic()))
            if time.monotonic() > deadline:
                results.fail("deadline passed before the turn")
                return
            started = time.perf_counter()
            try:
                turn(i, k)
            except Exception as exc:
                phase = "warm-up" if k < warmup else "turn"
                results.fail(f"{phase}: {type(exc).__name__}: {exc}")
                continue
            results.add(k < warmup, 1000 * (time.perf_counter() - started))

    workers = [threading.Thread(target=client, args=(i,), name=f"client-{i}", daemon=True)
               for i in range(n)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=max(0.1, deadline - time.monotonic()))
    hung = sum(worker.is_alive() for worker in workers)
    if hung:
        results.fail(f"{hung} client(s) still in a turn at the deadline")


# ------------------------------------------------------------------------------ homes


def fleet_home(path: Path, codex_home: Path, layout: str, *, gateway: bool = False) -> Path:
    """A HERMES_HOME for ``layout``: the plugin enabled with ``model.codex_app_server`` (shared,
    per-session), or Hermes' own codex runtime (builtin, the plugin not enabled)."""
    import yaml

    from hermes_codex_runtime.hermes.commands.offline import write_offline_caches

    path.mkdir(parents=True)
    model: dict[str, Any] = {"provider": "openai-codex", "default": "mock-model",
                             "openai_runtime": "codex_app_server",
                             "codex_home": str(codex_home), "context_length": 200000}
    if layout != "builtin":
        model["codex_app_server"] = layout
    else:  # Hermes' own runtime wants Hermes-side credentials of an OpenAI provider to run
        model.update(provider="openai-api", api_mode="codex_app_server",
                     base_url="http://127.0.0.1:9/v1", api_key="sk-bench")
    config: dict[str, Any] = {
        "plugins": {"enabled": [] if layout == "builtin" else ["codex-runtime"]},
        "security": {"allow_lazy_installs": False, "tirith_enabled": False},
        "model": model, "approvals": {"mode": "off"},
        "telemetry": {"shared_metrics": {"enabled": False, "send": False, "offer_version": 2}}}
    if gateway:  # Hermes caps concurrent API runs at 10 by default
        config["gateway"] = {"api_server": {"max_concurrent_runs": 0}}
    (path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if layout == "builtin":
        (path / ".env").write_text("OPENAI_API_KEY=sk-bench\n")  # a key for the loopback only
    write_offline_caches(path)
    return path


def hermes_environment(home: Path, codex_bin: str, codex_home: Path, cwd: Path,
                       **extra: str) -> dict[str, str]:
    """The environment of a Hermes process on ``home``; Hermes' own runtime runs the ``codex``
    it finds on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HERMES_SAFE_MODE", "HERMES_YOLO_MODE")}
    env.update(HERMES_HOME=str(home), HERMES_DISABLE_LAZY_INSTALLS="1", TIRITH_ENABLED="0",
               NO_COLOR="1", PYTHONUNBUFFERED="1", CODEX_BIN=codex_bin,
               CODEX_HOME=str(codex_home), CODEX_RUNTIME_LOAD_PLUGINS="", RUST_LOG="warn",
               TERMINAL_CWD=str(cwd),
               PATH=os.path.dirname(codex_bin) + os.pathsep + os.environ.get("PATH", ""))
    env.update(extra)
    return env


@dataclass
class Bench:
    """What every measurement of a run shares: the codex binary, the mock provider, a scratch
    directory (a fresh codex home and Hermes home per measurement)."""

    codex_bin: str
    provider_url: str
    root: Path
    counter: list[int] = field(default_factory=lambda: [0])

    def scratch(self, name: str) -> Path:
        self.counter[0] += 1
        path = self.root / f"{self.counter[0]:03d}-{name}"
        path.mkdir(parents=True)
        return path

    def codex_home(self, where: Path) -> Path:
        from hermes_codex_runtime.offline.codex_home import prepare_codex_home

        return prepare_codex_home(where / "codex-home", self.provider_url,
                                  codex_bin=self.codex_bin)


# ------------------------------------------------------------------------------ agents


def measure_agents(bench: Bench, layout: str, n: int, warmup: int, turns: int) -> dict[str, Any]:
    """One ``agents`` measurement in its own process."""
    where = bench.scratch(f"agents-{layout}-{n}")
    codex_home = bench.codex_home(where)
    cwd = where / "work"
    cwd.mkdir()
    home = fleet_home(where / "hermes", codex_home, layout)
    config = {"n": n, "warmup": warmup, "turns": turns, "cwd": str(cwd),
              "deadline_s": CHILD_TIMEOUT - 120}
    config_path = where / "config.json"
    config_path.write_text(json.dumps(config))
    env = hermes_environment(home, bench.codex_bin, codex_home, cwd)
    return run_child([sys.executable, __file__, "child", "agents", str(config_path)], env=env)


def child_agents(config: dict[str, Any]) -> dict[str, Any]:
    """N real ``AIAgent``s in this process, one thread each (the environment names the Hermes
    home, hence the layout)."""
    import run_agent

    n, warmup, turns = int(config["n"]), int(config["warmup"]), int(config["turns"])
    agents = []
    for _ in range(n):
        agent = run_agent.AIAgent(
            model="mock-model", provider="openai", api_mode="codex_app_server",
            api_key="sk-bench", base_url="http://127.0.0.1:9/v1", quiet_mode=True,
            skip_memory=True, skip_context_files=True)
        agent.session_cwd = config["cwd"]
        agents.append(agent)
    histories: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    results = Turns()

    def turn(i: int, k: int) -> None:
        outcome = agents[i].run_conversation(f"turn {k} of agent {i}",
                                             conversation_history=list(histories[i]))
        if not outcome.get("completed"):
            raise RuntimeError(str(outcome.get("error") or outcome.get("final_response")))
        histories[i] = outcome["messages"]

    started = time.monotonic()
    split = CpuSplit(os.getpid())
    run_clients(n, warmup, turns, turn, results, started + float(config["deadline_s"]),
                on_measure=split.begin)
    out = {"n": n, "wall_s": round(time.monotonic() - started, 2), **results.figures(n * turns),
           **split.figures(n * turns), **snapshot(os.getpid(), pss=True).as_dict("_after")}

    def close() -> None:
        for agent in agents:
            with contextlib.suppress(Exception):
                agent.close()
            session = getattr(agent, "_codex_session", None)  # Hermes' own runtime
            if session is not None and hasattr(session, "close"):
                with contextlib.suppress(Exception):
                    session.close()

    closer = threading.Thread(target=close, daemon=True)
    closer.start()
    closer.join(timeout=60)
    return out


# ------------------------------------------------------------------------------ gateway


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gateway:
    """``hermes gateway run`` with only the API server platform, on 127.0.0.1 (as
    tests/test_hermes_e2e.py starts it). Ended by PID, with every descendant it started."""

    def __init__(self, home: Path, env: dict[str, str], start_timeout: float = 120.0) -> None:
        self.port = _free_port()
        self.key = "bench-key-" + os.urandom(8).hex()
        self.log_path = home / "gateway.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        env = {**env, "API_SERVER_ENABLED": "1", "API_SERVER_KEY": self.key,
               "API_SERVER_HOST": "127.0.0.1", "API_SERVER_PORT": str(self.port)}
        self.proc = subprocess.Popen([HERMES, "gateway", "run"], env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=str(home), start_new_session=True)
        self.sampler = Sampler(self.proc.pid)
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                self.call("GET", "/health")
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    tail = self.log_tail()
                    self.stop()
                    raise RuntimeError("the gateway did not start: " + tail) from None
                time.sleep(0.3)
        self.sampler.start()

    def log_tail(self, chars: int = 600) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer

    def events(self, run_id: str, timeout: float = TURN_WAIT) -> Iterator[dict[str, Any]]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/runs/{run_id}/events",
                                         headers={"Authorization": f"Bearer {self.key}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            for raw in response:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    event: dict[str, Any] = json.loads(line[5:])
                    yield event
                    if event.get("event") in ("run.completed", "run.failed", "run.cancelled"):
                        return

    def run(self, text: str, session_id: str, history: list[dict[str, str]]) -> str:
        """One run to its end: the answer, or raises with the reason."""
        run_id = self.call("POST", "/v1/runs", {"input": text, "session_id": session_id,
                                                "conversation_history": history})["run_id"]
        for event in self.events(run_id):
            if event.get("event") == "run.completed":
                return str(event.get("output") or "")
            if event.get("event") in ("run.failed", "run.cancelled"):
                raise RuntimeError(f"{event.get('event')}: {event.get('error')}")
        raise RuntimeError("the run's event stream ended without an outcome")

    def stop(self) -> None:
        """SIGTERM the gateway's process group, SIGKILL after 15 s; then every descendant seen
        that still runs (codex processes may sit in sessions of their own)."""
        with contextlib.suppress(Exception):
            self.sampler.sample()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.sampler.stop()
        self.sampler.end_leftovers()
        self._log.close()


def measure_gateway(bench: Bench, layout: str, n: int, warmup: int,
                    turns: int) -> dict[str, Any]:
    """One ``gateway`` measurement: N concurrent clients of one gateway."""
    where = bench.scratch(f"gateway-{layout}-{n}")
    codex_home = bench.codex_home(where)
    cwd = where / "work"
    cwd.mkdir()
    home = fleet_home(where / "hermes", codex_home, layout, gateway=True)
    try:
        gateway = Gateway(home, hermes_environment(home, bench.codex_bin, codex_home, cwd))
    except RuntimeError as exc:
        return {"error": str(exc)}
    histories: list[list[dict[str, str]]] = [[] for _ in range(n)]
    results = Turns()

    def turn(i: int, k: int) -> None:
        text = f"turn {k} of client {i}"
        answer = gateway.run(text, f"bench-{i}", list(histories[i]))
        histories[i] += [{"role": "user", "content": text},
                         {"role": "assistant", "content": answer}]

    try:
        started = time.monotonic()
        split = CpuSplit(gateway.proc.pid)
        run_clients(n, warmup, turns, turn, results, started + CHILD_TIMEOUT - 120,
                    on_measure=split.begin)
        out = {"n": n, "wall_s": round(time.monotonic() - started, 2),
               **results.figures(n * turns), **split.figures(n * turns),
               **snapshot(gateway.proc.pid, pss=True).as_dict("_after")}
        gateway.sampler.sample()
        out.update(gateway.sampler.peak.as_dict("_peak"))
        if out["error_count"]:
            out["log_tail"] = gateway.log_tail(300)
    finally:
        gateway.stop()
    return out


# ------------------------------------------------------------------------------ remote


def measure_remote(bench: Bench, turns: int) -> dict[str, Any]:
    """Warm turns on a local stdio app-server against a loopback ws endpoint."""
    where = bench.scratch("remote")
    codex_home = bench.codex_home(where)
    cwd = where / "work"
    cwd.mkdir()
    config = {"codex_bin": bench.codex_bin, "codex_home": str(codex_home), "cwd": str(cwd),
              "provider_url": bench.provider_url, "dir": str(where / "server"), "turns": turns}
    config_path = where / "config.json"
    config_path.write_text(json.dumps(config))
    env = {**os.environ, "CODEX_HOME": str(codex_home), "CODEX_RUNTIME_LOAD_PLUGINS": ""}
    return run_child([sys.executable, __file__, "child", "remote", str(config_path)], env=env,
                     timeout=300)


def child_remote(config: dict[str, Any]) -> dict[str, Any]:
    """Two ``CodexSession``s on one pool: one on a local shared process, one on a ws endpoint;
    a warm-up turn each, then ``turns`` turns each, interleaved (the same machine load)."""
    from hermes_codex_runtime.pool import EndpointSpec, Placement, ServerPool
    from hermes_codex_runtime.session import CodexSession, SessionSettings
    from hermes_codex_runtime.testing.remote_server import RemoteAppServer

    server = RemoteAppServer(config["dir"], config["provider_url"], codex_bin=config["codex_bin"])
    pool = ServerPool()
    try:
        local = CodexSession(SessionSettings(
            codex_bin=config["codex_bin"], codex_home=config["codex_home"], cwd=config["cwd"],
            turn_timeout=60.0, app_server=Placement("shared")), pool=pool)
        remote = CodexSession(SessionSettings(
            codex_bin=config["codex_bin"], cwd=config["cwd"], turn_timeout=60.0,
            app_server=Placement("endpoints", endpoints=(
                EndpointSpec(server.url, token_file=str(server.token_file)),))), pool=pool)
        times: dict[str, list[float]] = {"local": [], "remote": []}
        for k in range(int(config["turns"]) + 1):
            for name, session in (("local", local), ("remote", remote)):
                started = time.perf_counter()
                result = session.run_turn(f"turn {k}")
                if not result.ok:
                    raise RuntimeError(f"{name} turn failed: {result.error}")
                if k:  # turn 0 warms up
                    times[name].append(1000 * (time.perf_counter() - started))
        assert remote.endpoint == server.url and local.endpoint is None
        local_ms, remote_ms = (statistics.median(times["local"]),
                               statistics.median(times["remote"]))
        for session in (local, remote):
            session.close()
        return {"turns": int(config["turns"]), "local_ms": round(local_ms, 2),
                "remote_ms": round(remote_ms, 2), "ratio": round(remote_ms / local_ms, 3),
                "local_min_ms": round(min(times["local"]), 2),
                "remote_min_ms": round(min(times["remote"]), 2)}
    finally:
        pool.close()
        server.stop()


# ------------------------------------------------------------------------------ targets


def _entry(fleet: Mapping[str, Any], scenario: str, layout: str,
           n: int | None) -> Mapping[str, Any] | None:
    if n is None:
        return None
    entry = fleet.get(scenario, {}).get(layout, {}).get(str(n))
    return entry if isinstance(entry, Mapping) and "error" not in entry else None


def _ratio(top: Any, bottom: Any) -> float | None:
    if not isinstance(top, int | float) or not isinstance(bottom, int | float) or bottom <= 0:
        return None
    return float(top) / float(bottom)


def _check(name: str, figure: float | None, limit: float, at_most: bool,
           detail: str) -> dict[str, Any]:
    met = None if figure is None else (figure <= limit if at_most else figure >= limit)
    return {"name": name, "figure": None if figure is None else round(figure, 2),
            "limit": limit, "at_most": at_most, "met": met, "detail": detail}


def targets(fleet: Mapping[str, Any] | None, remote: Mapping[str, Any] | None) -> list[
        dict[str, Any]]:
    """The issue's targets, each ``{name, figure, limit, at_most, met, detail}`` — ``met`` is
    ``None`` when the run has no figure for it. "Many" is N = 32 (else the largest N run),
    "some" is N = 8 (else the largest N run)."""
    checks: list[dict[str, Any]] = []
    fleet = fleet or {}
    ns = [int(n) for n in fleet.get("config", {}).get("n", [])]
    many = 32 if 32 in ns else (max(ns) if ns else None)
    some = 8 if 8 in ns else (max(ns) if ns else None)
    for scenario in ("agents", "gateway"):
        if scenario not in fleet:
            continue
        one = _entry(fleet, scenario, "shared", 1)
        shared = _entry(fleet, scenario, "shared", many)
        per = _entry(fleet, scenario, "per-session", many)
        mid = _entry(fleet, scenario, "shared", some)
        rss = "codex_rss_peak_mib"
        figure = _ratio(shared and shared.get(rss), one and one.get(rss))
        checks.append(_check(
            f"{scenario}: shared codex RSS at N={many} ≤ 2× one session's", figure, 2.0, True,
            f"{_mib(shared, rss)} vs {_mib(one, rss)} at N=1"))
        figure = _ratio(per and per.get(rss), shared and shared.get(rss))
        checks.append(_check(
            f"{scenario}: per-session codex RSS at N={many} ≥ 10× shared's", figure, 10.0, False,
            f"{_mib(per, rss)} vs {_mib(shared, rss)}"))
        figure = _ratio(mid and mid.get("p95_ms"), one and one.get("p95_ms"))
        limit = 1.5 if scenario == "agents" else 2.0  # the gateway adds its own executor
        checks.append(_check(
            f"{scenario}: shared p95 turn latency at N={some} ≤ {limit:g}× N=1's", figure,
            limit, True, f"{_ms(mid)} vs {_ms(one)} ms"))
    if remote is not None:
        figure = remote.get("ratio") if "error" not in remote else None
        checks.append(_check(
            "remote: a warm turn on a loopback ws endpoint ≤ 1.2× local stdio",
            float(figure) if isinstance(figure, int | float) else None, 1.2, True,
            f"{remote.get('remote_ms', '?')} vs {remote.get('local_ms', '?')} ms (median of "
            f"{remote.get('turns', '?')})"))
    return checks


def _mib(entry: Mapping[str, Any] | None, key: str) -> str:
    value = entry.get(key) if entry else None
    return f"{value:.0f} MiB" if isinstance(value, int | float) else "?"


def _ms(entry: Mapping[str, Any] | None) -> str:
    value = entry.get("p95_ms") if entry else None
    return f"{value:.0f}" if isinstance(value, int | float) else "?"


def verdict(check: Mapping[str, Any]) -> str:
    """``met`` / ``MISSED`` / ``NOT MEASURED``, as printed."""
    return {True: "met", False: "MISSED", None: "NOT MEASURED"}[check.get("met")]


# ------------------------------------------------------------------------------ rendering


def _cell(value: Any, unit: str = "") -> str:
    if not isinstance(value, int | float):
        return "—"
    return f"{value:,.0f}{unit}" if value >= 10 else f"{value:.1f}{unit}"


def render_lines(fleet: Mapping[str, Any] | None, remote: Mapping[str, Any] | None,
                 checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The fleet table (scenario × layout × N), the remote line and the target checks, as
    Markdown lines (nothing for a run without them)."""
    lines: list[str] = []
    if fleet:
        config = fleet.get("config", {})
        split = any("client_cpu_ms_per_turn" in entry for scenario in ("agents", "gateway")
                    for by_n in fleet.get(scenario, {}).values() for entry in by_n.values())
        lines += ["", f"Fleet: N concurrent sessions, {config.get('warmup', '?')} warm-up + "
                  f"{config.get('turns', '?')} measured turns each; the mock model answers "
                  f"after {_cell(config.get('model_delay_ms'))} ms. codex processes and RSS are "
                  "peaks sampled while the turns run (all `codex*` descendants of the client); "
                  "latency is per turn.", "",
                  "| scenario | layout | N | codex processes | codex RSS MiB | client RSS MiB "
                  "| turn p50 ms | turn p95 ms | " + ("client CPU ms/turn | codex CPU ms/turn | "
                                                  "CPU busy | " if split else "") + "errors |",
                  "|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if split else "")]
        for scenario in ("agents", "gateway"):
            for layout, by_n in fleet.get(scenario, {}).items():
                for n, entry in sorted(by_n.items(), key=lambda item: int(item[0])):
                    if "error" in entry:
                        lines.append(f"| {scenario} | {layout} | {n} | — | — | — | — | — | "
                                     + ("— | — | — | " if split else "")
                                     + f"failed: {_short(entry['error'])} |")
                        continue
                    errors = entry.get("error_count", 0)
                    note = f"{errors} ({_short(entry['errors'][0])})" if errors and \
                        entry.get("errors") else str(errors)
                    lines.append(
                        f"| {scenario} | {layout} | {n} | "
                        f"{entry.get('codex_processes_peak', '—')} | "
                        f"{_cell(entry.get('codex_rss_peak_mib'))} | "
                        f"{_cell(entry.get('client_rss_peak_mib'))} | "
                        f"{_cell(entry.get('p50_ms'))} | {_cell(entry.get('p95_ms'))} | "
                        + (f"{_cell(entry.get('client_cpu_ms_per_turn'))} | "
                           f"{_cell(entry.get('codex_cpu_ms_per_turn'))} | "
                           f"{_pct(entry.get('cpu_busy_fraction'))} | " if split else "")
                        + f"{note} |")
        lines.append("")
    if remote:
        if "error" in remote:
            lines.append(f"- remote ws endpoint on loopback: failed ({_short(remote['error'])})")
        else:
            lines.append(f"- warm turn, median of {remote['turns']}: local stdio "
                         f"{remote['local_ms']:.1f} ms, loopback ws endpoint "
                         f"{remote['remote_ms']:.1f} ms ({remote['ratio']:.2f}×)")
    for check in checks:
        figure = check.get("figure")
        shown = "—" if figure is None else f"{figure:.2f}×"
        lines.append(f"- target {check['name']}: {verdict(check)} — {shown} "
                     f"({check['detail']})")
    return lines


def _pct(value: Any) -> str:
    return f"{100 * value:.0f}%" if isinstance(value, int | float) else "—"


def _short(text: str, limit: int = 90) -> str:
    flat = " ".join(str(text).split()).replace("|", "/")
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


# ------------------------------------------------------------------------------ orchestration


def run_all(codex_bin: str, *, scenarios: Sequence[str] | None = None,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The fleet ``scenarios`` (default: what ``BENCH_FLEET_SCENARIOS`` names, else all) with
    the N and layouts the environment asks for: ``{"fleet", "remote", "targets"}``."""
    from hermes_codex_runtime.offline import provider as mp

    say = progress or (lambda text: print(text, flush=True))
    ns = [int(n) for n in env_list("BENCH_FLEET_N", "1,8,32")]
    layouts = [layout for layout in env_list("BENCH_FLEET_LAYOUTS", ",".join(LAYOUTS))
               if layout in LAYOUTS]
    wanted = env_list("BENCH_FLEET_SCENARIOS", ",".join(SCENARIOS))
    scenarios = [s for s in SCENARIOS if s in (scenarios or wanted)]
    warmup = int(os.environ.get("BENCH_FLEET_WARMUP", "1"))
    turns = int(os.environ.get("BENCH_FLEET_TURNS", "2"))
    delay_ms = float(os.environ.get("BENCH_FLEET_DELAY_MS", "250"))
    fleet: dict[str, Any] = {"config": {"n": ns, "layouts": layouts, "warmup": warmup,
                                        "turns": turns, "model_delay_ms": delay_ms,
                                        "cores": os.cpu_count()}}
    remote: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="hcr-fleet-") as tmp, \
            mp.MockResponsesProvider() as provider:
        bench = Bench(codex_bin, provider.base_url, Path(tmp))
        for scenario in [s for s in scenarios if s != "remote"]:
            provider.clear()
            provider.set_default(mp.text("ok", delay=delay_ms / 1000))
            measure = measure_agents if scenario == "agents" else measure_gateway
            for n in ns:  # layouts interleaved per N: the same machine state for each
                for layout in layouts:
                    t = time.monotonic()
                    entry = measure(bench, layout, n, warmup, turns)
                    fleet.setdefault(scenario, {}).setdefault(layout, {})[str(n)] = entry
                    say(f"  {scenario} {layout} N={n}: {_summary(entry)} "
                        f"[{time.monotonic() - t:.0f} s]")
        if "remote" in scenarios:
            provider.clear()
            provider.set_default(mp.text("ok"))
            remote = measure_remote(bench, int(os.environ.get("BENCH_REMOTE_TURNS", "20")))
            say(f"  remote: {_summary(remote)}")
    checks = targets(fleet, remote)
    for check in checks:
        say(f"  target {check['name']}: {verdict(check)} ({check['figure']}; "
            f"{check['detail']})")
    out: dict[str, Any] = {"targets": checks}
    if any(s in fleet for s in ("agents", "gateway")):
        out["fleet"] = fleet
    if remote is not None:
        out["remote"] = remote
    return out


def _summary(entry: Mapping[str, Any]) -> str:
    if "error" in entry:
        return "failed: " + _short(entry["error"], 200)
    if "ratio" in entry:
        return f"local {entry['local_ms']} ms, ws {entry['remote_ms']} ms ({entry['ratio']}×)"
    return (f"{entry.get('codex_processes_peak')} codex, codex RSS "
            f"{entry.get('codex_rss_peak_mib')} MiB, client {entry.get('client_rss_peak_mib')} "
            f"MiB, p50 {entry.get('p50_ms')} p95 {entry.get('p95_ms')} ms, "
            f"{entry.get('turns_ok')}/{entry.get('turns')} ok, errors {entry.get('error_count')}"
            + (f" e.g. {_short(entry['errors'][0], 160)}" if entry.get("errors") else ""))


def main(argv: list[str]) -> int:
    """``fleet.py [--out FILE]``, or ``fleet.py child <kind> <config.json>`` (one
    measurement: prints one JSON line)."""
    if argv[:1] == ["child"] and len(argv) == 3:
        config = json.loads(Path(argv[2]).read_text())
        kinds: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "agents": child_agents, "remote": child_remote}
        print(json.dumps(kinds[argv[1]](config)), flush=True)
        return 0
    from hermes_codex_runtime.wire import resolve_codex_binary

    out_path = Path(argv[1]) if argv[:1] == ["--out"] and len(argv) == 2 else None
    if argv and out_path is None:
        print("usage: bench/fleet.py [--out FILE]", file=sys.stderr)
        return 2
    report = run_all(resolve_codex_binary().path)
    print("\n".join(render_lines(report.get("fleet"), report.get("remote"),
                                 report["targets"])))
    if out_path is not None:
        out_path.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
