"""Models and clients from the config: resolves a model name to its provider adapter."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from toolscout.client import Deferral

from orchestrator_svc.errors import ProviderAuthError, UnknownModelError
from orchestrator_svc.providers.base import LLMProvider
from orchestrator_svc.providers.deferral import ProviderApi, api_of, resolve_for_model
from toolscout_kit.config import ClientConfig, ModelConfig, ToolscoutConfig

__all__ = ["OLLAMA_DEFAULT_BASE_URL", "ModelRegistry", "ResolvedModel", "build_provider"]

OLLAMA_DEFAULT_BASE_URL = "http://localhost:11434/v1"

ProviderFactory = Callable[[str, ClientConfig], LLMProvider]


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    name: str
    config: ModelConfig
    client_name: str
    client: ClientConfig
    provider: LLMProvider
    # The wire API (messages, chat_completions, responses), the deferral mode ``auto`` resolved
    # to (see providers/deferral.py), and whether the model rejects changes to ``tools``.
    api: ProviderApi = "chat_completions"
    deferral: Deferral = Deferral.APPEND
    strict_tools: bool = False


def _api_key(client_name: str, client: ClientConfig) -> str:
    if client.api_key is not None:
        return client.api_key.get_secret_value()
    key = os.environ.get(client.key_env, "")
    if key:
        return key
    if client.needs_api_key:
        raise ProviderAuthError(
            f"client {client_name!r} has no API key: set {client.key_env} in the environment of the "
            f"stack (toolscout up, or the orchestrator), or clients.{client_name}.api_key"
        )
    # Local OpenAI-compatible servers accept any key; the SDK insists on one.
    return "not-needed"


def _ollama_base_url(url: str | None) -> str:
    if not url:
        return OLLAMA_DEFAULT_BASE_URL
    # casual-mcp's ollama base_url is the server root; the OpenAI-compatible API lives under /v1.
    return url if url.rstrip("/").endswith("/v1") else url.rstrip("/") + "/v1"


def build_provider(client_name: str, client: ClientConfig) -> LLMProvider:
    """The adapter for one configured client, with the SDK's own retries off (we retry).

    Raises:
        ProviderAuthError: the provider needs a key and none is configured.
    """
    # SDKs are imported here, on first use, to keep start-up fast (see providers/__init__.py).
    if client.provider == "anthropic":
        from anthropic import AsyncAnthropic

        from orchestrator_svc.providers.anthropic_provider import AnthropicProvider

        key = _api_key(client_name, client)
        sdk = AsyncAnthropic(api_key=key, base_url=client.base_url, max_retries=0, timeout=client.timeout)
        return AnthropicProvider(
            sdk, client_name=client_name, max_retries=client.max_retries, request_timeout=client.timeout
        )
    from openai import AsyncOpenAI

    from orchestrator_svc.providers.openai_provider import OpenAIProvider

    if client.provider == "openai" and client.api == "responses":
        from orchestrator_svc.providers.responses_provider import OpenAIResponsesProvider

        key = _api_key(client_name, client)
        sdk_client = AsyncOpenAI(api_key=key, base_url=client.base_url, max_retries=0, timeout=client.timeout)
        return OpenAIResponsesProvider(
            sdk_client,
            client_name=client_name,
            max_retries=client.max_retries,
            request_timeout=client.timeout,
        )

    # OpenAI's chat completions, or Ollama's OpenAI-compatible endpoint.
    ollama = client.provider == "ollama"
    key = _api_key(client_name, client)
    base_url = _ollama_base_url(client.base_url) if ollama else client.base_url
    oai = AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=client.timeout)
    return OpenAIProvider(
        oai,
        provider="ollama" if ollama else "openai",
        client_name=client_name,
        max_retries=client.max_retries,
        request_timeout=client.timeout,
    )


class ModelRegistry:
    """Resolves model names; provider adapters are built on first use and shared per client."""

    def __init__(self, config: ToolscoutConfig, factory: ProviderFactory = build_provider) -> None:
        self._config = config
        self._factory = factory
        self._providers: dict[str, LLMProvider] = {}

    @property
    def models(self) -> dict[str, ModelConfig]:
        return dict(self._config.models)

    def client(self, name: str) -> ClientConfig:
        return self._config.clients[name]

    def deferral(self, name: str) -> tuple[ProviderApi, Deferral, bool]:
        """(wire API, deferral mode, strict) of a configured model, without building its client."""
        model = self._config.models[name]
        client = self._config.clients[model.client]
        mode, strict = resolve_for_model(model, client, self._config.toolscout.orchestrator)
        return api_of(client), mode, strict

    def resolve(self, name: str) -> ResolvedModel:
        """Raises UnknownModelError (listing the models) or ProviderAuthError (no key)."""
        model = self._config.models.get(name)
        if model is None:
            known = ", ".join(sorted(self._config.models)) or "none configured"
            raise UnknownModelError(f"unknown model {name!r}; configured models: {known}")
        client = self._config.clients[model.client]
        provider = self._providers.get(model.client)
        if provider is None:
            provider = self._providers[model.client] = self._factory(model.client, client)
        deferral, strict = resolve_for_model(model, client, self._config.toolscout.orchestrator)
        return ResolvedModel(name, model, model.client, client, provider, api_of(client), deferral, strict)

    async def aclose(self) -> None:
        """Closes every provider client built so far."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()
