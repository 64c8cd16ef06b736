"""read_result's arguments and refusals (toolscout_kit.result_tool): one reader for the orchestrator
and the gateway."""

from __future__ import annotations

import pytest
from toolscout.client import ReadRequest

from toolscout_kit.result_tool import no_handle_text, read_arguments, read_refused_text


def test_a_read_binds_the_callers_principal_and_conversation() -> None:
    read = read_arguments(
        {"handle": " r0-abc ", "pattern": "ERROR", "context_lines": 2},
        principal="team-a",
        conversation="c1",
        token_encoding="cl100k_base",
    )
    assert read == ReadRequest(
        "r0-abc", "team-a", "c1", pattern="ERROR", context_lines=2, token_encoding="cl100k_base"
    )


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "'handle' must be the handle a result preview gave"),
        ({"handle": "h", "offset": -1}, "'offset' must be a non-negative integer"),
        ({"handle": "h", "offset": True}, "'offset' must be a non-negative integer"),
        ({"handle": "h", "context_lines": 21}, "'context_lines' must be an integer from 0 to 20"),
        ({"handle": "h", "pattern": "a", "path": "b"}, "give 'pattern' or 'path', not both"),
        ({"handle": "h", "path": 3}, "'path' must be a string"),
    ],
)
def test_a_malformed_read_says_what_is_wrong_and_the_shape(
    arguments: dict[str, object], problem: str
) -> None:
    answer = read_arguments(arguments, principal="", conversation="")
    assert isinstance(answer, str)
    assert answer.startswith('read_result takes {"handle": ')
    assert answer.endswith(problem)


def test_the_refusals_read_as_tool_errors() -> None:
    assert no_handle_text("r0-x") == (
        "Error: no result handle 'r0-x' in this conversation. read_result reads only the handles "
        "that result previews above gave; call the tool again to get its result."
    )
    assert read_refused_text("no result handle 'r0-x'") == "Error: no result handle 'r0-x'"
    assert read_refused_text("Error: expired") == "Error: expired"
