"""``python -m mcp_gateway_svc --config PATH`` (or ``TOOLSCOUT_CONFIG``): run the MCP front door."""

from __future__ import annotations

import sys

from mcp_gateway_svc.server import build_server
from toolscout_kit.entrypoint import run_service


def main() -> int:
    return run_service("mcp_gateway_svc", build_server)


if __name__ == "__main__":
    sys.exit(main())
