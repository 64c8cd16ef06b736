"""The console mounted in a real gateway (fake pool, discovery and orchestrator over gRPC): where it
is served, the front's Host and Origin rules, and a gateway that stops with a live page open."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2

from mcp_gateway_svc.server import build_server
from tests.support.fake_services import fake_stack
from toolscout_kit.config import parse_config

WITHIN = 20.0


async def _gateway(target: str, **gateway: Any) -> Any:
    config = parse_config({"toolscout": {"gateway": gateway}})
    return await build_server(
        config,
        listen=gateway.get("listen", "127.0.0.1:0"),
        metrics_port=-1,
        discovery_target=target,
        pool_target=target,
        orchestrator_target=target,
    )


async def test_a_gateway_stops_promptly_with_a_live_servers_page_open() -> None:
    async with fake_stack() as stack:
        gateway = await _gateway(stack.target)
        base = f"http://{gateway.host}:{gateway.port}"
        assert gateway.console_url == f"{base}/console"
        async with httpx2.AsyncClient(timeout=WITHIN) as http:
            page = await http.get(f"{base}/console", follow_redirects=True)
            assert page.status_code == 200
            assert "<h1>Servers</h1>" in page.text
            assert "default-src 'self'" in page.headers["content-security-policy"]
            async with http.stream("GET", f"{base}/console/servers/events") as events:
                assert events.headers["content-type"].startswith("text/event-stream")
                lines = events.aiter_lines()
                async with asyncio.timeout(WITHIN):
                    while (await anext(lines)) != "event: servers":
                        pass
                    # The console ends its streams when the gateway stops: the stop and the
                    # stream's end come within WITHIN, long before the grace would run out.
                    await gateway.stop(grace=3 * WITHIN)
                    async for _ in lines:
                        pass


async def test_the_front_refuses_console_requests_from_another_origin_or_host() -> None:
    async with fake_stack() as stack:
        gateway = await _gateway(stack.target)
        base = f"http://{gateway.host}:{gateway.port}"
        try:
            async with httpx2.AsyncClient(timeout=WITHIN) as http:
                elsewhere = await http.post(
                    f"{base}/console/chat/reset", headers={"origin": "http://evil.example"}
                )
                assert elsewhere.status_code == 403
                rebound = await http.get(f"{base}/console/servers", headers={"host": "evil.example"})
                assert rebound.status_code == 421
        finally:
            await gateway.stop(grace=1)


async def test_the_console_is_not_served_when_off() -> None:
    async with fake_stack() as stack:
        gateway = await _gateway(stack.target, console="off")
        base = f"http://{gateway.host}:{gateway.port}"
        try:
            assert gateway.console_url is None
            async with httpx2.AsyncClient(timeout=WITHIN) as http:
                assert (await http.get(f"{base}/console/servers")).status_code == 404
        finally:
            await gateway.stop(grace=1)


async def test_each_console_page_marks_itself_in_the_navigation() -> None:
    async with fake_stack() as stack:
        gateway = await _gateway(stack.target)
        base = f"http://{gateway.host}:{gateway.port}"
        try:
            async with httpx2.AsyncClient(timeout=WITHIN) as http:
                for name in ("servers", "catalog", "search", "tokens"):
                    page = await http.get(f"{base}/console/{name}")
                    assert page.status_code == 200
                    assert f'<body data-page="{name}">' in page.text
                    current = f'<a href="/console/{name}" aria-current="page">'
                    assert page.text.count('aria-current="page"') == 1
                    assert current in page.text
        finally:
            await gateway.stop(grace=1)
