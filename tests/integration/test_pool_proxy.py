"""Remote MCP servers behind the environment's HTTP proxy (``HTTP_PROXY``): the pool reaches them
through it, on every transport it speaks (streamable HTTP on the SDK's path and on the lean path,
SSE), with its answer checks unchanged. Before, a client given the pool's own HTTP/1.1 transport
skipped the environment's proxies, so a server reachable only through one was never reached.

The proxy is :mod:`tests.support.forward_proxy` (it records each connection's first request);
the servers are the relay fixture at 2025-11-25 (its ``surrogates`` answer written with a lone
surrogate on the wire) and the ``text`` example (2026-07-28: the lean path).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.forward_proxy import running_forward_proxy
from tests.support.mcp_servers import HttpServer, running_example_http, running_relay_http
from toolscout_kit.config import parse_config

WAIT = 30.0
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@contextmanager
def _server(kind: str, tmp: Path) -> Iterator[HttpServer]:
    if kind == "text":
        with running_example_http("text", "streamable-http") as server:
            yield server
    else:
        with running_relay_http(tmp / "record.txt", transport=kind) as server:
            yield server


# (server, transport in the config, tool, arguments, the text the caller gets)
_CASES = {
    "streamable HTTP, the SDK's path": ("http", "streamable-http", "surrogates", {}, "a\ufffdb 😀"),
    "SSE": ("sse", "sse", "surrogates", {}, "a\ufffdb 😀"),
    "streamable HTTP, the lean path": ("text", "streamable-http", "reverse", {"text": "abc"}, "cba"),
}


@pytest.mark.parametrize("case", list(_CASES))
async def test_a_server_behind_the_environments_proxy_is_reached_through_it(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind, transport, tool, arguments, expected = _CASES[case]
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    async with running_forward_proxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        with _server(kind, tmp_path) as server:
            entry = {"url": server.url, "transport": transport, "call_timeout": 10}
            pool = McpPool(parse_config({"servers": {"mcp": entry}}))
            try:
                await pool.start(wait=WAIT)
                await pool.wait_until(lambda: pool.server_status("mcp").state is ServerState.READY, WAIT)
                result = await pool.call_tool(server="mcp", tool=tool, arguments=arguments)
            finally:
                await pool.stop()
    assert [block.text for block in result.content] == [expected]
    # Every connection the pool opened to the server went through the proxy.
    assert proxy.requests
    assert all(line.split(" ")[1].startswith(server.url.rsplit("/", 1)[0]) for line in proxy.requests)
