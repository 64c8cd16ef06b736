"""The server's tools/list cache hint (MCP 2026-07-28 ``ttlMs``) and a listing that does not validate."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.session import INVALID_LISTING, Connection
from tests.unit.mcp_pool_svc.test_pool_supervisor import FakeConnection, FakeServer, fake_connector
from toolscout_kit.config import parse_config


class _Pages:
    """A session whose tools/list answers the given pages (a ValidationError page raises)."""

    def __init__(self, pages: list[mcp_types.ListToolsResult | Exception]) -> None:
        self._pages = pages

    async def list_tools(self, *, params: Any = None) -> mcp_types.ListToolsResult:
        page = self._pages.pop(0)
        if isinstance(page, Exception):
            raise page
        return page


def _page(names: list[str], cursor: str | None = None, **hint: Any) -> mcp_types.ListToolsResult:
    tools = [mcp_types.Tool(name=n, input_schema={"type": "object"}) for n in names]
    return mcp_types.ListToolsResult(tools=tools, next_cursor=cursor, **hint)


def _connection(pages: list[mcp_types.ListToolsResult | Exception]) -> Connection:
    return Connection(
        session=_Pages(pages), server_info="", closed=anyio.Event(), protocol_version="2026-07-28"
    )  # type: ignore[arg-type]


async def test_the_smallest_hint_over_the_pages_is_kept_in_seconds() -> None:
    conn = _connection([_page(["a"], "next", ttl_ms=9000), _page(["b"], ttl_ms=1500)])
    tools = await conn.list_tools()
    assert [t.name for t in tools] == ["a", "b"]
    assert conn.tools_ttl == 1.5


async def test_no_hint_or_a_zero_hint_means_none() -> None:
    unset = _connection([_page(["a"])])
    await unset.list_tools()
    zero = _connection([_page(["a"], ttl_ms=0)])
    await zero.list_tools()
    assert unset.tools_ttl is None
    assert zero.tools_ttl is None


async def test_a_listing_that_does_not_validate_is_an_mcp_error_naming_the_field() -> None:
    class Needs(BaseModel):
        ttlMs: int

    with pytest.raises(ValidationError) as invalid:
        Needs.model_validate({})
    conn = _connection([invalid.value])
    with pytest.raises(MCPError) as refused:
        await conn.list_tools()
    assert refused.value.code == INVALID_LISTING
    assert "ttlMs" in refused.value.message
    assert "2026-07-28" in refused.value.message


class _HintedConnection(FakeConnection):
    def __init__(self, server: FakeServer, hint: float | None) -> None:
        super().__init__(server)
        self.hint = hint

    async def list_tools(self) -> Any:
        tools = await super().list_tools()
        self.tools_ttl = self.hint
        return tools


@pytest.mark.parametrize(("hint", "expected"), [(0.2, 1.0), (90.0, 90.0), (99_999.0, 3600.0), (None, 30.0)])
async def test_the_hint_replaces_the_configured_ttl_within_the_floor_and_the_cap(
    hint: float | None, expected: float
) -> None:
    servers = {"s": FakeServer()}
    config = parse_config(
        {"servers": {"s": {"command": "unused"}}, "toolscout": {"pool": {"tool_cache_ttl": 30}}}
    )
    connector = fake_connector(servers, lambda server: _HintedConnection(server, hint))
    pool = McpPool(config, connector=connector)
    await pool.start(wait=5)
    try:
        assert pool.server_status("s").tool_cache_ttl_seconds == expected
    finally:
        await pool.stop()
