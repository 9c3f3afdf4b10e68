# Two entry points, each doing all of its own set-up on a fresh clone:
#   make demo  — the main job end to end on the embedded default
#   make test  — lint, type-check and the whole test suite (seeded sweeps in a bounded
#                sample, docs/testing.md); make test-full runs every seed
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-full lint clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q pip==26.3
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/bexdb demo --dir work/demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q -n auto --dist loadfile

test-full: lint
	$(BIN)/pytest -q -n auto --dist loadfile --full

clean:
	rm -rf $(VENV) work
