# Two entry points for a fresh machine (see README):
#   make demo   set everything up, run the pipeline (ingest, claims) on the shipped demo dump
#   make test   set everything up, run the test suite
VENV ?= .venv
PYTHON ?= python3

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

.PHONY: setup demo test bench
setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/misbench ingest
	$(VENV)/bin/misbench claims
	$(VENV)/bin/misbench tables

test: setup
	$(VENV)/bin/python -m pytest -q

bench: setup
	$(VENV)/bin/python benchmarks/ingest.py
