"""W3C trace context on every call, when OpenTelemetry's API is installed (the ``otel`` extra).

The library depends on grpcio and protobuf only. Where ``opentelemetry-api`` can be imported and a
span is current in the caller (its own tracing, or a toolscout service's), each call carries that
span's ``traceparent`` (and ``tracestate``, baggage: whatever the configured propagators write) as
gRPC metadata, so the caller's trace continues through toolscout. Without the package, or with no
span current, nothing is added and nothing is imported per call.

It is done where every call of the clients passes (``_unary`` / ``_stream``), not by a channel
interceptor: an intercepted ``grpc.aio`` call costs tens of microseconds more per call and changes
the call objects the clients rely on (``wait_for_ready``, cancellation). Metadata the caller
passes that already holds a ``traceparent`` is left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

try:
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace

    _AVAILABLE = True
except ImportError:  # the library without the `otel` extra
    _AVAILABLE = False

__all__ = ["with_trace_context"]

Metadata = Sequence[tuple[str, str]] | None


def with_trace_context(metadata: Metadata) -> Metadata:
    """``metadata`` plus the current span's W3C context (``metadata`` itself when there is none)."""
    if not _AVAILABLE:
        return metadata
    if not _trace.get_current_span().get_span_context().is_valid:
        return metadata
    if metadata and any(key == "traceparent" for key, _ in metadata):
        return metadata
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    if not carrier:
        return metadata
    return [*(metadata or ()), *carrier.items()]
