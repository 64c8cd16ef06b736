"""The kit's metric declarations: TimedEvents counts and times one kind of event in one call."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from toolscout_kit.metrics import MetricSet, TimedEvents


def _events(
    registry: CollectorRegistry, *labels: str, timed_by: tuple[str, ...] | None = None
) -> TimedEvents:
    return TimedEvents(
        MetricSet("t_", registry),
        ("jobs", "Jobs."),
        ("job_duration_seconds", "Job time."),
        *labels,
        timed_by=timed_by,
        buckets=(0.1, 1.0),
    )


def test_timed_events_count_by_every_label_and_time_by_the_chosen_ones() -> None:
    registry = CollectorRegistry()
    events = _events(registry, "mode", "outcome", timed_by=("outcome",))
    events.record(0.5, "fast", "ok")
    events.record(2.0, "slow", "ok")
    assert registry.get_sample_value("t_jobs_total", {"mode": "fast", "outcome": "ok"}) == 1
    assert registry.get_sample_value("t_jobs_total", {"mode": "slow", "outcome": "ok"}) == 1
    assert registry.get_sample_value("t_job_duration_seconds_count", {"outcome": "ok"}) == 2
    assert registry.get_sample_value("t_job_duration_seconds_bucket", {"outcome": "ok", "le": "1.0"}) == 1


def test_timed_events_time_by_every_label_unless_told_otherwise() -> None:
    registry = CollectorRegistry()
    _events(registry, "server").record(0.05, "a")
    assert registry.get_sample_value("t_job_duration_seconds_sum", {"server": "a"}) == pytest.approx(0.05)


def test_timed_events_without_labels() -> None:
    registry = CollectorRegistry()
    events = _events(registry)
    events.record(0.2)
    events.record(0.3)
    assert registry.get_sample_value("t_jobs_total") == 2
    assert registry.get_sample_value("t_job_duration_seconds_count") == 2
