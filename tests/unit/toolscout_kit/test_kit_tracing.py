"""Tracing's configuration (the file and the OTEL_* variables), spans, content capture and the log
and client-library halves of propagation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from toolscout.client._trace_context import with_trace_context

from toolscout_kit.config import TracingSettings, parse_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import configure_logging, get_logger
from toolscout_kit.tracing import (
    NO_TRACING,
    TracePlan,
    Tracing,
    add_event,
    exemplar,
    extract_context,
    resolve_tracing,
    tracing_for,
)

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def plan(env: dict[str, str] | None = None, **settings: object) -> TracePlan:
    return resolve_tracing(TracingSettings.model_validate(settings), env or {})


@pytest.fixture
def recorded() -> Iterator[tuple[Tracing, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing("toolscout-test", provider, capture_content=True), exporter
    provider.shutdown()


# --- configuration -------------------------------------------------------------------------------


def test_tracing_is_off_unless_an_exporter_or_an_endpoint_is_given() -> None:
    assert plan().exporter == "none"
    assert plan(endpoint="http://collector:4317") == TracePlan("otlp", "http://collector:4317", "grpc", 1.0)
    assert plan(exporter="none", endpoint="http://collector:4317").exporter == "none"
    assert plan(exporter="console").exporter == "console"
    assert plan(exporter="otlp").endpoint == "http://localhost:4317"


def test_the_standard_variables_win_over_the_file() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://from-env:4317"}
    assert plan(env, endpoint="http://from-file:4317").endpoint == "http://from-env:4317"
    assert plan(env).exporter == "otlp"  # an endpoint in the environment turns it on
    assert plan({"OTEL_TRACES_EXPORTER": "none"}, endpoint="http://x:4317").exporter == "none"
    assert plan({"OTEL_TRACES_EXPORTER": "console"}).exporter == "console"
    assert plan({"OTEL_SDK_DISABLED": "true"}, exporter="otlp").exporter == "none"
    http = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}
    assert plan(http).endpoint == "http://c:4318/v1/traces"
    whole = {**http, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom"}
    assert plan(whole).endpoint == "http://c:4318/custom"  # the signal's own URL is taken as it is
    assert plan({"OTEL_TRACES_SAMPLER": "always_off"}, exporter="otlp").sample_ratio is None
    assert plan(
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, exporter="otlp"
    ).capture_content


def test_the_file_alone_sets_protocol_ratio_and_content() -> None:
    got = plan(endpoint="http://c:4318", protocol="http", sample_ratio=0.25, capture_content=True)
    assert got == TracePlan("otlp", "http://c:4318/v1/traces", "http/protobuf", 0.25, True)


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("OTEL_TRACES_EXPORTER", "jaeger", "OTEL_TRACES_EXPORTER"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ("OTEL_SDK_DISABLED", "yes", "OTEL_SDK_DISABLED"),
    ],
)
def test_a_variable_toolscout_cannot_use_is_a_config_error_naming_it(
    variable: str, value: str, named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        plan({variable: value}, exporter="otlp")


def test_a_bad_tracing_key_in_the_file_names_its_path() -> None:
    with pytest.raises(ConfigError, match=r"toolscout\.tracing\.sample_ratio"):
        parse_config({"toolscout": {"tracing": {"sample_ratio": 2}}})
    with pytest.raises(ConfigError, match=r"toolscout\.tracing\.endpoint"):
        parse_config({"toolscout": {"tracing": {"endpoint": "collector:4317"}}})


async def test_each_service_gets_a_provider_of_its_own_named_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in list(__import__("os").environ) if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    config = parse_config({"toolscout": {"tracing": {"exporter": "console"}}})
    pool, gateway = tracing_for(config, "pool"), tracing_for(config, "gateway")
    try:
        assert (pool.service_name, gateway.service_name) == ("toolscout-pool", "toolscout-gateway")
        assert pool.enabled
        assert pool._provider is not gateway._provider
        assert pool._provider is not None
        assert pool._provider.resource.attributes["service.name"] == "toolscout-pool"
    finally:
        await pool.shutdown()
        await gateway.shutdown()
    assert tracing_for(parse_config({}), "pool") is NO_TRACING


# --- spans ---------------------------------------------------------------------------------------


def test_off_every_span_is_the_same_no_op_and_nothing_is_current() -> None:
    assert NO_TRACING.span("a") is NO_TRACING.span("b")
    with NO_TRACING.span("a") as span:
        assert not span.is_recording()
        assert exemplar() is None
        add_event("retry")  # nothing records it, nothing fails


def test_a_span_is_current_for_its_block_and_marks_failures(
    recorded: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = recorded
    with tracing.span("outer") as outer:
        assert exemplar() == {
            "trace_id": format(outer.get_span_context().trace_id, "032x"),
            "span_id": format(outer.get_span_context().span_id, "016x"),
        }
        add_event("retry", {"attempt": 1, "skipped": None})
        with pytest.raises(ValueError, match="boom"), tracing.span("inner"):
            raise ValueError("boom Bearer abcdefghijklmnopqrstuvwxyz")
        with pytest.raises(asyncio.CancelledError), tracing.span("cancelled"):
            raise asyncio.CancelledError
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["inner"].parent is not None
    assert spans["inner"].parent.span_id == spans["outer"].context.span_id
    assert spans["inner"].attributes["error.type"] == "ValueError"
    assert spans["inner"].status.status_code is StatusCode.ERROR
    assert "abcdefghijklmnop" not in (spans["inner"].status.description or "")
    assert spans["cancelled"].attributes["error.type"] == "cancelled"
    assert spans["cancelled"].status.status_code is StatusCode.UNSET
    assert [(e.name, dict(e.attributes or {})) for e in spans["outer"].events] == [("retry", {"attempt": 1})]


def test_content_is_recorded_only_when_asked_redacted_like_the_logs_and_cut(
    recorded: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = recorded
    with tracing.span("call") as span:
        tracing.content(
            span, "gen_ai.tool.call.arguments", {"query": "x", "api_key": "sk-abcdefghijklmnopqrstu"}
        )
        tracing.content(span, "gen_ai.tool.call.result", "token sk-proj-abcdefghijklmnopqrstu " + "y" * 9000)
    quiet = Tracing("quiet", TracerProvider(), capture_content=False)
    with quiet.span("call") as span:
        quiet.content(span, "gen_ai.tool.call.arguments", {"query": "x"})
        assert "gen_ai.tool.call.arguments" not in span.attributes  # type: ignore[attr-defined]
    attributes = exporter.get_finished_spans()[0].attributes or {}
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {
        "query": "x",
        "api_key": "[REDACTED]",
    }
    result = str(attributes["gen_ai.tool.call.result"])
    assert "sk-proj" not in result
    assert result.endswith("…[truncated]")
    assert len(result) < 8300


def test_a_callers_context_is_read_from_grpc_metadata_or_http_headers() -> None:
    from opentelemetry import trace

    for pairs in ([("traceparent", TRACEPARENT)], [(b"Traceparent", TRACEPARENT.encode())]):
        found = extract_context(pairs)
        assert found is not None
        assert format(trace.get_current_span(found).get_span_context().trace_id, "032x") == TRACEPARENT[3:35]
    assert extract_context([("traceparent", "00-nonsense")]) is None
    assert extract_context([("x-request-id", "1")]) is None


# --- logs and the client library ---------------------------------------------------------------


def test_log_lines_carry_the_trace_and_span_ids_while_a_span_is_current(
    recorded: tuple[Tracing, InMemorySpanExporter], capsys: pytest.CaptureFixture[str]
) -> None:
    tracing, _ = recorded
    configure_logging("INFO")
    log = get_logger("test")
    log.info("outside")
    with tracing.span("work") as span:
        log.info("inside")
    outside, inside = (json.loads(line) for line in capsys.readouterr().out.strip().splitlines()[-2:])
    assert "trace_id" not in outside
    assert "span_id" not in outside
    assert inside["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert inside["span_id"] == format(span.get_span_context().span_id, "016x")


def test_the_client_library_sends_the_current_span_and_only_then(
    recorded: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, _ = recorded
    assert with_trace_context(None) is None
    mine = [("x-request-id", "r1")]
    assert with_trace_context(mine) is mine
    with tracing.span("caller") as span:
        sent = dict(with_trace_context(mine) or ())
        assert sent["x-request-id"] == "r1"
        ctx = span.get_span_context()
        assert sent["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
        own = [("traceparent", TRACEPARENT)]
        assert with_trace_context(own) is own  # the caller's own header is left alone
