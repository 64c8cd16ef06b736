"""Whether one server's session is alive, and why one ended.

The :class:`~mcp_pool_svc.supervisor.Supervisor` asks :func:`probe` in its loop (at the pace
:class:`~mcp_pool_svc.probes.Probes` sets for the whole pool) and reports every lost session
with :func:`describe_error`: one line, secret-free, the first error inside exception groups.
"""

from __future__ import annotations

import time

import anyio

from mcp_pool_svc.probes import Probes
from mcp_pool_svc.session import Connection
from toolscout_kit.logging import redact

__all__ = ["SessionLostError", "describe_error", "first_cause", "probe"]


class SessionLostError(Exception):
    """The live session ended (closed by the server, or it stopped answering pings)."""


def first_cause(err: BaseException) -> BaseException:
    """The error itself, or the first error inside (nested) exception groups (anyio task groups)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def describe_error(err: BaseException) -> str:
    """A one-line, secret-free description of why a connection failed."""
    err = first_cause(err)
    if isinstance(err, SessionLostError):
        return redact(str(err))[:500]
    if isinstance(err, TimeoutError) and not str(err):
        return "timed out"
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return redact(f"{type(err).__name__}: {text}" if text else type(err).__name__)[:500]


async def probe(conn: Connection, probes: Probes, ping_timeout: float) -> None:
    """One liveness probe, in its turn (:mod:`mcp_pool_svc.probes`).

    Raises:
        SessionLostError: the server did not answer within ``ping_timeout`` (twice in a row while the
            pool's probes are slow).
    """
    lenient = probes.under_load  # before this probe's own outcome counts
    for attempt in (1, 2):
        async with probes.probing():
            started = time.monotonic()
            try:
                with anyio.fail_after(ping_timeout):
                    await conn.ping()
            except TimeoutError:
                probes.answered(None)
                if attempt == 1 and lenient:
                    continue
                raise SessionLostError(f"no answer to ping within {ping_timeout:g}s") from None
            probes.answered(time.monotonic() - started)
            return
