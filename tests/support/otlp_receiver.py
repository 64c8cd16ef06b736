"""A real OTLP trace receiver on 127.0.0.1 (gRPC and HTTP/protobuf), built from opentelemetry-proto.

The services export to it exactly as to a collector; tests read back what arrived as :class:`Span`
records (service name, ids in W3C hex, parent, kind, attributes, events) and wait, bounded and
event-driven, for the spans they expect.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

__all__ = ["OtlpReceiver", "Span"]

_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def _value(v: common_pb2.AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    start_ns: int = 0
    end_ns: int = 0


class OtlpReceiver:
    """Collects every span exported to it; a context manager (starts and stops its servers)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self._changed = threading.Condition()
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Servicer(self), self._grpc)
        self._grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        receiver = self

        class _Http(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver.add(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                return

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _Http)
        self._http_thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self._grpc_port}"

    @property
    def http_endpoint(self) -> str:
        """The base URL (the exporter appends /v1/traces)."""
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._grpc.start()
        self._http_thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._grpc.stop(0).wait(5)
        self._http.shutdown()
        self._http.server_close()
        self._http_thread.join(5)

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            attributes = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            service = str(attributes.get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    found.append(
                        Span(
                            service=service,
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            kind=_KINDS.get(s.kind, str(s.kind)),
                            attributes={kv.key: _value(kv.value) for kv in s.attributes},
                            events=[
                                (e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in s.events
                            ],
                            status_code=s.status.code,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                        )
                    )
        with self._changed:
            self.requests += 1
            self.spans.extend(found)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[list[Span]], bool], timeout: float = 30.0) -> list[Span]:
        """Every span received, once ``predicate(spans)`` holds (waiting at most ``timeout`` seconds).

        Raises:
            TimeoutError: it did not hold in time (the message lists what arrived).
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(list(self.spans)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    names = sorted({f"{s.service}:{s.name}" for s in self.spans})
                    raise TimeoutError(f"spans not there within {timeout}s; received: {names}")
                self._changed.wait(remaining)
            return list(self.spans)

    def trace(self, trace_id: str) -> list[Span]:
        with self._changed:
            return [s for s in self.spans if s.trace_id == trace_id]


class _Servicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._receiver.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()
