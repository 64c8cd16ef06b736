"""Issue 29's plain pieces of the gateway: a request's body peeked for a progress token and replayed
unchanged; the host's progress token not passed on; tool definitions kept but for the name."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.types import Message
from toolscout.client import Tool

from mcp_gateway_svc.calls import call_meta
from mcp_gateway_svc.front import _peek_for_progress
from mcp_gateway_svc.tool_lists import mcp_tool


def _receiver(messages: list[Message]) -> Any:
    pending = list(messages)

    async def receive() -> Message:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    return receive


def _chunks(body: bytes, size: int) -> list[Message]:
    parts = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    return [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]


@pytest.mark.parametrize("size", [1000, 7])
async def test_a_body_with_a_progress_token_is_told_apart_and_replayed_unchanged(size: int) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":3}}}'
    receive, asks = await _peek_for_progress(_receiver(_chunks(body, size)), 1 << 20)
    replayed = b""
    while True:
        message = await receive()
        replayed += message.get("body", b"")
        if not message.get("more_body"):
            break
    assert asks
    assert replayed == body
    assert (await receive())["type"] == "http.disconnect"


async def test_a_body_without_a_token_or_over_the_limit_is_not_peeked_further() -> None:
    plain = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}'
    _, asks = await _peek_for_progress(_receiver(_chunks(plain, 10)), 1 << 20)
    assert not asks
    big = b'{"progressToken":1,"pad":"' + b"x" * 100 + b'"}'
    receive, asks = await _peek_for_progress(_receiver(_chunks(big, 10)), 20)
    assert not asks  # past the limit: left to the SDK, which refuses it
    first = await receive()
    assert first["body"] == big[:10]


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
