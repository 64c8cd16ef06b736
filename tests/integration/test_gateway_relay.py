"""What an MCP server asks during a call reaches the host that made the call, and the host's answer
reaches the server (issue 29 item 3).

Real pool and discovery, the gateway in front (``all`` mode, ``namespace_tools: false``), our own
SDK server ``tests/fixtures/relay/server.py`` over stdio and over streamable HTTP; the ``mcp`` SDK's
``Client`` with sampling, elicitation and roots callbacks as the host.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from toolscout import client as tc

from tests.support.gateway import GatewayStack, gateway_stack
from tests.support.mcp_servers import RELAY_SERVER, running_relay_http, wait_for_lines
from toolscout_kit.config import parse_config

SERVER = RELAY_SERVER
WAIT = 30.0

pytestmark = pytest.mark.asyncio


@pytest.fixture(params=["stdio", "http"])
async def gw(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[GatewayStack]:
    record = tmp_path / "record.txt"
    with nullcontext() if request.param == "stdio" else running_relay_http(record) as http:
        entry: dict[str, Any] = (
            {"command": sys.executable, "args": [str(SERVER), str(record)]}
            if http is None
            else {"url": http.url, "transport": "streamable-http"}
        )
        # Concurrent calls: none of the tools is annotated read-only, so they would run in turn.
        entry["serialize_writes"] = False
        config = parse_config(
            {
                "namespace_tools": False,
                "servers": {"relay": entry},
                "toolscout": {"gateway": {"mode": "all"}},
            },
            base_dir=tmp_path,
        )
        async with gateway_stack(config) as stack:
            yield stack


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


class Host:
    """A host's callbacks, recording what the server asked."""

    def __init__(self, name: str = "host") -> None:
        self.name = name
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[types.ElicitRequestParams] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampled.append(params)
        prompt = params.messages[0].content
        said = prompt.text if isinstance(prompt, types.TextContent) else "?"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"{self.name} read {said}"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.elicited.append(params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        default = params.requested_schema["properties"]["name"]["default"]
        return types.ElicitResult(action="accept", content={"name": f"{default} Lovelace"})

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[
                types.Root.model_validate({"uri": "file:///work/a"}),
                types.Root.model_validate({"uri": "file:///work/b"}),
            ]
        )

    async def logged(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    def client(self, url: str, **overrides: Any) -> Client:
        options: dict[str, Any] = {
            "mode": "legacy",
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.roots,
            "logging_callback": self.logged,
            **overrides,
        }
        return Client(url, **options)


async def test_sampling_elicitation_roots_and_logs_of_a_call_reach_its_host_and_the_answers_the_server(
    gw: GatewayStack,
) -> None:
    host = Host()
    async with host.client(gw.url) as client:
        sampled = await client.call_tool("sample", {"prompt": "the sky"})
        asked = await client.call_tool("ask", {})
        visited = await client.call_tool("visit", {})
        rooted = await client.call_tool("roots", {})
        chatty = await client.call_tool("chatty", {})
    assert _text(sampled) == "sampled: host read the sky"
    assert _text(asked) == 'accept {"name": "Ada Lovelace"}'
    assert _text(visited) == "accept"
    assert _text(rooted) == "file:///work/a,file:///work/b"
    assert _text(chatty) == "logged"
    assert not any(r.is_error for r in (sampled, asked, visited, rooted, chatty))
    # The requests as the server sent them: the form's schema with its default, the URL.
    form, url = host.elicited
    assert isinstance(form, types.ElicitRequestFormParams)
    assert form.requested_schema["properties"]["name"] == {"type": "string", "default": "Ada"}
    assert isinstance(url, types.ElicitRequestURLParams)
    assert (url.url, url.elicitation_id) == ("https://example.com/consent", "e1")
    assert [(m.level, m.logger, m.data) for m in host.logs] == [
        ("info", "relay", f"line {n}") for n in (1, 2, 3)
    ]


async def test_a_host_without_a_capability_gets_the_server_the_spec_error_and_is_not_asked(
    gw: GatewayStack,
) -> None:
    # Elicitation only (form mode): sampling, URL mode and roots are refused to the server.
    host = Host()
    async with host.client(gw.url, sampling_callback=None, list_roots_callback=None) as client:
        sampled = await client.call_tool("sample", {"prompt": "x"})
        rooted = await client.call_tool("roots", {})
        asked = await client.call_tool("ask", {})
    assert sampled.is_error
    assert _text(sampled).startswith(f"refused {types.METHOD_NOT_FOUND}: ")
    assert "did not declare sampling" in _text(sampled)
    assert rooted.is_error
    assert _text(rooted).startswith(f"refused {types.METHOD_NOT_FOUND}: ")
    assert _text(asked) == 'accept {"name": "Ada Lovelace"}'
    assert host.sampled == []
    # A host that declares nothing at all calls through the unary path: refused the same way.
    async with Client(gw.url, mode="legacy") as bare:
        refused = await bare.call_tool("sample", {"prompt": "x"})
    assert refused.is_error
    assert _text(refused).startswith(f"refused {types.METHOD_NOT_FOUND}: ")


async def test_two_concurrent_calls_each_get_their_own_hosts_sampling(tmp_path: Path) -> None:
    # Streamable HTTP: each call's requests come on its own stream, so both can be in flight.
    record = tmp_path / "record.txt"
    with running_relay_http(record) as http:
        config = parse_config(
            {
                "namespace_tools": False,
                "servers": {
                    "relay": {"url": http.url, "transport": "streamable-http", "serialize_writes": False}
                },
                "toolscout": {"gateway": {"mode": "all"}},
            },
            base_dir=tmp_path,
        )
        async with gateway_stack(config) as gw:
            both_asked = asyncio.Barrier(2)

            class Waiting(Host):
                async def sampling(
                    self, context: ClientRequestContext, params: types.CreateMessageRequestParams
                ) -> types.CreateMessageResult:
                    # Answer only once both calls are waiting for their host: both are in flight.
                    async with asyncio.timeout(WAIT):
                        await both_asked.wait()
                    return await super().sampling(context, params)

            alice, bob = Waiting("alice"), Waiting("bob")
            async with alice.client(gw.url) as a, bob.client(gw.url) as b:
                got_a, got_b = await asyncio.gather(
                    a.call_tool("sample", {"prompt": "one"}), b.call_tool("sample", {"prompt": "two"})
                )
    assert _text(got_a) == "sampled: alice read one"
    assert _text(got_b) == "sampled: bob read two"
    assert len(alice.sampled) == len(bob.sampled) == 1


async def test_a_call_with_nothing_to_relay_takes_the_unary_path(gw: GatewayStack) -> None:
    # The pool counts calls by RPC method: a host that declares nothing never opens a relay stream.
    async with Client(gw.url, mode="legacy") as bare:
        await bare.call_tool("chatty", {})
    handled = _handled(gw)
    assert handled.get(("CallTool", "OK"), 0) >= 1
    assert not any(method == "CallToolRelay" for method, _ in handled)


def _handled(gw: GatewayStack) -> dict[tuple[str, str], float]:
    """The pool's finished RPCs by (method, status code)."""
    counts: dict[tuple[str, str], float] = {}
    for metric in gw.stack.pool.registry.collect():
        for sample in metric.samples:
            labels = sample.labels
            if sample.name == "grpc_server_handled_total" and labels.get("grpc_service", "").endswith(
                "McpPool"
            ):
                key = (labels.get("grpc_method", ""), labels.get("grpc_code", ""))
                counts[key] = counts.get(key, 0) + sample.value
    return counts


async def test_a_handshake_era_hosts_call_to_a_server_spoken_to_in_2026_runs_in_the_hosts_era(
    tmp_path: Path,
) -> None:
    # 2026-07-28 has no requests from the server to the client: the relayed call gets a session of
    # the host's era of its own, while the pool's session stays 2026-07-28.
    with running_relay_http(tmp_path / "record.txt", transport="dual-http") as http:
        config = parse_config(
            {
                "namespace_tools": False,
                "servers": {"relay": {"url": http.url, "transport": "streamable-http"}},
                "toolscout": {"gateway": {"mode": "all"}},
            },
            base_dir=tmp_path,
        )
        async with gateway_stack(config) as gw:
            async with tc.AsyncPoolClient.connect(gw.stack.pool.address) as pool:
                (status,) = await pool.list_servers()
            host = Host()
            async with host.client(gw.url) as client:
                sampled = await client.call_tool("sample", {"prompt": "the sea"})
                asked = await client.call_tool("ask", {})
            async with Client(gw.url, mode="legacy") as bare:
                plain = await bare.call_tool("chatty", {})
    assert status.protocol_version == "2026-07-28"
    assert _text(sampled) == "sampled: host read the sea"
    assert _text(asked) == 'accept {"name": "Ada Lovelace"}'
    assert _text(plain) == "logged"


async def test_a_host_that_cancels_a_relayed_call_while_asked_ends_it_upstream_and_its_session_goes_on(
    gw: GatewayStack, tmp_path: Path
) -> None:
    asked = asyncio.Event()
    ended = asyncio.Event()

    class Hanging(Host):
        async def sampling(
            self, context: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult:
            asked.set()
            try:
                await asyncio.sleep(WAIT)  # never answers: the call is cancelled meanwhile
            finally:
                ended.set()
            return await super().sampling(context, params)

    host = Hanging()
    async with host.client(gw.url) as client:
        call = asyncio.ensure_future(client.call_tool("slow_sample", {"token": "c1"}))
        async with asyncio.timeout(WAIT):
            await asked.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # The server's request to the host is withdrawn with the call.
        async with asyncio.timeout(WAIT):
            await ended.wait()
        after = await client.call_tool("roots", {})
        # The MCP server's call is cancelled too (notifications/cancelled from the pool).
        record = await wait_for_lines(tmp_path / "record.txt", 2, within=WAIT)
    assert _text(after) == "file:///work/a,file:///work/b"
    assert record == ["started c1", "cancelled c1"]


async def test_a_host_that_set_a_log_level_gets_the_servers_messages_at_or_above_it_only(
    gw: GatewayStack,
) -> None:
    # A handshake-era host that declares none of sampling, elicitation and roots: logging/setLevel
    # alone takes its calls onto the relay stream, for the log messages at or above its level.
    host = Host()
    async with Client(gw.url, mode="legacy", logging_callback=host.logged) as client:
        with pytest.warns(MCPDeprecationWarning):  # deprecated as of 2026-07-28, still served
            await client.set_logging_level("warning")
        result = await client.call_tool("levels", {})
    assert _text(result) == "levelled"
    assert [(m.level, m.logger, m.data) for m in host.logs] == [
        ("warning", "levels", "warning"),
        ("error", "levels", "error"),
    ]
    assert _handled(gw).get(("CallToolRelay", "OK"), 0) >= 1


async def test_a_2026_host_that_asks_for_log_messages_on_its_request_gets_those_at_or_above_its_level(
    gw: GatewayStack,
) -> None:
    host = Host()
    async with Client(gw.url, mode="2026-07-28", logging_callback=host.logged, log_level="info") as client:
        result = await client.call_tool("levels", {})
    assert _text(result) == "levelled"
    assert [(m.level, m.data) for m in host.logs] == [
        ("info", "info"),
        ("warning", "warning"),
        ("error", "error"),
    ]


async def test_a_2026_host_asking_for_no_log_messages_gets_none_on_the_unary_path(gw: GatewayStack) -> None:
    host = Host()
    async with Client(gw.url, mode="2026-07-28", logging_callback=host.logged) as client:
        result = await client.call_tool("levels", {})
    assert _text(result) == "levelled"
    assert host.logs == []
    assert not any(method == "CallToolRelay" for method, _ in _handled(gw))


async def test_a_2026_hosts_log_level_reaches_a_server_spoken_to_in_2026(tmp_path: Path) -> None:
    # 2026-07-28 servers log only when the request asks them to (_meta logLevel): the host's level
    # goes on with the call, and the server's messages at or above it come back.
    with running_relay_http(tmp_path / "record.txt", transport="dual-http") as http:
        config = parse_config(
            {
                "namespace_tools": False,
                "servers": {"relay": {"url": http.url, "transport": "streamable-http"}},
                "toolscout": {"gateway": {"mode": "all"}},
            },
            base_dir=tmp_path,
        )
        async with gateway_stack(config) as gw:
            host = Host()
            async with Client(
                gw.url, mode="2026-07-28", logging_callback=host.logged, log_level="warning"
            ) as c:
                result = await c.call_tool("levels", {})
    assert _text(result) == "levelled"
    assert [(m.level, m.data) for m in host.logs] == [("warning", "warning"), ("error", "error")]
