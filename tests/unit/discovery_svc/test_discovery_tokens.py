"""Offline token counts: encoding per provider, definition JSON per dialect, per-tool caching."""

from __future__ import annotations

import json

import pytest
from toolscout.client import Tool

from discovery_svc.tokens import PROVIDERS, TokenCounter, definition_json
from tests.support.discovery_catalogs import SHARED_DATA, load_jsonl_tools, make_tool
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


def _whole(counter: TokenCounter, tool: Tool, provider: str) -> int:
    enc = counter.encoding_for(provider)
    return counter.count_text(
        definition_json(tool.llm_name, tool.description, tool.input_schema_json, enc.dialect), enc.name
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_tools_count_is_its_whole_definitions_on_every_real_catalog(provider: str) -> None:
    """Every tool of the five catalogs in ../shared/data (8,662, most with names the counter
    splits off their definition): the count is exactly what counting the whole definition gives."""
    tools = [tool for path in sorted(SHARED_DATA.glob("*.tools.jsonl")) for tool in load_jsonl_tools(path)]
    assert len(tools) > 8000
    counter = TokenCounter()
    enc = counter.encoding_for(provider)
    wrong = [t.llm_name for t in tools if counter.count_tool(t, enc) != _whole(counter, t, provider)]
    assert wrong == []
    assert len(counter._rest_counts[(enc.name, enc.dialect)]) > 4000  # most were counted in parts


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("name", ["_tool", "-x", "/x", "tool.", "tool ", "x)", "é_tool", 'say_"hi"', "", "a"])
def test_names_that_would_merge_with_the_quotes_are_counted_whole(provider: str, name: str) -> None:
    """A name that starts or ends with anything but an ASCII letter or digit can share a
    pre-tokenizer piece with the JSON around it (``":"_``, ``.","``): in parts its count would be
    one token off (the first six here are); it is counted with its whole definition."""
    counter = TokenCounter()
    for description in ("", "Gets it.", ", comma", "'s thing"):
        tool = Tool(
            name=name,
            llm_name=name,
            server="s",
            description=description,
            input_schema_json='{"type":"object"}',
        )
        assert counter.count_tool(tool, counter.encoding_for(provider)) == _whole(counter, tool, provider)


def test_a_fleets_repeated_definitions_are_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 servers running the same tool: its description and schema are counted once, each name
    on its own; a catalog without the tool forgets that count."""
    counter = TokenCounter()
    enc = counter.encoding_for("openai")
    tools = [
        make_tool(f"team{i}", "forecast", "Weather forecast for a city.", {"city": {"type": "string"}})
        for i in range(100)
    ]
    counted: list[str] = []
    count_text = counter.count_text
    monkeypatch.setattr(
        counter, "count_text", lambda text, encoding: counted.append(text) or count_text(text, encoding)
    )
    totals = [counter.count_tool(t, enc) for t in tools]
    assert len(counted) == 102  # the JSON before the name, the JSON after it, and 100 names
    assert totals == [_whole(TokenCounter(), t, "openai") for t in tools]
    counter.retain(frozenset())
    counted.clear()
    counter.count_tool(tools[0], enc)
    assert len(counted) == 2  # the name and, forgotten, the JSON after it
