"""Reasoning split out of the answer: think tags, across streamed chunks."""

from __future__ import annotations

import pytest

from orchestrator_svc.reasoning import ThinkSplitter, split_reasoning


@pytest.mark.parametrize(
    ("text", "answer", "reasoning"),
    [
        ("plain", "plain", ""),
        ("<think>a</think>b", "b", "a"),
        ("<thinking>\nstep\n</thinking>\n\nDone.", "Done.", "step"),
        ("x <think>unclosed", "x", "unclosed"),
        ("a < b and c > d", "a < b and c > d", ""),
    ],
)
def test_split_reasoning_separates_think_tags(text: str, answer: str, reasoning: str) -> None:
    assert split_reasoning(text) == (answer, reasoning)


def test_think_tags_split_across_chunks_never_leak_into_the_answer() -> None:
    splitter = ThinkSplitter()
    pieces = []
    for chunk in ["Hi <th", "ink>sec", "ret</thi", "nk> there <", "3"]:
        pieces += splitter.feed(chunk)
    pieces += splitter.flush()
    assert "".join(p for k, p in pieces if k == "text") == "Hi  there <3"
    assert "".join(p for k, p in pieces if k == "reasoning") == "secret"
