"""FastMCP 4 as a proxy in front of one streamable-HTTP MCP server (run isolated:
``uv run --isolated --no-project --with fastmcp==4.1.2 python bench/_baselines/fastmcp_proxy.py --upstream URL``).

FastMCP's documented proxy construct, ``fastmcp.server.create_proxy(target)``, served the way its
users serve it, with FastMCP's own HTTP server (``transport="http"``, ``path="/mcp"`` on 127.0.0.1):

* ``--session reuse`` (default): the target is a *connected* ``fastmcp.Client`` of the upstream URL,
  which ``create_proxy`` documents as "reuses existing session for all requests" (one upstream
  session for every call, as a gateway keeps its server connections open). The client has to stay
  connected on the server's event loop, so the server runs with ``run_async(transport="http", ...)``
  inside ``async with client`` (``run()`` is ``anyio.run(run_async, ...)``: the same server).
* ``--session fresh``: the target is the URL itself, ``create_proxy(url)`` (FastMCP's recommended
  form: a fresh upstream client per request), run with ``run(transport="http", ...)``.

Tools keep their upstream names. Prints ``listening <url>`` once the proxy accepts connections.
"""

from __future__ import annotations

import argparse

import anyio
from _common import announced_port
from fastmcp import Client
from fastmcp.server import create_proxy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True, help="the MCP server's streamable-HTTP URL")
    parser.add_argument("--session", choices=("reuse", "fresh"), default="reuse")
    args = parser.parse_args()
    serve = {
        "host": "127.0.0.1",
        "port": announced_port(),
        "path": "/mcp",
        "show_banner": False,
        "log_level": "WARNING",
    }
    if args.session == "fresh":
        create_proxy(args.upstream, name="fastmcp-proxy").run(transport="http", **serve)
        return

    async def reuse() -> None:
        async with Client(args.upstream) as upstream:
            await create_proxy(upstream, name="fastmcp-proxy").run_async(transport="http", **serve)

    anyio.run(reuse)


if __name__ == "__main__":
    main()
