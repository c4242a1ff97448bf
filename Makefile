# Two commands do all the set-up from a fresh clone: `make run` (the runtime only) and
# `make test` (adds the test extra: pytest, linters, the Agent SDK the tests check against).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
TESTS := $(VENV)/.installed-test
PIP := $(BIN)/python -m pip install --quiet

.PHONY: run test lint schemas bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(PIP) -e . > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	touch $@

$(TESTS): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[test]' > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	touch $(RUNTIME) $@

run: $(RUNTIME)
	$(BIN)/translator fixtures/tool_use_two_turns.events.jsonl

test: $(TESTS)
	$(BIN)/python -m pytest -q

lint: $(TESTS)
	$(BIN)/ruff check translator tests bench
	$(BIN)/mypy

schemas: $(TESTS)  # after a change to translator/frames.py
	$(BIN)/python -m translator.schema

bench: $(TESTS)
	@command -v jq >/dev/null || echo 'bench: jq is not installed; its comparison will count as missed (apt-get install jq)'
	$(BIN)/python bench/run.py; status=$$?; $(BIN)/python bench/load.py && exit $$status

clean:
	rm -rf $(VENV) bench/out
