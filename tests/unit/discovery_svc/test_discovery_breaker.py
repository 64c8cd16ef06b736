"""The circuit breaker's states, on a clock the test moves."""

from __future__ import annotations

import pytest

from discovery_svc.breaker import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_it_opens_after_the_configured_failures_in_a_row_and_closes_on_a_success() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=3, probe_interval=2.0, clock=clock)
    assert [breaker.record_failure() for _ in range(2)] == [False, False]
    assert not breaker.is_open
    assert breaker.record_failure() is True  # the third opens it ...
    assert breaker.is_open
    assert breaker.record_failure() is False  # ... once
    clock.now += 7.5
    assert breaker.open_for() == 7.5
    assert breaker.record_success() is True
    assert not breaker.is_open
    assert breaker.open_for() == 0.0
    assert breaker.record_success() is False


def test_a_success_in_between_starts_the_count_again() -> None:
    breaker = CircuitBreaker(failures=2, probe_interval=1.0, clock=Clock())
    breaker.record_failure()
    breaker.record_success()
    assert breaker.record_failure() is False
    assert breaker.consecutive_failures == 1
    assert breaker.record_failure() is True


@pytest.mark.parametrize(("failures", "interval"), [(0, 1.0), (1, 0.0), (1, -1.0)])
def test_nonsense_settings_are_refused(failures: int, interval: float) -> None:
    with pytest.raises(ValueError, match="breaker"):
        CircuitBreaker(failures=failures, probe_interval=interval)
