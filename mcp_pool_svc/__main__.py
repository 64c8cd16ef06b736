"""``python -m mcp_pool_svc --config PATH`` (or ``TOOLSCOUT_CONFIG``): run the MCP pool service."""

from __future__ import annotations

import sys

from mcp_pool_svc.server import build_server
from toolscout_kit.entrypoint import run_service


def main() -> int:
    return run_service("mcp_pool_svc", build_server)


if __name__ == "__main__":
    sys.exit(main())
