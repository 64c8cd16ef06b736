"""Pool-wide pacing of liveness probes and connection attempts, so that supervision scales with the
number of servers.

Every :class:`~mcp_pool_svc.supervisor.Supervisor` probes its own server (``ping``, or a
``server/discover`` at 2026-07-28) and opens its own connection; :class:`Probes` is the one budget
they share:

* **Spread and jitter.** A server's first probe comes at a random point of its first interval and
  each next one after the interval ±20 %, so a thousand servers started together are not probed
  together.
* **An interval that scales.** The interval is ``ping_interval``, stretched when the pool holds
  more servers than ``health_checks_per_second`` × ``ping_interval``: the pool as a whole sends at
  most that many probes a second (1,000 servers at the default 20/s: one probe per server every
  50 s; up to 100 servers: every 5 s, unchanged).
* **Bounded concurrency.** At most ``health_check_concurrency`` probes are in flight, and at most
  ``connect_concurrency`` connection attempts (spawn or dial, handshake, first listing) run at once;
  a probe's ``ping_timeout`` counts from when it is sent, not from when it queued.
* **Backing off under load.** A probe answered slowly (after half its timeout) or not at all
  doubles a pool-wide factor on the interval (up to ×8); prompt answers bring it back down. While
  the factor is raised, one unanswered probe is not yet a hung server: a second one, right after,
  must go unanswered too. A pool too busy to read its answers in time thus probes less and does
  not restart healthy servers, which would add the load of reconnecting to the load it has.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from toolscout_kit.config import PoolSettings

__all__ = ["Probes"]

_JITTER = 0.2  # each interval is the nominal one ±20 %
_MAX_BACKOFF = 8.0  # the interval grows to at most 8x under load
_EASE = 0.9  # a prompt answer keeps this share of the excess factor
_SETTLED = 0.05  # an excess this small is none


class Probes:
    """The probe and connection budget of one pool (shared by its supervisors)."""

    def __init__(self, settings: PoolSettings, rng: random.Random) -> None:
        self._settings = settings
        self._rng = rng
        self._servers = 0
        self._probing = asyncio.Semaphore(settings.health_check_concurrency)
        self._connecting = asyncio.Semaphore(settings.connect_concurrency)
        self.backoff = 1.0  # the load factor on the interval (1: none)

    def add_server(self) -> None:
        self._servers += 1

    def remove_server(self) -> None:
        self._servers = max(self._servers - 1, 0)

    @property
    def interval(self) -> float:
        """Seconds between two probes of one server (before jitter)."""
        s = self._settings
        return max(s.ping_interval, self._servers / s.health_checks_per_second) * self.backoff

    def first_delay(self) -> float:
        """Seconds until a newly connected server's first probe: anywhere in one interval."""
        return self._rng.uniform(0.1, 1.0) * self.interval

    def next_delay(self) -> float:
        return self.interval * self._rng.uniform(1.0 - _JITTER, 1.0 + _JITTER)

    @property
    def under_load(self) -> bool:
        """Recent probes were slow: an unanswered probe is checked once more before it counts."""
        return self.backoff > 1.0

    @asynccontextmanager
    async def probing(self) -> AsyncIterator[None]:
        """A turn to send one probe (its timeout starts inside)."""
        async with self._probing:
            yield

    @asynccontextmanager
    async def connecting(self) -> AsyncIterator[None]:
        """A turn to open one connection (spawn or dial, handshake, first listing)."""
        async with self._connecting:
            yield

    def answered(self, seconds: float | None) -> None:
        """A probe's outcome: the seconds it took, or None when it timed out."""
        if seconds is None or seconds > self._settings.ping_timeout / 2:
            self.backoff = min(self.backoff * 2.0, _MAX_BACKOFF)
        else:
            excess = (self.backoff - 1.0) * _EASE
            self.backoff = 1.0 + excess if excess > _SETTLED else 1.0
