"""2026-07-28 ``input_required`` results (multi-round-trip requests) relayed both ways through the
gateway (issue 29 item 3), on ``tools/call``, ``resources/read`` and ``prompts/get``: the server's
``inputRequests`` reach the host, the host's retry with ``inputResponses`` and ``requestState``
reaches the same server with the server's own state, on any gateway replica; a tampered state, or
one issued for another request, is refused with -32602 and never reaches the server; a
handshake-era (2025-11-25) host reads and gets prompts as before.

Real pool and discovery, two gateway replicas over them sharing ``$TOOLSCOUT_TOKEN_KEY`` (one stack
for the module), our own SDK server ``tests/fixtures/rounds/server.py`` (2026-07-28, streamable
HTTP); the ``mcp`` SDK's ``Client`` at 2026-07-28 with an elicitation callback as the host.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from toolscout.client import AsyncPoolClient, InvalidArgumentError, ResourceReadRequest

from tests.support.gateway import LEGACY, MODERN, gateway_stack, start_gateway
from tests.support.mcp_servers import REPO_ROOT, _running, free_port
from toolscout_kit.config import parse_config
from toolscout_kit.token_store import TOKEN_KEY_ENV

SERVER = REPO_ROOT / "tests" / "fixtures" / "rounds" / "server.py"
SERVER_STATE = "greet-state-1"
READ_STATE = "read-state-1"
PROMPT_STATE = "prompt-state-1"
RESOURCE_URI = "greeting://who"
WAIT = 30.0

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Replicas:
    first: str
    second: str
    record: Path
    pool: str
    # Lines of the record written before the running test.
    seen_before: int = 0

    def states_seen(self) -> list[str]:
        """The ``requestState`` of each request of the running test that reached the server ("-":
        none), in order."""
        lines = self.record.read_text().splitlines()[self.seen_before :]
        return [line.split(" ", 1)[1] for line in lines]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Replicas]:
    tmp_path = tmp_path_factory.mktemp("rounds")
    record = tmp_path / "record.txt"
    record.touch()
    port = free_port()
    argv = [sys.executable, str(SERVER), str(record), "--port", str(port)]
    with pytest.MonkeyPatch.context() as env, _running(argv, port=port, path="/mcp") as server:
        env.setenv(TOKEN_KEY_ENV, base64.urlsafe_b64encode(os.urandom(32)).decode())
        config = parse_config(
            {
                "namespace_tools": False,
                "servers": {"rounds": {"url": server.url, "transport": "streamable-http"}},
                "toolscout": {"gateway": {"mode": "all"}},
            },
            base_dir=tmp_path,
        )
        async with gateway_stack(config) as gateway:
            second = await start_gateway(config, gateway.stack)
            try:
                yield Replicas(gateway.url, second.url, record, gateway.stack.pool.address)
            finally:
                await second.stop(0.5)


@pytest.fixture
def replicas(stack: Replicas) -> Replicas:
    """The module's replicas, counting only what reaches the server from the running test on."""
    stack.seen_before = len(stack.record.read_text().splitlines())
    return stack


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


# --- resources/read and prompts/get -----------------------------------------------------------

# What each kind asks with and answers: (its first request, its retry, the text of its result).
Ask = Callable[[Client, types.InputResponses | None, str | None], Awaitable[Any]]


async def _read(host: Client, answers: types.InputResponses | None, state: str | None) -> Any:
    return await host.session.read_resource(
        RESOURCE_URI, input_responses=answers, request_state=state, allow_input_required=True
    )


async def _prompt(host: Client, answers: types.InputResponses | None, state: str | None) -> Any:
    return await host.session.get_prompt(
        "greeting", input_responses=answers, request_state=state, allow_input_required=True
    )


def _read_text(result: types.ReadResourceResult) -> str:
    (contents,) = result.contents
    assert isinstance(contents, types.TextResourceContents)
    return contents.text


def _prompt_text(result: types.GetPromptResult) -> str:
    (message,) = result.messages
    assert isinstance(message.content, types.TextContent)
    return message.content.text


KINDS = [
    pytest.param(_read, types.ReadResourceResult, _read_text, READ_STATE, id="resources/read"),
    pytest.param(_prompt, types.GetPromptResult, _prompt_text, PROMPT_STATE, id="prompts/get"),
]


@pytest.mark.parametrize(("ask", "done_type", "text_of", "server_state"), KINDS)
async def test_a_read_or_prompt_round_started_on_one_replica_is_answered_on_another(
    replicas: Replicas, ask: Ask, done_type: type[Any], text_of: Callable[[Any], str], server_state: str
) -> None:
    with anyio.fail_after(WAIT):
        async with Client(replicas.first, mode=MODERN, elicitation_callback=_elicit) as host:
            first = await ask(host, None, None)
        assert isinstance(first, types.InputRequiredResult)
        assert first.input_requests is not None
        asked = first.input_requests["who"]
        assert isinstance(asked, types.ElicitRequest)
        assert first.request_state
        assert server_state not in first.request_state
        async with Client(replicas.second, mode=MODERN, elicitation_callback=_elicit) as host:
            done = await ask(host, {"who": _answer(asked.params)}, first.request_state)
    assert isinstance(done, done_type)
    assert text_of(done) == "hello Ada"
    assert replicas.states_seen() == ["-", server_state]


async def test_the_sdk_client_drives_read_and_prompt_rounds_with_its_elicitation_callback(
    replicas: Replicas,
) -> None:
    with anyio.fail_after(WAIT):
        async with Client(replicas.second, mode=MODERN, elicitation_callback=_elicit) as host:
            read = await host.read_resource(RESOURCE_URI)
            prompt = await host.get_prompt("greeting")
    assert _read_text(read) == "hello Ada"
    assert _prompt_text(prompt) == "hello Ada"
    assert replicas.states_seen() == ["-", READ_STATE, "-", PROMPT_STATE]


async def test_a_tampered_state_or_one_of_another_request_is_refused_on_reads_and_prompts(
    replicas: Replicas,
) -> None:
    answer: types.InputResponses = {"who": types.ElicitResult(action="accept", content={"name": "Eve"})}
    with anyio.fail_after(WAIT):
        async with Client(replicas.first, mode=MODERN, elicitation_callback=_elicit) as host:
            tool_state = (await host.session.call_tool("greet", {}, allow_input_required=True)).request_state
            read_state = (await _read(host, None, None)).request_state
            prompt_state = (await _prompt(host, None, None)).request_state
        refused: list[tuple[int, str]] = []
        async with Client(replicas.second, mode=MODERN, elicitation_callback=_elicit) as host:
            for ask, bad in (
                (_read, _tampered(read_state)),
                (_read, READ_STATE),
                (_read, tool_state),  # a tool's round
                (_read, prompt_state),  # a prompt's round
                (_prompt, _tampered(prompt_state)),
                (_prompt, read_state),  # a read's round
            ):
                with pytest.raises(MCPError) as caught:
                    await ask(host, answer, bad)
                refused.append((caught.value.code, "requestState" in caught.value.message))
            # A tool is not resumed with a read's round either.
            with pytest.raises(MCPError) as caught:
                await host.session.call_tool(
                    "greet", {}, input_responses=answer, request_state=read_state, allow_input_required=True
                )
            refused.append((caught.value.code, "requestState" in caught.value.message))
    assert refused == [(types.INVALID_PARAMS, True)] * 7
    # Only the three first rounds reached the server.
    assert replicas.states_seen() == ["-", "-", "-"]


async def test_a_handshake_era_host_reads_and_gets_prompts_as_before(replicas: Replicas) -> None:
    """2025-11-25 has no input_required rounds: the server is not told of the host's elicitation
    on a read or a prompt (the pool relays no round for it), and answers without asking."""
    with anyio.fail_after(WAIT):
        async with Client(replicas.first, mode="legacy", elicitation_callback=_elicit) as host:  # type: ignore[arg-type]
            assert host.session.protocol_version == LEGACY
            read = await host.read_resource(RESOURCE_URI)
            prompt = await host.get_prompt("greeting")
    assert _read_text(read) == "hello stranger"
    assert _prompt_text(prompt) == "hello stranger"
    assert replicas.states_seen() == ["-", "-"]


async def test_a_handshake_era_host_gets_an_error_from_a_server_that_asks_anyway(replicas: Replicas) -> None:
    with anyio.fail_after(WAIT):
        async with Client(replicas.first, mode="legacy", elicitation_callback=_elicit) as host:  # type: ignore[arg-type]
            with pytest.raises(MCPError) as caught:
                await host.get_prompt("greeting", {"insist": "yes"})
    assert caught.value.code == types.INTERNAL_ERROR
    assert "input_required" in caught.value.message
    assert replicas.states_seen() == ["-"]


async def test_the_pool_passes_a_read_round_on_whole_and_refuses_answers_that_are_not_input_responses(
    replicas: Replicas,
) -> None:
    elicits = json.dumps({"elicitation": {"form": {}}})
    with anyio.fail_after(WAIT):
        async with AsyncPoolClient.connect(replicas.pool) as pool:
            first = await pool.read_resource(
                ResourceReadRequest(RESOURCE_URI, accept_input_required=True, host_capabilities_json=elicits)
            )
            asked = types.InputRequiredResult.model_validate_json(first.input_required_json)
            assert (first.server, first.result_json, asked.request_state) == ("rounds", "", READ_STATE)
            answers = json.dumps({"who": {"action": "accept", "content": {"name": "Ada"}}})
            done = await pool.read_resource(
                ResourceReadRequest(
                    RESOURCE_URI,
                    accept_input_required=True,
                    input_responses_json=answers,
                    request_state=READ_STATE,
                    host_capabilities_json=elicits,
                )
            )
            with pytest.raises(InvalidArgumentError):
                await pool.read_resource(
                    ResourceReadRequest(
                        RESOURCE_URI,
                        accept_input_required=True,
                        input_responses_json='{"who": {"nothing": 1}}',
                    )
                )
    assert _read_text(types.ReadResourceResult.model_validate_json(done.result_json)) == "hello Ada"
    assert not done.input_required_json
    assert replicas.states_seen() == ["-", READ_STATE]
