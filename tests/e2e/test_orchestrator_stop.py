"""The orchestrator's stop with chats still running at the end of its grace: real pool and discovery
services, our text MCP server (stdio), the real OpenAI SDK talking to the local fake provider.

A chat still running is answered ABORTED with a sentence a person can act on (a tool it was running
may or may not have taken effect), not gRPC's own "Cancelling all calls" as UNAVAILABLE; its tool
call is cancelled at the pool; a chat that ends within the grace is answered as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from discovery_svc.server import build_server as build_discovery
from mcp_pool_svc.server import build_server as build_pool
from orchestrator_svc.server import build_server as build_orchestrator
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.mcp_servers import example_server_config
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

WAIT = 30.0
GRACE = 0.5
_ENDED = (
    "the orchestrator stopped before this chat finished; a tool it was running may or may not have "
    "taken effect"
)


def _chat(text: str) -> pb.ChatRequest:
    return pb.ChatRequest(messages=[pb.Message(role="user", content=text)], model="gpt")


def _cancelled_calls(pool: RunningServer) -> float:
    labels = {"server": "text", "outcome": "cancelled"}
    return pool.registry.get_sample_value("toolscout_pool_tool_calls_total", labels) or 0.0


def _calls_started(pool: RunningServer) -> float:
    # ``text__wait`` is not annotated read-only: the pool takes the server's write turn right
    # before it sends the call, and counts the wait.
    labels = {"server": "text"}
    return pool.registry.get_sample_value("toolscout_pool_write_lock_wait_seconds_count", labels) or 0.0


async def _until(predicate: object) -> None:
    # The pool's metrics have no event to wait on.
    async with asyncio.timeout(WAIT):
        while not predicate():  # type: ignore[operator]  # noqa: ASYNC110
            await asyncio.sleep(0.02)


@asynccontextmanager
async def _stack(tmp_path: Path) -> AsyncIterator[tuple[FakeProvider, RunningServer, RunningServer]]:
    """The fake provider, the pool and the orchestrator (discovery runs too)."""
    async with FakeProvider() as fake:
        config = parse_config(
            {
                "clients": {"oai": fake.openai_client()},
                "models": {"gpt": {"client": "oai", "model": "gpt-e2e"}},
                "servers": {"text": example_server_config("text")},
            },
            base_dir=tmp_path,
        )
        servers = [await build_pool(config, listen="127.0.0.1:0", metrics_port=-1)]
        try:
            pool = servers[0]
            servers.append(
                await build_discovery(config, listen="127.0.0.1:0", metrics_port=-1, pool_target=pool.address)
            )
            servers.append(
                await build_orchestrator(
                    config,
                    listen="127.0.0.1:0",
                    metrics_port=-1,
                    pool_target=pool.address,
                    discovery_target=servers[1].address,
                )
            )
            yield fake, pool, servers[2]
        finally:
            for server in reversed(servers):
                await server.stop(GRACE)


async def test_a_streamed_chat_still_running_when_the_grace_ends_is_aborted_saying_why(
    tmp_path: Path,
) -> None:
    async with _stack(tmp_path) as (fake, pool, orchestrator):
        fake.script(Reply.calls(ScriptedCall("text__wait", {"seconds": 30})), Reply.answer("late"))
        started = _calls_started(pool)
        cancelled = _cancelled_calls(pool)
        events: list[str] = []
        stopping: list[asyncio.Future[None]] = []

        async def read(call: grpc.aio.UnaryStreamCall[pb.ChatRequest, pb.ChatEvent]) -> None:
            async for event in call:
                events.append(event.WhichOneof("event"))
                if events[-1] == "tool_call_started":
                    await _until(lambda: _calls_started(pool) > started)
                    stopping.append(asyncio.ensure_future(orchestrator.stop(GRACE)))

        async with grpc.aio.insecure_channel(orchestrator.address) as channel:
            call = orchestrator_pb2_grpc.OrchestratorStub(channel).StreamChat(_chat("wait"), timeout=WAIT)
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await read(call)
        await stopping[0]
        # The pool's call was cancelled with the chat.
        await _until(lambda: _cancelled_calls(pool) > cancelled)
    assert ended.value.code() == grpc.StatusCode.ABORTED
    assert ended.value.details() == _ENDED
    assert events == ["assistant_message", "usage", "tool_call_started"]
    assert len(fake.requests) == 1  # the chat went no further


@pytest.mark.parametrize(
    ("seconds", "grace", "answer"),
    [(30, GRACE, f"ABORTED: {_ENDED}"), (0.3, WAIT, "done waiting")],
    ids=["still_running", "ends_within_the_grace"],
)
async def test_a_chat_ending_within_the_grace_is_answered_and_one_still_running_is_aborted_saying_why(
    tmp_path: Path, seconds: float, grace: float, answer: str
) -> None:
    async with _stack(tmp_path) as (fake, pool, orchestrator):
        fake.script(
            Reply.calls(ScriptedCall("text__wait", {"seconds": seconds})), Reply.answer("done waiting")
        )
        started = _calls_started(pool)
        async with grpc.aio.insecure_channel(orchestrator.address) as channel:
            chat = asyncio.ensure_future(
                orchestrator_pb2_grpc.OrchestratorStub(channel).Chat(_chat("wait"), timeout=WAIT)
            )
            await _until(lambda: _calls_started(pool) > started)
            stopping = asyncio.ensure_future(orchestrator.stop(grace))
            (outcome,) = await asyncio.gather(chat, return_exceptions=True)
            await stopping
    if isinstance(outcome, grpc.aio.AioRpcError):
        assert f"{outcome.code().name}: {outcome.details()}" == answer
    else:
        assert isinstance(outcome, pb.ChatResponse), outcome
        assert outcome.messages[-1].content == answer
