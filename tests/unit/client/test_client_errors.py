"""The one translation from gRPC status codes to the client's exception tree."""

from __future__ import annotations

import grpc
import pytest
from toolscout import client as tc
from toolscout.client.errors import error_for_code, translate_rpc_error

EXPECTED = {
    grpc.StatusCode.CANCELLED: tc.CancelledError,
    grpc.StatusCode.UNKNOWN: tc.UnknownError,
    grpc.StatusCode.INVALID_ARGUMENT: tc.InvalidArgumentError,
    grpc.StatusCode.DEADLINE_EXCEEDED: tc.DeadlineExceededError,
    grpc.StatusCode.NOT_FOUND: tc.NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: tc.AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: tc.PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: tc.ResourceExhaustedError,
    grpc.StatusCode.FAILED_PRECONDITION: tc.FailedPreconditionError,
    grpc.StatusCode.ABORTED: tc.AbortedError,
    grpc.StatusCode.OUT_OF_RANGE: tc.OutOfRangeError,
    grpc.StatusCode.UNIMPLEMENTED: tc.UnimplementedError,
    grpc.StatusCode.INTERNAL: tc.InternalError,
    grpc.StatusCode.UNAVAILABLE: tc.UnavailableError,
    grpc.StatusCode.DATA_LOSS: tc.DataLossError,
    grpc.StatusCode.UNAUTHENTICATED: tc.UnauthenticatedError,
}


class _FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str | None) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str | None:
        return self._details


def test_every_status_code_except_ok_has_its_own_exception_class() -> None:
    assert set(EXPECTED) == set(grpc.StatusCode) - {grpc.StatusCode.OK}
    assert len(set(EXPECTED.values())) == len(EXPECTED)


@pytest.mark.parametrize(("code", "cls"), EXPECTED.items(), ids=[c.name for c in EXPECTED])
def test_translate_maps_each_code_to_its_class_keeping_code_message_and_method(
    code: grpc.StatusCode, cls: type[tc.ToolscoutClientError]
) -> None:
    err = translate_rpc_error(_FakeRpcError(code, "Unknown tool 'x'"), method="/svc/M")
    assert type(err) is cls
    assert isinstance(err, tc.ToolscoutClientError)
    assert err.code is code
    assert cls.code is code
    assert err.message == "Unknown tool 'x'" == str(err)
    assert err.method == "/svc/M"


def test_ok_or_unrecognised_codes_become_unknown_error() -> None:
    assert type(error_for_code(grpc.StatusCode.OK, "odd")) is tc.UnknownError
    err = error_for_code("NOT_A_CODE", "odd")
    assert type(err) is tc.UnknownError
    assert err.code is grpc.StatusCode.UNKNOWN


def test_an_error_without_details_gets_a_message_naming_the_method_and_code() -> None:
    err = translate_rpc_error(_FakeRpcError(grpc.StatusCode.UNAVAILABLE, None), method="/x.Y/Z")
    assert err.message == "/x.Y/Z failed with UNAVAILABLE"


def test_an_exception_that_is_not_an_rpc_error_becomes_unknown_error() -> None:
    err = translate_rpc_error(RuntimeError("boom"))
    assert type(err) is tc.UnknownError


def test_only_unavailable_and_resource_exhausted_are_marked_retryable() -> None:
    retryable = {code for code in EXPECTED if error_for_code(code, "m").retryable}
    assert retryable == {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED}


def test_outcome_unknown_is_the_aborted_error_and_is_not_retryable() -> None:
    err = error_for_code(grpc.StatusCode.ABORTED, "the tool may or may not have run")
    assert isinstance(err, tc.OutcomeUnknownError)
    assert tc.OutcomeUnknownError is tc.AbortedError
    assert not err.retryable


def test_an_unmarked_call_unavailable_becomes_outcome_unknown_without_transport_text() -> None:
    lost = error_for_code(grpc.StatusCode.UNAVAILABLE, "Stream removed (Socket closed)", method="/m")
    err = tc.call_outcome_error(lost)
    assert isinstance(err, tc.OutcomeUnknownError)
    assert err.code == grpc.StatusCode.ABORTED
    assert err.method == "/m"
    assert "may or may not have run" in err.message
    assert "Socket closed" not in err.message


def test_a_call_unavailable_marked_not_sent_stays_unavailable() -> None:
    refused = error_for_code(
        grpc.StatusCode.UNAVAILABLE,
        "server down; the call was not sent",
        trailing_metadata=tc.NOT_SENT_METADATA,
    )
    assert isinstance(refused, tc.UnavailableError)
    assert refused.not_sent
    assert tc.call_outcome_error(refused) is refused
    assert tc.not_sent_error("no connection").not_sent


@pytest.mark.parametrize("code", [c for c in EXPECTED if c is not grpc.StatusCode.UNAVAILABLE])
def test_other_call_errors_pass_through_unchanged(code: grpc.StatusCode) -> None:
    err = error_for_code(code, "x")
    assert tc.call_outcome_error(err) is err


def test_each_status_code_has_one_error_class() -> None:
    with pytest.raises(TypeError):

        class _Second(tc.ToolscoutClientError, code=grpc.StatusCode.NOT_FOUND):
            pass

    assert type(error_for_code(grpc.StatusCode.NOT_FOUND, "gone")) is tc.NotFoundError
