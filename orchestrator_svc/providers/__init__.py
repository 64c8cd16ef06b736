"""LLM provider adapters (OpenAI-compatible and Anthropic) behind one interface."""

from orchestrator_svc.providers.anthropic_provider import AnthropicProvider
from orchestrator_svc.providers.base import LLMProvider, SdkProvider
from orchestrator_svc.providers.openai_provider import OpenAIProvider
from orchestrator_svc.providers.registry import ModelRegistry, ResolvedModel, build_provider

__all__ = [
    "AnthropicProvider",
    "LLMProvider",
    "ModelRegistry",
    "OpenAIProvider",
    "ResolvedModel",
    "SdkProvider",
    "build_provider",
]
