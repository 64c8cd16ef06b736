"""The pool's lean call path (``mcp_pool_svc/lean.py``, ``mcp_pool_svc/http11.py``) against real servers.

A plain ``tools/call`` to a 2026-07-28 streamable-HTTP server is one direct POST; everything else
takes the SDK's own path. One fixture server (``tests/fixtures/lean/server.py``) runs over HTTP
and over stdio: a result must come back the same both ways (every content type, structured
content, ``_meta``, tool errors, JSON-RPC errors with their code), and the ways an HTTP server may
answer a POST (JSON, SSE with other messages first, a request of the server mid-call, a stream
resumed with ``Last-Event-ID``, an error status, a result without ``resultType``) must all read
as the SDK reads them. A cancelled call closes its POST, which the server sees.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from toolscout.client import CallRequest, CallToolResult

from mcp_pool_svc.errors import ToolCallTimeoutError
from mcp_pool_svc.lean import LEAN_IDS_FROM
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.relay import QueuedRelay, host_capabilities
from tests.support.mcp_servers import _stop, wait_for_lines
from tests.support.protocol_servers import _read_announcement
from toolscout_kit.config import parse_config

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "lean" / "server.py"
WAIT = 30.0


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lean") / "record.txt"
    path.touch()
    return path


@pytest.fixture(scope="module")
def http_url(record: Path) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(record), "http"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield _read_announcement(process, WAIT)
    finally:
        _stop(process)
        if process.stdout is not None:
            process.stdout.close()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool(
    http_url: str, record: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[McpPool]:
    servers = {
        "http": {"url": http_url, "transport": "streamable-http"},
        "moved": {"url": http_url.replace("/mcp", "/moved"), "transport": "streamable-http"},
        "stdio": {"command": sys.executable, "args": [str(SERVER), str(record), "stdio"]},
    }
    config = parse_config({"servers": servers}, base_dir=tmp_path_factory.mktemp("lean-config"))
    pool = McpPool(config)
    await pool.start(wait=WAIT)
    yield pool
    await pool.stop()


async def _call(pool: McpPool, server: str, tool: str, **kwargs: object) -> CallToolResult:
    request = CallRequest(server=server, tool=tool, arguments_json=json.dumps(kwargs))
    return await pool.call(request, deadline=WAIT)


def _same(result: CallToolResult) -> tuple[object, ...]:
    """What a caller gets of a result, without where it came from and how long it took."""
    return (
        result.content,
        result.structured_content_json,
        result.meta_json,
        result.is_error,
        result.jsonrpc_error_code,
        result.truncated,
    )


async def test_a_plain_call_over_http_is_one_direct_post_and_the_rest_take_the_sdk_path(
    pool: McpPool,
) -> None:
    lean = await _call(pool, "http", "request_id")
    assert int(lean.content[0].text) >= LEAN_IDS_FROM
    over_stdio = await _call(pool, "stdio", "request_id")
    assert int(over_stdio.content[0].text) < LEAN_IDS_FROM
    # A call whose host takes the server's requests (a relay) goes through the SDK's session.
    relay = QueuedRelay(host_capabilities(""), "2026-07-28")
    request = CallRequest(server="http", tool="request_id", arguments_json="{}")
    relayed = await pool.call(request, deadline=WAIT, relay=relay)
    assert int(relayed.content[0].text) < LEAN_IDS_FROM


async def test_a_2026_listing_is_one_direct_post_and_lists_every_tool(pool: McpPool, record: Path) -> None:
    """The pool's ``tools/list`` to a 2026-07-28 server takes the lean path too (the fixture notes
    each listing's JSON-RPC id beside its record); the tools it lists are the stdio side's."""
    ids = [int(line) for line in record.with_name(record.name + ".lists").read_text().split()]
    assert ids
    assert all(i >= LEAN_IDS_FROM for i in ids)
    over_http = sorted(t.name for t in pool.catalog.snapshot(servers=["http"]).tools)
    over_stdio = sorted(t.name for t in pool.catalog.snapshot(servers=["stdio"]).tools)
    assert over_http == over_stdio
    assert len(over_http) > 5


@pytest.mark.parametrize("tool", ["rich", "fail", "refuse"])
async def test_results_come_back_as_the_sdk_path_gives_them(pool: McpPool, tool: str) -> None:
    over_http = await _call(pool, "http", tool)
    over_stdio = await _call(pool, "stdio", tool)
    assert _same(over_http) == _same(over_stdio)


async def test_every_content_type_structured_content_and_meta_pass(pool: McpPool) -> None:
    result = await _call(pool, "http", "rich")
    assert [block.type for block in result.content] == [
        "text",
        "image",
        "audio",
        "resource_link",
        "resource",
        "resource",
    ]
    assert result.content[0].text == "hello"
    assert result.content[1].data.startswith(b"\x89PNG")
    assert json.loads(result.content[0].raw_json)["annotations"] == {"audience": ["user"], "priority": 0.5}
    assert result.content[4].text == "b"
    assert result.content[5].data.startswith(b"\x89PNG")
    assert json.loads(result.structured_content_json) == {"n": 3}
    assert json.loads(result.meta_json)["example.com/trace"] == "abc"
    assert not result.is_error


async def test_a_tool_error_and_a_json_rpc_error_keep_their_kind_and_code(pool: McpPool) -> None:
    failed = await _call(pool, "http", "fail")
    assert failed.is_error
    assert failed.content[0].text == "it failed"
    assert failed.jsonrpc_error_code == 0
    refused = await _call(pool, "http", "refuse")
    assert refused.is_error
    assert refused.jsonrpc_error_code == -32042
    assert "always refuses" in refused.content[0].text
    at_400 = await _call(pool, "http", "refuse_400")
    assert at_400.is_error
    assert at_400.jsonrpc_error_code == -32602
    assert "bad arguments" in at_400.content[0].text


async def test_a_result_without_result_type_is_read_as_complete(pool: McpPool) -> None:
    result = await _call(pool, "http", "no_result_type")
    assert not result.is_error
    assert result.content[0].text == "no type"


async def test_an_sse_answer_with_a_log_message_first_gives_the_result(pool: McpPool) -> None:
    result = await _call(pool, "http", "sse_log")
    assert not result.is_error
    assert result.content[0].text == "logged"


async def test_a_request_of_the_server_mid_call_is_answered_by_the_session(pool: McpPool) -> None:
    result = await _call(pool, "http", "sse_ping")
    # The server's ping reached the SDK's session, which POSTed its answer back (2026-07-28 has no
    # ping: method not found), the same answer as on the SDK's own path (a relayed call).
    answer = json.loads(result.content[0].text)
    assert answer["id"] == "ping-1"
    assert answer["error"]["code"] == -32601
    relay = QueuedRelay(host_capabilities(""), "2026-07-28")
    request = CallRequest(server="http", tool="sse_ping", arguments_json="{}")
    assert json.loads((await pool.call(request, deadline=WAIT, relay=relay)).content[0].text) == answer


async def test_a_stream_that_ends_early_is_resumed_with_its_last_event_id(pool: McpPool) -> None:
    result = await _call(pool, "http", "sse_resume")
    assert not result.is_error
    assert result.content[0].text == "resumed"


async def test_a_cancelled_call_closes_its_post_and_the_connection_serves_the_next(
    pool: McpPool, record: Path
) -> None:
    request = CallRequest(server="http", tool="hang", arguments_json='{"token": "t1"}', timeout_seconds=1.0)
    with pytest.raises(ToolCallTimeoutError):
        await pool.call(request, deadline=WAIT)
    lines = await wait_for_lines(record, 2, within=WAIT)
    assert lines == ["started t1", "closed t1"]
    result = await _call(pool, "http", "request_id")
    assert int(result.content[0].text) >= LEAN_IDS_FROM


async def test_a_post_redirected_with_307_is_sent_on_as_the_sdk_sends_it(pool: McpPool) -> None:
    moved = await _call(pool, "moved", "rich")
    assert _same(moved) == _same(await _call(pool, "http", "rich"))
    assert int((await _call(pool, "moved", "request_id")).content[0].text) >= LEAN_IDS_FROM
