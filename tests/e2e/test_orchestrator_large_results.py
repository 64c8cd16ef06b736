"""Large tool results through the orchestrator end to end over gRPC: the real pool running npm
server-everything (stdio), real discovery, the real OpenAI and Anthropic SDKs against the
wire-level fake provider. The model gets a preview with a handle instead of the whole result, is
offered read_result while the handle is live, reads the part it needs, and the stats and metrics
count the result tokens; a handle is read only within its own conversation."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from toolscout import client as tc
from toolscout.client import wire
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from discovery_svc.server import SERVICE_NAME as DISCOVERY_SERVICE
from discovery_svc.server import build_server as build_discovery
from mcp_pool_svc.server import build_server as build_pool
from orchestrator_svc.server import build_server as build_orchestrator
from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.mcp_servers import everything_bin
from toolscout_kit.config import parse_config
from toolscout_kit.result_tool import no_handle_text
from toolscout_kit.server import RunningServer

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

REPO = Path(__file__).resolve().parents[2]
# A real, long text (about 50,000 tokens) that server-everything's echo sends back whole.
README = (REPO / "README.md").read_text(encoding="utf-8")
BUDGET = 2000
WAIT = 60.0
HANDLE = re.compile(r"as handle '(r\d+-[A-Za-z0-9_-]+)'")


def _middle_line() -> str:
    """A line from the middle of the README that occurs once: the answer the model looks for."""
    lines = README.splitlines()
    for line in lines[len(lines) // 2 :]:
        if len(line) > 40 and README.count(line) == 1 and "`" not in line:
            return line[:60]
    raise AssertionError("no unique line in the README")


NEEDLE = _middle_line()


@dataclass
class Stack:
    fake: FakeProvider
    stub: orchestrator_pb2_grpc.OrchestratorStub
    orchestrator: RunningServer
    pool: RunningServer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    base = tmp_path_factory.mktemp("results")
    async with FakeProvider() as fake:
        config = parse_config(
            {
                "clients": {
                    "oai": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "sk-e2e-0123"},
                    "claude": {"provider": "anthropic", "base_url": fake.anthropic_base_url, "api_key": "ak"},
                },
                "models": {
                    "gpt": {"client": "oai", "model": "gpt-e2e"},
                    "sonnet": {"client": "claude", "model": "claude-e2e"},
                },
                "servers": {"everything": {"command": str(everything_bin()), "args": ["stdio"]}},
                "toolscout": {
                    "orchestrator": {"max_iterations": 5},
                    "results": {"budget_tokens": BUDGET, "preview_tokens": 500},
                },
            },
            base_dir=base,
        )
        servers: list[RunningServer] = []
        try:
            pool = await build_pool(config, listen="127.0.0.1:0", metrics_port=-1)
            servers.append(pool)
            discovery = await build_discovery(
                config, listen="127.0.0.1:0", metrics_port=-1, pool_target=pool.address
            )
            servers.append(discovery)
            await _until_serving(discovery.address, DISCOVERY_SERVICE)
            orchestrator = await build_orchestrator(
                config,
                listen="127.0.0.1:0",
                metrics_port=-1,
                pool_target=pool.address,
                discovery_target=discovery.address,
            )
            servers.append(orchestrator)
            async with grpc.aio.insecure_channel(orchestrator.address) as channel:
                yield Stack(fake, orchestrator_pb2_grpc.OrchestratorStub(channel), orchestrator, pool)
        finally:
            for server in reversed(servers):
                await server.stop(0.5)


async def _until_serving(address: str, service: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=service), timeout=WAIT
        )
        async for reply in watch:
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                watch.cancel()
                return


@pytest.fixture
def fake(stack: Stack) -> FakeProvider:
    stack.fake.replies.clear()
    stack.fake.requests.clear()
    stack.fake.responder = None
    return stack.fake


def _tool_texts(request: RecordedRequest) -> list[str]:
    """The tool results in a provider request, as the model reads them."""
    texts: list[str] = []
    for m in request.body.get("messages", []):
        if m.get("role") == "tool":
            texts.append(m["content"] if isinstance(m["content"], str) else str(m["content"]))
        elif isinstance(m.get("content"), list):
            for block in m["content"]:
                if block.get("type") == "tool_result":
                    content = block.get("content")
                    if isinstance(content, list):  # text blocks: their text, not a repr of them
                        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
                    texts.append(content if isinstance(content, str) else str(content))
    return texts


def _reader(stack_fake: FakeProvider) -> None:
    """The model: call echo with the README, then read_result for the needle, then answer."""

    def respond(request: RecordedRequest) -> Reply:
        texts = _tool_texts(request)
        if not texts:
            return Reply.calls(ScriptedCall("everything__echo", {"message": README}, id="echo1"))
        found = HANDLE.search(texts[0])
        assert found is not None, texts[0][:500]
        if len(texts) == 1:
            read = {"handle": found.group(1), "pattern": NEEDLE, "context_lines": 1}
            return Reply.calls(ScriptedCall("read_result", read, id="read1"))
        return Reply.answer("found it" if NEEDLE in texts[-1] else "not found")

    stack_fake.responder = respond


def _chat(text: str, model: str, **kw: Any) -> pb.ChatRequest:
    return pb.ChatRequest(messages=[pb.Message(role="user", content=text)], model=model, **kw)


@pytest.mark.parametrize("model", ["gpt", "sonnet"])
async def test_the_model_gets_a_preview_reads_the_part_it_needs_and_the_tokens_are_counted(
    stack: Stack, fake: FakeProvider, model: str
) -> None:
    _reader(fake)
    response = await stack.stub.Chat(_chat(f"find the line ({model})", model), timeout=WAIT)
    result = wire.chat_result(response)
    assert result.text == "found it"
    echo, read = (m for m in result.messages if m.role == "tool")
    # The model saw a preview within the budget, with the handle; not the needle.
    assert echo.result_handle
    assert echo.result_handle in echo.content
    assert echo.handle_expires_unix > time.time()
    assert NEEDLE not in echo.content
    assert NEEDLE in read.content
    assert not read.is_error
    # read_result was offered only once a handle was live.
    first, second, _third = fake.requests
    assert "read_result" not in first.tool_names
    assert "read_result" in second.tool_names
    (tokens,) = result.stats.result_tokens
    assert tokens.server == "everything"
    assert tokens.tokens_returned > 10 * BUDGET
    assert 0 < tokens.tokens_delivered <= BUDGET
    assert tokens.tokens_saved == tokens.tokens_returned - tokens.tokens_delivered
    assert (tokens.results_kept, tokens.reads) == (1, 1)
    assert 0 < tokens.read_tokens <= BUDGET
    registry = stack.orchestrator.registry
    saved = registry.get_sample_value(
        "toolscout_orchestrator_result_tokens_total", {"server": "everything", "kind": "saved"}
    )
    assert saved is not None
    assert saved >= tokens.tokens_saved
    # The pool's own totals (what `toolscout tokens` shows) include this chat's result.
    async with tc.AsyncPoolClient.connect(stack.pool.address) as pool:
        (everything,) = await pool.list_servers()
    assert everything.result_tokens_returned >= tokens.tokens_returned
    assert everything.results_kept >= 1


async def test_a_handle_is_read_on_a_later_turn_but_not_from_another_conversation(
    stack: Stack, fake: FakeProvider
) -> None:
    _reader(fake)
    first = wire.chat_result(await stack.stub.Chat(_chat("find it", "gpt"), timeout=WAIT))
    handle = next(m.result_handle for m in first.messages if m.result_handle)
    history = [pb.Message(role="user", content="find it"), *(wire.chat_message_pb(m) for m in first.messages)]

    # Next turn of the same conversation (rebuilt from the history): the handle reads on.
    fake.responder = None
    fake.requests.clear()
    fake.script(
        Reply.calls(ScriptedCall("read_result", {"handle": handle, "offset": 0}, id="page")),
        Reply.answer("done"),
    )
    later = [*history, pb.Message(role="user", content="the first page, please")]
    turn = wire.chat_result(await stack.stub.Chat(pb.ChatRequest(messages=later, model="gpt"), timeout=WAIT))
    (page,) = (m for m in turn.messages if m.role == "tool")
    assert not page.is_error
    assert "characters 0-" in page.content
    assert "read_result" in fake.requests[0].tool_names

    # The same history sent as another conversation: the pool does not know the handle there.
    fake.script(
        Reply.calls(ScriptedCall("read_result", {"handle": handle}, id="steal")),
        Reply.answer("done"),
    )
    other = pb.ChatRequest(messages=later, model="gpt", conversation_id="someone-else")
    turn = wire.chat_result(await stack.stub.Chat(other, timeout=WAIT))
    (refused,) = (m for m in turn.messages if m.role == "tool")
    assert refused.is_error
    assert handle in refused.content
    assert NEEDLE not in refused.content

    # A handle the conversation was never given is refused before the pool is asked.
    fake.script(
        Reply.calls(ScriptedCall("read_result", {"handle": "r0-made-up"}, id="guess")),
        Reply.answer("done"),
    )
    turn = wire.chat_result(await stack.stub.Chat(pb.ChatRequest(messages=later, model="gpt"), timeout=WAIT))
    (guessed,) = (m for m in turn.messages if m.role == "tool")
    assert guessed.is_error
    assert guessed.content == no_handle_text("r0-made-up")
