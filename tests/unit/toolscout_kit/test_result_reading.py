"""Reading a kept result: pages, grep with context, JMESPath projections, all within the budget."""

from __future__ import annotations

import json

import pytest

from toolscout_kit.errors import InvalidArgumentError
from toolscout_kit.result_reading import grep, project, read_page
from toolscout_kit.tokens import count_tokens, estimate_tokens

LOG = "\n".join(
    f"08:{i % 60:02d} req={i:05d} user=u{i * 7 % 1000} status={503 if i % 13 == 0 else 200}"
    for i in range(5000)
)
ENC = "o200k_base"


def test_pages_cover_the_whole_document_in_order_within_the_budget() -> None:
    offset, pages = 0, []
    while offset >= 0:
        out = read_page(LOG, offset, 300, ENC)
        assert out.tokens == count_tokens(out.text, ENC) <= 300
        body = out.text.rsplit("\n[characters ", 1)[0]
        pages.append(body)
        offset = out.next_offset
    assert "".join(pages) == LOG


def test_a_page_past_the_end_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="outside the result"):
        read_page(LOG, len(LOG) + 1, 300, ENC)


def test_grep_finds_the_line_with_its_context_and_line_numbers() -> None:
    out = grep(LOG, "REQ=02500", 1, 400, ENC)
    assert "[1 matching line(s) for 'REQ=02500']" in out.text
    assert "2501: 08:40 req=02500 user=u500 status=200" in out.text
    assert "2500: 08:39 req=02499" in out.text
    assert "2502: 08:41 req=02501" in out.text


def test_grep_with_many_matches_stays_within_the_budget_and_says_how_many() -> None:
    out = grep(LOG, "status=503", 0, 200, ENC)
    assert out.tokens <= 200
    assert out.text.startswith("[385 matching line(s) for 'status=503';")
    assert "more not shown" in out.text


def test_grep_without_matches_says_so() -> None:
    assert "no line contains" in grep(LOG, "nothing-here", 2, 200, ENC).text


def test_grep_refuses_a_bad_context() -> None:
    with pytest.raises(InvalidArgumentError, match="context_lines"):
        grep(LOG, "x", 99, 200, ENC)


def test_a_jmespath_projection_returns_the_selected_values() -> None:
    doc = json.dumps({"items": [{"id": i, "name": f"n{i}"} for i in range(1000)]}, indent=2)
    assert project(doc, "items[?id==`777`].name", 200, ENC).text == '["n777"]'
    assert project(doc, "length(items)", 200, ENC).text == "1000"
    assert project(doc, "items", 200, ENC).tokens <= 200


def test_projection_errors_are_invalid_arguments() -> None:
    with pytest.raises(InvalidArgumentError, match="not a valid JMESPath"):
        project("{}", "items[?", 200, ENC)
    with pytest.raises(InvalidArgumentError, match="not JSON"):
        project(LOG, "items", 200, ENC)


def test_long_texts_are_estimated_close_to_their_exact_count() -> None:
    estimate = estimate_tokens(LOG, ENC)
    exact = count_tokens(LOG, ENC)
    assert estimate.estimated
    assert abs(estimate.tokens - exact) / exact < 0.1
