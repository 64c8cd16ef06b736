"""The principal a caller names for a chat: one rule for the sender and the orchestrator."""

from __future__ import annotations

import pytest
from toolscout.client import PRINCIPAL_KEY, check_principal, principal_metadata


@pytest.mark.parametrize("principal", ["alice", "oauth:alice@example.com", "app:7f3a", "x" * 256, "!~"])
def test_printable_ascii_without_spaces_is_a_principal(principal: str) -> None:
    assert check_principal(principal) == principal
    assert principal_metadata(principal) == ((PRINCIPAL_KEY, principal),)


@pytest.mark.parametrize("principal", ["", "two words", "tab\there", "x" * 257, "zoë", "line\n"])
def test_anything_else_is_refused_without_echoing_it(principal: str) -> None:
    with pytest.raises(ValueError, match=PRINCIPAL_KEY) as refused:
        principal_metadata(principal)
    assert principal not in str(refused.value) or not principal
