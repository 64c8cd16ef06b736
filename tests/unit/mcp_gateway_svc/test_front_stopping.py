"""The gateway's front once its stop's grace is over (``end_requests``): every MCP and console
request is answered 503 "the gateway is stopping", the probes still answer, and the refusals are
counted (``toolscout_gateway_http_rejections_total{reason="stopping"}``)."""

from __future__ import annotations

import httpx2
from prometheus_client import CollectorRegistry
from starlette.types import Receive, Scope, Send
from toolscout.client import AsyncDiscoveryClient
from toolscout.client.types import GatewayMode

from mcp_gateway_svc.endpoints import Endpoints
from mcp_gateway_svc.front import GatewayFront, Guard, Tenants
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.peers import Replica
from mcp_gateway_svc.sessions import SessionRegistry


async def _page(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"a console page"})


async def test_once_the_grace_is_over_mcp_and_console_requests_are_refused_and_the_probes_answer() -> None:
    registry = CollectorRegistry()
    metrics = GatewayMetrics(registry)
    sessions = SessionRegistry(metrics, 60.0)
    # Never called: every request below is answered before an endpoint is looked up.
    async with AsyncDiscoveryClient.connect("127.0.0.1:9") as discovery:
        front = GatewayFront(
            endpoints=Endpoints(
                toolsets={},
                default_toolset="",
                default_mode=GatewayMode.META,
                discovery=discovery,
                sessions=sessions,
                metrics=metrics,
            ),
            managers={},
            sessions=sessions,
            tenants=Tenants({}),
            guard=Guard.from_settings("127.0.0.1:8080", [], None),
            replica=Replica(),
            forwarder=None,
            metrics=metrics,
            max_body_bytes=1 << 20,
            read_timeout=5.0,
            max_sessions=10,
            tenant_quota=10,
            ready=lambda: True,
            console=_page,
        )
        transport = httpx2.ASGITransport(app=front)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
            assert (await http.get("/console/servers")).text == "a console page"
            assert front.end_requests() == 0  # nothing was running
            console = await http.get("/console/servers")
            mcp = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            health = await http.get("/healthz")
    for refused in (console, mcp):
        assert refused.status_code == 503
        assert refused.json()["error"]["message"] == "the gateway is stopping"
    assert health.status_code == 200
    stopping = registry.get_sample_value("toolscout_gateway_http_rejections_total", {"reason": "stopping"})
    assert stopping == 2
