# The two commands a newcomer needs: `make run` and `make test`. Everything else is for contributors.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export GRADIO_ANALYTICS_ENABLED := False
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test lint synth bench clean lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.local-installed: requirements.txt requirements-local.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-local.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-local.txt requirements-cdk.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

## Serve the UI and API on http://127.0.0.1:8000/ with the built-in model, on the CPU.
run: $(VENV)/.local-installed
	HOST=127.0.0.1 $(BIN)/python -m app

## Lint and run the whole test suite, offline.
test: $(VENV)/.dev-installed node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## Synthesize the CloudFormation templates into cdk.out/ (offline, no AWS account).
synth: $(VENV)/.dev-installed node_modules/.installed
	PATH="$(abspath $(BIN)):$$PATH" npx --no-install cdk synth --quiet

## Benchmark the service through its HTTP server (BENCH_ARGS=..., see `python -m app.bench --help`).
bench: $(VENV)/.local-installed
	$(BIN)/python -m app.bench $(BENCH_ARGS)

## Re-resolve the images' locked requirement sets (app/requirements/*.lock) with uv; needs PyPI.
lock: $(VENV)/.dev-installed
	$(BIN)/python -m tools.image_locks compile

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .ruff_cache
