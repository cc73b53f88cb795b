# Two entry points for a fresh machine (see README):
#   make demo   set everything up, run the pipeline (ingest, claims, generate, quality) on the demo dump
#   make test   set everything up, run the test suite
VENV ?= .venv
PYTHON ?= python3

$(VENV)/.dev: setup.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

$(VENV)/.embedded: $(VENV)/.dev
	$(VENV)/bin/pip install -q -e '.[dev,embedded]'
	touch $@

.PHONY: setup demo test bench
setup: $(VENV)/.dev

demo: $(VENV)/.embedded
	$(VENV)/bin/misbench ingest
	$(VENV)/bin/misbench claims
	$(VENV)/bin/misbench generate --limit 1
	$(VENV)/bin/misbench quality
	$(VENV)/bin/misbench tables

test: setup
	$(VENV)/bin/python -m pytest -q

bench: setup
	$(VENV)/bin/python benchmarks/ingest.py
	$(VENV)/bin/python benchmarks/generate.py
	$(VENV)/bin/python benchmarks/quality.py
