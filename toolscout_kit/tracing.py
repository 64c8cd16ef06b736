"""OpenTelemetry traces: one TracerProvider per service, a span at each seam, W3C context on every hop.

Each service builds its :class:`Tracing` with :func:`tracing_for` in its ``build_server`` and passes
it, as a dependency, to what opens spans: the kit's gRPC server interceptor (one SERVER span per RPC,
continuing the caller's ``traceparent``) and the one seam of each service (the chat and its LLM calls
and tool calls; plan and search; call_tool and the MCP request it sends; the gateway's MCP
requests). A provider per service gives each its own ``service.name`` (``toolscout-orchestrator``,
``toolscout-discovery``, ``toolscout-pool``, ``toolscout-gateway``), also where several share a
process (``toolscout up``). Code below a seam adds to the span in effect with :func:`add_event` and
:func:`set_attributes`, which need no provider.

No global provider is installed. The MCP SDK opens spans of its own through the global API: left
to the API's no-op tracer, they record nothing and only carry the context along, so the SDK still
writes our span's ``traceparent`` into each request's ``_meta`` (the MCP convention) and the
gateway's handlers still see a host's ``_meta`` context as their parent.

The client half of propagation (``traceparent`` on outgoing gRPC calls) lives in the client library
(:mod:`toolscout.client._trace_context`), so callers outside toolscout get it the same way.

Configuration: ``toolscout.tracing`` and the standard variables, which win over the file:
``OTEL_SDK_DISABLED``, ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``),
``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``, ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``,
``OTEL_TRACES_SAMPLER`` / ``_ARG``, ``OTEL_RESOURCE_ATTRIBUTES``, and what the OTLP exporters read
themselves (``OTEL_EXPORTER_OTLP_HEADERS``, ``_TIMEOUT``, ``_CERTIFICATE``, ``_COMPRESSION``),
``OTEL_BSP_*`` for batching, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``. Off (the default),
no interceptor is installed and :meth:`Tracing.span` hands out one shared no-op context manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

from toolscout_kit.config import ToolscoutConfig, TracingSettings
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import get_logger, redact, redact_value

__all__ = [
    "NO_TRACING",
    "SERVICE_NAMES",
    "Exporter",
    "SpanKind",
    "TracePlan",
    "Tracing",
    "add_event",
    "exemplar",
    "extract_context",
    "mark_error",
    "resolve_tracing",
    "set_attributes",
    "tracing_for",
]

_log = get_logger(__name__)

Exporter = Literal["none", "otlp", "console"]
# service.name per config section.
SERVICE_NAMES = {
    "pool": "toolscout-pool",
    "discovery": "toolscout-discovery",
    "orchestrator": "toolscout-orchestrator",
    "gateway": "toolscout-gateway",
}
_DEFAULT_ENDPOINTS = {"grpc": "http://localhost:4317", "http/protobuf": "http://localhost:4318"}
_PROTOCOLS = {"grpc": "grpc", "http/protobuf": "http/protobuf", "http": "http/protobuf"}
# Longest content attribute (capture_content): a prompt or a result is cut there.
_MAX_CONTENT_CHARS = 8192
# Seconds a stopping service waits for its last spans to leave (an unreachable collector must not
# hold up a shutdown for the exporter's whole timeout).
_FLUSH_WAIT = 5.0


@dataclass(frozen=True, slots=True)
class TracePlan:
    """``toolscout.tracing`` with the ``OTEL_*`` variables applied: what a service will do."""

    exporter: Exporter
    endpoint: str = ""
    protocol: str = "grpc"
    # None: the SDK reads OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG itself.
    sample_ratio: float | None = 1.0
    capture_content: bool = False


def _env(environ: Mapping[str, str], *names: str) -> str:
    """The first of ``names`` set to a non-empty value ("" if none)."""
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return value
    return ""


def _flag(environ: Mapping[str, str], name: str) -> bool | None:
    value = environ.get(name, "").strip().lower()
    if not value:
        return None
    if value not in ("true", "false"):
        raise ConfigError(f"{name}: expected true or false, not {environ[name]!r}")
    return value == "true"


def resolve_tracing(settings: TracingSettings, environ: Mapping[str, str] | None = None) -> TracePlan:
    """What ``settings`` and the ``OTEL_*`` variables of ``environ`` (default: the process's) ask for.

    Raises:
        ConfigError: a variable holds a value toolscout cannot use (an exporter other than otlp,
            console or none; the http/json protocol; a flag other than true or false).
    """
    env = os.environ if environ is None else environ
    if _flag(env, "OTEL_SDK_DISABLED"):
        return TracePlan("none")
    protocol = _env(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol not in _PROTOCOLS:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported (grpc or http/protobuf)"
        )
    protocol = _PROTOCOLS[protocol or settings.protocol]
    traces_endpoint = _env(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = _env(env, "OTEL_EXPORTER_OTLP_ENDPOINT") or (settings.endpoint or "")
    named = _env(env, "OTEL_TRACES_EXPORTER").split(",")[0].strip().lower()
    if named and named not in ("otlp", "console", "none"):
        raise ConfigError(f"OTEL_TRACES_EXPORTER: {named!r} is not supported (otlp, console or none)")
    exporter: Exporter
    if named:
        exporter = named  # type: ignore[assignment]  # checked just above
    elif settings.exporter is not None:
        exporter = settings.exporter
    else:
        exporter = "otlp" if traces_endpoint or base else "none"
    if exporter == "none":
        return TracePlan("none")
    if traces_endpoint:
        endpoint = traces_endpoint  # a whole URL, as the specification has it
    else:
        endpoint = (base or _DEFAULT_ENDPOINTS[protocol]).rstrip("/")
        if protocol == "http/protobuf":
            endpoint += "/v1/traces"
    sampled = _env(env, "OTEL_TRACES_SAMPLER")
    content = _flag(env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    return TracePlan(
        exporter,
        endpoint if exporter == "otlp" else "",
        protocol,
        None if sampled else settings.sample_ratio,
        settings.capture_content if content is None else content,
    )


def _exporter(plan: TracePlan) -> SpanExporter:
    if plan.exporter == "console":
        # Standard error: `serve` writes its JSON log lines to standard output.
        return ConsoleSpanExporter(out=sys.stderr)
    if plan.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415 - only when used
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=plan.endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415 - only when used
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(endpoint=plan.endpoint)


def _version() -> str:
    from toolscout.client import __version__  # noqa: PLC0415 - one version for every package

    return __version__


class _NoSpan(AbstractContextManager[Span]):
    """What :meth:`Tracing.span` hands out when tracing is off: nothing to start, attach or end."""

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


class _CurrentSpan(AbstractContextManager[Span]):
    """``span`` made current for the block, then ended; an exception marks it (:func:`mark_error`)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is not None:
                mark_error(self._span, exc)
        finally:
            otel_context.detach(self._token)
            self._span.end()


class Tracing:
    """One service's tracing: its tracer (its own ``service.name``) and whether content is recorded."""

    def __init__(
        self,
        service_name: str,
        provider: TracerProvider | None = None,
        *,
        capture_content: bool = False,
    ) -> None:
        self.service_name = service_name
        self._provider = provider
        self._tracer = provider.get_tracer("toolscout", _version()) if provider is not None else None
        self.enabled = provider is not None
        self.capture_content = capture_content and self.enabled

    def start(
        self,
        name: str,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        parent: Context | None = None,
    ) -> Span:
        """A started span (not made current); ``parent`` None = the current context's span."""
        if self._tracer is None:
            return INVALID_SPAN
        return self._tracer.start_span(
            name, context=parent, kind=kind, attributes=attributes, record_exception=False
        )

    def span(
        self,
        name: str,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        parent: Context | None = None,
    ) -> AbstractContextManager[Span]:
        """``with tracing.span(name, attributes=...) as span:`` — a span current for the block."""
        if self._tracer is None:
            return _NO_SPAN
        return _CurrentSpan(self.start(name, kind=kind, attributes=attributes, parent=parent))

    def content(self, span: Span, key: str, value: Any) -> None:
        """Records ``value`` (text, or JSON-like) under ``key`` when content capture is on: redacted
        like the logs and cut at 8192 characters."""
        if not self.capture_content or not span.is_recording():
            return
        cleaned = redact_value(value)
        text = cleaned if isinstance(cleaned, str) else json.dumps(cleaned, ensure_ascii=False, default=str)
        if len(text) > _MAX_CONTENT_CHARS:
            text = text[:_MAX_CONTENT_CHARS] + "…[truncated]"
        span.set_attribute(key, text)

    async def shutdown(self) -> None:
        """Sends the spans still queued (waiting at most a few seconds) and stops the exporter."""
        provider = self._provider
        if provider is None:
            return
        self._provider = None
        done = asyncio.get_running_loop().create_future()

        def finished() -> None:
            if not done.done():
                done.set_result(None)

        def stop() -> None:
            try:
                provider.shutdown()
            finally:
                # The loop may be gone by then (the wait below gave up and the process moved on).
                with contextlib.suppress(RuntimeError):
                    done.get_loop().call_soon_threadsafe(finished)

        # A thread of its own (daemon): a collector that does not answer holds only that thread.
        threading.Thread(target=stop, name=f"{self.service_name}-trace-flush", daemon=True).start()
        try:
            await asyncio.wait_for(asyncio.shield(done), _FLUSH_WAIT)
        except TimeoutError:
            _log.warning("traces not sent before shutdown", service=self.service_name, waited=_FLUSH_WAIT)


NO_TRACING = Tracing("toolscout")


def tracing_for(config: ToolscoutConfig, service: str, environ: Mapping[str, str] | None = None) -> Tracing:
    """The tracing of ``service`` ("pool", "discovery", "orchestrator" or "gateway") for ``config``:
    a provider of its own with its ``service.name``, or the no-op :data:`NO_TRACING` when off.

    Raises:
        ConfigError: an ``OTEL_*`` variable holds a value toolscout cannot use.
    """
    plan = resolve_tracing(config.toolscout.tracing, environ)
    name = SERVICE_NAMES[service]
    if plan.exporter == "none":
        return NO_TRACING
    sampler: Sampler | None = (
        ParentBased(TraceIdRatioBased(plan.sample_ratio)) if plan.sample_ratio is not None else None
    )
    resource = Resource.create(
        {"service.name": name, "service.namespace": "toolscout", "service.version": _version()}
    )
    provider = TracerProvider(resource=resource, sampler=sampler, shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(_exporter(plan)))
    _log.info(
        "tracing",
        service=name,
        exporter=plan.exporter,
        endpoint=plan.endpoint,
        protocol=plan.protocol,
        sample_ratio=plan.sample_ratio,
        capture_content=plan.capture_content,
    )
    return Tracing(name, provider, capture_content=plan.capture_content)


# --- the span in effect (API only: no provider needed, no-ops when nothing records) ----------


def set_attributes(attributes: Mapping[str, AttributeValue | None]) -> None:
    """Sets ``attributes`` (None values skipped) on the current span, if it records."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({k: v for k, v in attributes.items() if v is not None})


def add_event(name: str, attributes: Mapping[str, AttributeValue | None] | None = None) -> None:
    """Adds an event (a retry, a fallback) to the current span, if it records."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, {k: v for k, v in (attributes or {}).items() if v is not None})


def mark_error(span: Span, exc: BaseException) -> None:
    """``error.type`` (and ERROR status, unless it is a cancellation) for ``exc`` on ``span``."""
    if not span.is_recording():
        return
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        span.set_attribute("error.type", "cancelled")
        return
    # A protocol error's own code (MCP's JSON-RPC codes), else the exception's type.
    code = getattr(exc, "code", None)
    numeric = isinstance(code, int) and not isinstance(code, bool)
    span.set_attribute("error.type", str(code) if numeric else type(exc).__qualname__)
    message = getattr(exc, "message", None) or str(exc)
    span.set_status(StatusCode.ERROR, redact(str(message))[:500])


def exemplar() -> dict[str, str] | None:
    """The current span as a Prometheus exemplar (``trace_id``, ``span_id``), if it is recorded."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    ctx = span.get_span_context()
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


def extract_context(pairs: Iterable[tuple[Any, Any]] | None) -> Context | None:
    """The caller's trace context (W3C ``traceparent``, ``tracestate``, baggage) from gRPC metadata
    or HTTP headers given as key/value pairs; None when there is no valid one."""
    carrier = {
        (k.decode("latin-1") if isinstance(k, bytes) else str(k)).lower(): (
            v.decode("latin-1") if isinstance(v, bytes) else v
        )
        for k, v in (pairs or ())
    }
    if "traceparent" not in carrier:
        return None
    with contextlib.suppress(ValueError, TypeError):
        ctx = propagate.extract({k: v for k, v in carrier.items() if isinstance(v, str)})
        if trace.get_current_span(ctx).get_span_context().is_valid:
            return ctx
    return None
