"""Models and clients from the config: provider adapters, keys, tool-rejection detection."""

from __future__ import annotations

import pytest

from orchestrator_svc.errors import ProviderAuthError
from orchestrator_svc.providers.base import looks_like_tools_rejected
from orchestrator_svc.providers.registry import OLLAMA_DEFAULT_BASE_URL, ModelRegistry, build_provider
from toolscout_kit.config import ClientConfig, parse_config


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (400, "registry.ollama.ai/library/gemma does not support tools", True),
        (400, '"auto" tool choice requires --enable-auto-tool-choice', True),
        (400, "No endpoints found that support tool use", True),
        (400, "messages: field required", False),
        (500, "tools broke", False),
    ],
)
def test_tool_rejections_are_recognised_across_servers(status: int, message: str, expected: bool) -> None:
    assert looks_like_tools_rejected(status, message) is expected


def test_missing_api_key_is_a_clear_precondition_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderAuthError, match="set ANTHROPIC_API_KEY"):
        build_provider("claude", ClientConfig(provider="anthropic"))
    with pytest.raises(ProviderAuthError, match="set OPENAI_API_KEY"):
        build_provider("oai", ClientConfig(provider="openai"))


async def test_ollama_needs_no_key_and_defaults_to_the_local_openai_compatible_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = parse_config(
        {
            "clients": {
                "local": {"provider": "ollama"},
                "remote": {"provider": "ollama", "base_url": "http://gpu:11434"},
            },
            "models": {
                "m": {"client": "local", "model": "qwen3"},
                "r": {"client": "remote", "model": "qwen3"},
            },
        }
    )
    registry = ModelRegistry(config)
    local = registry.resolve("m").provider
    remote = registry.resolve("r").provider
    assert local.provider == "ollama"
    assert str(local._client.base_url) == OLLAMA_DEFAULT_BASE_URL + "/"  # type: ignore[attr-defined]
    assert str(remote._client.base_url) == "http://gpu:11434/v1/"  # type: ignore[attr-defined]
    await registry.aclose()
