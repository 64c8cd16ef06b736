"""Every orchestrator error maps to the status code its category promises."""

from __future__ import annotations

from orchestrator_svc import errors as orch_errors
from toolscout_kit.errors import ToolscoutError
from toolscout_kit.status import status_for


def test_every_orchestrator_error_maps_to_a_status_code() -> None:
    classes = [getattr(orch_errors, name) for name in orch_errors.__all__]
    for cls in classes:
        assert issubclass(cls, ToolscoutError)
        assert status_for(cls("x")) is not None, cls
