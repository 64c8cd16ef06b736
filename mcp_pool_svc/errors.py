"""The pool's domain errors, each in one of the kit's categories (one gRPC status each)."""

from __future__ import annotations

from toolscout_kit.errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
)

__all__ = [
    "InvalidToolArgumentsError",
    "ResultTooLargeError",
    "ServerUnavailableError",
    "ToolCallTimeoutError",
    "UnknownServerError",
    "UnknownToolError",
]


class UnknownServerError(NotFoundError):
    """No server of that name is configured."""


class UnknownToolError(NotFoundError):
    """No tool of that name is in the catalog."""


class ServerUnavailableError(UnavailableError):
    """The server is down, reconnecting, failed, or lost the connection during the call."""


class ToolCallTimeoutError(DeadlineExceededError):
    """The call ran past its timeout; the server was sent notifications/cancelled."""


class ResultTooLargeError(ResourceExhaustedError):
    """The result is larger than ``max_result_bytes`` and the pool is set to reject."""


class InvalidToolArgumentsError(InvalidArgumentError):
    """Arguments or ``_meta`` are not a JSON object."""
