"""Prometheus plumbing shared by every server: one registry per service, the gRPC server metrics and
the scrape endpoint.

Each service builds its registry with :func:`new_registry` in its ``server.py``, hands it to its own
metrics class and to :func:`toolscout_kit.server.start_server`, which serves exactly that registry.
Services sharing a process (``toolscout up``) therefore never report each other's figures.

Metric names follow one scheme per service (``toolscout_pool_*``, ``toolscout_discovery_*``,
``toolscout_orchestrator_*``, ``toolscout_gateway_*``). A renamed metric keeps its old name for one
release through :class:`DeprecatedNames`, which serves the new metric's samples under the old name
too, so dashboards and alerts written for it keep working while they are moved over. Each
service declares its metrics through :class:`MetricSet`, which gives every name the service's prefix
and registers it in the service's registry.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = [
    "DeprecatedNames",
    "GrpcServerMetrics",
    "MetricSet",
    "MetricsEndpoint",
    "ResultTokens",
    "TimedEvents",
    "grpc_server_metrics",
    "new_registry",
    "start_metrics_endpoint",
]


def new_registry() -> CollectorRegistry:
    """An empty registry with the standard process, platform and GC collectors."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class DeprecatedNames(Collector):
    """Serves metrics under their old names as well, for one release after a rename.

    ``renamed`` maps each old family name (without ``_total``) to the metric that replaced it; a
    scrape returns that metric's samples again under the old name, so both always agree.
    """

    def __init__(self, registry: CollectorRegistry, renamed: Mapping[str, MetricWrapperBase]) -> None:
        self._renamed = dict(renamed)
        registry.register(self)

    def _aliases(self, families: Iterable[tuple[str, Metric]]) -> Iterator[Metric]:
        for old, family in families:
            alias = Metric(
                old, f"Deprecated: renamed to {family.name}. {family.documentation}", family.type, family.unit
            )
            alias.samples = [
                sample._replace(name=old + sample.name[len(family.name) :]) for sample in family.samples
            ]
            yield alias

    def collect(self) -> Iterator[Metric]:
        yield from self._aliases(
            (old, family) for old, new in self._renamed.items() for family in new.collect()
        )

    def describe(self) -> Iterator[Metric]:
        # The registry checks names for duplicates with this; no samples needed.
        yield from self._aliases(
            (old, family) for old, new in self._renamed.items() for family in new.describe()
        )


class MetricSet:
    """Declares one service's metrics: every name gets the service's ``prefix`` (the naming scheme
    above), every metric registers in ``registry`` (a throwaway one when None: tests)."""

    def __init__(self, prefix: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._prefix = prefix

    def counter(self, name: str, doc: str, *labels: str) -> Counter:
        """``<prefix><name>_total``, counted by ``labels``."""
        return Counter(self._prefix + name, doc, labels, registry=self.registry)

    def gauge(self, name: str, doc: str, *labels: str) -> Gauge:
        return Gauge(self._prefix + name, doc, labels, registry=self.registry)

    def histogram(self, name: str, doc: str, *labels: str, buckets: Sequence[float]) -> Histogram:
        return Histogram(self._prefix + name, doc, labels, buckets=buckets, registry=self.registry)


class ResultTokens:
    """``<prefix>result_tokens_total`` by server and kind: the tokens of tool results shaped to a
    budget, returned (by the server), delivered (to the caller) and saved (the difference), one
    rule wherever results are shaped (the pool, the orchestrator); a service may count more kinds."""

    def __init__(self, metrics: MetricSet, doc: str) -> None:
        self.counter = metrics.counter("result_tokens", doc, "server", "kind")

    def shaped(self, server: str, returned: int, delivered: int) -> None:
        """One result shaped to a budget."""
        self.counter.labels(server, "returned").inc(returned)
        self.counter.labels(server, "delivered").inc(delivered)
        self.counter.labels(server, "saved").inc(max(returned - delivered, 0))


class TimedEvents:
    """One kind of event, counted (``<prefix><count>_total``, by ``labels``) and timed
    (``<prefix><seconds>``, a histogram by ``timed_by``: all of ``labels`` or some of them), both
    recorded by one call: the pattern of every service's searches, calls and builds."""

    def __init__(
        self,
        metrics: MetricSet,
        count: tuple[str, str],
        seconds: tuple[str, str],
        *labels: str,
        timed_by: Sequence[str] | None = None,
        buckets: Sequence[float],
    ) -> None:
        """``count`` and ``seconds`` are each a (name, documentation) pair."""
        self._labels = labels
        self._timed_by = labels if timed_by is None else tuple(timed_by)
        self.counter = metrics.counter(*count, *labels)
        self.histogram = metrics.histogram(*seconds, *self._timed_by, buckets=buckets)
        # The two children per label values, looked up once (``labels()`` takes a lock and builds
        # a key per call; events are recorded on hot paths).
        self._children: dict[tuple[str, ...], tuple[Any, Any]] = {}

    def record(self, seconds: float, *values: str, exemplar: dict[str, str] | None = None) -> None:
        """One event that took ``seconds``, with the value of each of ``labels`` (in order);
        ``exemplar``: the trace it belongs to (:func:`toolscout_kit.tracing.exemplar`)."""
        children = self._children.get(values)
        if children is None:
            children = self._children[values] = self._lookup(values)
        children[0].inc()
        children[1].observe(seconds, exemplar)

    def _lookup(self, values: tuple[str, ...]) -> tuple[Any, Any]:
        if not values:
            return self.counter, self.histogram
        by_name = dict(zip(self._labels, values, strict=True))
        return (
            self.counter.labels(*values),
            self.histogram.labels(*(by_name[name] for name in self._timed_by)),
        )


# Seconds to handle one RPC (for streams: until the stream ends).
_RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class GrpcServerMetrics:
    """``grpc_server_handled_total`` and ``grpc_server_handling_seconds`` (names dashboards use)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        m = MetricSet("grpc_server_", registry)
        rpc = ("grpc_service", "grpc_method")
        self.handled = m.counter(
            "handled", "RPCs completed on the server, by status code.", *rpc, "grpc_code"
        )
        self.handling_seconds = m.histogram(
            "handling_seconds",
            "Time to handle an RPC on the server (for streams: until the stream ends).",
            *rpc,
            buckets=_RPC_BUCKETS,
        )


_GRPC_SERVER_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, GrpcServerMetrics] = (
    weakref.WeakKeyDictionary()
)


def grpc_server_metrics(registry: CollectorRegistry) -> GrpcServerMetrics:
    """The gRPC server metrics of ``registry`` (made once: the interceptor and a servicer that
    counts work of its own, such as the calls on a pool's call stream, share them)."""
    metrics = _GRPC_SERVER_METRICS.get(registry)
    if metrics is None:
        metrics = _GRPC_SERVER_METRICS[registry] = GrpcServerMetrics(registry)
    return metrics


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


def start_metrics_endpoint(host: str, port: int, registry: CollectorRegistry) -> MetricsEndpoint:
    """Serves ``registry`` on ``host:port`` (0 = a free port) in a daemon thread."""
    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsEndpoint(server, thread)
