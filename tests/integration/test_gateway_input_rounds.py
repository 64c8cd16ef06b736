"""2026-07-28 ``input_required`` results (multi-round-trip requests) relayed both ways through the
gateway (issue 29 item 3): the server's ``inputRequests`` reach the host, the host's retry with
``inputResponses`` and ``requestState`` reaches the same server with the server's own state, on any
gateway replica; a tampered state is refused with -32602 and never reaches the server.

Real pool and discovery, two gateway replicas over them sharing ``$TOOLSCOUT_TOKEN_KEY``, our own
SDK server ``tests/fixtures/rounds/server.py`` (2026-07-28, streamable HTTP); the ``mcp`` SDK's
``Client`` at 2026-07-28 with an elicitation callback as the host.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from tests.support.gateway import MODERN, gateway_stack, start_gateway
from tests.support.mcp_servers import REPO_ROOT, _running, free_port
from toolscout_kit.config import parse_config
from toolscout_kit.token_store import TOKEN_KEY_ENV

SERVER = REPO_ROOT / "tests" / "fixtures" / "rounds" / "server.py"
SERVER_STATE = "greet-state-1"
WAIT = 30.0

pytestmark = pytest.mark.asyncio


@dataclass
class Replicas:
    first: str
    second: str
    record: Path

    def states_seen(self) -> list[str]:
        """The ``requestState`` of each call that reached the server ("-": none), in order."""
        return [line.split(" ", 1)[1] for line in self.record.read_text().splitlines()]


@pytest.fixture
async def replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Replicas]:
    monkeypatch.setenv(TOKEN_KEY_ENV, base64.urlsafe_b64encode(os.urandom(32)).decode())
    record = tmp_path / "record.txt"
    record.touch()
    port = free_port()
    argv = [sys.executable, str(SERVER), str(record), "--port", str(port)]
    with _running(argv, port=port, path="/mcp") as server:
        config = parse_config(
            {
                "namespace_tools": False,
                "servers": {"rounds": {"url": server.url, "transport": "streamable-http"}},
                "toolscout": {"gateway": {"mode": "all"}},
            },
            base_dir=tmp_path,
        )
        async with gateway_stack(config) as stack:
            second = await start_gateway(config, stack.stack)
            try:
                yield Replicas(stack.url, second.url, record)
            finally:
                await second.stop(0.5)


def _answer(params: types.ElicitRequestParams) -> types.ElicitResult:
    """What the user answers to the server's question."""
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == "Who shall I greet?"
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def _elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return _answer(params)


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def _first_round(url: str) -> types.InputRequiredResult:
    async with Client(url, mode=MODERN, elicitation_callback=_elicit) as host:
        first = await host.session.call_tool("greet", {}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    return first


async def test_a_round_started_on_one_replica_is_answered_on_another(replicas: Replicas) -> None:
    with anyio.fail_after(WAIT):
        first = await _first_round(replicas.first)
        # The server's input request reaches the host as it was; its state does not (sealed).
        assert first.input_requests is not None
        assert set(first.input_requests) == {"who"}
        asked = first.input_requests["who"]
        assert isinstance(asked, types.ElicitRequest)
        assert first.request_state
        assert SERVER_STATE not in first.request_state
        async with Client(replicas.second, mode=MODERN, elicitation_callback=_elicit) as host:
            done = await host.session.call_tool(
                "greet",
                {},
                input_responses={"who": _answer(asked.params)},
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert isinstance(done, types.CallToolResult)
    assert _text(done) == "hello Ada"
    assert replicas.states_seen() == ["-", SERVER_STATE]


async def test_the_sdk_client_drives_the_rounds_with_its_elicitation_callback(replicas: Replicas) -> None:
    with anyio.fail_after(WAIT):
        async with Client(replicas.first, mode=MODERN, elicitation_callback=_elicit) as host:
            done = await host.call_tool("greet", {})
    assert _text(done) == "hello Ada"
    assert replicas.states_seen() == ["-", SERVER_STATE]


def _tampered(state: str) -> str:
    last = state[-1]
    return state[:-1] + ("A" if last != "A" else "B")


async def test_a_tampered_or_foreign_request_state_is_refused_and_never_reaches_the_server(
    replicas: Replicas,
) -> None:
    answer: types.InputResponses = {"who": types.ElicitResult(action="accept", content={"name": "Eve"})}
    with anyio.fail_after(WAIT):
        first = await _first_round(replicas.first)
        assert first.request_state is not None
        codes = []
        async with Client(replicas.second, mode=MODERN, elicitation_callback=_elicit) as host:
            for bad in (_tampered(first.request_state), SERVER_STATE, "v1.not-a-state"):
                with pytest.raises(MCPError) as caught:
                    await host.session.call_tool(
                        "greet", {}, input_responses=answer, request_state=bad, allow_input_required=True
                    )
                codes.append(caught.value.code)
                assert "requestState" in caught.value.message
    assert codes == [types.INVALID_PARAMS] * 3
    # Only the first round reached the server.
    assert replicas.states_seen() == ["-"]


async def test_the_server_is_told_the_hosts_own_capabilities(replicas: Replicas) -> None:
    """A host that cannot elicit is not offered to the server as one that can."""
    with anyio.fail_after(WAIT):
        async with Client(replicas.first, mode=MODERN) as host:
            result = await host.session.call_tool("greet", {}, allow_input_required=True)
    assert isinstance(result, types.CallToolResult)
    assert result.is_error
    assert _text(result) == "cannot ask: no elicitation"
