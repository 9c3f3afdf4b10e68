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

# Spark's classes archived once per venv, so that the tests' JVMs start on half the CPU
# (tests/support/jvm_cds.py; a failure only means the tests run without it).  One xdist
# worker more than the cores: the workers wait on fsyncs, subprocesses and JVM starts
# (docs/testing.md "Running the suite")
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

test: lint
	$(BIN)/python -m tests.support.jvm_cds dump
	$(BIN)/pytest -q -n $(WORKERS) --dist loadfile

test-full: lint
	$(BIN)/python -m tests.support.jvm_cds dump
	$(BIN)/pytest -q -n $(WORKERS) --dist loadfile --full

clean:
	rm -rf $(VENV) work
