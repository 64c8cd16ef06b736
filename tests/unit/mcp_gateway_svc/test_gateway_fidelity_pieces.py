"""Issue 29's plain pieces of the gateway: a request's body peeked for a progress token and replayed
unchanged; the host's progress token not passed on; tool definitions kept but for the name."""

from __future__ import annotations

from typing import Any

import pytest
from toolscout.client import Tool

from mcp_gateway_svc.calls import call_meta
from mcp_gateway_svc.host_modes import opening_of
from mcp_gateway_svc.tool_lists import mcp_tool


@pytest.mark.parametrize(
    ("request_", "asks"),
    [
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "x", "_meta": {"progressToken": 3}},
            },
            True,
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "x", "_meta": {"progressToken": "t"}},
            },
            True,
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}, False),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "_meta": {"k": 1}}},
            False,
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "x", "arguments": {"progressToken": 1}},
            },
            False,
        ),
    ],
)
def test_a_request_that_asks_for_progress_is_told_apart(request_: dict[str, Any], asks: bool) -> None:
    assert opening_of(request_).asks_progress is asks


def test_the_hosts_progress_token_is_not_passed_on_to_the_server() -> None:
    passed, _ = call_meta({"progress_token": 1, "progressToken": 2, "trace": "t"})
    assert passed == {"trace": "t"}


def test_a_definition_that_does_not_validate_keeps_its_own_fields() -> None:
    tool = Tool(
        server="s",
        name="x",
        llm_name="x",
        input_schema_json='{"type":"object"}',
        extra_json='{"icons":"not a list","_meta":{"k":1}}',
    )
    listed = mcp_tool(tool).model_dump(by_alias=True, exclude_none=True)
    assert listed == {"name": "x", "inputSchema": {"type": "object"}}
