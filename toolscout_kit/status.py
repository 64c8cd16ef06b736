"""The one table between domain errors and gRPC status codes, in both directions.

Servers use :func:`status_for` (through the error interceptor). A service calling another one does
so through the client library ``toolscout.client`` and turns its errors into domain errors with
:func:`error_from_client`, at one seam, so that domain code only ever sees domain errors.

Who wrote a status is told by its trailing metadata and its class by its code, never by reading
its text. What a model reads about a failed call is written here too, once:
:func:`outcome_unknown_text` says that a call which was sent and then lost may or may not have run,
:func:`chat_ended_text` that a chat a stopping service ended may have had a tool take effect
(``without_internals``, re-exported from the kit's logging module where the other redactions live,
takes peer addresses and exception names out of a text a model reads).
"""

from __future__ import annotations

import grpc
from toolscout.client import ToolscoutClientError

from toolscout_kit.errors import (
    CancelledError,
    ConfigError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    ResourceExhaustedError,
    ToolscoutError,
    UnauthenticatedError,
    UnavailableError,
)
from toolscout_kit.logging import get_logger, redact, without_internals

__all__ = [
    "GENERIC_INTERNAL_MESSAGE",
    "STATUS_BY_CATEGORY",
    "PeerUnavailableError",
    "chat_ended_text",
    "error_from_client",
    "outcome_unknown_text",
    "reply_status",
    "status_for",
    "without_internals",
]

GENERIC_INTERNAL_MESSAGE = "internal error; see the server logs for details"
_log = get_logger(__name__)

# "Sent, outcome unknown" is ABORTED: no retry policy of ours lists it, and unlike UNKNOWN (which
# gRPC itself reports for unhandled exceptions and undecodable messages) gRPC never produces it on
# its own, so a caller can trust that ABORTED from a toolscout service means exactly this.

# Checked in order: the first category an exception is an instance of wins.
STATUS_BY_CATEGORY: tuple[tuple[type[ToolscoutError], grpc.StatusCode], ...] = (
    (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (CancelledError, grpc.StatusCode.CANCELLED),
    (OutcomeUnknownError, grpc.StatusCode.ABORTED),
    (InternalError, grpc.StatusCode.INTERNAL),
)

_ERROR_BY_STATUS: dict[grpc.StatusCode, type[ToolscoutError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.CANCELLED: CancelledError,
    grpc.StatusCode.ABORTED: OutcomeUnknownError,
}


def status_for(exc: ToolscoutError) -> grpc.StatusCode | None:
    """The status code for a domain error, or None when its class has no category (a bug)."""
    for category, code in STATUS_BY_CATEGORY:
        if isinstance(exc, category):
            return code
    return None


def reply_status(exc: Exception) -> tuple[grpc.StatusCode, str]:
    """The status and details a caller gets for ``exc``: a domain error's code and its message
    (secrets redacted); a method not implemented, UNIMPLEMENTED; anything else is a bug, logged
    here in full and answered INTERNAL with a generic message (never its text)."""
    if isinstance(exc, ToolscoutError):
        code = status_for(exc)
        if code is not None:
            return code, redact(exc.message)
    if isinstance(exc, NotImplementedError):
        # A servicer's method left as generated (a fake, or a service that does not offer it).
        return grpc.StatusCode.UNIMPLEMENTED, "method not implemented"
    _log.error("unhandled exception", exc_info=exc)
    return grpc.StatusCode.INTERNAL, GENERIC_INTERNAL_MESSAGE


_CHECK_FIRST = "Check whether it took effect before calling it again."
# A peer's bug, or an answer no toolscout service gives: nothing a retry would fix.
_INTERNAL_WORDS = {grpc.StatusCode.INTERNAL: "internal error", grpc.StatusCode.UNKNOWN: "unknown error"}
# What a caller reads for a failure gRPC reported itself (a peer not reached, or a connection lost
# mid-call): its own details carry addresses and transport words, and are not read to tell which.
_TRANSPORT_FAILURE = "not reachable or connection lost"


class PeerUnavailableError(UnavailableError):
    """Another toolscout service could not do it now: ``peer`` names it ("pool", "discovery") and
    ``detail`` is its own account (a server's state), or the transport's failure in plain words."""

    def __init__(self, peer: str, detail: str = "") -> None:
        super().__init__(f"{peer} unavailable: {detail}" if detail else f"{peer} unavailable")
        self.peer = peer
        self.detail = detail


def error_from_client(err: ToolscoutClientError, what: str) -> ToolscoutError:
    """Translates a client-library error from another toolscout service into a domain error.

    ``what`` names the peer ("pool", "discovery") for messages. INVALID_ARGUMENT, NOT_FOUND and
    ABORTED (outcome unknown) keep the peer's message as is, because it is written for the caller
    (often for the LLM). An ``UNAVAILABLE`` the peer did not write itself (no ``toolscout-status``
    mark: gRPC's transport could not reach it, or lost the connection) is reported as "not
    reachable or connection lost", never with the channel's addresses or transport jargon. The class of the
    failure is kept: the peer's INTERNAL (or any code no toolscout service answers with) is an
    :class:`InternalError`, never an outage that invites a retry; its details (generic, or an
    exception's text) are left out.
    """
    code = err.code if isinstance(err.code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN
    details = err.message or ""
    if code is grpc.StatusCode.UNAVAILABLE and not err.from_service:
        details = _TRANSPORT_FAILURE
    category = _ERROR_BY_STATUS.get(code)
    if category is None:
        return InternalError(
            f"{what} failed: {_INTERNAL_WORDS.get(code, code.name.lower().replace('_', ' '))}"
        )
    if category in (InvalidArgumentError, NotFoundError, OutcomeUnknownError):
        return category(details)
    if category is UnavailableError:
        return PeerUnavailableError(what, details)
    return category(f"{what}: {details}" if details else what)


def chat_ended_text(service: str) -> str:
    """What the caller of a chat reads when ``service`` (the orchestrator, or the gateway for its
    console) stopped and ended the chat while it ran."""
    return (
        f"the {service} stopped before this chat finished; a tool it was running may or may not have "
        "taken effect"
    )


def outcome_unknown_text(name: str, detail: str = "") -> str:
    """The tool result a model reads for a call of ``name`` that was sent and then lost: the tool may
    or may not have run, and it is not run again. ``detail``, the peer's own account of what was
    lost (internal addresses removed), is included when given."""
    if detail:
        return (
            f"Error: the outcome of this call of '{name}' is unknown: {without_internals(detail)} The tool "
            f"may or may not have run, and it was not run again. {_CHECK_FIRST}"
        )
    return (
        f"Error: the outcome of this call of '{name}' is unknown: the connection to the tool was lost "
        f"after the call was sent, so the tool may or may not have run, and it was not run again. {_CHECK_FIRST}"
    )
