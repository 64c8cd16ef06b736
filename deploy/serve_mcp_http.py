"""Serve an MCP server script over streamable HTTP on every interface, for an in-cluster deployment.

``python serve_mcp_http.py SCRIPT`` loads SCRIPT (one of the example servers, which define a
module-level ``server``) and serves it at ``http://$HOST:$PORT/mcp`` (defaults 0.0.0.0:8000).
The example servers' own launcher binds 127.0.0.1, which other pods cannot reach; binding a
non-loopback host also turns off the SDK's DNS-rebinding guard, whose allow-list only names
localhost (the NetworkPolicy restricts callers to the pool instead).
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: serve_mcp_http.py SCRIPT\n")
        return 2
    module = runpy.run_path(argv[0], run_name="toolscout_mcp_server")
    server: Any = module.get("server")
    if server is None or not hasattr(server, "run"):
        sys.stderr.write(f"{argv[0]}: no module-level `server` to run\n")
        return 2
    host = os.environ.get("HOST", "0.0.0.0")  # noqa: S104 - serving other pods is the point
    port = int(os.environ.get("PORT", "8000"))
    server.run("streamable-http", host=host, port=port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
