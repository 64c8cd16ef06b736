"""Every domain error class maps to a status code, in one table."""

from __future__ import annotations

import importlib
import pkgutil

import grpc
import pytest
from toolscout.client import NOT_SENT_METADATA, SERVICE_STATUS_METADATA, error_for_code

from toolscout_kit import errors
from toolscout_kit.errors import ToolscoutError
from toolscout_kit.status import PeerUnavailableError, error_from_client, status_for

SERVICE_PACKAGES = ("toolscout_kit", "mcp_pool_svc", "discovery_svc", "orchestrator_svc")


def _import_all() -> None:
    for name in SERVICE_PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)


def _all_subclasses(cls: type[ToolscoutError]) -> set[type[ToolscoutError]]:
    found: set[type[ToolscoutError]] = set()
    for sub in cls.__subclasses__():
        found.add(sub)
        found |= _all_subclasses(sub)
    return found


def test_every_domain_error_class_in_every_package_has_a_status_code() -> None:
    _import_all()
    classes = _all_subclasses(ToolscoutError)
    assert len(classes) >= len(errors.__all__) - 1
    unmapped = sorted(c.__qualname__ for c in classes if status_for(c("x")) is None)
    assert unmapped == []


def test_the_bare_base_class_has_no_code_so_it_becomes_internal() -> None:
    assert status_for(ToolscoutError("x")) is None


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
        (errors.NotFoundError, grpc.StatusCode.NOT_FOUND),
        (errors.UnavailableError, grpc.StatusCode.UNAVAILABLE),
        (errors.DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
        (errors.ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
        (errors.FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
        (errors.UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
        (errors.CancelledError, grpc.StatusCode.CANCELLED),
        (errors.ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
        (errors.OutcomeUnknownError, grpc.StatusCode.ABORTED),
        (errors.InternalError, grpc.StatusCode.INTERNAL),
    ],
)
def test_categories_map_to_the_design_table(error: type[ToolscoutError], code: grpc.StatusCode) -> None:
    assert status_for(error("x")) == code


def test_client_errors_from_peers_become_domain_errors_keeping_llm_facing_text() -> None:
    err = error_from_client(
        error_for_code(grpc.StatusCode.NOT_FOUND, "Unknown server 'x'. Valid servers: a, b"), "discovery"
    )
    assert isinstance(err, errors.NotFoundError)
    assert err.message == "Unknown server 'x'. Valid servers: a, b"
    down = error_from_client(error_for_code(grpc.StatusCode.UNAVAILABLE, "connection refused"), "pool")
    assert isinstance(down, errors.UnavailableError)
    assert "pool unavailable" in down.message


@pytest.mark.parametrize("mark", [SERVICE_STATUS_METADATA, NOT_SENT_METADATA])
def test_an_unavailable_the_peer_wrote_itself_keeps_its_words_apart_from_the_peers_name(
    mark: tuple[tuple[str, str], ...],
) -> None:
    text = "MCP server 'notes' is reconnecting (attempt 3)"
    err = error_from_client(error_for_code(grpc.StatusCode.UNAVAILABLE, text, trailing_metadata=mark), "pool")
    assert isinstance(err, PeerUnavailableError)
    assert (err.peer, err.detail) == ("pool", text)
    assert err.message == f"pool unavailable: {text}"
    assert status_for(err) == grpc.StatusCode.UNAVAILABLE


def test_an_unmarked_unavailable_is_the_transports_whatever_its_text_says() -> None:
    # Words a service might write are not trusted without the service's mark.
    err = error_from_client(
        error_for_code(grpc.StatusCode.UNAVAILABLE, "MCP server 'notes' is reconnecting"), "pool"
    )
    assert isinstance(err, PeerUnavailableError)
    assert err.detail == "not reachable or connection lost"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (grpc.StatusCode.INTERNAL, "pool failed: internal error"),
        (grpc.StatusCode.UNKNOWN, "pool failed: unknown error"),
        (grpc.StatusCode.UNIMPLEMENTED, "pool failed: unimplemented"),
        (grpc.StatusCode.DATA_LOSS, "pool failed: data loss"),
    ],
)
def test_a_peers_bug_stays_internal_instead_of_inviting_a_retry(code: grpc.StatusCode, message: str) -> None:
    # The peer's own details (generic, or an exception's text) are not repeated.
    err = error_from_client(error_for_code(code, "Exception calling application: KeyError('x')"), "pool")
    assert isinstance(err, errors.InternalError)
    assert err.message == message
    assert status_for(err) == grpc.StatusCode.INTERNAL


@pytest.mark.parametrize(
    "transport_text",
    [
        "Stream removed",
        "Socket closed",
        "recvmsg:Connection reset by peer",
        "Received RST_STREAM with error code 2",
        "GOAWAY received",
    ],
)
def test_a_connection_lost_mid_call_is_reported_without_transport_jargon(transport_text: str) -> None:
    err = error_from_client(error_for_code(grpc.StatusCode.UNAVAILABLE, transport_text), "discovery")
    assert isinstance(err, errors.UnavailableError)
    assert err.message == "discovery unavailable: not reachable or connection lost"


def test_an_unreachable_peer_is_reported_without_its_address() -> None:
    channel_text = (
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:52205: "
        "Failed to connect to remote host: Connection refused"
    )
    err = error_from_client(error_for_code(grpc.StatusCode.UNAVAILABLE, channel_text), "pool")
    assert isinstance(err, errors.UnavailableError)
    assert err.message == "pool unavailable: not reachable or connection lost"
    assert "127.0.0.1" not in err.message


def test_an_outcome_unknown_from_a_peer_stays_outcome_unknown_with_its_message() -> None:
    text = (
        "MCP server 'notes' closed the connection during the call of 'add'; the tool may or may not have run"
    )
    err = error_from_client(error_for_code(grpc.StatusCode.ABORTED, text), "pool")
    assert isinstance(err, errors.OutcomeUnknownError)
    assert err.message == text
