"""The pool's domain errors, each in one of the kit's categories (one gRPC status each)."""

from __future__ import annotations

from toolscout_kit.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    ResourceExhaustedError,
    UnavailableError,
)

__all__ = [
    "FeatureNotOfferedError",
    "InvalidToolArgumentsError",
    "NotOwnerError",
    "ResultHandleExpiredError",
    "ResultHandleNotFoundError",
    "ResultTooLargeError",
    "ServerUnavailableError",
    "ToolCallTimeoutError",
    "ToolOutcomeUnknownError",
    "UnknownFeatureError",
    "UnknownServerError",
    "UnknownToolError",
    "UserAuthorizationRequiredError",
]


class UnknownServerError(NotFoundError):
    """No server of that name is configured."""


class UnknownToolError(NotFoundError):
    """No tool of that name is in the catalog."""


class UnknownFeatureError(NotFoundError):
    """No server lists (or matches) that resource URI, prompt or resource template."""


class FeatureNotOfferedError(FailedPreconditionError):
    """The server does not offer what was asked (resource subscriptions)."""


class ServerUnavailableError(UnavailableError):
    """The call was not sent: the server is starting, reconnecting, failed or the pool is stopping."""


class NotOwnerError(ServerUnavailableError):
    """The call was not sent: another pool shard runs the server (the caller routed with an old count).

    ``owners`` are the shards that run it among ``count``; the servicer hands them to the caller so
    that it can send the call there.
    """

    def __init__(
        self, message: str, *, server: str = "", owners: tuple[int, ...] = (), count: int = 1
    ) -> None:
        super().__init__(message)
        self.server = server
        self.owners = owners
        self.count = count


class ToolOutcomeUnknownError(OutcomeUnknownError):
    """The call was sent, then the server went away (or the pool stopped) before it answered."""


class ToolCallTimeoutError(DeadlineExceededError):
    """The call ran past its timeout; the server was sent notifications/cancelled."""


class ResultTooLargeError(ResourceExhaustedError):
    """The result is larger than ``max_result_bytes`` and the pool is set to reject."""


class InvalidToolArgumentsError(InvalidArgumentError):
    """Arguments or ``_meta`` are not a JSON object."""


class ResultHandleNotFoundError(NotFoundError):
    """No kept result by that handle for this principal and conversation."""


class ResultHandleExpiredError(ResultHandleNotFoundError):
    """The kept result expired or was dropped; its owner is told which tool to run again."""


class UserAuthorizationRequiredError(FailedPreconditionError):
    """A ``per_user`` server and a caller without a usable token of their own (none, revoked, or no
    caller named): not sent. ``server`` is the server to sign in to (the gateway's login route)."""

    def __init__(self, message: str, *, server: str = "") -> None:
        super().__init__(message)
        self.server = server
