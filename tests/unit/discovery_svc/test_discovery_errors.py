"""Every discovery error maps to the status code its category promises."""

from __future__ import annotations

import grpc
import pytest

from discovery_svc.errors import SearchArgumentError, ToolsetNotFoundError, UnknownServerError
from toolscout_kit.errors import ToolscoutError, UnavailableError
from toolscout_kit.status import status_for


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (SearchArgumentError("bad"), grpc.StatusCode.INVALID_ARGUMENT),
        (UnknownServerError("no such server"), grpc.StatusCode.NOT_FOUND),
        (ToolsetNotFoundError("no such toolset"), grpc.StatusCode.NOT_FOUND),
        (UnavailableError("no catalog yet"), grpc.StatusCode.UNAVAILABLE),
    ],
)
def test_discovery_errors_map_to_status_codes(error: ToolscoutError, code: grpc.StatusCode) -> None:
    assert status_for(error) == code
