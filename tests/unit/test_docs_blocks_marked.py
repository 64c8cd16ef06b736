"""Every code block of the READMEs says whether a test runs it (tests/e2e/test_docs_runnable.py)."""

from __future__ import annotations

import itertools

import pytest

from tests.support.doc_blocks import DOCS, blocks, output_matches
from tests.support.mcp_servers import REPO_ROOT


@pytest.mark.parametrize("path", DOCS)
def test_every_code_block_is_marked_runnable_or_says_why_not(path: str) -> None:
    found = blocks(REPO_ROOT, path)
    assert found
    assert [b.id for b in found if not b.marker] == []
    assert [b.id for b in found if b.marker == "not runnable" and not b.detail] == []


@pytest.mark.parametrize("path", DOCS)
def test_runnable_blocks_are_shell_or_python(path: str) -> None:
    runnable = [b for b in blocks(REPO_ROOT, path) if b.marker == "runnable"]
    assert {(b.language, b.detail) for b in runnable} <= {
        ("bash", ""),
        ("python", ""),
        ("bash", "app-venv"),
        ("bash", "oauth-test-servers"),
        ("bash", "oauth-gateway"),
    }


@pytest.mark.parametrize("path", DOCS)
def test_an_output_block_follows_a_runnable_block(path: str) -> None:
    found = blocks(REPO_ROOT, path)
    for before, block in itertools.pairwise(found):
        if block.marker == "output":
            assert (before.marker, block.language) == ("runnable", "text"), block.id
    assert found[0].marker != "output"


def test_output_lines_match_with_ellipses_standing_for_what_changes() -> None:
    expected = 'time__get_current_time: {"timezone": "Asia/Tokyo", "datetime": "…"}\n'
    assert output_matches(
        expected, 'time__get_current_time: {"timezone": "Asia/Tokyo", "datetime": "2026"}\n'
    )
    assert not output_matches(
        expected, 'weather__get_current_weather: {"timezone": "Asia/Tokyo", "datetime": ""}'
    )
    assert not output_matches(expected, expected + "one line more\n")
