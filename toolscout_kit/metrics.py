"""Prometheus metrics shared by every server: the gRPC server metrics and the scrape endpoint.

Service-specific metrics live in each service's own ``metrics.py``; all of them register in the
default registry, which the endpoint started here serves.
"""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import Counter, Histogram, start_http_server

__all__ = ["GRPC_HANDLED", "GRPC_HANDLING_SECONDS", "MetricsEndpoint", "start_metrics_endpoint"]

GRPC_HANDLED = Counter(
    "grpc_server_handled",
    "RPCs completed on the server, by status code.",
    ["grpc_service", "grpc_method", "grpc_code"],
)
GRPC_HANDLING_SECONDS = Histogram(
    "grpc_server_handling_seconds",
    "Time to handle an RPC on the server (for streams: until the stream ends).",
    ["grpc_service", "grpc_method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)


class MetricsEndpoint:
    """A running /metrics HTTP endpoint."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.port: int = server.server_address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def start_metrics_endpoint(host: str, port: int) -> MetricsEndpoint:
    """Serves the default registry on ``host:port`` (0 = a free port) in a daemon thread."""
    server, thread = start_http_server(port, addr=host)
    return MetricsEndpoint(server, thread)
