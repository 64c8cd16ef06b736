"""A pool process killed while its call waits for the host's answer to the server's request.

The pool and discovery are ``toolscout serve`` processes, the gateway runs in-process in front of
them; the MCP server (``tests/fixtures/relay/server.py``, stdio) samples during ``slow_sample`` and
records the call as it starts. The host's sampling callback signals that the request reached it,
then the pool process is SIGKILLed: the host gets a clear error (the tool may or may not have run,
and it was not run again), and the tool ran once.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from mcp_gateway_svc.server import build_server
from tests.support.mcp_servers import REPO_ROOT, wait_for_lines
from tests.support.sharded_stack import running_sharded_stack
from toolscout_kit.config import parse_config

pytestmark = pytest.mark.e2e

SERVER = REPO_ROOT / "tests" / "fixtures" / "relay" / "server.py"
WAIT = 60.0


async def test_a_pool_killed_mid_relay_gives_the_host_a_clear_error_and_the_tool_ran_once(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.txt"
    document = {
        "namespace_tools": False,
        "servers": {"relay": {"command": sys.executable, "args": [str(SERVER), str(record)]}},
        "toolscout": {"gateway": {"mode": "all"}},
    }
    asked = asyncio.Event()
    released = asyncio.Event()

    async def sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.set()
        async with asyncio.timeout(WAIT):
            await released.wait()
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="late"), model="m"
        )

    async with running_sharded_stack(tmp_path, document, shards=0) as stack:
        config = parse_config(document, base_dir=tmp_path)
        gateway = await build_server(
            config,
            listen="127.0.0.1:0",
            metrics_port=0,
            pool_target=stack.shard_address(0),
            discovery_target=stack.discovery_address,
        )
        try:
            async with Client(gateway.url, mode="legacy", sampling_callback=sampling) as host:
                call = asyncio.ensure_future(host.call_tool("slow_sample", {"token": "t1"}))
                async with asyncio.timeout(WAIT):
                    await asked.wait()
                await stack.kill(stack.pools[0])
                async with asyncio.timeout(WAIT):
                    result = await call
                released.set()
        finally:
            await gateway.stop(0.5)
    assert result.is_error
    text = "".join(b.text for b in result.content if isinstance(b, types.TextContent))
    assert "may or may not have run" in text
    assert "slow_sample" in text
    assert await wait_for_lines(record, 1, within=WAIT) == ["started t1"]
