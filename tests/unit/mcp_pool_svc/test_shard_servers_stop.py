"""A shard's stop says which servers held it up: those that did not stop within the stop timeout
(then cancelled) and those still running after the second wait. Supervisors that only take their
time stand in for the servers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from mcp_pool_svc.catalog import Catalog
from mcp_pool_svc.metrics import PoolMetrics
from mcp_pool_svc.shard_servers import ShardServers
from tests.support.mcp_servers import example_server_config
from toolscout_kit.config import parse_config
from toolscout_kit.shards import ShardIdentity


class _Supervisor:
    """Stops at once (``prompt``), once cancelled (``slow``), or not even then (``stuck``)."""

    def __init__(self, name: str, how: str) -> None:
        self.name = name
        self._how = how
        self._stop = asyncio.Event()

    def request_stop(self) -> None:
        if self._how == "prompt":
            self._stop.set()

    async def run(self) -> None:
        try:
            await self._stop.wait()
        except asyncio.CancelledError:
            if self._how != "stuck":
                raise
            await asyncio.sleep(3600)  # (a teardown that ignores its cancellation)


async def test_a_stop_names_the_servers_that_did_not_stop_in_time_and_those_that_never_did(
    tmp_path: Path,
) -> None:
    hows = {"prompt": "prompt", "slow": "slow", "stuck": "stuck"}
    config = parse_config(
        {"servers": {name: example_server_config("text") for name in hows}}, base_dir=tmp_path
    )
    shard = ShardServers(
        config,
        ShardIdentity(0, 1),
        new_supervisor=lambda name, _config: _Supervisor(name, hows[name]),  # type: ignore[arg-type,return-value]
        catalog=Catalog(),
        metrics=PoolMetrics(),
        notify=lambda _server: None,
        stop_timeout=0.05,
    )
    shard.start()
    tasks = list(shard._tasks.values())
    with structlog.testing.capture_logs() as logs:
        await shard.stop()
    stopped = [
        (e["event"], e["servers"], e["log_level"]) for e in logs if e["event"].startswith("mcp_servers_stop")
    ]
    assert stopped == [
        ("mcp_servers_stop_slow", ["slow", "stuck"], "warning"),
        ("mcp_servers_stop_stuck", ["stuck"], "error"),
    ]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
