"""Suite-wide rules.

* Tests that use the real codex binary (anything depending on the ``codex_binary`` fixture) are
  marked ``real_codex`` automatically; tests that import Hermes carry ``real_hermes``.
* With ``HCR_REQUIRE_REAL=1`` (``make test`` and CI) the run FAILS unless tests of both kinds ran
  and none of them was skipped — a suite that silently skips the real parts proves nothing.
"""

from __future__ import annotations

import os

import pytest

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
