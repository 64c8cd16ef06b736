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


@pytest.mark.parametrize("provider_kind", ["openai", "anthropic"])
async def test_a_provider_that_cannot_be_reached_is_named_by_the_url_tried(provider_kind: str) -> None:
    from anthropic import AsyncAnthropic

    from orchestrator_svc.providers.anthropic_provider import AnthropicProvider
    from tests.support.mcp_servers import free_port

    base = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    request = LLMRequest(model="m", system="", messages=[Message("user", "hi")], tools=[])
    if provider_kind == "openai":
        sdk: AsyncOpenAI | AsyncAnthropic = AsyncOpenAI(api_key="k", base_url=f"{base}/v1", max_retries=0)
        provider: OpenAIProvider | AnthropicProvider = OpenAIProvider(
            sdk, client_name="oai", max_retries=0, request_timeout=10
        )
        url = f"{base}/v1/chat/completions"
    else:
        sdk = AsyncAnthropic(api_key="k", base_url=base, max_retries=0)
        provider = AnthropicProvider(sdk, client_name="claude", max_retries=0, request_timeout=10)
        url = f"{base}/v1/messages"
    with pytest.raises(ProviderUnavailableError) as err:
        await provider.complete(request)
    await sdk.close()
    assert f"connection error to {url}: " in err.value.message
    assert "refused" in err.value.message.lower()
