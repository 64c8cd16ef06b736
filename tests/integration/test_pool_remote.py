"""Remote servers (our example server over SSE and streamable HTTP) going away and coming back."""

from __future__ import annotations

from typing import Literal

import pytest

from mcp_pool_svc.errors import ServerUnavailableError
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import running_example_http
from toolscout_kit.config import parse_config


@pytest.mark.parametrize(("transport", "configured"), [("sse", "sse"), ("streamable-http", "http")])
async def test_a_remote_server_that_goes_away_is_reconnected_when_it_returns(
    transport: Literal["sse", "streamable-http"], configured: str
) -> None:
    with running_example_http("text", transport) as first:
        config = parse_config(
            {
                "servers": {"text": {"url": first.url, "transport": configured, "connect_timeout": 2}},
                "toolscout": {
                    "pool": {
                        "ping_interval": 0.5,
                        "initial_backoff": 0.1,
                        "max_backoff": 0.5,
                        "crash_loop_restarts": 100,
                    }
                },
            }
        )
        pool = McpPool(config)
        await pool.start(wait=20)
        try:
            assert pool.server_status("text").state is ServerState.READY
            result = await pool.call_tool(server="text", tool="slugify", arguments={"text": "Hello World"})
            assert result.content[0].text == "hello-world"
            port = first.port
            first.process.terminate()
            await pool.wait_until(lambda: pool.server_status("text").state is not ServerState.READY, 20)
            with pytest.raises(ServerUnavailableError):
                await pool.call_tool(server="text", tool="slugify", arguments={"text": "x"})
            with running_example_http("text", transport, port=port):
                await pool.wait_until(lambda: pool.server_status("text").state is ServerState.READY, 30)
                again = await pool.call_tool(server="text", tool="slugify", arguments={"text": "Back Again"})
                assert again.content[0].text == "back-again"
                assert pool.server_status("text").restarts >= 1
        finally:
            await pool.stop()
