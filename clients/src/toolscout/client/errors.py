"""One exception tree for every toolscout RPC, mapped from gRPC status codes in one place.

Callers catch :class:`ToolscoutClientError` (or one category) instead of ``grpc.RpcError``; the
status code stays available as ``.code`` so a service that re-raises can keep it. The messages are
the server's own status details, which toolscout writes for callers (never stack traces).
"""

from __future__ import annotations

from typing import Any

import grpc

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfRangeError",
    "OutcomeUnknownError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "ToolscoutClientError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "error_for_code",
    "translate_rpc_error",
]


class ToolscoutClientError(Exception):
    """Base of every error a toolscout client raises for a failed RPC.

    Attributes:
        code: the gRPC status code the server (or the channel) reported.
        message: the status details, written by the server for the caller.
        method: the full RPC method name (``/toolscout.mcp_pool.v1.McpPool/CallTool``), if known.
        trailing_metadata: the status's trailing metadata as ``(key, value)`` pairs (a pool shard
            that refuses a call for a server it does not run names the owners there).
    """

    code: Any = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        code: Any = None,
        method: str = "",
        trailing_metadata: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.method = method
        self.trailing_metadata = trailing_metadata

    def metadata_value(self, key: str) -> str | None:
        """The value of ``key`` in the trailing metadata, or None."""
        for k, v in self.trailing_metadata:
            if k == key:
                return v
        return None

    @property
    def retryable(self) -> bool:
        """True for failures where trying again later can succeed (UNAVAILABLE, RESOURCE_EXHAUSTED)."""
        return self.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)

    def __str__(self) -> str:
        return self.message


class CancelledError(ToolscoutClientError):
    """The call was cancelled (by the caller, or the server saw its caller go away)."""

    code = grpc.StatusCode.CANCELLED


class UnknownError(ToolscoutClientError):
    """The server failed without a status (or with one this client does not know)."""

    code = grpc.StatusCode.UNKNOWN


class InvalidArgumentError(ToolscoutClientError):
    """The request was malformed (bad JSON arguments, wrong types, limits on input)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(ToolscoutClientError):
    """The call ran past its deadline (the client's default per method, or the one passed)."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFoundError(ToolscoutClientError):
    """Unknown model, toolset, server or tool; the message lists what exists."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(ToolscoutClientError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDeniedError(ToolscoutClientError):
    """The credentials are valid but not allowed to do this."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(ToolscoutClientError):
    """A limit was hit: provider rate limit, result size cap, message size."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(ToolscoutClientError):
    """The stack is not in a state to do this (e.g. a provider without a configured key)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class AbortedError(ToolscoutClientError):
    """The request was sent but its outcome is unknown: the tool (or chat) may or may not have run.

    The pool answers this when an MCP server went away (crash, lost connection, pool shutdown)
    after a call was sent to it. Nothing retries it automatically: check the tool's effect before
    calling it again. Also available as :data:`OutcomeUnknownError`.
    """

    code = grpc.StatusCode.ABORTED


# The name that says what ABORTED means from a toolscout service.
OutcomeUnknownError = AbortedError


class OutOfRangeError(ToolscoutClientError):
    code = grpc.StatusCode.OUT_OF_RANGE


class UnimplementedError(ToolscoutClientError):
    """The server does not implement this method (an older server, or the wrong target)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class InternalError(ToolscoutClientError):
    """A bug on the server; details are in the server's logs, never in the message."""

    code = grpc.StatusCode.INTERNAL


class UnavailableError(ToolscoutClientError):
    """The service (or a dependency of it) is down or unreachable; retrying later may help.

    The channel already retried according to its service config before this was raised.
    """

    code = grpc.StatusCode.UNAVAILABLE


class DataLossError(ToolscoutClientError):
    code = grpc.StatusCode.DATA_LOSS


class UnauthenticatedError(ToolscoutClientError):
    """Missing or wrong bearer token."""

    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: dict[Any, type[ToolscoutClientError]] = {
    cls.code: cls
    for cls in (
        CancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}


def error_for_code(
    code: Any, message: str, *, method: str = "", trailing_metadata: tuple[tuple[str, str], ...] = ()
) -> ToolscoutClientError:
    """The exception for a status code (``grpc.StatusCode``); unknown or OK codes give UnknownError."""
    cls = _BY_CODE.get(code, UnknownError)
    if not message:
        name = getattr(code, "name", str(code))
        message = f"{method or 'RPC'} failed with {name}"
    return cls(
        message,
        code=code if code in _BY_CODE else grpc.StatusCode.UNKNOWN,
        method=method,
        trailing_metadata=trailing_metadata,
    )


def _text_metadata(metadata: Any) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for item in metadata or ():
        try:
            key, value = item
        except (TypeError, ValueError):
            continue
        if isinstance(key, str) and isinstance(value, str):
            pairs.append((key, value))
    return tuple(pairs)


def translate_rpc_error(err: BaseException, *, method: str = "") -> ToolscoutClientError:
    """Translate a ``grpc.RpcError`` / ``grpc.aio.AioRpcError`` into the toolscout exception tree.

    This is the one seam where grpc errors become toolscout errors; raise the result
    ``from err`` so the original stays chained for debugging.
    """
    code_fn = getattr(err, "code", None)
    details_fn = getattr(err, "details", None)
    trailing_fn = getattr(err, "trailing_metadata", None)
    code = code_fn() if callable(code_fn) else grpc.StatusCode.UNKNOWN
    details = details_fn() if callable(details_fn) else ""
    trailing = _text_metadata(trailing_fn()) if callable(trailing_fn) else ()
    return error_for_code(code, details or "", method=method, trailing_metadata=trailing)
