"""Shared launcher for the example servers: ``stdio`` (default), ``sse`` or ``streamable-http``.

HTTP modes bind 127.0.0.1 and the port in ``--port`` (default ``PORT`` or 8000).
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def run(server: Any, argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=f"Run the {server.name!r} example MCP server.")
    parser.add_argument("transport", nargs="?", default="stdio", choices=["stdio", "sse", "streamable-http"])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run(args.transport, host="127.0.0.1", port=args.port)
