"""A lone surrogate in what an HTTP server answers on the ``mcp`` SDK's own transports (a 2025-11-25
streamable-HTTP server's calls, any server's stream of notifications, an SSE server) reaches the
caller as U+FFFD.

The SDK's parser refuses a whole message for one such escape (``"\\ud800"``: valid JSON, not valid
Unicode; a JavaScript server writes one whenever it cuts a string inside a pair), so the answer it
carried was lost and the call waited for its timeout. The MCP server is
``tests/fixtures/relay/server.py`` at revision 2025-11-25, over streamable HTTP and over SSE: its
``surrogates`` tool's answer is written on the wire as ``a\\ud800b \\ud83d\\ude00``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import running_relay_http
from toolscout_kit.config import parse_config

WAIT = 30.0


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_lone_surrogate_in_an_answer_read_by_the_sdk_arrives_as_the_replacement_character(
    tmp_path: Path, transport: str
) -> None:
    with running_relay_http(
        tmp_path / "record.txt", transport="http" if transport != "sse" else "sse"
    ) as server:
        # A short timeout: the lost answer would make the call wait for it.
        entry = {"url": server.url, "transport": transport, "call_timeout": 10}
        pool = McpPool(parse_config({"servers": {"relay": entry}}))
        try:
            await pool.start(wait=WAIT)
            await pool.wait_until(lambda: pool.server_status("relay").state is ServerState.READY, WAIT)
            result = await pool.call_tool(server="relay", tool="surrogates", arguments={})
            # The session that read it is still the one it started with.
            status = pool.server_status("relay")
        finally:
            await pool.stop()
    assert not result.is_error
    assert [block.text for block in result.content] == ["a\ufffdb 😀"]
    assert (status.state, status.restarts) == (ServerState.READY, 0)
