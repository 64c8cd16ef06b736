"""One exception tree for every toolscout RPC, mapped from gRPC status codes in one place.

Callers catch :class:`ToolscoutClientError` (or one category) instead of ``grpc.RpcError``; the
status code stays available as ``.code`` so a service that re-raises can keep it. The messages are
the server's own status details, which toolscout writes for callers (never stack traces).

"Not sent" is proven, never inferred. gRPC itself answers ``UNAVAILABLE`` when a connection dies
while a call is in flight, which is also the code the pool uses for a call it did not send; so the
pool marks its own "not sent" answers with the trailing metadata ``toolscout-not-sent: 1``
(:data:`NOT_SENT_KEY`), and :func:`call_outcome_error` turns an ``UNAVAILABLE`` on ``CallTool``
without that mark into :class:`OutcomeUnknownError`.

Who wrote a status is told the same way. gRPC writes ``UNAVAILABLE`` (and others) itself when it
cannot reach a peer or loses the connection, with addresses and transport words in the details;
a toolscout service marks every status it answers with ``toolscout-status: 1``
(:data:`SERVICE_STATUS_KEY`), so :attr:`ToolscoutClientError.from_service` says whether the
message was written for the caller, without reading it.
"""

from __future__ import annotations

from typing import Any

import grpc

__all__ = [
    "AUTHORIZATION_REQUIRED_KEY",
    "NOT_SENT_KEY",
    "NOT_SENT_METADATA",
    "SERVICE_STATUS_KEY",
    "SERVICE_STATUS_METADATA",
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
    "authorization_required",
    "call_outcome_error",
    "error_for_code",
    "not_sent_error",
    "translate_rpc_error",
]

# Trailing metadata on an UNAVAILABLE answer whose sender proves the request was not sent (the
# pool's CallTool: server down or starting, pool stopping, another shard runs the server).
NOT_SENT_KEY = "toolscout-not-sent"
NOT_SENT_METADATA: tuple[tuple[str, str], ...] = ((NOT_SENT_KEY, "1"),)
# Trailing metadata on every status a toolscout service answers with (its error interceptor adds
# it): the details were written by the service for its caller, not by gRPC's transport.
SERVICE_STATUS_KEY = "toolscout-status"
SERVICE_STATUS_METADATA: tuple[tuple[str, str], ...] = ((SERVICE_STATUS_KEY, "1"),)
# Trailing metadata on a FAILED_PRECONDITION from CallTool: the server (``auth.per_user``) needs the
# caller's own authorization, which the caller does not have (none yet, or revoked). Its value is
# the server's name; the gateway answers with its login route for that server.
AUTHORIZATION_REQUIRED_KEY = "toolscout-authorization-required"


# Each status code's exception class, filled by the classes' own declarations (``code=`` below).
_BY_CODE: dict[Any, type[ToolscoutClientError]] = {}


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

    def __init_subclass__(cls, *, code: Any = None, **kwargs: Any) -> None:
        """A subclass declared with ``code=`` is the class :func:`error_for_code` raises for it (one
        class per code: a subclass of it inherits its code without ``code=``).

        Raises:
            TypeError: ``code`` has its class already.
        """
        super().__init_subclass__(**kwargs)
        if code is None:
            return
        if code in _BY_CODE:
            raise TypeError(f"{code} is raised as {_BY_CODE[code].__name__} already")
        cls.code = code
        _BY_CODE[code] = cls

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
    def from_service(self) -> bool:
        """Whether a toolscout service (or this client library) wrote this status and its message,
        rather than gRPC's transport (a peer not reached, a connection lost mid-call)."""
        return self.metadata_value(SERVICE_STATUS_KEY) == "1" or self.metadata_value(NOT_SENT_KEY) == "1"

    @property
    def retryable(self) -> bool:
        """True for failures where trying again later can succeed (UNAVAILABLE, RESOURCE_EXHAUSTED)."""
        return self.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)

    def __str__(self) -> str:
        return self.message


class CancelledError(ToolscoutClientError, code=grpc.StatusCode.CANCELLED):
    """The call was cancelled (by the caller, or the server saw its caller go away)."""


class UnknownError(ToolscoutClientError, code=grpc.StatusCode.UNKNOWN):
    """The server failed without a status (or with one this client does not know)."""


class InvalidArgumentError(ToolscoutClientError, code=grpc.StatusCode.INVALID_ARGUMENT):
    """The request was malformed (bad JSON arguments, wrong types, limits on input)."""


class DeadlineExceededError(ToolscoutClientError, code=grpc.StatusCode.DEADLINE_EXCEEDED):
    """The call ran past its deadline (the client's default per method, or the one passed)."""


class NotFoundError(ToolscoutClientError, code=grpc.StatusCode.NOT_FOUND):
    """Unknown model, toolset, server or tool; the message lists what exists."""


class AlreadyExistsError(ToolscoutClientError, code=grpc.StatusCode.ALREADY_EXISTS):
    """What the request would create exists already."""


class PermissionDeniedError(ToolscoutClientError, code=grpc.StatusCode.PERMISSION_DENIED):
    """The credentials are valid but not allowed to do this."""


class ResourceExhaustedError(ToolscoutClientError, code=grpc.StatusCode.RESOURCE_EXHAUSTED):
    """A limit was hit: provider rate limit, result size cap, message size."""


class FailedPreconditionError(ToolscoutClientError, code=grpc.StatusCode.FAILED_PRECONDITION):
    """The stack is not in a state to do this (e.g. a provider without a configured key)."""


class AbortedError(ToolscoutClientError, code=grpc.StatusCode.ABORTED):
    """The request was sent but its outcome is unknown: the tool (or chat) may or may not have run.

    The pool answers this when an MCP server went away (crash, lost connection, pool shutdown)
    after a call was sent to it. Nothing retries it automatically: check the tool's effect before
    calling it again. Also available as :data:`OutcomeUnknownError`.
    """


# The name that says what ABORTED means from a toolscout service.
OutcomeUnknownError = AbortedError


class OutOfRangeError(ToolscoutClientError, code=grpc.StatusCode.OUT_OF_RANGE):
    """The request asked past the end of something (a page, a range)."""


class UnimplementedError(ToolscoutClientError, code=grpc.StatusCode.UNIMPLEMENTED):
    """The server does not implement this method (an older server, or the wrong target)."""


class InternalError(ToolscoutClientError, code=grpc.StatusCode.INTERNAL):
    """A bug on the server; details are in the server's logs, never in the message."""


class UnavailableError(ToolscoutClientError, code=grpc.StatusCode.UNAVAILABLE):
    """The service (or a dependency of it) is down or unreachable; retrying later may help.

    The channel already retried according to its service config before this was raised. From the
    pool's ``CallTool`` this always means "not sent" (:attr:`not_sent`): an ``UNAVAILABLE`` without
    the pool's mark is raised as :class:`OutcomeUnknownError` instead.
    """

    @property
    def not_sent(self) -> bool:
        """Whether the request is proven not sent: marked by the pool, or never sent by this client."""
        return self.metadata_value(NOT_SENT_KEY) == "1"


class DataLossError(ToolscoutClientError, code=grpc.StatusCode.DATA_LOSS):
    """Unrecoverable loss or corruption of data."""


class UnauthenticatedError(ToolscoutClientError, code=grpc.StatusCode.UNAUTHENTICATED):
    """Missing or wrong bearer token."""


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


def not_sent_error(message: str, *, method: str = "") -> UnavailableError:
    """An UNAVAILABLE for a call this client did not send (no connection, no shard to send it to)."""
    return UnavailableError(
        message, code=grpc.StatusCode.UNAVAILABLE, method=method, trailing_metadata=NOT_SENT_METADATA
    )


def call_outcome_error(err: ToolscoutClientError) -> ToolscoutClientError:
    """The error a caller of ``CallTool`` gets for ``err``: an unmarked UNAVAILABLE is outcome-unknown.

    The request may have reached the pool, and the tool may have run, before the connection died
    (the pool process was killed, a shard went away): only the pool's explicit mark proves it did
    not. The transport's own words ("Stream removed", addresses) stay in the chained cause, out of
    the message, which callers may show to an LLM.
    """
    if not isinstance(err, UnavailableError) or err.not_sent:
        return err
    return OutcomeUnknownError(
        "the connection to the pool was lost after the call was sent: the tool may or may not "
        "have run. It was not sent again.",
        code=grpc.StatusCode.ABORTED,
        method=err.method,
        trailing_metadata=err.trailing_metadata,
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


def authorization_required(err: ToolscoutClientError) -> str | None:
    """The server whose per-user authorization the caller lacks, when ``err`` says so, else None."""
    if not isinstance(err, FailedPreconditionError):
        return None
    return err.metadata_value(AUTHORIZATION_REQUIRED_KEY) or None
