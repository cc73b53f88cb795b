# Two entry points for a fresh machine (see README):
#   make demo   set everything up, run the whole pipeline (misbench run-all: ingest, claims,
#               generate, quality, bench, evaluate, hoax, hoax-evaluate, views) on the demo dump
#   make test   set everything up, run the test suite (every tier)
#   make test-fast  the inner-loop tier: no model, no kill or crash, no whole pipeline, no slow
#               Spark job (minutes)
VENV ?= .venv
PYTHON ?= python3

# llama.cpp is compiled at install. Portable: no -march=native (so no AVX-512 and no AMX
# kernels), AVX2/FMA/F16C as any x86-64 server of the last ten years has. A build never
# depends on the CPU it was made on, so a wheel built on one machine runs on any other.
# --no-cache-dir: pip's wheel cache is keyed by version only and may hold a native build.
# (setup.py asks for it with its [server] extra: the version alone is what is compiled here.)
LLAMA_CPP_PYTHON := llama-cpp-python==$(shell grep -o 'llama-cpp-python[^"]*==[0-9.]*' setup.py | grep -o '[0-9.]*$$')
# The instruction sets are named, not left to llama.cpp's defaults, which turn them all off
# where SOURCE_DATE_EPOCH is set (reproducible-build environments).
# LLAVA_BUILD=OFF: no vision library (mtmd), which misbench never loads; 44 s of a 362 s
# build on 2 cores.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON \
  -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
  -DLLAVA_BUILD=OFF
# One stamp per version and build flags: other flags rebuild llama.cpp in the same .venv.
LLAMA_STAMP := $(VENV)/.llama-$(subst ==,-,$(LLAMA_CPP_PYTHON))-$(shell echo '$(LLAMA_CMAKE_ARGS)' | cksum | cut -d' ' -f1)

$(LLAMA_STAMP):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(VENV)/bin/pip install -q --no-cache-dir \
	  --no-binary llama-cpp-python --force-reinstall --no-deps '$(LLAMA_CPP_PYTHON)'
	touch $@

$(VENV)/.dev: $(LLAMA_STAMP) setup.py
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

$(VENV)/.embedded: $(VENV)/.dev
	$(VENV)/bin/pip install -q -e '.[dev,embedded]'
	touch $@

.PHONY: setup demo test test-fast bench
setup: $(VENV)/.dev

# --limit 1: one claim gets generated texts (minutes on a CPU); a rerun skips finished stages.
demo: $(VENV)/.embedded
	$(VENV)/bin/misbench run-all --limit 1

test: setup
	$(VENV)/bin/python -m pytest -q

# The markers are declared in pytest.ini (README, Testing).
test-fast: setup
	$(VENV)/bin/python -m pytest -q -m "not model and not chaos and not e2e and not slow"

bench: setup
	$(VENV)/bin/python benchmarks/ingest.py
	$(VENV)/bin/python benchmarks/generate.py
	$(VENV)/bin/python benchmarks/quality.py
	$(VENV)/bin/python benchmarks/answering.py
