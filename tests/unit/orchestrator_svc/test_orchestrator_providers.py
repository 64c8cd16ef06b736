"""The shared retry policy of the provider adapters."""

from __future__ import annotations

import pytest
from openai import AsyncOpenAI

from orchestrator_svc.errors import ProviderUnavailableError
from orchestrator_svc.messages import LLMRequest, Message
from orchestrator_svc.providers.openai_provider import OpenAIProvider
from tests.support.fake_provider import FakeProvider, Reply


async def test_backoff_grows_without_retry_after_and_stops_at_the_deadline() -> None:
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    async with FakeProvider() as fake:
        fake.responder = lambda req: Reply.error(503, "busy", retry_after=None)
        client = AsyncOpenAI(api_key="k", base_url=fake.openai_base_url, max_retries=0)
        provider = OpenAIProvider(client, client_name="oai", max_retries=3, request_timeout=10, sleep=record)
        request = LLMRequest(model="m", system="", messages=[Message("user", "hi")], tools=[])
        with pytest.raises(ProviderUnavailableError, match="after 4 attempts: 503 busy"):
            await provider.complete(request)
        assert len(delays) == 3
        assert delays[0] < delays[2]
        # A backoff longer than the time left ends the call instead of sleeping past the deadline.
        delays.clear()
        request.timeout = 0.2
        with pytest.raises(ProviderUnavailableError, match="after 1 attempts"):
            await provider.complete(request)
        assert delays == []  # the first backoff (>= 0.25 s) would already overshoot
        await client.close()
