"""The domain error tree shared by every toolscout service.

Domain code raises these (or subclasses defined in its own package); the error-translation
interceptor in :mod:`toolscout_kit.interceptors` maps each category to one gRPC status code.
Messages are written for the caller: they must never contain secrets or stack traces.
"""

from __future__ import annotations

__all__ = [
    "CancelledError",
    "ConfigError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutcomeUnknownError",
    "ResourceExhaustedError",
    "ToolscoutError",
    "UnauthenticatedError",
    "UnavailableError",
]


class ToolscoutError(Exception):
    """Base of every error toolscout reports to a caller. Subclass a category, not this."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgumentError(ToolscoutError):
    """The caller sent something malformed (bad JSON, wrong types, limits on input)."""


class NotFoundError(ToolscoutError):
    """Unknown model, toolset, server or tool. The message lists what exists."""


class UnavailableError(ToolscoutError):
    """A dependency (MCP server, provider, another service) is down; retrying may help."""


class OutcomeUnknownError(ToolscoutError):
    """A request with side effects was sent, then its answer was lost: it may or may not have run.

    Unlike :class:`UnavailableError` (nothing was sent; retrying is safe) this is never retried
    automatically, by a channel or a service: only the caller can check what happened.
    """


class DeadlineExceededError(ToolscoutError):
    """An operation ran past its timeout or the caller's deadline."""


class ResourceExhaustedError(ToolscoutError):
    """A limit was hit: rate limit, result size cap, concurrency cap."""


class FailedPreconditionError(ToolscoutError):
    """The system is not in a state to do this (e.g. a provider without a configured key)."""


class UnauthenticatedError(ToolscoutError):
    """Missing or wrong credentials."""


class CancelledError(ToolscoutError):
    """The caller cancelled the operation."""


class InternalError(ToolscoutError):
    """Another toolscout service failed with a bug (its ``INTERNAL``): reported as ``INTERNAL``, not
    as an outage, since retrying will not help. A bug of this service is not raised as this: any
    exception outside the tree is one, and the error interceptor logs it with its traceback."""


class ConfigError(ToolscoutError):
    """The configuration file is invalid; the message names the file, the key path and the problem."""
