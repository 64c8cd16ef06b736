"""``toolscout.tracing``: OpenTelemetry traces."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolscout_kit.config._base import Flag, Strict

__all__ = ["TracingSettings"]


class TracingSettings(Strict):
    """OpenTelemetry traces (``toolscout.tracing``); the standard ``OTEL_*`` variables win over these
    (see :mod:`toolscout_kit.tracing`). Off unless an exporter or an OTLP endpoint is given."""

    # Unset: "otlp" when an OTLP endpoint is given (here or in OTEL_EXPORTER_OTLP_*ENDPOINT), else "none".
    exporter: Literal["none", "otlp", "console"] | None = None
    # The collector's base URL ("http://collector:4317" for gRPC, ":4318" for HTTP, which appends
    # /v1/traces); http:// sends in plain text, https:// with TLS.
    endpoint: str | None = Field(default=None, pattern=r"^$|^https?://")
    protocol: Literal["grpc", "http/protobuf", "http"] = "grpc"
    # Share of new traces recorded; a caller's sampling decision is followed (parent-based).
    sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    # Prompt text, tool arguments and results in spans (redacted like the logs). Off: counts,
    # names and outcomes only.
    capture_content: Flag = False
