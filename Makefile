# Two commands do all the set-up from a fresh clone: `make run` (the runtime only) and
# `make test` (adds the test extra: pytest, linters, the Agent SDK the tests check against).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
TESTS := $(VENV)/.installed-test
PIP := $(BIN)/python -m pip install --quiet
# The package is installed editable as a plain path entry (setuptools' "compat" mode), so every
# start is spared the import hook of its default mode (~4 ms: pathlib, urllib.parse, ...);
# edits and new modules are seen without reinstalling either way. The default mode if a
# setuptools no longer has it.
EDITABLE := --config-settings editable_mode=compat
# Bytecode is compiled as pip compiles a regular install's; an editable install has none, and
# with PYTHONDONTWRITEBYTECODE set every start would compile every module again (~25 ms).
BYTECODE := $(BIN)/python -m compileall -q translator

# The suite runs in parallel (pytest-xdist): most tests wait on processes, sockets and signals,
# not on the CPU, so more workers than cores (2 here); TEST_JOBS=0 runs it in this one process.
TEST_JOBS ?= 4

.PHONY: run test lint schemas docs bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(RUNTIME): pyproject.toml Makefile | $(BIN)/python
	{ $(PIP) -e . $(EDITABLE) || $(PIP) -e . ; } > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	touch $@

$(TESTS): pyproject.toml Makefile | $(BIN)/python
	{ $(PIP) -e '.[test]' $(EDITABLE) || $(PIP) -e '.[test]' ; } > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	touch $(RUNTIME) $@

run: $(RUNTIME)
	$(BYTECODE)
	$(BIN)/translator fixtures/tool_use_two_turns.events.jsonl

test: $(TESTS)
	$(BYTECODE)
	$(BIN)/python -m pytest -q -n $(TEST_JOBS)

lint: $(TESTS)
	$(BIN)/ruff check translator tests bench
	$(BIN)/mypy

schemas: $(TESTS)  # after a change to translator/schema/frames.py
	$(BIN)/python -m translator.schema.generate

docs: $(TESTS)  # after a change to an option: docs/cli.md and the man page, from the parsers
	$(BIN)/python -m translator.cli.reference docs

bench: $(TESTS)
	@command -v jq >/dev/null || echo 'bench: jq is not installed; its comparison will count as missed (apt-get install jq)'
	$(BYTECODE)
	$(BIN)/python bench/run.py; status=$$?; $(BIN)/python bench/load.py || status=1; \
		$(BIN)/python bench/fleet.py || status=1; $(BIN)/python bench/permission_latency.py || status=1; exit $$status

clean:
	rm -rf $(VENV) bench/out
