"""A fleet of simulated MCP servers in one process: 1,000 streamable-HTTP endpoints, ~50 real tools each.

Every server is its own ``mcp`` SDK ``Server`` (name ``sim-0000`` …) with its own
``StreamableHTTPSessionManager``, served at ``/sim-NNNN/mcp`` by one uvicorn on 127.0.0.1; a small
ASGI router picks the manager by path (Starlette's route list would be a linear scan of 1,000
patterns per request). Both protocol eras are served, as the SDK does by default: the handshake
revisions with stateful sessions and 2026-07-28 stateless requests, whose ``tools/list`` results
carry ``ttlMs`` (``--ttl-ms``) and ``cacheScope: public``.

Tools come from the real catalogues in ``../shared/data/*.tools.jsonl`` (8,662 of them), dealt out
deterministically so that each server has ``--tools`` distinct names: 1,000 × 50 = 50,000 tools.
Names are made valid MCP tool names (``[A-Za-z0-9._-]``, at most 64 characters); descriptions and
input schemas are the catalogue's. Servers dealt the same catalogue entry share its immutable
``Tool`` object, which keeps this process small; callers see 50,000 (server, tool) pairs. Every
tool is callable and answers at once with a one-line text result.

    uv run --frozen python bench/mcp_fleet.py serve [--servers 1000] [--tools 50] [--port 0]
    uv run --frozen python bench/mcp_fleet.py config --url http://127.0.0.1:PORT [--shards N] [--out F]

``serve`` prints ``listening <base url>`` once the socket accepts connections, then one JSON line
``{"ready": ...}`` with the start-up time and RSS once every server is up. ``config`` writes a
toolscout config (JSON) whose ``servers`` point at the fleet's endpoints.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import socket
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import CacheHint, Server, ServerRequestContext
from mcp.server.caching import CacheableMethod
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
_INVALID = re.compile(r"[^A-Za-z0-9._-]+")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def server_name(index: int) -> str:
    return f"sim-{index:04d}"


def endpoint_path(index: int) -> str:
    return f"/{server_name(index)}/mcp"


def _tool_name(raw: str) -> str:
    return (_INVALID.sub("_", raw).strip("_") or "tool")[:64]


def load_catalogue(data_dir: Path = DATA) -> list[types.Tool]:
    """Every tool of every ``*.tools.jsonl`` file, as MCP tools (sorted, so the deal is deterministic)."""
    tools: list[types.Tool] = []
    for path in sorted(data_dir.glob("*.tools.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                schema = row.get("input_schema")
                if not isinstance(schema, dict) or schema.get("type") != "object":
                    schema = _EMPTY_SCHEMA
                tools.append(
                    types.Tool(
                        name=_tool_name(str(row["name"])),
                        description=str(row.get("description") or ""),
                        input_schema=schema,
                    )
                )
    if not tools:
        raise SystemExit(f"no *.tools.jsonl catalogues in {data_dir}")
    return tools


def deal(
    catalogue: Sequence[types.Tool], servers: int, per_server: int, seed: int = 15
) -> list[list[types.Tool]]:
    """``per_server`` tools with distinct names for each server, walking a seeded shuffle of the catalogue."""
    order = list(range(len(catalogue)))
    random.Random(seed).shuffle(order)
    dealt: list[list[types.Tool]] = []
    cursor = 0
    for _ in range(servers):
        names: set[str] = set()
        tools: list[types.Tool] = []
        for _attempt in range(len(order)):
            tool = catalogue[order[cursor % len(order)]]
            cursor += 1
            if tool.name not in names:
                names.add(tool.name)
                tools.append(tool)
                if len(tools) == per_server:
                    break
        dealt.append(tools)
    return dealt


def build_server(name: str, tools: list[types.Tool], ttl_ms: int) -> Server[Any]:
    """One simulated server: lists its tools, answers every call at once."""
    listing = types.ListToolsResult(tools=tools)
    known = {tool.name for tool in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in known:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"unknown tool {params.name}")], is_error=True
            )
        size = len(json.dumps(params.arguments or {}))
        text = f"{name}/{params.name}: ok ({size} bytes of arguments)"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    hints: dict[CacheableMethod, CacheHint] = {"tools/list": CacheHint(ttl_ms=ttl_ms, scope="public")}
    schemas = {tool.name: tool.input_schema for tool in tools}
    server: Server[Any] = Server(
        name,
        version="1.0.0",
        cache_hints=hints,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Without it, the SDK's 2026-07-28 HTTP entry runs the whole tools/list handler on every
        # tools/call with arguments, to check Mcp-Param-* headers against the tool's schema.
        get_tool_input_schema=schemas.get,
    )
    # The SDK's default OpenTelemetry middleware is a no-op without an exporter; a fleet has no use for it.
    server.middleware.clear()
    return server


class FleetApp:
    """ASGI router: ``/sim-NNNN/mcp`` → that server's session manager (404 for anything else)."""

    def __init__(self, managers: dict[str, StreamableHTTPSessionManager]) -> None:
        self._managers = managers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            # The managers' lifespans are entered by serve() around uvicorn, not per ASGI lifespan.
            while (message := await receive())["type"] != "lifespan.shutdown":
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        manager = self._managers.get(scope.get("path", "")) if scope["type"] == "http" else None
        if manager is None:
            await send(
                {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]}
            )
            await send({"type": "http.response.body", "body": b"no such MCP server\n"})
            return
        await manager.handle_request(scope, receive, send)


def rss_mb() -> float:
    """This process's resident set size in MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


async def serve(count: int, per_server: int, port: int, ttl_ms: int, started: float) -> None:
    catalogue = load_catalogue()
    dealt = deal(catalogue, count, per_server)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
    )
    managers: dict[str, StreamableHTTPSessionManager] = {}
    for index, tools in enumerate(dealt):
        server = build_server(server_name(index), tools, ttl_ms)
        # No idle reaping during a benchmark; a pool keeps its sessions open anyway.
        managers[endpoint_path(index)] = StreamableHTTPSessionManager(
            app=server, security_settings=security, session_idle_timeout=None
        )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by every accepted connection. Without it a 2026-07-28 JSON reply (headers, then
    # the body in a second write) waits for the client's delayed ACK: ~40 ms per request.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    chosen = sock.getsockname()[1]
    config = uvicorn.Config(
        FleetApp(managers), log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=60
    )
    async with AsyncExitStack() as stack:
        for manager in managers.values():
            await stack.enter_async_context(manager.run())
        sys.stdout.write(f"listening http://127.0.0.1:{chosen}\n")
        ready = {
            "servers": count,
            "tools": sum(len(tools) for tools in dealt),
            "catalogue_tools": len(catalogue),
            "start_seconds": round(time.monotonic() - started, 3),
            "rss_mb": rss_mb(),
        }
        sys.stdout.write(json.dumps({"ready": ready}) + "\n")
        sys.stdout.flush()
        await uvicorn.Server(config).serve(sockets=[sock])


def fleet_config(
    base_url: str, count: int, *, shards: int = 1, defer: bool = True, call_timeout: float = 30.0
) -> dict[str, Any]:
    """A toolscout config whose ``servers`` are the fleet's ``count`` endpoints at ``base_url``."""
    base = base_url.rstrip("/")
    servers = {
        server_name(i): {
            "url": f"{base}{endpoint_path(i)}",
            "transport": "streamable-http",
            "defer_loading": defer,
            "call_timeout": call_timeout,
        }
        for i in range(count)
    }
    return {
        "servers": servers,
        "tool_discovery": {"enabled": defer, "defer_all": defer},
        "toolscout": {"pool": {"shards": {"count": shards}}},
    }


def main(argv: list[str] | None = None) -> None:
    started = time.monotonic()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve_p = sub.add_parser("serve", help="serve the fleet on 127.0.0.1")
    serve_p.add_argument("--servers", type=int, default=1000)
    serve_p.add_argument("--tools", type=int, default=50, help="tools per server")
    serve_p.add_argument("--port", type=int, default=0, help="0 = any free port (printed)")
    serve_p.add_argument("--ttl-ms", type=int, default=300_000, help="ttlMs on 2026-07-28 tools/list results")
    config_p = sub.add_parser("config", help="write a toolscout config pointing at a running fleet")
    config_p.add_argument("--url", required=True, help="the fleet's base URL, e.g. http://127.0.0.1:8765")
    config_p.add_argument("--servers", type=int, default=1000)
    config_p.add_argument("--shards", type=int, default=1, help="toolscout.pool.shards.count")
    config_p.add_argument("--no-defer", action="store_true", help="load every tool instead of deferring all")
    config_p.add_argument("--out", type=Path, help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        anyio.run(serve, args.servers, args.tools, args.port, args.ttl_ms, started)
        return
    text = json.dumps(
        fleet_config(args.url, args.servers, shards=args.shards, defer=not args.no_defer), indent=1
    )
    if args.out is None:
        sys.stdout.write(text + "\n")
    else:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
