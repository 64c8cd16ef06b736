# toolscout — developer tasks. Every target runs through uv with the committed lock.
UV ?= uv
PROTO_OUT := clients/src
PROTOS := $(shell find protos -name '*.proto' | sort)

.PHONY: install proto proto-check fmt lint test test-e2e bench up

install:
	$(UV) sync --frozen

proto:
	$(UV) run --frozen python -m grpc_tools.protoc -Iprotos \
	  --python_out=$(PROTO_OUT) --pyi_out=$(PROTO_OUT) --grpc_python_out=$(PROTO_OUT) \
	  --mypy_grpc_out=$(PROTO_OUT) $(PROTOS)

proto-check: proto
	@git diff --exit-code -- $(PROTO_OUT) || (echo "generated code is stale: run 'make proto' and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain --untracked-files=all -- $(PROTO_OUT))" || (git status --porcelain -- $(PROTO_OUT); echo "untracked generated files: run 'make proto' and commit" >&2; exit 1)
