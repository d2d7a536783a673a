"""Suite-wide rules.

* Tests that use the real codex binary (anything depending on the ``codex_binary`` fixture) are
  marked ``real_codex`` automatically; tests that import Hermes carry ``real_hermes``.
* With ``HCR_REQUIRE_REAL=1`` (``make test`` and CI) the run FAILS unless tests of both kinds ran
  and none of them was skipped — a suite that silently skips the real parts proves nothing.
* ``HCR_APP_SERVER=per-session`` (``make test-per-session``) runs the tests whose sessions are
  placed by that setting — those using the runtime, Hermes or Hermes-home fixtures, or a module
  that reads the layout (``support.APP_SERVER_MODE``, ``hermes_env.base_config``, the Hermes
  home of ``walled_home.PlantedHome``); the others
  would run exactly as in the shared cells, and are deselected (counted in the summary).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["hermes_codex_runtime.testing.pytest_plugin"]

# Third-party codex-runtime plugins installed on the machine stay out of the suite's runs.
os.environ.setdefault("CODEX_RUNTIME_LOAD_PLUGINS", "")


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test ends with the environment it started with. Importing some Hermes modules sets
    process-wide variables as a side effect (``gateway.run`` sets ``HERMES_EXEC_ASK`` and
    ``_HERMES_GATEWAY``: "this process is a gateway"); left in place they would make every later
    test — and every subprocess it starts — a gateway too."""
    saved = dict(os.environ)
    yield
    for key in [k for k in os.environ if k not in saved and k not in SESSION_ENV]:
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value and key not in SESSION_ENV:
            os.environ[key] = value


#: Set for the whole session by a session fixture (``hermes_base``), first used inside a test.
SESSION_ENV: set[str] = set()


@pytest.fixture(scope="session", autouse=True)
def _codex_never_leaves_the_machine(tmp_path_factory):
    """Any codex spawned without an explicit CODEX_HOME (a bug in a test or in the code) gets an
    offline home whose model provider is a closed port on 127.0.0.1 — never the user's
    ~/.codex, never a real provider."""
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home
    from hermes_codex_runtime.wire import CodexBinaryError, resolve_codex_binary

    home = tmp_path_factory.mktemp("default-codex-home")
    try:
        binary = resolve_codex_binary()
        prepare_codex_home(home, "http://127.0.0.1:9/v1", codex_bin=binary.path)
    except CodexBinaryError:
        pass
    previous = os.environ.get("CODEX_HOME")
    os.environ["CODEX_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("CODEX_HOME", None)
    else:
        os.environ["CODEX_HOME"] = previous


@pytest.fixture(scope="session", autouse=True)
def _name_lookups_stay_on_the_loopback():
    """Tests talk to 127.0.0.1 only: any in-process name lookup of another host fails at once
    (Hermes' own lookups are answered from caches, see ``hermes_env.write_offline_caches``)."""
    import socket

    real = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name not in (None, "127.0.0.1", "localhost", "::1") and \
                not str(name).startswith("127."):
            raise socket.gaierror(socket.EAI_NONAME, f"tests stay on 127.0.0.1 ({name})")
        return real(host, *args, **kwargs)

    socket.getaddrinfo = loopback_only
    yield
    socket.getaddrinfo = real


REAL_MARKERS = ("real_codex", "real_hermes")

_outcomes: dict[str, dict[str, int]] = {m: {"ran": 0, "skipped": 0} for m in REAL_MARKERS}


#: Fixtures whose sessions are placed by ``HCR_APP_SERVER`` (the runtime, Hermes, a Hermes home).
LAYOUT_FIXTURES = frozenset({"make_runtime", "hermes", "hermes_base", "home"})


def _follows_layout(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    return bool(LAYOUT_FIXTURES & set(getattr(item, "fixturenames", ()))) or any(
        hasattr(module, name) for name in ("APP_SERVER_MODE", "base_config", "PlantedHome"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("HCR_APP_SERVER", "shared") == "per-session":
        others = [item for item in items if not _follows_layout(item)]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if _follows_layout(item)]
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "codex_binary" in names:
            item.add_marker(pytest.mark.real_codex)
        if "hermes_base" in names:
            item.add_marker(pytest.mark.real_hermes)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for marker in REAL_MARKERS:
        if marker not in report.keywords:
            continue
        if report.skipped:
            _outcomes[marker]["skipped"] += 1
        elif report.when == "call":
            _outcomes[marker]["ran"] += 1


def _matrix_cell() -> tuple[str, str]:
    """The host and codex versions this run is on (``make test`` names the cell it expects)."""
    from hermes_codex_runtime.hermes.symbols.probe import find_host
    from hermes_codex_runtime.wire import CodexBinaryError, probe_version, resolve_codex_binary
    from hermes_codex_runtime.wire.binary import format_version

    host = find_host()
    try:
        codex = format_version(probe_version(resolve_codex_binary(os.environ.get("CODEX_BIN"))))
    except CodexBinaryError as exc:
        codex = f"none ({exc})"
    return (f"{host.distribution} {host.version}" if host else "none"), codex


def pytest_report_header(config: pytest.Config) -> str:
    from support import APP_SERVER_MODE

    host, codex = _matrix_cell()
    return f"compatibility cell: Hermes {host} x codex {codex}, app-server {APP_SERVER_MODE}"


def pytest_configure(config: pytest.Config) -> None:
    """A matrix cell that would run on another host or codex than it names fails at once."""
    mode = os.environ.get("HCR_APP_SERVER", "shared")
    if mode not in ("shared", "per-session"):
        raise pytest.UsageError(f"HCR_APP_SERVER must be shared or per-session, got {mode!r}")
    expect_host, expect_codex = (os.environ.get("HCR_EXPECT_HOST"),
                                 os.environ.get("HCR_EXPECT_CODEX"))
    if not (expect_host or expect_codex):
        return
    host, codex = _matrix_cell()
    if expect_host and not host.endswith(f" {expect_host}"):
        raise pytest.UsageError(f"this cell expects Hermes {expect_host}, found {host}")
    if expect_codex and codex != expect_codex:
        raise pytest.UsageError(f"this cell expects codex {expect_codex}, found {codex}")


def _missing_real_tests() -> list[str]:
    if os.environ.get("HCR_REQUIRE_REAL", "") in ("", "0"):
        return []
    problems = []
    for marker, counts in _outcomes.items():
        if counts["ran"] == 0:
            problems.append(f"no {marker} test ran")
        if counts["skipped"]:
            problems.append(f"{counts['skipped']} {marker} test(s) were skipped")
    return problems


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _missing_real_tests():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    problems = _missing_real_tests()
    if problems:
        terminalreporter.write_line("HCR_REQUIRE_REAL: " + "; ".join(problems), red=True)


@pytest.fixture
def make_runtime(codex_binary, codex_home, tmp_path, protocol_schema, experimental_schema):
    """Factory: ``make_runtime(**host_options) -> (runtime, host)`` on the real codex binary and
    the mock provider. Every connection records what it sent; teardown closes every session and
    asserts the wire stayed clean (schema-valid, nothing codex would ignore)."""
    from support import APP_SERVER_MODE, RecordingHost, shut_down

    from hermes_codex_runtime.plugins import make_plugin_manager
    from hermes_codex_runtime.pool import Placement, ServerPool
    from hermes_codex_runtime.runtime import CodexRuntime
    from hermes_codex_runtime.session import SessionSettings
    from hermes_codex_runtime.testing.wire_recorder import RecordingConnection

    workdir = tmp_path / "work"
    workdir.mkdir()
    connections: list[RecordingConnection] = []
    runtimes = []

    def connect(options):
        conn = RecordingConnection.spawn(options)
        connections.append(conn)
        return conn

    def make(settings=None, **host_options):
        settings = settings or SessionSettings(
            codex_bin=codex_binary.path, codex_home=str(codex_home), cwd=str(workdir),
            turn_timeout=60.0, app_server=Placement(APP_SERVER_MODE))
        host = RecordingHost(settings, **host_options)
        runtime = CodexRuntime(make_plugin_manager([host]), pool=ServerPool(spawn=connect))
        runtimes.append((runtime, host))
        return runtime, host

    make.workdir = workdir
    make.settings_defaults = {"codex_bin": codex_binary.path, "codex_home": str(codex_home)}
    make.connections = connections
    yield make
    for runtime, _host in runtimes:
        shut_down(runtime)
    problems = []
    for conn in connections:
        schema = experimental_schema if conn.experimental else protocol_schema
        problems.extend(conn.wire_problems(schema))
    assert problems == [], problems


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory):
    """The user's cache directory for this run, empty as on a clean machine and shared by every
    process of the run: what the plugin keeps there (the walls' verdicts per codex binary) is
    proved once per run, whatever this machine's own cache holds."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("user-cache"))
    yield Path(os.environ["XDG_CACHE_HOME"])
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture(scope="session")
def hermes_base(tmp_path_factory):
    """A session-wide HERMES_HOME with the plugin enabled in config.yaml, set BEFORE Hermes is
    imported, so Hermes' own loader discovers and registers the plugin (as for a user)."""
    from hermes_env import base_config, write_hermes_home

    home = tmp_path_factory.mktemp("hermes-home")
    write_hermes_home(home, base_config())
    session_env = {"HERMES_HOME": str(home), "HERMES_DISABLE_LAZY_INSTALLS": "1",
                   "TIRITH_ENABLED": "0"}
    SESSION_ENV.update(session_env)
    os.environ.update(session_env)
    os.environ.pop("HERMES_YOLO_MODE", None)
    import agent.codex_runtime
    import run_agent  # noqa: F401  (importing it runs Hermes' plugin discovery)

    from hermes_codex_runtime.hermes.registrations import REGISTRATIONS
    from hermes_codex_runtime.hermes.symbols.patch import is_ours

    assert REGISTRATIONS, "Hermes did not load the plugin from its entry point"
    assert is_ours(agent.codex_runtime.run_codex_app_server_turn)
    return home


class HermesHarness:
    """Per-test Hermes: config.yaml, a codex home on the mock provider, real AIAgents."""

    def __init__(self, home, codex_binary, provider, tmp_path, monkeypatch):
        from hermes_codex_runtime.offline.codex_home import prepare_codex_home

        self.home = home
        self.provider = provider
        self.tmp = tmp_path
        self.workdir = tmp_path / "work"
        self.workdir.mkdir()
        self.hooks_file = tmp_path / "hooks.jsonl"
        monkeypatch.setenv("HOOK_RECORD_FILE", str(self.hooks_file))
        monkeypatch.delenv("TERMINAL_CWD", raising=False)
        # the codex under test (CODEX_BIN in a matrix cell, else the bundled binary) is the one
        # Hermes' turns and every `hermes` subprocess use
        monkeypatch.setenv("CODEX_BIN", str(codex_binary.path))
        self.codex_binary = codex_binary
        self.codex_home = prepare_codex_home(tmp_path / "codex-home", provider.base_url,
                                             codex_bin=codex_binary.path)
        self.agents = []
        self.configure()

    def configure(self, approvals=None, codex_toml_extra="", **model):
        from hermes_env import base_config, write_config

        if codex_toml_extra:
            config_toml = self.codex_home / "config.toml"
            text = config_toml.read_text()
            head, sep, tail = text.partition("[model_providers")
            config_toml.write_text(head + codex_toml_extra + "\n" + sep + tail)
        config = base_config(codex_home=str(self.codex_home), **model)
        if approvals is not None:
            config["approvals"] = approvals
        write_config(self.home, config)
        return config

    def session_db(self):
        from hermes_state import SessionDB

        return SessionDB(db_path=self.tmp / "state.db")

    def agent(self, **overrides):
        import run_agent

        kwargs = dict(model="mock-model", provider="openai", api_mode="codex_app_server",
                      api_key="sk-test-not-used", base_url="http://127.0.0.1:9/v1",
                      quiet_mode=True, skip_memory=True, skip_context_files=True,
                      session_db=self.session_db())
        kwargs.update(overrides)
        agent = run_agent.AIAgent(**kwargs)
        agent.session_cwd = str(self.workdir)
        self.agents.append(agent)
        return agent

    def hooks(self):
        from hermes_env import read_hooks

        return read_hooks(self.hooks_file)

    def close(self):
        for agent in self.agents:
            agent.close()


@pytest.fixture
def home(tmp_path, codex_binary, mock_provider):
    """A Hermes home with the plugin enabled, on an offline codex home that talks to the mock."""
    from hermes_env import base_config, write_hermes_home

    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    hermes_home = tmp_path / "hermes-home"
    write_hermes_home(hermes_home, base_config(codex_home=str(codex_home)))
    return hermes_home


@pytest.fixture
def hermes(hermes_base, codex_binary, mock_provider, tmp_path, monkeypatch):
    """A real Hermes AIAgent factory whose codex turns use the real binary on the mock."""
    harness = HermesHarness(hermes_base, codex_binary, mock_provider, tmp_path, monkeypatch)
    yield harness
    harness.close()
