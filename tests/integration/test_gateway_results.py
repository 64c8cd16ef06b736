"""Large tool results through the MCP gateway, read by the pinned ``mcp`` SDK's own client.

A real pool runs npm server-everything (stdio) and our weather example; discovery and the gateway
are in front, with two tenants' tokens. A result over the host's budget arrives as a preview and a
``resource_link``; the host reads it with ``resources/read`` (a page at a time) or the
``read_result`` tool; another tenant, or another session of a session-keeping endpoint, is told
the result does not exist.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx2
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from toolscout import client as tc

from mcp_pool_svc.pool import McpPool
from tests.support.gateway import MODERN, GatewayStack, gateway_stack
from tests.support.mcp_servers import everything_bin, example_server_config
from toolscout_kit.config import parse_config
from toolscout_kit.tokens import count_tokens

pytestmark = pytest.mark.asyncio(loop_scope="module")

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
BUDGET = 2000
SMALL_HOST_BUDGET = 300
WAIT = 60.0
TOKENS = {"TEAM_A_TOKEN": "team-a-secret-0001", "TEAM_B_TOKEN": "team-b-secret-0002"}
PAGE = re.compile(r"next: read_result with offset (\d+)")


def _needle() -> str:
    lines = README.splitlines()
    for line in lines[len(lines) // 2 :]:
        if len(line) > 40 and README.count(line) == 1 and "`" not in line:
            return line[:60]
    raise AssertionError("no unique line in the README")


NEEDLE = _needle()


class _RecordingPool(McpPool):
    """The pool the stack hosts, keeping every call's request as the gateway sent it."""

    requests: ClassVar[list[tc.CallRequest]] = []

    async def call(self, request: tc.CallRequest, **options: Any) -> tc.CallToolResult:
        self.requests.append(request)
        return await super().call(request, **options)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayStack]:
    tmp = tmp_path_factory.mktemp("gateway-results")
    config = parse_config(
        {
            "servers": {
                "everything": {"command": str(everything_bin()), "args": ["stdio"]},
                "weather": example_server_config("weather", defer_loading=True),
            },
            "tool_discovery": {"enabled": True},
            "tool_sets": {"ev": {"servers": {"everything": True, "weather": True}}},
            "toolscout": {
                "gateway": {
                    "tokens": {"TEAM_A_TOKEN": ["*"], "TEAM_B_TOKEN": ["*"]},
                    "modes": {"ev": "progressive"},
                    "result_budget": BUDGET,
                    "result_budgets": {"small-host*": SMALL_HOST_BUDGET},
                },
                "results": {"preview_tokens": 200},
            },
        },
        base_dir=tmp,
        env=TOKENS,
    )
    # The gateway reads its tokens from the environment when it starts.
    with pytest.MonkeyPatch.context() as env:
        for name, value in TOKENS.items():
            env.setenv(name, value)
        async with gateway_stack(config, pool_object=_RecordingPool(config)) as running:
            yield running


def _client(url: str, team: str, *, mode: str = MODERN, name: str = "test-host") -> Any:
    """A Client for ``team`` (its own HTTP client carries the bearer token)."""
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKENS[team]}"}, timeout=WAIT)
    transport = streamable_http_client(url, http_client=http)
    return http, Client(transport, mode=mode, client_info=types.Implementation(name=name, version="1"))


def _preview_and_link(result: types.CallToolResult) -> tuple[str, types.ResourceLink]:
    assert not result.is_error
    (preview,) = (b for b in result.content if isinstance(b, types.TextContent))
    (link,) = (b for b in result.content if isinstance(b, types.ResourceLink))
    return preview.text, link


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_a_host_gets_a_preview_and_a_resource_link_it_reads_and_another_tenant_cannot(
    gw: GatewayStack, mode: str
) -> None:
    http_a, client_a = _client(gw.url, "TEAM_A_TOKEN", mode=mode)
    http_b, client_b = _client(gw.url, "TEAM_B_TOKEN", mode=mode)
    with anyio.fail_after(WAIT):
        async with http_a, http_b, client_a as a, client_b as b:
            names = [t.name for t in (await a.list_tools()).tools]
            preview, link = _preview_and_link(await a.call_tool("everything__echo", {"message": README}))
            handle = str(link.uri).removeprefix("toolscout://results/")
            first = await a.read_resource(str(link.uri))
            offset = PAGE.search(first.contents[0].text)  # type: ignore[union-attr]
            assert offset is not None
            second = await a.read_resource(f"{link.uri}?offset={offset.group(1)}")
            grep = await a.call_tool("read_result", {"handle": handle, "pattern": NEEDLE})
            with pytest.raises(MCPError) as stolen:
                await b.read_resource(str(link.uri))
            refused = await b.call_tool("read_result", {"handle": handle, "offset": 0})
    # meta mode lists read_result beside call_tool, for hosts that do not read resource links.
    assert names[-3:] == ["search_tools", "call_tool", "read_result"]
    assert handle in preview
    assert NEEDLE not in preview
    assert count_tokens(preview) <= BUDGET
    page_one, page_two = first.contents[0], second.contents[0]
    assert isinstance(page_one, types.TextResourceContents)
    assert isinstance(page_two, types.TextResourceContents)
    assert page_one.text.startswith("Echo: ")
    assert count_tokens(page_one.text) <= BUDGET
    assert f"characters {offset.group(1)}-" in page_two.text
    assert NEEDLE in _text(grep)
    assert not grep.is_error
    # Another principal: the handle does not exist for it, on either path.
    assert stolen.value.error.code == -32002
    assert refused.is_error
    assert f"no result handle '{handle}'" in _text(refused)
    assert README[1000:1100] not in _text(refused)


async def _everything_status(gw: GatewayStack) -> tc.ServerStatus:
    async with tc.AsyncPoolClient.connect(gw.stack.pool.address) as pool:
        (everything,) = [s for s in await pool.list_servers() if s.name == "everything"]
    return everything


async def test_a_result_within_the_budget_reaches_the_host_whole_and_is_counted_after_the_answer(
    gw: GatewayStack,
) -> None:
    message = "a short answer, well within the budget; " * 20
    before = await _everything_status(gw)
    http, client = _client(gw.url, "TEAM_A_TOKEN")
    with anyio.fail_after(WAIT):
        async with http, client as host:
            result = await host.call_tool("everything__echo", {"message": message})
    assert not result.is_error
    assert _text(result) == f"Echo: {message}"
    # The gateway does not wait for the tokens of a result that fits: the pool counts it after.
    (request,) = [r for r in _RecordingPool.requests if message in r.arguments_json]
    assert (request.result_budget_tokens, request.defer_token_counts) == (BUDGET, True)
    after = await _everything_status(gw)
    tokens = count_tokens(f"Echo: {message}")
    assert after.result_tokens_returned - before.result_tokens_returned == tokens
    assert after.result_tokens_delivered - before.result_tokens_delivered == tokens


async def test_a_host_matched_by_client_name_gets_its_own_budget(gw: GatewayStack) -> None:
    http, client = _client(gw.url, "TEAM_A_TOKEN", name="small-host-2")
    with anyio.fail_after(WAIT):
        async with http, client as host:
            preview, _link = _preview_and_link(await host.call_tool("everything__echo", {"message": README}))
    assert f"over the {SMALL_HOST_BUDGET}-token result budget" in preview
    assert count_tokens(preview) <= SMALL_HOST_BUDGET


async def test_on_a_session_endpoint_a_handle_is_bound_to_its_session(gw: GatewayStack) -> None:
    url = gw.gateway.toolset_url("ev")
    http_1, one = _client(url, "TEAM_A_TOKEN", mode="legacy")
    http_2, two = _client(url, "TEAM_A_TOKEN", mode="legacy")
    with anyio.fail_after(WAIT):
        async with http_1, http_2, one as first, two as second:
            _preview, link = _preview_and_link(await first.call_tool("everything__echo", {"message": README}))
            own = await first.read_resource(str(link.uri))
            with pytest.raises(MCPError) as other:
                await second.read_resource(str(link.uri))
            unknown = await first.call_tool("read_result", {"handle": "r0-made-up"})
    assert own.contents[0].text.startswith("Echo: ")  # type: ignore[union-attr]
    assert other.value.error.code == -32002
    assert unknown.is_error
    assert "no result handle 'r0-made-up'" in _text(unknown)
