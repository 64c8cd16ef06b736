"""Result shaping: lossless steps, binary kept out past the budget, previews within the budget."""

from __future__ import annotations

import json
import random
import tracemalloc
from typing import Any

import pytest
from toolscout.client import ContentBlock

from toolscout_kit.shaping import (
    Shaped,
    ShapingPolicy,
    StructuredCopy,
    compact_json_text,
    count_result,
    fits_unchanged,
    json_sketch,
    shape_result,
)
from toolscout_kit.tokens import count_tokens, max_tokens


def _text(text: str) -> ContentBlock:
    return ContentBlock("text", text=text, raw_json='{"type":"text"}')


def _shape(content: tuple[ContentBlock, ...], structured: str = "", **policy: Any) -> Shaped:
    return shape_result(
        content, structured, ShapingPolicy(**{"budget_tokens": 500, **policy}), handle="h-1", what="srv/tool"
    )


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 4 and roll < 0.3:
        return {f'k{i} "q"': _random_json(rng, depth + 1) for i in range(rng.randint(0, 5))}
    if depth < 4 and roll < 0.5:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 12))]
    return rng.choice([1, -2.5, 1e-7, True, None, "a b\n\t c", 'é ✓ \\ "', 12345678901234567890])


def _random_result(rng: random.Random) -> tuple[tuple[ContentBlock, ...], str]:
    pieces = ["word ", "é", "✓", "😀", "\ud800", "\n", "  ", '{"a": [1, 2]}', "0123456789", "x" * 700]
    blocks: list[ContentBlock] = []
    for _ in range(rng.randint(0, 3)):
        if rng.random() < 0.2:
            blocks.append(ContentBlock("image", data=bytes(rng.randint(0, 900)), mime_type="image/png"))
        else:
            blocks.append(_text("".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))))
    structured = json.dumps({"result": "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))})
    return tuple(blocks), structured if rng.random() < 0.5 else ""


@pytest.mark.parametrize("copy", list(StructuredCopy))
def test_a_result_said_to_fit_unchanged_is_shaped_unchanged_on_random_results(copy: StructuredCopy) -> None:
    rng = random.Random(7)  # noqa: S311  # reproducible test data, not secrets
    said = 0
    for _ in range(400):
        content, structured = _random_result(rng)
        policy = ShapingPolicy(budget_tokens=rng.choice([100, 300, 1000, 3000]), structured_copy=copy)
        shaped = shape_result(content, structured, policy, handle="h-1", what="srv/tool")
        counted = count_result(content, structured, policy.encoding)
        assert (counted.tokens, counted.estimated) == (shaped.tokens_returned, shaped.estimated)
        if fits_unchanged(content, structured, policy):
            said += 1
            assert (shaped.content, shaped.structured_content_json) == (content, structured)
            assert shaped.tokens_delivered == shaped.tokens_returned <= policy.budget_tokens
            assert shaped.document is None
    assert said > 100  # (the bound is not so loose that it never says so)


def test_fits_unchanged_is_not_sure_past_the_bound_or_where_a_copy_may_be_dropped() -> None:
    text = "a" * 600  # 600 bytes, far fewer tokens
    assert count_tokens(text) < 500 < max_tokens(text)
    assert not fits_unchanged((_text(text),), "", ShapingPolicy(budget_tokens=500))
    assert fits_unchanged((_text(text),), "", ShapingPolicy(budget_tokens=600))
    listing = (_text('{"a": 1}'),)
    assert fits_unchanged(listing, '{"a": 1}', ShapingPolicy(budget_tokens=500))
    assert not fits_unchanged(
        listing, '{"a": 1}', ShapingPolicy(budget_tokens=500, structured_copy=StructuredCopy.STRUCTURED)
    )


def test_a_long_text_is_counted_from_windows_within_its_bound() -> None:
    text = "naïve café — " * 2_000  # past the exact count: estimated
    (counted,) = (count_result((_text(text),), "", "o200k_base"),)
    assert counted.estimated
    assert counted.tokens <= max_tokens(text) == len(text.encode())


def test_lone_surrogates_are_counted_as_the_replacement_character() -> None:
    # json.loads gives them from "\\ud800" escapes; counting must not fail on them.
    assert count_tokens("a\ud800b") == count_tokens("a\ufffdb")
    assert count_tokens("\ud83d\ude00") == count_tokens("😀")  # a pair, as UTF-16 reads it
    assert max_tokens("a\ud800b") == 5 >= count_tokens("a\ud800b")


def test_compaction_is_lossless_on_random_documents() -> None:
    rng = random.Random(7)  # noqa: S311  # reproducible test data, not secrets
    for _ in range(300):
        value = _random_json(rng)
        pretty = json.dumps(value, indent=rng.choice([1, 2, 4]), ensure_ascii=rng.random() < 0.5)
        compact = compact_json_text(pretty)
        if compact is None:  # nothing to remove (a scalar, or already compact)
            assert not isinstance(value, dict | list) or pretty == json.dumps(value, separators=(",", ":"))
            continue
        assert json.loads(compact) == value
        assert len(compact) < len(pretty)


def test_sketch_counts_match_the_document_on_random_documents() -> None:
    rng = random.Random(11)  # noqa: S311  # reproducible test data, not secrets
    for _ in range(200):
        value = {"rows": [_random_json(rng) for _ in range(rng.randint(0, 20))], "n": 1}
        sketch = json_sketch(json.dumps(value, indent=2))
        assert sketch is not None
        assert sketch.count == 2
        assert sketch.items["rows"].count == len(value["rows"])


def test_text_that_only_looks_like_json_is_not_compacted() -> None:
    assert compact_json_text("{ not json at all }") is None
    assert json_sketch("[1, 2,]") is None


def test_a_small_text_result_passes_unchanged() -> None:
    content = (_text("hello world"),)
    shaped = _shape(content)
    assert shaped.content == content
    assert shaped.document is None
    assert shaped.tokens_returned == shaped.tokens_delivered == count_tokens("hello world")


def test_pretty_json_is_delivered_compact() -> None:
    pretty = json.dumps({"a": [1, 2, 3], "b": {"c": "d e"}}, indent=4)
    shaped = _shape((_text(pretty),), structured_copy=StructuredCopy.STRUCTURED)
    assert shaped.content[0].text == '{"a":[1,2,3],"b":{"c":"d e"}}'
    assert shaped.tokens_delivered < shaped.tokens_returned


def test_a_result_within_the_budget_reaches_a_host_unchanged() -> None:
    structured = '{"temperature":21.5,"unit":"C"}'
    text = json.dumps(json.loads(structured), indent=2)
    shaped = _shape((_text(text),), structured, structured_copy=StructuredCopy.TEXT)
    assert shaped.structured_content_json == structured
    assert shaped.content[0].text == text
    assert shaped.tokens_delivered == shaped.tokens_returned


def test_duplicate_structured_content_reaches_the_model_once_as_text_for_hosts_past_the_budget() -> None:
    structured = json.dumps({"rows": [{"id": i, "name": f"row {i}"} for i in range(40)]})
    text = json.dumps(json.loads(structured), indent=2)
    shaped = _shape((_text(text),), structured, structured_copy=StructuredCopy.TEXT, budget_tokens=600)
    assert shaped.structured_content_json == ""
    assert json.loads(shaped.content[0].text) == json.loads(structured)


def test_duplicate_structured_content_stays_when_the_tool_declares_an_output_schema() -> None:
    structured = '{"temperature":21.5}'
    shaped = _shape((_text(structured),), structured, keep_structured=True)
    assert shaped.structured_content_json == structured


def test_duplicate_structured_content_reaches_the_model_once_as_structured_for_providers() -> None:
    structured = '{"temperature":21.5,"unit":"C"}'
    shaped = _shape(
        (_text(json.dumps(json.loads(structured), indent=2)),),
        structured,
        structured_copy=StructuredCopy.STRUCTURED,
    )
    assert shaped.content == ()
    assert shaped.structured_content_json == structured


def test_a_text_that_differs_from_structured_content_is_kept() -> None:
    shaped = _shape(
        (_text("It is 21.5 C"),), '{"temperature":21.5}', structured_copy=StructuredCopy.STRUCTURED
    )
    assert shaped.content[0].text == "It is 21.5 C"
    assert shaped.structured_content_json == '{"temperature":21.5}'


def test_an_image_over_the_budget_is_not_inlined() -> None:
    image = ContentBlock(
        "image", data=bytes(range(256)) * 40, mime_type="image/png", raw_json='{"type":"image"}'
    )
    shaped = _shape((_text("chart:"), image))
    assert [b.type for b in shaped.content] == ["text", "text"]
    assert "image/png" in shaped.content[1].text
    assert "not inlined" in shaped.content[1].text
    assert shaped.tokens_delivered <= 500


def test_a_small_image_within_the_budget_stays() -> None:
    image = ContentBlock("image", data=b"\x89PNG tiny", mime_type="image/png", raw_json='{"type":"image"}')
    shaped = _shape((image,))
    assert shaped.content == (image,)


def test_a_long_log_becomes_a_preview_with_head_tail_and_handle_within_the_budget() -> None:
    log = "\n".join(f"line {i} status={i % 7}" for i in range(20_000))
    shaped = _shape((_text(log),), budget_tokens=400, preview_tokens=300)
    assert shaped.document is log  # kept, not copied
    (preview,) = shaped.content
    assert "'h-1'" in preview.text
    assert "srv/tool" in preview.text
    assert "line 0 status=0" in preview.text
    assert "line 19999 status=" in preview.text
    assert "not shown" in preview.text
    assert count_tokens(preview.text) == shaped.tokens_delivered <= 300
    assert shaped.tokens_returned > 100_000


def test_a_large_json_listing_previews_its_shape_with_counts_and_first_items() -> None:
    listing = {"items": [{"id": i, "name": f"n{i}"} for i in range(5000)], "total": 5000}
    shaped = _shape((_text(json.dumps(listing, indent=2)),), budget_tokens=600)
    (preview,) = shaped.content
    assert shaped.document_is_json
    assert "$.items: array of 5000 items of object (id, name)" in preview.text
    assert '{"id":0,"name":"n0"}' in preview.text
    assert "more items (of 5000)" in preview.text
    assert count_tokens(preview.text) <= 600


def test_structured_only_results_over_the_budget_keep_structured_content_as_the_document() -> None:
    structured = json.dumps({"rows": list(range(3000))}, separators=(",", ":"))
    shaped = _shape((), structured)
    assert shaped.document == structured
    assert shaped.structured_content_json == ""
    assert shaped.tokens_delivered <= 500


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_previews_stay_within_the_budget_for_every_budget_and_encoding(encoding: str) -> None:
    rng = random.Random(3)  # noqa: S311  # reproducible test data, not secrets
    doc = "\n".join(
        "".join(rng.choice("abcdef0123456789 \u00e9\u4e2d") for _ in range(rng.randint(0, 120)))
        for _ in range(3000)
    )
    for budget in (100, 137, 500, 2000):
        shaped = _shape((_text(doc),), budget_tokens=budget, preview_tokens=budget, encoding=encoding)
        assert count_tokens(shaped.content[0].text, encoding) <= budget


def test_a_50_mb_result_is_shaped_without_a_second_copy_in_memory() -> None:
    row = '{"id":%d,"path":"src/pkg/module_%d.py","size":%d,"summary":"' + "lorem ipsum " * 40 + '"}'
    text = "[" + ",".join(row % (i, i, i * 3) for i in range(95_000)) + "]"
    assert len(text) > 50_000_000
    tracemalloc.start()
    try:
        shaped = _shape((_text(text),), budget_tokens=2000, preview_tokens=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert shaped.document is text
    assert "array of 95000 items" in shaped.content[0].text
    assert peak < len(text) // 10
