"""Prompt caching on OpenAI Chat Completions as billed since GPT-5.6: the conversation's
``prompt_cache_key`` on every ``provider: openai`` request (off per client), and cache writes
read from the usage beside cache reads. Real SDK, fake ``/v1/chat/completions``."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from orchestrator_svc.chat import ChatRequest
from orchestrator_svc.errors import ProviderRejectedError
from orchestrator_svc.loop import ChatLoop
from orchestrator_svc.messages import Message
from tests.support.fake_provider import FakeProvider, Reply
from tests.support.orchestrator_fakes import FakeDiscovery, FakePool, make_loop, tool
from toolscout_kit.config import parse_config

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as fake:
        yield fake


@pytest.fixture
async def loop(fake: FakeProvider, tmp_path: Path) -> AsyncIterator[ChatLoop]:
    local = {"base_url": fake.openai_base_url, "api_key": "k"}
    config = parse_config(
        {
            "clients": {
                "oai": {"provider": "openai", **local},
                "vllm": {"provider": "openai", **local, "prompt_cache_key": False},
                "ollama": {"provider": "ollama", **local},
            },
            "models": {
                "gpt": {"client": "oai", "model": "gpt-5.6"},
                "local": {"client": "vllm", "model": "qwen3-32b"},
                "llama": {"client": "ollama", "model": "llama3.2"},
            },
            "toolscout": {"orchestrator": {"templates_dir": str(tmp_path)}},
        },
        env={},
    )
    discovery = FakeDiscovery(eager=[tool("clock", "now")], deferred=[])
    chat_loop = make_loop(config, discovery, FakePool(), CollectorRegistry())
    yield chat_loop
    await chat_loop.models.aclose()


async def test_every_request_of_a_conversation_carries_one_prompt_cache_key_and_writes_are_counted(
    fake: FakeProvider, loop: ChatLoop
) -> None:
    fake.script(
        Reply.answer("Hi.", input_tokens=2000, cache_write_tokens=1920),
        Reply.answer("Fine.", input_tokens=2100, cached_tokens=1920),
    )
    history = [Message("user", "hello")]
    first = await loop.run(ChatRequest(messages=list(history), model="gpt"))
    history += [*first.messages, Message("user", "and now?")]
    second = await loop.run(ChatRequest(messages=history, model="gpt"))
    keys = [r.body.get("prompt_cache_key") for r in fake.requests]
    assert keys[0] == keys[1]
    assert re.fullmatch(r"[0-9a-f]{32}", str(keys[0]))
    assert (first.stats.usage.cache_write_tokens, first.stats.usage.cached_input_tokens) == (1920, 0)
    assert (second.stats.usage.cache_write_tokens, second.stats.usage.cached_input_tokens) == (0, 1920)


async def test_a_server_refusing_the_key_works_with_prompt_cache_key_false(
    fake: FakeProvider, loop: ChatLoop
) -> None:
    fake.unknown_chat_fields = {"prompt_cache_key"}
    fake.script(Reply.answer("never sent"), Reply.answer("ok"), Reply.answer("ok too"))
    with pytest.raises(
        ProviderRejectedError, match="Unrecognized request argument supplied: prompt_cache_key"
    ):
        await loop.run(ChatRequest(messages=[Message("user", "hi")], model="gpt"))
    local = await loop.run(ChatRequest(messages=[Message("user", "hi")], model="local"))
    # Ollama speaks Chat Completions but is no provider: openai client; it never gets the key.
    ollama = await loop.run(ChatRequest(messages=[Message("user", "hi")], model="llama"))
    assert (local.stop_reason, ollama.stop_reason) == ("completed", "completed")
    assert [("prompt_cache_key" in r.body, bool(r.rejected)) for r in fake.requests] == [
        (True, True),
        (False, False),
        (False, False),
    ]
