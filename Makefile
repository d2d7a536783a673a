# hermes-codex-runtime — everything a fresh clone needs.
#   make demo    a real codex turn on the bundled mock provider (no credentials, no network)
#   make test    lint + the whole test suite (real codex binary, real Hermes host)
# Both create .venv and install the extras on first use.

VENV    ?= .venv
# Hermes 0.19.0 supports Python 3.11–3.13: take the first interpreter in that range.
PYTHON  ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
             $$p -c 'import sys; sys.exit(not (3,11) <= sys.version_info[:2] <= (3,13))' \
             >/dev/null 2>&1 && { echo $$p; break; }; done)
PY       = $(VENV)/bin/python
STAMP    = $(VENV)/.installed-test

.PHONY: setup tools demo test lint bench soak clean compat-manifest codex-npm

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.11-3.13 is required (Hermes 0.19.0 supports those)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

setup: $(STAMP) tools

# The interactive-CLI test drives Hermes in tmux: install it where we can (root + apt).
tools:
	@command -v tmux >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing tmux (for the interactive CLI test)"; \
	    (apt-get update -qq && apt-get install -y -qq tmux) >/dev/null 2>&1 || true; \
	  else echo "note: tmux is missing; the interactive CLI test needs it"; fi; }

demo: setup
	$(VENV)/bin/hermes-codex-runtime demo

lint: setup
	$(VENV)/bin/ruff check hermes_codex_runtime tests bench
	$(VENV)/bin/mypy hermes_codex_runtime

test: lint
	HCR_REQUIRE_REAL=1 $(PY) -m pytest -p no:cacheprovider

# The newest codex (npm @openai/codex; its platform package ships the binary), in the project's
# own folder — never globally. `make codex-npm` prints the binary's path (for CODEX_BIN).
CODEX_NPM_VERSION ?= 0.171.0
CODEX_NPM_DIR := .tools/codex-npm
codex-npm:
	@test -x "$$(find $(CODEX_NPM_DIR)/node_modules/@openai -path '*/bin/codex' -type f 2>/dev/null | head -1)" \
	  || npm install --silent --no-audit --no-fund --prefix $(CODEX_NPM_DIR) @openai/codex@$(CODEX_NPM_VERSION)
	@find $(CODEX_NPM_DIR)/node_modules/@openai -path '*/bin/codex' -type f | head -1

# COMPAT_MANIFEST.md's Hermes table is generated from hermes_codex_runtime/hermes/compat.py.
compat-manifest: setup
	$(PY) -m hermes_codex_runtime.hermes.compat --write COMPAT_MANIFEST.md

bench: setup
	$(PY) bench/run.py

# The full soak (CI runs 120 turns): one session, 500 turns, memory slope reported.
soak: setup
	HCR_SOAK_TURNS=500 $(PY) -m pytest -q -s -p no:cacheprovider tests/test_reliability.py -k soak

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
