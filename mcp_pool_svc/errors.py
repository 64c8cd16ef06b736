"""The pool's domain errors, each in one of the kit's categories (one gRPC status each)."""

from __future__ import annotations

from toolscout_kit.errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    ResourceExhaustedError,
    UnavailableError,
)

__all__ = [
    "InvalidToolArgumentsError",
    "ResultTooLargeError",
    "ServerUnavailableError",
    "ToolCallTimeoutError",
    "ToolOutcomeUnknownError",
    "UnknownServerError",
    "UnknownToolError",
]


class UnknownServerError(NotFoundError):
    """No server of that name is configured."""


class UnknownToolError(NotFoundError):
    """No tool of that name is in the catalog."""


class ServerUnavailableError(UnavailableError):
    """The call was not sent: the server is starting, reconnecting, failed or the pool is stopping."""


class ToolOutcomeUnknownError(OutcomeUnknownError):
    """The call was sent, then the server went away (or the pool stopped) before it answered."""


class ToolCallTimeoutError(DeadlineExceededError):
    """The call ran past its timeout; the server was sent notifications/cancelled."""


class ResultTooLargeError(ResourceExhaustedError):
    """The result is larger than ``max_result_bytes`` and the pool is set to reject."""


class InvalidToolArgumentsError(InvalidArgumentError):
    """Arguments or ``_meta`` are not a JSON object."""
