# Two commands do all the set-up from a fresh clone: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]' > $(VENV)/install.log 2>&1 \
	  || { cat $(VENV)/install.log; exit 1; }
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/translator fixtures/tool_use_two_turns.events.jsonl

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check translator tests bench
	$(BIN)/mypy

bench: $(STAMP)
	@command -v jq >/dev/null || echo 'bench: jq is not installed; its comparison will count as missed (apt-get install jq)'
	$(BIN)/python bench/run.py; status=$$?; $(BIN)/python bench/load.py && exit $$status

clean:
	rm -rf $(VENV) bench/out
