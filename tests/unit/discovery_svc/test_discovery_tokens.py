"""Offline token counts: encoding per provider, definition JSON per dialect, per-tool caching."""

from __future__ import annotations

import json

import pytest

from discovery_svc.tokens import PROVIDERS, TokenCounter, definition_json
from tests.support.discovery_catalogs import make_tool
from toolscout_kit.errors import InvalidArgumentError


def test_providers_map_to_encodings_and_anthropic_is_an_estimate() -> None:
    counter = TokenCounter()
    assert counter.encoding_for("") == PROVIDERS["openai"]
    assert (counter.encoding_for("openai").name, counter.encoding_for("openai").estimate) == (
        "o200k_base",
        False,
    )
    assert (counter.encoding_for("anthropic").name, counter.encoding_for("anthropic").estimate) == (
        "cl100k_base",
        True,
    )
    assert counter.encoding_for("ollama").name == "o200k_base"


def test_unknown_provider_is_invalid_and_lists_providers() -> None:
    with pytest.raises(
        InvalidArgumentError, match=r"unknown provider 'gemini' \(providers: anthropic, ollama, openai\)"
    ):
        TokenCounter.encoding_for("gemini")


def test_definitions_are_the_json_each_provider_receives() -> None:
    schema = '{"type":"object","properties":{"q":{"type":"string"}}}'
    openai = json.loads(definition_json("s_t", 'Does "x"', schema, "openai"))
    anthropic = json.loads(definition_json("s_t", 'Does "x"', schema, "anthropic"))
    assert openai == {
        "type": "function",
        "function": {"name": "s_t", "description": 'Does "x"', "parameters": json.loads(schema)},
    }
    assert anthropic == {"name": "s_t", "description": 'Does "x"', "input_schema": json.loads(schema)}


def test_tool_count_matches_counting_its_definition_and_is_cached() -> None:
    counter = TokenCounter()
    enc = counter.encoding_for("openai")
    tool = make_tool("weather", "forecast", "Weather forecast for a city.", {"city": {"type": "string"}})
    expected = counter.count_text(
        definition_json(tool.llm_name, tool.description, tool.input_schema_json, "openai"), "o200k_base"
    )
    assert counter.count_tool(tool, enc) == expected > 10
    assert tool in counter._tool_counts[("o200k_base", "openai")]
    counter.retain(frozenset())
    assert tool not in counter._tool_counts[("o200k_base", "openai")]


def test_retain_while_a_worker_thread_adds_counts() -> None:
    """A worker thread counting tools (a toolset's totals) while the event loop installs a new
    catalog: a count added in the middle of ``retain`` does not break it. Here the addition comes
    from the membership test itself, at the point where a thread switch could put it."""
    counter = TokenCounter()
    enc = counter.encoding_for("openai")
    kept = make_tool("weather", "forecast", "Weather forecast for a city.")
    counter.count_tool(kept, enc)
    cache = counter._tool_counts[("o200k_base", "openai")]
    late = make_tool("mail", "send", "Send an email.")

    class Counting:
        """A key whose membership test adds another tool's count to the cache meanwhile."""

        armed = False

        def __hash__(self) -> int:
            if self.armed:
                cache.setdefault(late, 3)
            return 0

    meddler = Counting()
    cache[meddler] = 1  # type: ignore[index]
    meddler.armed = True
    counter.retain(frozenset({kept}))
    assert set(counter._tool_counts[("o200k_base", "openai")]) == {kept}


def test_non_ascii_text_is_counted() -> None:
    counter = TokenCounter()
    assert counter.count_text("使用必应搜索指定的关键词", "cl100k_base") > 5
    assert counter.count_text("", "o200k_base") == 0
