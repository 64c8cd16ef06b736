"""The one service host: the lifecycle every server runs, over a listener of any kind, and the one
rule for a reload that changes the pool's shards (discovery, the orchestrator and the gateway)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from toolscout.client import AsyncPoolClient

from toolscout_kit.config import ToolscoutConfig, parse_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.host import RunningServer, bind_socket
from toolscout_kit.service_clients import Downstream, PoolShards


class _Listener:
    """Records what the host asks of it; ``close`` waits for ``release`` (the requests in flight)."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.release = asyncio.Event()
        self.ended = asyncio.Event()

    async def refuse(self) -> None:
        self.events.append("refuse")

    async def close(self, grace: float) -> None:
        self.events.append(f"close {grace}")
        await self.release.wait()
        self.events.append("closed")
        self.ended.set()

    async def closed(self) -> None:
        await self.ended.wait()


def _server(listener: _Listener, grace: float = 2.0) -> RunningServer:
    return RunningServer(listener, port=1, registry=CollectorRegistry(), metrics=None, shutdown_grace=grace)


async def test_stop_refuses_first_drains_while_closing_then_cleans_up_newest_first() -> None:
    events: list[str] = []
    listener = _Listener(events)
    server = _server(listener)

    async def drain(seconds: float) -> None:
        events.append(f"drain {seconds}")
        listener.release.set()  # the last request in flight answered

    for name in ("first", "second"):

        async def cleanup(name: str = name) -> None:
            events.append(f"cleanup {name}")

        server.add_cleanup(cleanup)
    server.add_drain(drain)
    assert not server.stopping
    await asyncio.wait_for(server.stop(), 5)
    assert server.stopping
    assert events == ["refuse", "close 2.0", "drain 1.75", "closed", "cleanup second", "cleanup first"]


async def test_a_second_stop_waits_for_the_first_and_does_nothing_again() -> None:
    events: list[str] = []
    listener = _Listener(events)
    server = _server(listener)
    first = asyncio.create_task(server.stop(grace=1.0))
    second = asyncio.create_task(server.stop())
    await asyncio.sleep(0)
    assert not second.done()
    listener.release.set()
    await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert events == ["refuse", "close 1.0", "closed"]


async def test_a_listener_that_ends_on_its_own_ends_the_wait_for_termination() -> None:
    listener = _Listener([])
    server = _server(listener)
    waiting = asyncio.create_task(server.wait_for_termination())
    await asyncio.sleep(0)
    assert not waiting.done()
    listener.ended.set()  # the HTTP server failed: serve_until_signal then stops and cleans up
    await asyncio.wait_for(waiting, 5)


async def test_an_http_servers_wildcard_address_is_shown_as_loopback_and_a_v6_one_in_brackets() -> None:
    assert RunningServer(_Listener([]), host="0.0.0.0", port=8, registry=CollectorRegistry(), metrics=None,
                         shutdown_grace=1).address == "127.0.0.1:8"  # fmt: skip
    assert RunningServer(_Listener([]), host="::1", port=8, registry=CollectorRegistry(), metrics=None,
                         shutdown_grace=1).address == "[::1]:8"  # fmt: skip


def test_a_taken_address_is_a_config_error_naming_it() -> None:
    taken = bind_socket("127.0.0.1:0")
    try:
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=re.escape(f"cannot listen on 127.0.0.1:{port}")):
            bind_socket(f"127.0.0.1:{port}").close()
        with pytest.raises(ConfigError, match="cannot listen on nowhere"):
            bind_socket("nowhere")
    finally:
        taken.close()


def _config(shards: dict[str, Any] | None = None) -> ToolscoutConfig:
    return parse_config({"toolscout": {"pool": {"shards": shards or {"count": 1}}}})


_TWO = {"count": 2, "addresses": ["a:1", "b:1"]}


async def test_an_unsharded_pool_is_the_callers_target_and_a_reload_that_keeps_it_so_changes_nothing() -> (
    None
):
    shards = PoolShards(_config(), "the orchestrator", "pool:1", None)
    assert (shards.sharded, shards.targets) == (False, ["pool:1"])
    assert shards.new_targets(_config()) is None


async def test_a_reload_to_more_shards_follows_their_addresses() -> None:
    shards = PoolShards(_config(), "discovery", "pool:1", None)
    assert shards.new_targets(_config(_TWO)) == ["a:1", "b:1"]
    assert shards.sharded


async def test_a_sharded_pool_that_is_no_longer_sharded_keeps_its_shards_until_a_restart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shards = PoolShards(_config(_TWO), "the gateway", "pool:1", None)
    assert (shards.sharded, shards.targets) == (True, ["a:1", "b:1"])
    assert shards.new_targets(_config()) is None
    assert "restart the gateway" in capsys.readouterr().out


async def test_a_pool_sharded_without_addresses_is_refused_at_the_start() -> None:
    with pytest.raises(ConfigError, match=r"toolscout\.pool\.shards\.count is 2"):
        PoolShards(_config({"count": 2}), "discovery", "pool:1", None)


async def test_a_shard_still_at_its_address_keeps_its_client_across_a_reshard() -> None:
    downstream = Downstream(_config(_TWO), "the orchestrator", pool_target="pool:1", discovery_target="d:1")
    try:
        kept: AsyncPoolClient = downstream.shards.client("b:1")
        await downstream.reshard(_config({"count": 2, "addresses": ["c:1", "b:1"]}))
        assert downstream.shards.client("b:1") is kept
    finally:
        await downstream.close()
