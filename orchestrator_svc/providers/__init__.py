"""LLM provider adapters (OpenAI Chat Completions and compatibles, OpenAI Responses, Anthropic)
behind one interface.

The SDK-backed adapters are imported on first use: importing ``anthropic`` alone costs seconds of
CPU, which every ``toolscout`` command and service start would otherwise pay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator_svc.providers.base import LLMProvider, SdkProvider
from orchestrator_svc.providers.registry import ModelRegistry, ResolvedModel, build_provider

if TYPE_CHECKING:
    from orchestrator_svc.providers.anthropic_provider import AnthropicProvider
    from orchestrator_svc.providers.openai_provider import OpenAIProvider
    from orchestrator_svc.providers.responses_provider import OpenAIResponsesProvider

__all__ = [
    "AnthropicProvider",
    "LLMProvider",
    "ModelRegistry",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "ResolvedModel",
    "SdkProvider",
    "build_provider",
]


def __getattr__(name: str) -> Any:
    if name == "AnthropicProvider":
        from orchestrator_svc.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider
    if name == "OpenAIProvider":
        from orchestrator_svc.providers.openai_provider import OpenAIProvider

        return OpenAIProvider
    if name == "OpenAIResponsesProvider":
        from orchestrator_svc.providers.responses_provider import OpenAIResponsesProvider

        return OpenAIResponsesProvider
    raise AttributeError(name)
