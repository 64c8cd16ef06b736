"""The MCP gateway in front of a real pool and discovery, in-process on 127.0.0.1:0, for tests.

``gateway_stack`` starts pool → discovery → gateway (the orchestrator is not needed: MCP hosts run
their own loop). ``post`` sends raw JSON-RPC over HTTP (bad-input tests need bytes no SDK sends).
``RoundRobin`` is a small HTTP load balancer that sends each request to the next backend, as a
Kubernetes Service with several gateway pods may.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2
import uvicorn
from starlette.types import Receive, Scope, Send

from mcp_gateway_svc.server import RunningGateway, build_server
from tests.support.stack import Stack, running_stack
from toolscout_kit.config import ToolscoutConfig

if TYPE_CHECKING:
    from mcp_pool_svc.pool import McpPool

__all__ = ["MODERN", "GatewayStack", "RoundRobin", "gateway_stack", "post", "start_gateway"]

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
_ACCEPT = "application/json, text/event-stream"


@dataclass
class GatewayStack:
    stack: Stack
    gateway: RunningGateway

    @property
    def url(self) -> str:
        return self.gateway.url


async def start_gateway(config: ToolscoutConfig, stack: Stack, **overrides: Any) -> RunningGateway:
    options: dict[str, Any] = {
        "listen": "127.0.0.1:0",
        "metrics_port": 0,
        "discovery_target": stack.discovery.address,
        "pool_target": stack.pool.address,
    }
    return await build_server(config, **{**options, **overrides})


@asynccontextmanager
async def gateway_stack(
    config: ToolscoutConfig, *, pool_object: McpPool | None = None, **overrides: Any
) -> AsyncIterator[GatewayStack]:
    """Pool, discovery and a gateway (``overrides``: its start's); ``pool_object``: the pool hosted."""
    async with running_stack(config, orchestrator=False, pool_object=pool_object) as stack:
        gateway = await start_gateway(config, stack, **overrides)
        try:
            yield GatewayStack(stack, gateway)
        finally:
            await gateway.stop(0.5)


def _modern_meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
    }


async def post(
    url: str,
    body: bytes | Mapping[str, Any] | Sequence[Any],
    *,
    headers: Mapping[str, str] | None = None,
    modern: bool = False,
) -> httpx2.Response:
    """One POST of ``body`` (bytes as they are; anything else as JSON). ``modern`` sends the
    2026-07-28 header and, for a request object without ``_meta``, the revision's envelope."""
    sent: dict[str, str] = {"accept": _ACCEPT, "content-type": "application/json"}
    if modern:
        sent["mcp-protocol-version"] = MODERN
        if isinstance(body, dict) and "method" in body:
            sent["mcp-method"] = str(body["method"])
            name = (body.get("params") or {}).get("name")
            if body["method"] == "tools/call" and isinstance(name, str):
                sent["mcp-name"] = name
        if isinstance(body, dict) and "method" in body and "id" in body:
            params = dict(body.get("params") or {})
            params.setdefault("_meta", _modern_meta())
            body = {**body, "params": params}
    sent.update(headers or {})
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx2.AsyncClient(timeout=30) as client:
        return await client.post(url, content=content, headers=sent)


class RoundRobin:
    """An HTTP load balancer over ``backends`` (``host:port``): request N goes to backend N mod k,
    streaming the answer back. Counts the requests each backend got."""

    def __init__(self, backends: Sequence[str]) -> None:
        self.backends = list(backends)
        self.hits = [0] * len(backends)
        self._next = 0
        self._client = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None))
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        index = self._next % len(self.backends)
        self._next += 1
        self.hits[index] += 1
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        url = f"http://{self.backends[index]}{scope['path']}"
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in (b"host", b"connection")]
        request = self._client.build_request(scope["method"], url, headers=headers, content=b"".join(chunks))
        response = await self._client.send(request, stream=True)
        try:
            raw = [
                (k, v)
                for k, v in response.headers.raw
                if k.lower() not in (b"connection", b"transfer-encoding")
            ]
            await send({"type": "http.response.start", "status": response.status_code, "headers": raw})
            with contextlib.suppress(httpx2.HTTPError):
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    async def __aenter__(self) -> RoundRobin:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self, lifespan="off", log_level="warning"))
        self._server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        assert self._task is not None
        self._server.should_exit = True
        self._server.force_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self._task, 10)
        await self._client.aclose()
