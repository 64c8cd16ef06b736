"""One chat, one trace: the services in process, real MCP servers (stdio subprocesses), the real
OpenAI SDK against the fake provider, and a real OTLP receiver on 127.0.0.1 that the services export
to over gRPC (and HTTP). The processes of ``toolscout up`` and ``toolscout serve`` are covered by
tests/e2e/test_tracing_processes.py."""

from __future__ import annotations

import json
import re
import secrets
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from mcp.client import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import set_span_in_context
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.gateway import GatewayStack, gateway_stack, post
from tests.support.mcp_servers import REPO_ROOT, example_server_config, misbehaving_config, wait_for_lines
from tests.support.otlp_receiver import OtlpReceiver, Span
from tests.support.stack import Stack, running_stack
from toolscout_kit.config import ToolscoutConfig, parse_config

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

WAIT = 30.0


def _config(tmp: Path, provider_url: str, tracing: dict[str, Any]) -> ToolscoutConfig:
    return parse_config(
        {
            "clients": {
                "oai": {"provider": "openai", "base_url": provider_url, "api_key": "sk-trace-0123456789"}
            },
            "models": {"gpt": {"client": "oai", "model": "gpt-trace"}},
            "servers": {
                "text": example_server_config("text"),
                "weather": example_server_config("weather", defer_loading=True),
                "probe": misbehaving_config("--meta-log", str(tmp / "meta.jsonl")),
            },
            "tool_discovery": {"enabled": True},
            "toolscout": {"tracing": tracing},
        },
        base_dir=REPO_ROOT,
    )


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@dataclass
class Traced:
    fake: FakeProvider
    stack: Stack
    stub: orchestrator_pb2_grpc.OrchestratorStub
    tmp: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def traced(
    receiver: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: pytest.MonkeyPatch
) -> AsyncIterator[Traced]:
    # Spans leave in batches; a short delay keeps the test's waits short (a collector's default is 5 s).
    monkeypatch_module.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    tmp = tmp_path_factory.mktemp("tracing")
    async with FakeProvider() as fake:
        config = _config(tmp, fake.openai_base_url, {"endpoint": receiver.grpc_endpoint})
        async with running_stack(config) as stack:
            assert stack.orchestrator is not None
            async with grpc.aio.insecure_channel(stack.orchestrator.address) as channel:
                yield Traced(fake, stack, orchestrator_pb2_grpc.OrchestratorStub(channel), tmp)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _scrape_openmetrics(port: int | None) -> str:
    """The metrics endpoint in the OpenMetrics format (the one that carries exemplars)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 - a local URL
        assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
        return str(reply.read().decode())


def _traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


async def _traced_chat(
    traced: Traced, receiver: OtlpReceiver, question: str, *last: str
) -> tuple[str, str, list[Span]]:
    """A chat sent with a caller's traceparent: its trace id, the caller's span id, and the spans
    of its trace once the ``last`` names (each service's last span) have arrived."""
    traceparent, trace_id, caller_span = _traceparent()
    reply = await traced.stub.Chat(
        pb.ChatRequest(messages=[pb.Message(role="user", content=question)], model="gpt"),
        metadata=[("traceparent", traceparent)],
        timeout=WAIT,
    )
    assert reply.stop_reason == pb.STOP_REASON_COMPLETED
    spans = receiver.wait_for(lambda got: _has(*last)([s for s in got if s.trace_id == trace_id]))
    return trace_id, caller_span, [s for s in spans if s.trace_id == trace_id]


def _one(spans: list[Span], name: str, **attributes: Any) -> Span:
    found = [
        s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in attributes.items())
    ]
    assert len(found) == 1, (name, attributes, [(s.service, s.name) for s in spans])
    return found[0]


def _children(spans: list[Span], parent: Span) -> list[Span]:
    return [s for s in spans if s.parent_id == parent.span_id]


# The span each service ends last in a chat: once these are in, so is everything before them (a
# service exports its spans in the order they end).
_LAST_ENDING = (
    "toolscout.orchestrator.v1.Orchestrator/Chat",
    "toolscout.discovery.v1.Discovery/SearchTools",
    "toolscout.mcp_pool.v1.McpPool/CallTool",
)


def _has(*names: str) -> Any:
    return lambda spans: all(any(s.name == n for s in spans) for n in names)


async def test_a_callers_chat_is_one_trace_from_its_span_to_the_mcp_server(
    traced: Traced, receiver: OtlpReceiver
) -> None:
    traced.fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "weather forecast for a city"})),
        Reply.calls(ScriptedCall("weather__get_forecast", {"location": {"city": "Berlin"}, "days": 1})),
        Reply.calls(ScriptedCall("probe__echo", {"text": "hi"})),
        Reply.answer("Sunny in Berlin."),
    )
    trace_id, caller_span, spans = await _traced_chat(
        traced, receiver, "Weather in Berlin?", *_LAST_ENDING, "tools/call echo", "tools/call get_forecast"
    )
    assert {s.service for s in spans} == {"toolscout-orchestrator", "toolscout-discovery", "toolscout-pool"}

    # The caller's span is the parent of the orchestrator's RPC span: its trace continues.
    rpc = _one(spans, "toolscout.orchestrator.v1.Orchestrator/Chat")
    assert (rpc.parent_id, rpc.kind, rpc.service) == (caller_span, "SERVER", "toolscout-orchestrator")
    assert rpc.attributes["rpc.system.name"] == "grpc"
    assert rpc.attributes["rpc.response.status_code"] == "OK"
    chat = _one(spans, "chat")
    assert chat.parent_id == rpc.span_id
    assert chat.attributes["gen_ai.request.model"] == "gpt"
    assert chat.attributes["toolscout.chat.outcome"] == "completed"
    assert chat.attributes["toolscout.chat.iterations"] == 3
    assert chat.attributes["toolscout.deferral.mode"] == "append"

    # Four LLM calls (GenAI conventions), children of the chat.
    llm = [s for s in _children(spans, chat) if s.name == "chat gpt-trace"]
    assert len(llm) == 4
    for call in llm:
        assert call.kind == "CLIENT"
        assert call.attributes["gen_ai.provider.name"] == "openai"
        assert call.attributes["gen_ai.request.model"] == "gpt-trace"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.usage.cache_read.input_tokens" not in call.attributes  # none read: not sent
    assert sorted(c.attributes["gen_ai.response.finish_reasons"][0] for c in llm) == [
        "stop",
        "tool_calls",
        "tool_calls",
        "tool_calls",
    ]

    # search_tools: execute_tool → discovery's RPC span → search (BM25 here).
    run_search = _one(spans, "execute_tool search_tools")
    assert run_search.parent_id == chat.span_id
    search_rpc = _one(spans, "toolscout.discovery.v1.Discovery/SearchTools")
    assert (search_rpc.parent_id, search_rpc.service) == (run_search.span_id, "toolscout-discovery")
    search = _one(spans, "search")
    assert search.parent_id == search_rpc.span_id
    assert search.attributes["toolscout.search.mode"] == "query"
    assert search.attributes["toolscout.search.ranking"] == "bm25"
    assert search.attributes["toolscout.search.query_length"] == len("weather forecast for a city")
    assert search.attributes["toolscout.search.hits"] >= 1
    assert search.attributes["toolscout.search.newly_loaded"] >= 1

    # A tool call: execute_tool → the pool's RPC span → call_tool → the MCP request (MCP conventions).
    run_tool = _one(spans, "execute_tool weather__get_forecast")
    assert run_tool.parent_id == chat.span_id
    pool_rpcs = [s for s in spans if s.name == "toolscout.mcp_pool.v1.McpPool/CallTool"]
    call_rpc = next(s for s in pool_rpcs if s.parent_id == run_tool.span_id)
    call_tool = next(s for s in _children(spans, call_rpc) if s.name == "call_tool")
    assert call_tool.attributes["toolscout.mcp.server"] == "weather"
    assert call_tool.attributes["gen_ai.tool.name"] == "get_forecast"
    assert call_tool.attributes["toolscout.call.outcome"] == "ok"
    assert call_tool.attributes["toolscout.pool.shard"] == "0/1"
    assert call_tool.attributes["toolscout.call.result_bytes"] > 0
    mcp = _one(spans, "tools/call get_forecast")
    assert (mcp.parent_id, mcp.kind) == (call_tool.span_id, "CLIENT")
    assert mcp.attributes["mcp.method.name"] == "tools/call"
    assert mcp.attributes["gen_ai.tool.name"] == "get_forecast"
    assert mcp.attributes["network.transport"] == "pipe"
    assert mcp.attributes["mcp.protocol.version"]

    # The MCP server received that request span's context in _meta (the MCP convention).
    echo = _one(spans, "tools/call echo")
    metas = [json.loads(line) for line in await wait_for_lines(traced.tmp / "meta.jsonl", 1)]
    assert f"00-{trace_id}-{echo.span_id}-01" in [m.get("traceparent") for m in metas]

    # Metrics link to traces: OpenMetrics exemplars on the latency histograms carry the span's ids.
    pool_metrics = _scrape_openmetrics(traced.stack.pool.metrics_port)
    exemplars = re.findall(
        r'^toolscout_pool_tool_call_duration_seconds_bucket\{[^}]*server="weather"[^}]*\} \S+ '
        r'# \{span_id="([0-9a-f]{16})",trace_id="([0-9a-f]{32})"\}',
        pool_metrics,
        re.MULTILINE,
    )
    assert (call_tool.span_id, trace_id) in exemplars
    grpc_exemplars = re.findall(
        r'grpc_server_handling_seconds_bucket\{[^}]*\} \S+ # \{[^}]*trace_id="([0-9a-f]{32})"', pool_metrics
    )
    assert trace_id in grpc_exemplars

    # No prompt text, arguments or results without capture_content.
    for span in spans:
        assert not {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"} & set(
            span.attributes
        )
        assert "Berlin" not in json.dumps(span.attributes)


async def test_a_streamed_chat_is_one_trace_under_its_rpc(traced: Traced, receiver: OtlpReceiver) -> None:
    traced.fake.script(Reply.calls(ScriptedCall("text__reverse", {"text": "abc"})), Reply.answer("cba"))
    traceparent, trace_id, caller = _traceparent()
    events = [
        event
        async for event in traced.stub.StreamChat(
            pb.ChatRequest(messages=[pb.Message(role="user", content="reverse abc")], model="gpt"),
            metadata=[("traceparent", traceparent)],
            timeout=WAIT,
        )
    ]
    assert events
    rpc_name = "toolscout.orchestrator.v1.Orchestrator/StreamChat"
    spans = receiver.wait_for(
        lambda got: _has(rpc_name, _LAST_ENDING[2])([s for s in got if s.trace_id == trace_id])
    )
    spans = [s for s in spans if s.trace_id == trace_id]
    rpc = _one(spans, rpc_name)
    assert rpc.parent_id == caller
    chat = _one(spans, "chat")
    assert chat.parent_id == rpc.span_id
    assert chat.attributes["toolscout.chat.outcome"] == "completed"
    assert _one(spans, "call_tool").attributes["gen_ai.tool.name"] == "reverse"


async def test_a_chat_without_a_caller_trace_starts_its_own(traced: Traced, receiver: OtlpReceiver) -> None:
    traced.fake.script(Reply.answer("hello"))
    reply = await traced.stub.Chat(
        pb.ChatRequest(messages=[pb.Message(role="user", content="hi")], model="gpt"), timeout=WAIT
    )
    assert reply.stop_reason == pb.STOP_REASON_COMPLETED
    spans = receiver.wait_for(
        lambda got: any(
            s.name == "chat"
            and s.attributes.get("toolscout.chat.iterations") == 0
            and any(r.span_id == s.parent_id for r in got)
            for s in got
        )
    )
    chat = next(s for s in spans if s.name == "chat" and s.attributes["toolscout.chat.iterations"] == 0)
    rpc = next(s for s in spans if s.span_id == chat.parent_id)
    assert rpc.parent_id == ""  # a root: no caller context


async def test_retries_of_the_provider_and_of_a_repeatable_tool_are_events_on_their_spans(
    traced: Traced, receiver: OtlpReceiver
) -> None:
    marker = traced.tmp / "crashed-once"
    traced.fake.script(
        Reply.error(429, "slow down"),
        Reply.calls(ScriptedCall("probe__crash_once_idempotent", {"marker": str(marker)})),
        Reply.answer("done"),
    )
    _, _, spans = await _traced_chat(traced, receiver, "crash it once", _LAST_ENDING[0], _LAST_ENDING[2])
    first_llm = min((s for s in spans if s.name == "chat gpt-trace"), key=lambda s: s.start_ns)
    events = [name for name, _ in first_llm.events]
    assert events == ["provider_error", "retry"]
    assert first_llm.events[0][1] == {
        "error.type": "rate_limited",
        "http.response.status_code": 429,
        "attempt": 0,
    }
    call_tool = _one(spans, "call_tool")
    assert [name for name, _ in call_tool.events] == ["retry"]
    assert call_tool.attributes["toolscout.call.outcome"] == "ok"
    # Not annotated read-only: it waited its turn behind the server's write lock (here: none).
    assert call_tool.attributes["toolscout.call.write_wait_seconds"] >= 0
    # Two MCP requests: the one lost with the crash (a JSON-RPC error code), and the one sent again.
    sent = [s for s in spans if s.name == "tools/call crash_once_idempotent"]
    assert len(sent) == 2
    assert {s.parent_id for s in sent} == {call_tool.span_id}


# --- the MCP front door --------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gateway(
    receiver: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: pytest.MonkeyPatch
) -> AsyncIterator[GatewayStack]:
    monkeypatch_module.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    tmp = tmp_path_factory.mktemp("gateway-tracing")
    config = _config(tmp, "http://127.0.0.1:9/v1", {"endpoint": receiver.grpc_endpoint})
    async with gateway_stack(config) as running:
        yield running


def _host_span() -> Any:
    """A span of the MCP host's own tracing (its provider, not toolscout's)."""
    return TracerProvider().get_tracer("host").start_span("host turn")


async def test_an_mcp_hosts_tool_call_through_the_gateway_is_one_trace(
    gateway: GatewayStack, receiver: OtlpReceiver
) -> None:
    from opentelemetry import context

    host = _host_span()
    trace_id = format(host.get_span_context().trace_id, "032x")
    token = context.attach(set_span_in_context(host))
    try:
        # The SDK's client writes the current span's traceparent into each request's _meta.
        async with Client(gateway.url, mode="2026-07-28") as client:
            found = await client.call_tool("search_tools", {"query": "weather forecast"})
            called = await client.call_tool(
                "call_tool", {"name": "weather__get_forecast", "arguments": {"location": {"city": "Tokyo"}}}
            )
    finally:
        context.detach(token)
    assert not found.is_error
    assert not called.is_error
    spans = receiver.wait_for(
        lambda got: _has(
            "tools/call search_tools",
            "tools/call call_tool",
            "toolscout.discovery.v1.Discovery/SearchTools",
            "toolscout.mcp_pool.v1.McpPool/CallTool",
        )([s for s in got if s.trace_id == trace_id])
    )
    spans = [s for s in spans if s.trace_id == trace_id]
    assert {s.service for s in spans} == {"toolscout-gateway", "toolscout-discovery", "toolscout-pool"}
    host_id = format(host.get_span_context().span_id, "016x")
    searched = _one(spans, "tools/call search_tools")
    assert (searched.parent_id, searched.kind, searched.service) == (host_id, "SERVER", "toolscout-gateway")
    assert searched.attributes["mcp.method.name"] == "tools/call"
    assert searched.attributes["gen_ai.tool.name"] == "search_tools"
    assert searched.attributes["toolscout.gateway.mode"] == "meta"
    assert _one(spans, "toolscout.discovery.v1.Discovery/SearchTools").parent_id == searched.span_id
    through = _one(spans, "tools/call call_tool")
    assert through.parent_id == host_id
    pool_rpc = _one(spans, "toolscout.mcp_pool.v1.McpPool/CallTool")
    assert pool_rpc.parent_id == through.span_id
    call_tool = _one(spans, "call_tool")
    assert call_tool.parent_id == pool_rpc.span_id
    assert _one(spans, "tools/call get_forecast").parent_id == call_tool.span_id


async def test_a_gateway_request_continues_the_traceparent_header_when_meta_has_none(
    gateway: GatewayStack, receiver: OtlpReceiver
) -> None:
    traceparent, trace_id, caller = _traceparent()
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "search_tools", "arguments": {"query": "slug"}},
    }
    answer = await post(gateway.url, body, headers={"traceparent": traceparent})
    assert answer.status_code == 200, answer.text
    spans = receiver.wait_for(
        lambda got: _has("toolscout.discovery.v1.Discovery/SearchTools", "tools/call search_tools")(
            [s for s in got if s.trace_id == trace_id]
        )
    )
    searched = _one([s for s in spans if s.trace_id == trace_id], "tools/call search_tools")
    assert searched.parent_id == caller
    assert searched.attributes["toolscout.toolset"] == ""


async def test_tracing_off_sends_nothing(receiver: OtlpReceiver, tmp_path: Path) -> None:
    before = receiver.requests
    async with FakeProvider() as fake:
        config = _config(
            tmp_path, fake.openai_base_url, {"exporter": "none", "endpoint": receiver.grpc_endpoint}
        )
        fake.script(
            Reply.calls(ScriptedCall("text__reverse", {"text": "abc"})),
            Reply.answer("cba"),
        )
        async with running_stack(config) as stack:
            assert stack.orchestrator is not None
            async with grpc.aio.insecure_channel(stack.orchestrator.address) as channel:
                traceparent, _, _ = _traceparent()
                reply = await orchestrator_pb2_grpc.OrchestratorStub(channel).Chat(
                    pb.ChatRequest(messages=[pb.Message(role="user", content="reverse abc")], model="gpt"),
                    metadata=[("traceparent", traceparent)],
                    timeout=WAIT,
                )
                assert reply.stop_reason == pb.STOP_REASON_COMPLETED
    # Stopped: anything queued would have been sent by now.
    assert receiver.requests == before


async def test_spans_go_over_otlp_http_when_asked(receiver: OtlpReceiver, tmp_path: Path) -> None:
    from toolscout.client import AsyncPoolClient

    from mcp_pool_svc.server import build_server as build_pool

    config = _config(
        tmp_path, "http://127.0.0.1:9/v1", {"endpoint": receiver.http_endpoint, "protocol": "http/protobuf"}
    )
    pool = await build_pool(config, listen="127.0.0.1:0", metrics_port=-1)
    try:
        async with AsyncPoolClient.connect(pool.address) as client:
            result = await client.call_tool("text__reverse", {"text": "http"})
        assert not result.is_error
    finally:
        await pool.stop(0.5)
    spans = receiver.wait_for(
        lambda got: any(
            s.name == "call_tool" and s.attributes.get("gen_ai.tool.name") == "reverse" for s in got
        )
    )
    assert {s.service for s in spans if s.name == "call_tool"} >= {"toolscout-pool"}
