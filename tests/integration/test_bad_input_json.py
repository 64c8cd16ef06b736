"""Bad JSON anywhere in the API is INVALID_ARGUMENT, and a Chat reports the class of a downstream
failure: real grpc.aio servers on 127.0.0.1:0 (discovery with a real engine, the pool with a real
MCP server subprocess, the orchestrator against them or against the fake downstream services),
the fake LLM provider behind the real SDKs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from discovery_svc.engine import DiscoveryEngine
from mcp_pool_svc.server import build_server as build_pool
from orchestrator_svc.server import build_server as build_orchestrator
from tests.integration.test_discovery_grpc import make_config
from tests.integration.test_discovery_toolsets_hybrid_grpc import catalog, serve
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.fake_services import FakeState, fake_stack
from tests.support.mcp_servers import misbehaving_config
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer

WAIT = 20.0
LONE_SURROGATE = '{"servers": {"\\ud800": true}}'
# Under the 256 KiB cap of an inline toolset, far deeper than any parser should follow.
DEEP_ARRAYS = "[" * 100_000 + "]" * 100_000
DEEP_OBJECTS = '{"a":' * 40_000 + "1" + "}" * 40_000
BAD_TOOLSETS = {
    "lone surrogate": LONE_SURROGATE,
    "100k-deep arrays": DEEP_ARRAYS,
    "40k-deep objects": DEEP_OBJECTS,
    "a string for true": '{"servers": {"weather": "yes"}}',
    "a number for true": '{"servers": {"weather": 1}}',
    "a surrogate in a tool name": '{"servers": {"weather": ["\\udfff"]}}',
}


@dataclass
class Stack:
    discovery: discovery_pb2_grpc.DiscoveryStub
    orchestrator: orchestrator_pb2_grpc.OrchestratorStub
    provider: FakeProvider


def orchestrator_config(provider: FakeProvider, tmp_path: Path) -> Any:
    return parse_config(
        {
            "clients": {
                "oai": {"provider": "openai", "base_url": provider.openai_base_url, "api_key": "k"},
                "ant": {"provider": "anthropic", "base_url": provider.anthropic_base_url, "api_key": "k"},
            },
            "models": {
                "gpt": {"client": "oai", "model": "gpt-test"},
                "claude": {"client": "ant", "model": "claude-3-5-haiku", "deferral": "append"},
            },
        },
        base_dir=tmp_path,
    )


@asynccontextmanager
async def orchestrator_calling(
    provider: FakeProvider, tmp_path: Path, *, pool: str, discovery: str
) -> AsyncIterator[orchestrator_pb2_grpc.OrchestratorStub]:
    """A real orchestrator on 127.0.0.1:0 calling ``pool`` and ``discovery``, and a stub of it."""
    orchestrator = await build_orchestrator(
        orchestrator_config(provider, tmp_path),
        listen="127.0.0.1:0",
        metrics_port=-1,
        pool_target=pool,
        discovery_target=discovery,
    )
    try:
        async with grpc.aio.insecure_channel(orchestrator.address) as channel:
            yield orchestrator_pb2_grpc.OrchestratorStub(channel)
    finally:
        await orchestrator.stop(0)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    """Real discovery (a catalog of weather, mail, time) and a real orchestrator calling it."""
    engine = DiscoveryEngine(make_config())
    engine.set_catalog(catalog())
    discovery = await serve(engine)
    try:
        async with (
            FakeProvider() as provider,
            fake_stack() as pool,
            orchestrator_calling(provider, tmp_path, pool=pool.target, discovery=discovery.address) as stub,
            grpc.aio.insecure_channel(discovery.address) as channel,
        ):
            yield Stack(discovery_pb2_grpc.DiscoveryStub(channel), stub, provider)
    finally:
        await discovery.stop(0)


async def status_of(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value.code(), err.value.details() or ""


def chat(*messages: pb.Message, model: str = "gpt", **fields: Any) -> pb.ChatRequest:
    return pb.ChatRequest(
        messages=list(messages) or [pb.Message(role="user", content="go")], model=model, **fields
    )


# --- inline toolsets --------------------------------------------------------------------------


@pytest.mark.parametrize("toolset_json", list(BAD_TOOLSETS.values()), ids=list(BAD_TOOLSETS))
async def test_a_malformed_inline_toolset_is_invalid_argument_on_every_rpc(
    stack: Stack, toolset_json: str
) -> None:
    d = stack.discovery
    for call in (
        d.PlanTools(discovery_pb2.PlanToolsRequest(toolset_json=toolset_json), timeout=WAIT),
        d.SearchTools(
            discovery_pb2.SearchToolsRequest(query="weather", toolset_json=toolset_json), timeout=WAIT
        ),
        d.GetManifest(discovery_pb2.GetManifestRequest(toolset_json=toolset_json), timeout=WAIT),
        stack.orchestrator.Chat(chat(toolset_json=toolset_json), timeout=WAIT),
    ):
        code, details = await status_of(call)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert details.startswith("toolset_json"), details
    assert stack.provider.requests == []


async def test_inline_toolset_errors_say_what_is_wrong(stack: Stack) -> None:
    async def details(toolset_json: str) -> str:
        request = discovery_pb2.PlanToolsRequest(toolset_json=toolset_json)
        return (await status_of(stack.discovery.PlanTools(request, timeout=WAIT)))[1]

    assert await details(DEEP_ARRAYS) == "toolset_json: nested deeper than 64 levels"
    assert "surrogate" in await details(LONE_SURROGATE)
    assert await details('{"servers": {"weather": "yes"}}') == (
        'toolset_json: servers.weather: expected true, false, a list of tool names or {"exclude": [...]}'
    )


async def test_strict_booleans_still_accept_true_and_false(stack: Stack) -> None:
    plan = await stack.discovery.PlanTools(
        discovery_pb2.PlanToolsRequest(toolset_json='{"servers": {"weather": true, "time": false}}'),
        timeout=WAIT,
    )
    assert plan.total_tools == 2


async def test_search_arguments_nested_too_deeply_are_an_error_for_the_llm(stack: Stack) -> None:
    request = discovery_pb2.SearchToolsRequest(arguments_json='{"query": ' + DEEP_ARRAYS + "}")
    code, details = await status_of(stack.discovery.SearchTools(request, timeout=WAIT))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == 'search_tools arguments must be a JSON object, e.g. {"query": "send an email"}.'


# --- chat messages ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "item",
    [
        '{"provider": "anthropic", "item": ' + DEEP_ARRAYS + "}",
        '{"provider": "anthropic", "item": {"type": "text", "text": "\\ud800"}}',
    ],
    ids=["100k deep", "lone surrogate"],
)
async def test_bad_native_items_in_a_chat_message_are_invalid_argument(stack: Stack, item: str) -> None:
    message = pb.Message(role="assistant", content="hi", native_items_json=[item])
    code, details = await status_of(
        stack.orchestrator.Chat(
            chat(pb.Message(role="user", content="go"), message, pb.Message(role="user", content="?")),
            timeout=WAIT,
        )
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith("native_items_json[0]: native item: "), details
    assert stack.provider.requests == []


async def test_chat_meta_nested_too_deeply_is_invalid_argument(stack: Stack) -> None:
    code, details = await status_of(stack.orchestrator.Chat(chat(meta_json=DEEP_OBJECTS), timeout=WAIT))
    assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, "meta_json: nested deeper than 64 levels")


@pytest.mark.parametrize("model", ["gpt", "claude"])
async def test_a_history_holding_unusable_tool_arguments_still_chats(stack: Stack, model: str) -> None:
    # The model's own earlier output may be anything; it is sent on as an empty object, never a crash.
    stack.provider.script(Reply.answer("done"))
    history = [
        pb.Message(role="user", content="go"),
        pb.Message(
            role="assistant",
            tool_calls=[pb.ToolCall(id="c1", name="time_now", arguments_json=DEEP_ARRAYS)],
        ),
        pb.Message(role="tool", tool_call_id="c1", content="12:00"),
        pb.Message(role="user", content="and now?"),
    ]
    response = await stack.orchestrator.Chat(chat(*history, model=model), timeout=WAIT)
    assert response.messages[-1].content == "done"
    assert len(stack.provider.requests) == 1


# --- the class of a downstream failure ------------------------------------------------------------


@asynccontextmanager
async def orchestrator_before(
    state: FakeState, provider: FakeProvider, tmp_path: Path
) -> AsyncIterator[orchestrator_pb2_grpc.OrchestratorStub]:
    """A real orchestrator whose discovery and pool are the fake services with failure knobs."""
    async with (
        fake_stack(state) as downstream,
        orchestrator_calling(provider, tmp_path, pool=downstream.target, discovery=downstream.target) as stub,
    ):
        yield stub


async def test_a_chat_whose_discovery_failed_internally_is_internal_not_unavailable(tmp_path: Path) -> None:
    state = FakeState()
    state.fail(
        "PlanTools", grpc.StatusCode.INTERNAL, details="internal error; see the server logs for details"
    )
    async with FakeProvider() as provider, orchestrator_before(state, provider, tmp_path) as stub:
        code, details = await status_of(stub.Chat(chat(), timeout=WAIT))
    assert code == grpc.StatusCode.INTERNAL
    assert details == "discovery failed: internal error"
    assert state.attempts["PlanTools"] == 1  # INTERNAL is not retried
    assert provider.requests == []


@pytest.mark.parametrize(
    "transport_text", ["Stream removed", "Socket closed", "recvmsg:Connection reset by peer"]
)
async def test_transport_text_of_a_lost_discovery_never_reaches_the_llm(
    tmp_path: Path, transport_text: str
) -> None:
    state = FakeState()
    # Every attempt of the search (the channel retries UNAVAILABLE for SearchTools) loses its stream.
    state.fail("SearchTools", grpc.StatusCode.UNAVAILABLE, times=10, details=transport_text)
    async with FakeProvider() as provider, orchestrator_before(state, provider, tmp_path) as stub:
        provider.script(
            Reply.calls(ScriptedCall("search_tools", {"query": "weather"})), Reply.answer("sorry")
        )
        response = await stub.Chat(chat(), timeout=WAIT)
    [result] = [m for m in response.messages if m.role == "tool"]
    assert result.content == (
        "Error: search_tools failed: discovery unavailable: not reachable or connection lost"
    )
    sent = json.dumps([r.body for r in provider.requests])
    assert transport_text.rsplit(":", maxsplit=1)[-1] not in sent


# --- tool arguments -----------------------------------------------------------------------------


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[RunningServer]:
    config = parse_config(
        {"servers": {"fixture": misbehaving_config("--call-log", str(tmp_path / "called.log"))}},
        base_dir=tmp_path,
    )
    running = await build_pool(config, listen="127.0.0.1:0", metrics_port=-1)
    try:
        yield running
    finally:
        await running.stop(0.5)


@pytest.mark.parametrize(
    ("arguments", "details"),
    [
        ('{"text": "\\ud800"}', "arguments: not valid Unicode"),
        ('{"text": "\\udc00\\ud800"}', "arguments: not valid Unicode"),
        ('{"text": ' + DEEP_OBJECTS + "}", "arguments: nested deeper than 64 levels"),
        ('{"n": 1' + "0" * 5000 + "}", "arguments: not valid JSON (Exceeds the limit"),
    ],
    ids=["lone high surrogate", "swapped pair", "40k deep", "a 5000-digit number"],
)
async def test_tool_arguments_that_are_not_valid_json_text_are_refused_before_the_call(
    pool: RunningServer, tmp_path: Path, arguments: str, details: str
) -> None:
    async with grpc.aio.insecure_channel(pool.address) as channel:
        stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
        request = mcp_pool_pb2.CallToolRequest(server="fixture", tool="echo", arguments_json=arguments)
        code, got = await status_of(stub.CallTool(request, timeout=WAIT))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, got
    assert got.startswith(details), got
    assert not (tmp_path / "called.log").exists()
