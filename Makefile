# `make run` serves the demo catalogue on http://127.0.0.1:8080/mcp; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench bench-instructions clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/mcp-gateway serve

test: $(STAMP)
	$(BIN)/ruff check gateway backends bench tests
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check gateway backends bench tests

bench: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench

bench-instructions: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.instructions

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
