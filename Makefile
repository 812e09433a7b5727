# `make run` serves the demo catalogue on http://127.0.0.1:8080/mcp; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint docs bench bench-instructions bench-scale screenshots clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/mcp-gateway serve

test: $(STAMP)
	$(BIN)/ruff check gateway backends bench tests docs
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q -n auto --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check gateway backends bench tests docs

docs: $(STAMP)
	$(BIN)/python docs/generate.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench

bench-instructions: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.instructions

bench-scale: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.scale

# The status page's screenshots in docs/assets/status/ (Debian's chromium; about a minute).
screenshots: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python tests/browser/screenshots.py docs/assets/status

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
