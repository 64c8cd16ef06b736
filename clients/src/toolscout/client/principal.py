"""Who a call is made for: the principal a trusted caller names in the request metadata.

The gRPC API authenticates services (one bearer token), not the people behind them. A backend that
authenticated its user names that user with the metadata ``x-toolscout-principal``
(:data:`PRINCIPAL_KEY`, :func:`principal_metadata`); the orchestrator passes it on to the pool as the
``principal`` of every tool call and result read of the chat, so a ``per_user`` server runs the
chat's calls with that user's own upstream token, and result handles are that user's alone.
Whoever holds the API token may name any principal: it is the caller's word, like ``principal`` on
``CallTool``. One rule for what a principal may be (:func:`check_principal`), for the sender and the
receiver alike.
"""

from __future__ import annotations

import re

__all__ = ["PRINCIPAL_KEY", "check_principal", "principal_metadata"]

PRINCIPAL_KEY = "x-toolscout-principal"
_MAX_LENGTH = 256
# Printable ASCII without spaces: a gRPC metadata value, a log field, a token-store key.
_PRINCIPAL = re.compile(rf"[!-~]{{1,{_MAX_LENGTH}}}")


def check_principal(value: str) -> str:
    """``value`` when it is a principal (1-256 printable ASCII characters, no spaces).

    Raises:
        ValueError: it is not (the message says what a principal is, without echoing the value).
    """
    if not _PRINCIPAL.fullmatch(value):
        raise ValueError(
            f"{PRINCIPAL_KEY} must be 1 to {_MAX_LENGTH} printable ASCII characters without spaces"
        )
    return value


def principal_metadata(principal: str) -> tuple[tuple[str, str], ...]:
    """The request metadata naming ``principal`` (pass it as ``metadata=`` to ``chat``).

    Raises:
        ValueError: ``principal`` is not a principal (:func:`check_principal`).
    """
    return ((PRINCIPAL_KEY, check_principal(principal)),)
