# The two commands a newcomer needs: `make run` and `make test`. Everything else is for contributors.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# Node 22 from npm (package.json's optionalDependencies: the one platform package that fits this
# machine), first on PATH for the CDK CLI and for the jsii runtime that the Python CDK spawns as `node`:
# jsii no longer supports the Node 20 that many systems (and CI images) still ship.
NODE_BIN := $(abspath node_modules/.bin)
export PATH := $(NODE_BIN):$(PATH)
export GRADIO_ANALYTICS_ENABLED := False
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run run-llm run-llm-embed test test-fast lint synth costs deploy kubectl-tunnel verify bench bench-families bench-gpu bench-gpu-wheels bench-llm bench-llm-cluster clean lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.local-installed: requirements.txt requirements-local.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-local.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-local.txt requirements-cdk.txt requirements-dev.txt routing_controller/requirements.txt llm_gateway/requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

$(VENV)/.llm-gateway-installed: llm_gateway/requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r llm_gateway/requirements.txt
	touch $@

# Checkov keeps its own environment: its pins would fight the app's (tests/support/checkov-requirements.txt).
CHECKOV_VENV := .cache/checkov-venv
$(CHECKOV_VENV)/.installed: tests/support/checkov-requirements.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r tests/support/checkov-requirements.txt
	touch $@

# vLLM's router keeps its own environment too (tests/support/vllm-router-requirements.txt): the llmRouter rehearsal runs
# its binary.
ROUTER_VENV := .cache/vllm-router-venv
$(ROUTER_VENV)/.installed: tests/support/vllm-router-requirements.txt
	$(PYTHON) -m venv $(ROUTER_VENV)
	$(ROUTER_VENV)/bin/python -m pip install --quiet -r tests/support/vllm-router-requirements.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@$(NODE_BIN)/node --version | grep -q '^v22\.' || { \
	  echo "npm installed no Node 22 for this platform: add its package to package.json's optionalDependencies" >&2; exit 1; }
	touch $@

## Serve the UI and API on http://127.0.0.1:8000/ with the built-in model, on the CPU.
run: $(VENV)/.local-installed
	HOST=127.0.0.1 $(BIN)/python -m app

## Serve the OpenAI-compatible LLM API on http://127.0.0.1:8000/v1 and a chat page on http://127.0.0.1:8000/:
## a tiny built-in model on vLLM's CPU engine, behind the LLM gateway (the first run builds vLLM's environment
## under .cache/: several minutes).
run-llm: $(VENV)/.local-installed $(VENV)/.llm-gateway-installed
	HOST=127.0.0.1 $(BIN)/python -m llm_local

## The same, with the tiny model as an embedding model (tiny-llama-embed) on /v1/embeddings.
run-llm-embed: $(VENV)/.local-installed $(VENV)/.llm-gateway-installed
	HOST=127.0.0.1 ENGINE_TASK=embed $(BIN)/python -m llm_local

## Lint and run the whole test suite, offline, over both cores: the tests that share a session's synth, sandbox
## stacks, contract venv or vLLM engine on one worker, every other module whole on either (tests/support/tiers.py).
test: $(VENV)/.dev-installed node_modules/.installed $(CHECKOV_VENV)/.installed $(ROUTER_VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 --dist loadgroup

## The fast tier, for a seconds-long loop: lint and the tests that need no synth, vLLM engine, sandbox, Neuron
## contract venv, browser or GPU (pytest --fast; docs/testing.md). Run one file with: $(BIN)/python -m pytest --fast FILE
## node_modules too: some fast tests run Node (the CRD schemas' validator, the pinned Node's own checks).
test-fast: $(VENV)/.dev-installed node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest --fast -q -n 2

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## Synthesize the CloudFormation templates into cdk.out/: for your account and region when the CLI
## finds credentials, else offline for the labelled, not deployable example environment.
synth: $(VENV)/.dev-installed node_modules/.installed
	PATH="$(abspath $(BIN)):$$PATH" npx --no-install cdk synth --quiet -c exampleEnvironment=true

## Print the cost at rest, the observability bill and each image model preset's cost for cdk.json's context, with
## COSTS_ARGS's key=value pairs on top (make costs COSTS_ARGS="profile=trial"): python -m cdk.costs in the venv, on the
## pinned Node 22, so that jsii prints no end-of-life banner before the tables.
costs: $(VENV)/.dev-installed node_modules/.installed
	@$(BIN)/python -m cdk.costs $(COSTS_ARGS)

## Deploy every stack to the account and region of your AWS credentials, with you (the AWS CLI's caller, resolved
## by tools/deployer.py) as a cluster admin through an EKS access entry. DEPLOY_ARGS=... adds CDK CLI options
## (such as -c llmEnabled=true or --require-approval never).
deploy: $(VENV)/.dev-installed node_modules/.installed
	@deployer="$$($(BIN)/python -m tools.deployer)" && \
	PATH="$(abspath $(BIN)):$$PATH" npx --no-install cdk deploy --all -c deployerArn="$$deployer" $(DEPLOY_ARGS)

## After a deploy: kubectl through the private endpoint. Writes ~/.kube/<clusterName>-tunnel and holds a Session
## Manager port-forwarding session open (needs the AWS CLI's Session Manager plugin and kubectl); while it runs,
## KUBECONFIG=~/.kube/<clusterName>-tunnel kubectl ... reaches the cluster. TUNNEL_ARGS=... (see
## `python -m tools.kubectl_tunnel --help`).
kubectl-tunnel: $(VENV)/.dev-installed
	@exec $(BIN)/python -m tools.kubectl_tunnel $(TUNNEL_ARGS)

## After a deploy: run the first-deploy checks (docs/first-deploy.md) against the stacks, one row per check; exits
## non-zero on a FAIL. Needs the AWS credentials and region you deploy with and kubectl for the cluster (the
## UpdateKubeconfig output). VERIFY_ARGS=... names checks or options (see `python -m verify --help`).
verify: $(VENV)/.dev-installed
	@$(BIN)/python -m verify $(VERIFY_ARGS)

## Benchmark the service through its HTTP server (BENCH_ARGS=..., see `python -m app.bench --help`).
bench: $(VENV)/.local-installed
	$(BIN)/python -m app.bench $(BENCH_ARGS)

## CPU benchmark per image model family: the serving benchmark and the breaking point for the tiny SDXL and
## Flux built-ins at 128x128 and each family's default steps, written into docs/benchmarks.md (a ramp that meets
## no SLO is a result too: the next family still runs).
bench-families: $(VENV)/.local-installed
	$(BIN)/python -m app.bench serving --model-id builtin:tiny-sdxl --steps 30 --size 128 --concurrency 1 4 --pairs 20 --results-file docs/benchmarks.md
	-$(BIN)/python -m app.bench breaking-point --model-id builtin:tiny-sdxl --steps 30 --width 128 --height 128 --level-seconds 20 --max-concurrency 16 --results-file docs/benchmarks.md
	$(BIN)/python -m app.bench serving --model-id builtin:tiny-flux --steps 4 --size 128 --concurrency 1 4 --pairs 20 --results-file docs/benchmarks.md
	-$(BIN)/python -m app.bench breaking-point --model-id builtin:tiny-flux --steps 4 --width 128 --height 128 --level-seconds 20 --max-concurrency 16 --results-file docs/benchmarks.md

## On one H100/H200, first thing: the headline image figures (SD 2.1-base 512x512 50 steps at batch 1 and 8, SDXL,
## FLUX.1-schnell; eager bf16, random weights from the published configs), then the speed ladder while its 8 minutes
## last, written into docs/benchmarks.md by the benchmark (tools/bench_gpu.sh; GPU_PYTHON=python3, BENCH_ARGS=...).
## `make bench-gpu-wheels` first, here. Through the device tool: run(command='bash tools/bench_gpu.sh "$$OUT"',
## carry=[".bench-gpu"], timeout_s=600), then copy its benchmarks.md over docs/benchmarks.md (docs/benchmarks.md).
bench-gpu:
	bash tools/bench_gpu.sh

## The wheels a bare GPU machine lacks for make bench-gpu (diffusers, pydantic; the GPU image lock's versions) and
## the pinned instances' prices, into the ignored .bench-gpu/ (about 9 MiB; needs PyPI).
bench-gpu-wheels: $(VENV)/.dev-installed node_modules/.installed
	$(BIN)/python -m tools.bench_gpu_carry

## Benchmark the LLM stack of make run-llm, llmperf-style (BENCH_ARGS=..., see `python -m llm_bench --help`).
bench-llm: $(VENV)/.local-installed $(VENV)/.llm-gateway-installed
	$(BIN)/python -m llm_bench --local $(BENCH_ARGS)

## Benchmark one LLM replica per accelerator of a deployed stack, as a Job in the cluster (the stack's
## LlmBenchmarkCommand output gives BENCH_ARGS; see `python -m llm_bench.cluster --help`). Needs kubectl and AWS access.
bench-llm-cluster: $(VENV)/.dev-installed
	$(BIN)/python -m llm_bench.cluster $(BENCH_ARGS)

## Re-resolve the images' locked requirement sets (app/requirements/*.lock) with uv; needs PyPI.
lock: $(VENV)/.dev-installed
	$(BIN)/python -m tools.image_locks compile

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .ruff_cache
