"""One chat, one trace, across processes: ``toolscout up`` (the services sharing one process, each
with its own service.name) and ``toolscout serve`` (pool shards, discovery and the orchestrator each
a process of its own), exporting to a real OTLP receiver on 127.0.0.1; and every log line a chat
wrote, in every service, joined to it by its trace id."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from tests.support.cli_stack import ThreadedProvider, UpProcess, run_cli, stack_config
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.mcp_servers import example_server_config
from tests.support.otlp_receiver import OtlpReceiver, Span
from tests.support.sharded_stack import running_sharded_stack

pytestmark = pytest.mark.e2e

WAIT = 60.0
CHAT_SPAN = "toolscout.orchestrator.v1.Orchestrator/Chat"
SEARCH_RPC = "toolscout.discovery.v1.Discovery/SearchTools"
CALL_RPC = "toolscout.mcp_pool.v1.McpPool/CallTool"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    # Spans leave in batches; a short delay keeps the waits short (the default is 5 s).
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    with OtlpReceiver() as running:
        yield running


def _script(fake: FakeProvider) -> None:
    fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "weather forecast for a city"})),
        Reply.calls(ScriptedCall("weather__get_forecast", {"location": {"city": "Tokyo"}, "days": 1})),
        Reply.answer("Sunny."),
    )


def _chat_trace(receiver: OtlpReceiver) -> tuple[str, list[Span]]:
    """The trace of the one chat: once the last span of each service in it has arrived."""

    def complete(spans: list[Span]) -> bool:
        chats = [s for s in spans if s.name == CHAT_SPAN]
        return bool(chats) and {CHAT_SPAN, SEARCH_RPC, CALL_RPC} <= {
            s.name for s in spans if s.trace_id == chats[0].trace_id
        }

    spans = receiver.wait_for(complete, WAIT)
    trace_id = next(s.trace_id for s in spans if s.name == CHAT_SPAN)
    return trace_id, [s for s in spans if s.trace_id == trace_id]


def _assert_one_tree(spans: list[Span]) -> dict[str, Span]:
    """chat → LLM calls → search → call_tool → the MCP request, each parented by the one before."""
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if s.parent_id not in by_id]
    assert [r.name for r in roots] == [CHAT_SPAN], roots  # one tree, rooted at the chat's RPC
    named = {s.name: s for s in spans}

    def parent(name: str) -> Span:
        return by_id[named[name].parent_id]

    assert parent("chat").name == CHAT_SPAN
    llm = [s for s in spans if s.name == "chat fake-model"]
    assert len(llm) == 3
    assert {by_id[s.parent_id].name for s in llm} == {"chat"}
    assert parent("search").name == SEARCH_RPC
    assert by_id[parent("search").parent_id].name == "execute_tool search_tools"
    assert parent("tools/call get_forecast").name == "call_tool"
    assert parent("call_tool").name == CALL_RPC
    assert by_id[parent("call_tool").parent_id].name == "execute_tool weather__get_forecast"
    return named


def _joined(lines: list[str], trace_id: str) -> list[dict[str, Any]]:
    """The JSON log lines that carry ``trace_id``."""
    found = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("trace_id") == trace_id:
            found.append(record)
    return found


def test_a_chat_through_toolscout_up_is_one_trace_and_its_log_lines_join_by_its_id(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    log = tmp_path / "up.log"
    with ThreadedProvider() as fake:
        config = stack_config(tmp_path / "config.json", provider_url=fake.openai_base_url)
        document = json.loads(config.read_text())
        document["toolscout"]["tracing"] = {"endpoint": receiver.grpc_endpoint}
        config.write_text(json.dumps(document))
        up = UpProcess(config, "--log-file", str(log), "--log-level", "DEBUG")
        try:
            endpoints = up.wait_ready(WAIT)
            up.server_states({"notes", "weather", "time"}, WAIT)
            _script(fake)
            with grpc.insecure_channel(endpoints["orchestrator"]) as channel:
                reply = orchestrator_pb2_grpc.OrchestratorStub(channel).Chat(
                    pb.ChatRequest(
                        messages=[pb.Message(role="user", content="Weather in Tokyo?")], model="fake"
                    ),
                    timeout=WAIT,
                )
            assert reply.stop_reason == pb.STOP_REASON_COMPLETED
            trace_id, spans = _chat_trace(receiver)
        finally:
            assert up.stop() == 0, up.stderr
    # One process, a service.name each.
    assert {s.service for s in spans} == {"toolscout-orchestrator", "toolscout-discovery", "toolscout-pool"}
    _assert_one_tree(spans)
    lines = _joined(log.read_text().splitlines(), trace_id)
    rpcs = {line.get("rpc") for line in lines}
    assert {f"/{CHAT_SPAN}", f"/{SEARCH_RPC}", f"/{CALL_RPC}"} <= rpcs, rpcs
    assert "/toolscout.discovery.v1.Discovery/PlanTools" in rpcs
    assert any(line["event"] == "chat_finished" for line in lines)
    span_ids = {s.span_id for s in spans}
    assert {line["span_id"] for line in lines} <= span_ids


async def test_a_chat_across_toolscout_serve_processes_and_pool_shards_is_one_trace(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    with ThreadedProvider() as fake:
        document = {
            "clients": {"local": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "k"}},
            "models": {"fake": {"client": "local", "model": "fake-model"}},
            "servers": {
                "text": example_server_config("text", shard=0),
                "weather": example_server_config("weather", defer_loading=True, shard=1),
            },
            "tool_discovery": {"enabled": True},
            "toolscout": {"log_level": "DEBUG", "tracing": {"endpoint": receiver.grpc_endpoint}},
        }
        async with running_sharded_stack(tmp_path, document, shards=2, orchestrator=True) as stack:
            assert stack.orchestrator is not None
            _script(fake)
            async with grpc.aio.insecure_channel(stack.orchestrator.address) as channel:
                reply = await orchestrator_pb2_grpc.OrchestratorStub(channel).Chat(
                    pb.ChatRequest(
                        messages=[pb.Message(role="user", content="Weather in Tokyo?")], model="fake"
                    ),
                    timeout=WAIT,
                )
            assert reply.stop_reason == pb.STOP_REASON_COMPLETED
            trace_id, spans = _chat_trace(receiver)
            logs = {s.name: s.log for s in stack.services()}
    named = _assert_one_tree(spans)
    # weather is pinned to shard 1 of 2: its call span says so.
    assert named["call_tool"].attributes["toolscout.pool.shard"] == "1/2"
    assert named["call_tool"].attributes["toolscout.mcp.server"] == "weather"
    # Each process's lines of this chat, joined by the trace id.
    joined = {name: _joined(path.read_text().splitlines(), trace_id) for name, path in logs.items()}
    assert {line.get("rpc") for line in joined["orchestrator"]} >= {f"/{CHAT_SPAN}"}
    assert {line.get("rpc") for line in joined["discovery"]} >= {f"/{SEARCH_RPC}"}
    assert {line.get("rpc") for line in joined["pool-1"]} >= {f"/{CALL_RPC}"}
    assert joined["pool-0"] == []  # the other shard had no part in this chat
    assert all(re.fullmatch(r"[0-9a-f]{16}", line["span_id"]) for lines in joined.values() for line in lines)


def test_a_tracing_variable_toolscout_cannot_use_stops_serve_at_start_naming_it() -> None:
    done = run_cli(
        "serve",
        "discovery",
        "-c",
        "examples/casual_mcp_config.json",
        "--listen",
        "127.0.0.1:0",
        "--metrics-port",
        "-1",
        env={"OTEL_TRACES_EXPORTER": "jaeger"},
    )
    assert done.returncode == 2
    assert "OTEL_TRACES_EXPORTER: 'jaeger' is not supported (otlp, console or none)" in done.stderr
    assert "Traceback" not in done.stderr
