"""The orchestrator's metric names are a contract (dashboards and alerts use them)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from orchestrator_svc.messages import Usage
from orchestrator_svc.metrics import OrchestratorMetrics


def test_metric_names_are_the_documented_contract() -> None:
    registry = CollectorRegistry()
    metrics = OrchestratorMetrics(registry)
    metrics.record_llm_call("openai", "gpt", 0.1, Usage(1, 2, 3))
    metrics.record_llm_error("openai", "gpt", "rate_limited")
    metrics.record_chat("gpt", "", "completed", 2, 100, 300)
    metrics.deferred_rejections.labels("gpt").inc()
    metrics.search_calls.labels("gpt").inc()
    metrics.discovered_tool_calls.labels("gpt").inc()
    samples = {(s.name, tuple(sorted(s.labels))) for family in registry.collect() for s in family.samples}
    expected = {
        ("toolscout_orchestrator_llm_tokens_total", ("model", "provider", "type")),
        ("toolscout_orchestrator_llm_call_duration_seconds_count", ("model", "provider")),
        ("toolscout_orchestrator_llm_errors_total", ("model", "provider", "reason")),
        ("toolscout_orchestrator_chat_iterations_count", ()),
        ("toolscout_orchestrator_chats_total", ("model", "outcome")),
        ("toolscout_orchestrator_deferred_call_rejections_total", ("model",)),
        ("toolscout_orchestrator_tokens_saved_total", ("model", "toolset")),
        ("toolscout_orchestrator_definition_tokens_sent_total", ("model", "toolset")),
        ("toolscout_orchestrator_definition_tokens_all_total", ("model", "toolset")),
        ("toolscout_orchestrator_search_calls_total", ("model",)),
        ("toolscout_orchestrator_discovered_tool_calls_total", ("model",)),
    }
    assert expected <= samples
    saved = registry.get_sample_value(
        "toolscout_orchestrator_tokens_saved_total", {"model": "gpt", "toolset": "_all"}
    )
    assert saved == 200
    types = {
        registry.get_sample_value(
            "toolscout_orchestrator_llm_tokens_total", {"provider": "openai", "model": "gpt", "type": t}
        )
        for t in ("input", "output", "cached_input")
    }
    assert types == {1, 2, 3}


def test_names_before_the_orchestrator_prefix_are_served_for_one_more_release() -> None:
    registry = CollectorRegistry()
    metrics = OrchestratorMetrics(registry)
    metrics.record_llm_call("openai", "gpt", 0.1, Usage(1, 2, 3))
    metrics.record_chat("gpt", "planning", "completed", 2, 100, 300)
    for old, new in (
        ("toolscout_llm_tokens_total", "toolscout_orchestrator_llm_tokens_total"),
        ("toolscout_tokens_saved_total", "toolscout_orchestrator_tokens_saved_total"),
    ):
        labels = (
            {"provider": "openai", "model": "gpt", "type": "output"}
            if "llm" in old
            else {"model": "gpt", "toolset": "planning"}
        )
        assert registry.get_sample_value(old, labels) == registry.get_sample_value(new, labels) != None  # noqa: E711
    assert registry.get_sample_value("toolscout_chat_iterations_count") == 1
