"""A circuit breaker for a dependency a request may skip (discovery's query embedder).

Closed, every request uses the dependency. After ``failures`` consecutive failures (errors or
timeouts) it opens: requests skip the dependency at once instead of each waiting for it to fail
again, and the owner probes it, one probe at a time, every ``probe_interval`` seconds. The first
probe (or late request) that succeeds closes it. Plain state, no I/O and no clock of its own beyond
the one given, so that it is tested without waiting; the caller keeps it on one event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["CircuitBreaker"]


class CircuitBreaker:
    """Counts consecutive failures; open after ``failures`` of them until a success."""

    def __init__(
        self, *, failures: int, probe_interval: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if failures < 1 or probe_interval <= 0:
            raise ValueError("a breaker needs failures >= 1 and a positive probe interval")
        self.failures = failures
        self.probe_interval = probe_interval
        self._clock = clock
        self._consecutive = 0
        self._opened_at: float | None = None

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    @property
    def consecutive_failures(self) -> int:
        return self._consecutive

    def open_for(self) -> float:
        """Seconds since it opened (0 while closed)."""
        return 0.0 if self._opened_at is None else self._clock() - self._opened_at

    def record_failure(self) -> bool:
        """One more failure in a row; True when this one opened the breaker."""
        self._consecutive += 1
        if self._opened_at is None and self._consecutive >= self.failures:
            self._opened_at = self._clock()
            return True
        return False

    def record_success(self) -> bool:
        """The dependency worked; True when this closed an open breaker."""
        self._consecutive = 0
        was_open = self._opened_at is not None
        self._opened_at = None
        return was_open
