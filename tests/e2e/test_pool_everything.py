"""@modelcontextprotocol/server-everything (npm, pinned) over stdio, SSE and streamable HTTP."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import pytest_asyncio

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import everything_bin, live_descendants, running_everything, wait_until_gone
from toolscout_kit.config import parse_config

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]
TRANSPORTS = ["stdio", "sse", "http"]


@pytest.fixture(scope="module")
def everything_servers() -> Iterator[dict[str, Any]]:
    """A config entry per transport; the HTTP ones run as separate processes on free ports."""
    exe = everything_bin()
    with ExitStack() as stack:
        sse = stack.enter_context(running_everything("sse"))
        http = stack.enter_context(running_everything("streamableHttp"))
        yield {
            "stdio": {"command": str(exe), "args": ["stdio"]},
            "sse": {"url": sse.url, "transport": "sse"},
            # casual-mcp's "http" means streamable HTTP.
            "http": {"url": http.url, "transport": "http"},
        }


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool(everything_servers: dict[str, Any]) -> AsyncIterator[McpPool]:
    before = live_descendants()
    pool = McpPool(parse_config({"servers": everything_servers}))
    await pool.start(wait=60)
    yield pool
    await pool.stop()
    # The HTTP servers are the fixture's; only the stdio one belongs to the pool.
    leftovers = live_descendants() - before
    assert await wait_until_gone(leftovers) == set()


async def test_every_transport_connects_and_reports_itself(pool: McpPool) -> None:
    statuses = {s.name: s for s in pool.list_servers()}
    assert {n: s.state for n, s in statuses.items()} == dict.fromkeys(TRANSPORTS, ServerState.READY)
    assert {n: s.transport for n, s in statuses.items()} == {
        "stdio": "stdio",
        "sse": "sse",
        "http": "streamable-http",
    }
    assert all("everything" in s.server_info for s in statuses.values())


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_the_tool_list_is_the_same_over_every_transport(pool: McpPool, server: str) -> None:
    tools = {t.name: t for t in pool.list_tools([server]).tools}
    assert {"echo", "get-sum", "get-tiny-image", "get-structured-content"} <= set(tools)
    assert tools["echo"].llm_name == f"{server}__echo"
    structured = tools["get-structured-content"]
    assert json.loads(structured.output_schema_json)["properties"]["temperature"]["type"] == "number"


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_calls_return_text_over_every_transport(pool: McpPool, server: str) -> None:
    result = await pool.call_tool(server=server, tool="echo", arguments={"message": f"via {server}"})
    assert result.content[0].text == f"Echo: via {server}"
    total = await pool.call_tool(server=server, tool="get-sum", arguments={"a": 2, "b": 40})
    assert "42" in total.content[0].text


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_images_arrive_decoded_over_every_transport(pool: McpPool, server: str) -> None:
    result = await pool.call_tool(server=server, tool="get-tiny-image")
    images = [c for c in result.content if c.type == "image"]
    assert len(images) == 1
    assert images[0].mime_type == "image/png"
    assert images[0].data.startswith(b"\x89PNG")
    assert base64.b64encode(images[0].data)


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_structured_content_arrives_over_every_transport(pool: McpPool, server: str) -> None:
    result = await pool.call_tool(
        server=server, tool="get-structured-content", arguments={"location": "Chicago"}
    )
    structured = json.loads(result.structured_content_json)
    assert set(structured) >= {"temperature", "conditions", "humidity"}


async def test_resource_links_keep_their_uris(pool: McpPool) -> None:
    result = await pool.call_tool(server="stdio", tool="get-resource-links", arguments={"count": 2})
    links = [c for c in result.content if c.type == "resource_link"]
    assert len(links) == 2
    assert all(link.uri for link in links)


async def test_a_timeout_over_http_is_a_deadline_error_and_the_session_survives(pool: McpPool) -> None:
    from mcp_pool_svc.errors import ToolCallTimeoutError

    with pytest.raises(ToolCallTimeoutError):
        await pool.call_tool(
            server="http",
            tool="trigger-long-running-operation",
            arguments={"duration": 30, "steps": 3},
            timeout_seconds=0.5,
        )
    again = await pool.call_tool(server="http", tool="echo", arguments={"message": "still here"})
    assert again.content[0].text == "Echo: still here"
