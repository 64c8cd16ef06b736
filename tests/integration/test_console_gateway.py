"""The console mounted in a real gateway (fake pool, discovery and orchestrator over gRPC): where it
is served, the front's Host and Origin rules, and a gateway that stops with a live page open."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import structlog

from mcp_gateway_svc.console.chat import ENDED_AT_STOP
from mcp_gateway_svc.server import build_server
from tests.support.fake_services import FakeState, fake_stack
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


async def _chat_events(http: httpx2.AsyncClient, base: str) -> AsyncIterator[dict[str, Any]]:
    """The events of one console chat turn, as the page reads them."""
    page = await http.get(f"{base}/console/chat")
    found = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
    assert found is not None, page.text
    body = {"message": "hello", "model": "gpt", "toolset": ""}
    headers = {"x-csrf-token": found.group(1), "content-type": "application/json"}
    async with http.stream(
        "POST", f"{base}/console/chat/send", content=json.dumps(body), headers=headers
    ) as sent:
        assert sent.status_code == 200
        async for line in sent.aiter_lines():
            if line.startswith("data: "):
                yield json.loads(line.removeprefix("data: "))


async def test_a_chat_still_running_when_the_grace_ends_is_told_it_was_cut_short_and_cancelled() -> None:
    state = FakeState(chat_gate=asyncio.Event())  # never set: the chat never finishes
    async with fake_stack(state) as stack:
        gateway = await _gateway(stack.target)
        base = f"http://{gateway.host}:{gateway.port}"
        seen: list[dict[str, Any]] = []
        async with httpx2.AsyncClient(timeout=WITHIN) as http, asyncio.timeout(WITHIN):
            async for event in _chat_events(http, base):
                seen.append(event)
                if event["type"] == "usage":  # the last event before the chat's final answer
                    with structlog.testing.capture_logs() as logs:
                        await gateway.stop(grace=0.5)
        # The orchestrator's chat was cancelled, and the page was told why the turn ended.
        assert state.cancelled.is_set()
    assert [e["type"] for e in seen][-2:] == ["usage", "error"]
    assert seen[-1]["message"] == ENDED_AT_STOP
    ended = [entry for entry in logs if entry["event"].startswith("the shutdown grace is over")]
    assert [(e["console_chats"], e["tool_calls"], e["other_requests"]) for e in ended] == [(1, 0, 0)]


async def test_a_chat_that_finishes_within_the_grace_gets_its_answer() -> None:
    state = FakeState(chat_gate=asyncio.Event())
    async with fake_stack(state) as stack:
        gateway = await _gateway(stack.target)
        base = f"http://{gateway.host}:{gateway.port}"
        seen: list[dict[str, Any]] = []
        stopping: asyncio.Future[None] | None = None
        async with httpx2.AsyncClient(timeout=WITHIN) as http, asyncio.timeout(WITHIN):
            with structlog.testing.capture_logs() as logs:
                async for event in _chat_events(http, base):
                    seen.append(event)
                    if event["type"] == "usage":
                        stopping = asyncio.ensure_future(gateway.stop(grace=3 * WITHIN))
                        await asyncio.sleep(0.2)  # the stop has begun; the chat then finishes
                        state.chat_gate.set()
                assert stopping is not None
                await stopping
    assert seen[-1]["type"] == "finished"
    assert seen[-1]["answer"] == "echo: hello"
    assert not [entry for entry in logs if entry["event"].startswith("the shutdown grace is over")]
