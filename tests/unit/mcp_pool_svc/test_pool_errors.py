from __future__ import annotations

import grpc
import pytest

from mcp_pool_svc import errors
from toolscout_kit.status import status_for


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.UnknownServerError, grpc.StatusCode.NOT_FOUND),
        (errors.UnknownToolError, grpc.StatusCode.NOT_FOUND),
        (errors.ServerUnavailableError, grpc.StatusCode.UNAVAILABLE),
        (errors.ToolCallTimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
        (errors.ResultTooLargeError, grpc.StatusCode.RESOURCE_EXHAUSTED),
        (errors.InvalidToolArgumentsError, grpc.StatusCode.INVALID_ARGUMENT),
        (errors.ToolOutcomeUnknownError, grpc.StatusCode.ABORTED),
        (errors.ResultHandleNotFoundError, grpc.StatusCode.NOT_FOUND),
        (errors.ResultHandleExpiredError, grpc.StatusCode.NOT_FOUND),
        (errors.UnknownFeatureError, grpc.StatusCode.NOT_FOUND),
        (errors.FeatureNotOfferedError, grpc.StatusCode.FAILED_PRECONDITION),
    ],
)
def test_every_pool_error_maps_to_its_status_code(
    error: type[errors.UnknownServerError], code: grpc.StatusCode
) -> None:
    assert status_for(error("x")) == code


def test_a_call_for_another_shards_server_is_unavailable_not_sent() -> None:
    refusal = errors.NotOwnerError("x", server="s", owners=(2,), count=3)
    assert status_for(refusal) == grpc.StatusCode.UNAVAILABLE
    assert (refusal.owners, refusal.count) == ((2,), 3)


def test_a_caller_without_their_own_authorization_is_a_failed_precondition_naming_the_server() -> None:
    refusal = errors.UserAuthorizationRequiredError("x", server="gh")
    assert status_for(refusal) == grpc.StatusCode.FAILED_PRECONDITION
    assert refusal.server == "gh"


def test_every_exported_pool_error_is_covered() -> None:
    assert set(errors.__all__) == {
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
    }
