"""casual-mcp's ``clients`` and ``models``: the LLM API clients and the models that use them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, model_validator
from toolscout.client.types import Deferral

from toolscout_kit.config._base import Flag, Strict

__all__ = ["ClientConfig", "ModelConfig"]

# Where each provider's own API is (which refuses calls without a key), and where keys come from.
_PROVIDER_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "ollama": "OPENAI_API_KEY"}


class ClientConfig(Strict):
    """An LLM API client (casual-mcp ``clients.<name>``).

    toolscout's ``api`` picks the OpenAI API a ``provider: openai`` client speaks:
    ``chat_completions`` (default; also every OpenAI-compatible server) or ``responses`` (the
    Responses API, needed for OpenAI's native tool search). Other providers reject ``responses``.
    """

    provider: Literal["openai", "anthropic", "ollama"]
    base_url: str | None = None
    # Prefer the environment (OPENAI_API_KEY / ANTHROPIC_API_KEY); never logged.
    api_key: SecretStr | None = None
    timeout: float = Field(default=60.0, gt=0)
    # toolscout: retries of provider 429/5xx before giving up (exponential backoff).
    max_retries: int = Field(default=2, ge=0, le=10)
    # toolscout: which OpenAI API (provider openai only).
    api: Literal["chat_completions", "responses"] = "chat_completions"
    # toolscout, provider openai only: send ``prompt_cache_key`` (a per-conversation hash that
    # routes its requests to the same prompt cache). ``false`` for an OpenAI-compatible server
    # that rejects the unknown field.
    prompt_cache_key: Flag = True

    @property
    def key_env(self) -> str:
        """The environment variable the key comes from when ``api_key`` is not set."""
        return _KEY_ENV[self.provider]

    @property
    def needs_api_key(self) -> bool:
        """Whether calls need a key: the provider's own API does (no ``base_url``, or one on its
        host); a ``base_url`` elsewhere (Ollama, vLLM, LM Studio, a proxy) and ``ollama`` may not."""
        if self.provider not in _PROVIDER_HOSTS:
            return False
        if self.base_url is None:
            return True
        host = (urlsplit(self.base_url).hostname or "").lower()
        own = _PROVIDER_HOSTS[self.provider]
        return host == own or host.endswith("." + own)

    def missing_api_key(self, env: Mapping[str, str]) -> str | None:
        """The variable to set when a key is needed and neither ``api_key`` nor ``env`` has one."""
        if not self.needs_api_key or self.api_key is not None or env.get(self.key_env):
            return None
        return self.key_env

    @model_validator(mode="after")
    def _responses_only_for_openai(self) -> ClientConfig:
        if self.api == "responses" and self.provider != "openai":
            raise ValueError(
                f"api 'responses' is only for provider 'openai', not {self.provider!r} "
                "(Ollama and other OpenAI-compatible servers speak chat_completions)"
            )
        return self


class ModelConfig(Strict):
    """A model (casual-mcp ``models.<name>``), referencing a client."""

    client: str
    model: str
    template: str | None = None
    temperature: float | None = None
    # toolscout: cap on completion tokens (required by Anthropic; default 4096 there).
    max_tokens: int | None = Field(default=None, gt=0)
    # toolscout: the model accepts images. OpenAI-compatible tool messages carry text only, so image
    # results of tools then follow as a user message; Anthropic always receives them in the result.
    vision: Flag = False
    # toolscout: how discovered tools reach the model. ``append``: added to ``tools`` in a stable
    # order (works everywhere). ``native``: every tool of the toolset is declared on every request,
    # deferred ones with ``defer_loading: true``, and searches answer with the provider's own
    # mechanism (Anthropic ``tool_reference``; OpenAI Responses ``tool_search``), so ``tools`` never
    # changes. ``auto``: native where the provider and model support it (the table in
    # orchestrator_svc/providers/deferral.py, extended by
    # ``toolscout.orchestrator.native_deferral_models``), else append. ``stable`` (any provider):
    # ``tools`` is eager tools + ``search_tools`` + ``call_tool`` for the whole conversation; a
    # search answers with the found tools' definitions as text and the model calls them through
    # ``call_tool`` (discovery's cache-stable surface), so every provider's prompt cache survives.
    deferral: Deferral = Deferral.AUTO
    # toolscout: mark the stable prefix (tools, system, the previous turn) with prompt-cache
    # breakpoints where the provider wants explicit ones (Anthropic). OpenAI caches on its own.
    prompt_cache: Flag = True
    # toolscout, native mode on Anthropic only: ``ours`` (our BM25 ``search_tools`` answering with
    # tool_reference blocks) or ``provider`` (Anthropic's ``tool_search_tool_bm25_20251119``).
    search: Literal["ours", "provider"] = "ours"
    # toolscout: the model rejects any change to ``tools`` within a conversation (true/false);
    # unset: decided by the same table (and ``toolscout.orchestrator.strict_tools_models``).
    strict_tools: Flag | None = None
