"""What the gateway passes through unchanged: tool definitions (but for the name), results, JSON-RPC
errors; and a tool that runs only as a task.

Real pool and discovery, the gateway in front (``all`` mode, ``namespace_tools: false``), our own
SDK server ``tests/fixtures/fidelity/server.py`` over stdio; the ``mcp`` SDK's client as the host.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support.gateway import MODERN, GatewayStack, gateway_stack
from tests.support.mcp_servers import REPO_ROOT
from toolscout_kit.config import parse_config

SERVER = REPO_ROOT / "tests" / "fixtures" / "fidelity" / "server.py"
sys.path.insert(0, str(SERVER.parent))
import server as fidelity  # noqa: E402  # the fixture's own definitions, to compare with

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[GatewayStack]:
    config = parse_config(
        {
            "namespace_tools": False,
            "servers": {
                "fid": {"command": sys.executable, "args": [str(SERVER), str(tmp_path / "record.txt")]}
            },
            "tool_sets": {"fid_meta": {"servers": {"fid": True}}},
            "toolscout": {"gateway": {"mode": "all", "modes": {"fid_meta": "meta"}}},
        },
        base_dir=tmp_path,
    )
    async with gateway_stack(config) as stack:
        yield stack


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_tool_definitions_reach_the_host_as_the_server_sent_them(gw: GatewayStack, mode: str) -> None:
    async with Client(gw.url, mode=mode) as host:  # type: ignore[arg-type]
        listed = {t.name: _dump(t) for t in (await host.list_tools()).tools}
    for tool in fidelity.TOOLS:
        expected = _dump(tool)
        if mode == MODERN:
            # 2026-07-28 moved tasks to an extension: its tools have no `execution`.
            expected.pop("execution", None)
        got = dict(listed[tool.name])
        # What the gateway adds for hosts (issue 32), and nothing else: all mode's description is
        # the server's own, then search-ready terms from the catalog; _meta gains the result-size hint.
        description = got.pop("description", "")
        assert description.startswith(expected.pop("description", ""))
        meta = got.pop("_meta", {})
        assert meta.pop("anthropic/maxResultSizeChars") == 500_000
        assert meta == expected.pop("_meta", {})
        assert got == expected


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_a_result_reaches_the_host_unchanged(gw: GatewayStack, mode: str) -> None:
    async with Client(gw.url, mode=mode) as host:  # type: ignore[arg-type]
        result = _dump(await host.call_tool("rich", {}))
    expected = _dump(types.CallToolResult.model_validate(fidelity.RICH_RESULT))
    assert result["content"] == expected["content"]
    assert result["structuredContent"] == expected["structuredContent"]
    assert result.get("isError", False) is False
    # The server's own _meta keys arrive (the revision may add its own beside them).
    assert result["_meta"].items() >= expected["_meta"].items()


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_a_json_rpc_error_of_the_server_stays_a_json_rpc_error_with_its_code(
    gw: GatewayStack, mode: str
) -> None:
    async with Client(gw.url, mode=mode) as host:  # type: ignore[arg-type]
        with pytest.raises(MCPError) as refused:
            await host.call_tool("refuse", {})
        # The session keeps working.
        assert not (await host.call_tool("rich", {})).is_error
    assert refused.value.code == fidelity.REFUSAL_CODE
    assert "always refuses" in refused.value.message


async def test_a_task_only_tool_is_listed_with_it_and_a_call_is_a_clear_error(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="legacy") as host:
        listed = {t.name: t for t in (await host.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await host.call_tool("task_only", {})
    execution = listed["task_only"].execution
    assert execution is not None
    assert execution.task_support == "required"
    assert refused.value.code == types.METHOD_NOT_FOUND
    assert "runs only as a task" in refused.value.message


@pytest.mark.parametrize("endpoint", ["", "fid_meta"], ids=["all", "meta"])
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_progress_of_a_call_reaches_the_host_that_asked_for_it(
    gw: GatewayStack, mode: str, endpoint: str
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    url = gw.gateway.toolset_url(endpoint) if endpoint else gw.url
    async with Client(url, mode=mode) as host:  # type: ignore[arg-type]
        result = await host.call_tool("steps", {}, progress_callback=on_progress)
        # A host that asked for none gets none (and the call takes the unary path).
        plain = await host.call_tool("steps", {})
    assert [b.text for b in result.content if isinstance(b, types.TextContent)] == ["done"]
    assert [b.text for b in plain.content if isinstance(b, types.TextContent)] == ["done"]
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
