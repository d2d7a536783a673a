"""Suite-wide rules.

* Tests that use the real codex binary (anything depending on the ``codex_binary`` fixture) are
  marked ``real_codex`` automatically; tests that import Hermes carry ``real_hermes``.
* With ``HCR_REQUIRE_REAL=1`` (``make test`` and CI) the run FAILS unless tests of both kinds ran
  and none of them was skipped — a suite that silently skips the real parts proves nothing.
"""

from __future__ import annotations

import functools
import os

import pytest

# Third-party codex-runtime plugins installed on the machine stay out of the suite's runs.
os.environ.setdefault("CODEX_RUNTIME_LOAD_PLUGINS", "")

REAL_MARKERS = ("real_codex", "real_hermes")
_outcomes: dict[str, dict[str, int]] = {m: {"ran": 0, "skipped": 0} for m in REAL_MARKERS}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "codex_binary" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_codex)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for marker in REAL_MARKERS:
        if marker not in report.keywords:
            continue
        if report.skipped:
            _outcomes[marker]["skipped"] += 1
        elif report.when == "call":
            _outcomes[marker]["ran"] += 1


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
def make_runtime(codex_binary, codex_home, tmp_path, protocol_schema):
    """Factory: ``make_runtime(**host_options) -> (runtime, host)`` on the real codex binary and
    the mock provider. Every connection records what it sent; teardown closes every session and
    asserts the wire stayed clean (schema-valid, nothing codex would ignore)."""
    from support import RecordingHost

    from hermes_codex_runtime.plugins import make_plugin_manager
    from hermes_codex_runtime.runtime import CodexRuntime
    from hermes_codex_runtime.session import CodexSession, SessionSettings
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
            turn_timeout=60.0)
        host = RecordingHost(settings, **host_options)
        runtime = CodexRuntime(make_plugin_manager([host]),
                               session_factory=functools.partial(CodexSession,
                                                                 connection_factory=connect))
        runtimes.append(runtime)
        return runtime, host

    make.workdir = workdir
    make.connections = connections
    yield make
    for runtime in runtimes:
        runtime.close_all()
    problems = [p for conn in connections for p in conn.wire_problems(protocol_schema)]
    assert problems == [], problems
