"""Supervision logic against a fake connector (no processes): states, backoff, grace, idle."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from mcp_pool_svc.catalog import ListedTool
from mcp_pool_svc.errors import ServerUnavailableError
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.session import Connection, ConnectionEvent
from mcp_pool_svc.supervisor import ServerState, backoff_delay, describe_error
from toolscout_kit.config import RemoteServerConfig, StdioServerConfig, parse_config


class FakeConnection(Connection):
    def __init__(self, server: FakeServer) -> None:
        super().__init__(session=None, server_info="fake 1.0", closed=anyio.Event())  # type: ignore[arg-type]
        self.server = server

    async def list_tools(self) -> list[ListedTool]:
        self.server.listings += 1
        return [ListedTool(name=n) for n in self.server.tools]

    async def ping(self) -> None:
        if self.server.hang_ping:
            await anyio.sleep_forever()


@dataclass
class FakeServer:
    tools: list[str] = field(default_factory=lambda: ["a", "b"])
    fail: bool = False
    hang_ping: bool = False
    connects: int = 0
    listings: int = 0
    live: FakeConnection | None = None
    on_event: Callable[[ConnectionEvent, str], None] | None = None
    # When set, leaving a connection waits for it (a teardown that takes a while).
    teardown_release: asyncio.Event | None = None
    teardown_started: asyncio.Event = field(default_factory=asyncio.Event)

    def crash(self) -> None:
        assert self.live is not None
        assert self.on_event is not None
        self.live.closed.set()
        self.on_event("closed", "gone")


def fake_connector(
    servers: dict[str, FakeServer], connection: Callable[[FakeServer], FakeConnection] | None = None
) -> Any:
    @asynccontextmanager
    async def connect(
        name: str,
        config: StdioServerConfig | RemoteServerConfig,
        on_event: Callable[[ConnectionEvent, str], None],
    ) -> AsyncIterator[Connection]:
        server = servers[name]
        server.connects += 1
        if server.fail:
            raise ConnectionRefusedError("refused")
        server.live = (connection or FakeConnection)(server)
        server.on_event = on_event
        try:
            yield server.live
        finally:
            server.teardown_started.set()
            if server.teardown_release is not None:
                await server.teardown_release.wait()
            server.live = None

    return connect


def make_pool(
    servers: dict[str, FakeServer],
    extra: dict[str, Any] | None = None,
    *,
    remote: bool = False,
    **pool: Any,
) -> McpPool:
    settings = {
        "initial_backoff": 0.01,
        "max_backoff": 0.02,
        "ping_interval": 30,
        "tool_cache_ttl": 0,
        "blip_grace": 0.3,
        **pool,
    }
    config = parse_config(
        {
            "servers": {
                name: {
                    **({"url": f"http://127.0.0.1:1/{name}"} if remote else {"command": "unused"}),
                    **(extra or {}),
                }
                for name in servers
            },
            "toolscout": {"pool": settings},
        }
    )
    rng = random.Random(1)  # noqa: S311 - deterministic jitter for the test
    return McpPool(config, connector=fake_connector(servers), rng=rng)


def state(pool: McpPool, name: str) -> ServerState:
    return pool.server_status(name).state


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    rng = random.Random(7)  # noqa: S311 - deterministic jitter for the test
    delays = [backoff_delay(n, 0.5, 30.0, rng) for n in range(12)]
    for n, d in enumerate(delays):
        cap = min(30.0, 0.5 * 2**n)
        assert cap / 2 <= d <= cap
    assert max(delays) <= 30.0


def test_error_descriptions_unwrap_groups_and_hide_tokens() -> None:
    err = ExceptionGroup("x", [ValueError("bad header Bearer abcdefghijklmnop")])
    assert describe_error(err) == "ValueError: bad header Bearer [REDACTED]"


async def test_a_crash_looping_server_is_marked_failed_and_the_others_stay_ready() -> None:
    servers = {"bad": FakeServer(fail=True), "good": FakeServer()}
    pool = make_pool(servers, crash_loop_restarts=2, failed_retry_interval=60)
    await pool.start()
    try:
        await pool.wait_until(lambda: state(pool, "bad") is ServerState.FAILED, 5)
        status = pool.server_status("bad")
        assert status.restarts == 2
        assert "ConnectionRefusedError: refused" in status.last_error
        assert state(pool, "good") is ServerState.READY
        with pytest.raises(ServerUnavailableError, match="failed"):
            await pool.call_tool(server="bad", tool="a")
    finally:
        await pool.stop()
    assert state(pool, "good") is ServerState.STOPPED


async def test_a_failed_server_is_retried_after_the_failed_retry_interval() -> None:
    servers = {"bad": FakeServer(fail=True)}
    pool = make_pool(servers, crash_loop_restarts=1, failed_retry_interval=0.2)
    await pool.start()
    try:
        await pool.wait_until(lambda: state(pool, "bad") is ServerState.FAILED, 5)
        servers["bad"].fail = False
        await pool.wait_until(lambda: state(pool, "bad") is ServerState.READY, 5)
    finally:
        await pool.stop()


async def test_a_brief_blip_does_not_change_the_catalog() -> None:
    servers = {"s": FakeServer()}
    pool = make_pool(servers)
    await pool.start(wait=5)
    try:
        version = pool.catalog.version
        servers["s"].crash()
        await pool.wait_until(lambda: servers["s"].connects == 2 and state(pool, "s") is ServerState.READY, 5)
        assert pool.catalog.version == version
        assert pool.server_status("s").restarts == 1
    finally:
        await pool.stop()


async def test_a_server_that_stays_down_has_its_tools_marked_unavailable_then_dropped() -> None:
    servers = {"s": FakeServer(), "t": FakeServer(tools=["z"])}
    pool = make_pool(servers, unavailable_grace=0.6, crash_loop_restarts=100)
    await pool.start(wait=5)
    try:
        servers["s"].fail = True
        servers["s"].crash()
        await pool.wait_until(
            lambda: any(not t.available for t in pool.list_tools(include_unavailable=True).tools), 5
        )
        assert [t.name for t in pool.list_tools().tools] == ["z"]
        await pool.wait_until(lambda: not pool.catalog.has_listing("s"), 5)
        assert [t.name for t in pool.list_tools(include_unavailable=True).tools] == ["z"]
    finally:
        await pool.stop()


async def test_a_failed_ping_restarts_a_hung_server() -> None:
    servers = {"s": FakeServer(hang_ping=True)}
    pool = make_pool(servers, ping_interval=0.1, ping_timeout=0.1)
    errors: list[str] = []
    pool.add_listener(lambda name: errors.append(pool.server_status(name).last_error))
    await pool.start(wait=5)
    try:
        await pool.wait_until(lambda: pool.server_status("s").restarts >= 1, 5)
        assert "no answer to ping within 0.1s" in errors
    finally:
        await pool.stop()


async def test_list_changed_makes_the_supervisor_list_tools_again() -> None:
    servers = {"s": FakeServer()}
    pool = make_pool(servers)
    await pool.start(wait=5)
    try:
        servers["s"].tools.append("c")
        assert servers["s"].on_event is not None
        servers["s"].on_event("tools_changed", "")
        await pool.wait_until(lambda: pool.server_status("s").tool_count == 3, 5)
    finally:
        await pool.stop()


async def test_the_ttl_refreshes_the_listing_without_a_notification() -> None:
    servers = {"s": FakeServer()}
    pool = make_pool(servers, tool_cache_ttl=0.1)
    await pool.start(wait=5)
    try:
        servers["s"].tools.append("c")
        await pool.wait_until(lambda: pool.server_status("s").tool_count == 3, 5)
    finally:
        await pool.stop()


async def test_an_idle_server_is_stopped_keeps_its_tools_and_starts_on_demand() -> None:
    servers = {"s": FakeServer()}
    pool = make_pool(servers, extra={"idle_timeout": 0.1})
    await pool.start(wait=5)
    try:
        await pool.wait_until(lambda: state(pool, "s") is ServerState.IDLE, 5)
        assert servers["s"].live is None
        assert [t.name for t in pool.list_tools().tools] == ["a", "b"]
        sup = pool._servers.running["s"]
        conn = await asyncio.wait_for(sup.connection_for_call(), 5)
        assert conn is servers["s"].live
        assert servers["s"].connects == 2
        assert pool.server_status("s").restarts == 0
    finally:
        await pool.stop()


async def test_mcp_tool_cache_ttl_from_the_environment_sets_the_refresh_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_TOOL_CACHE_TTL", "0.1")
    servers = {"s": FakeServer()}
    pool = make_pool(servers, tool_cache_ttl=None)
    await pool.start(wait=5)
    try:
        servers["s"].tools.append("c")
        await pool.wait_until(lambda: pool.server_status("s").tool_count == 3, 5)
    finally:
        await pool.stop()


async def test_a_zero_ttl_lists_only_at_connect_and_on_list_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TOOL_CACHE_TTL", "0")
    servers = {"s": FakeServer()}
    pool = make_pool(servers, tool_cache_ttl=None)
    await pool.start(wait=5)
    try:
        assert pool.server_status("s").tool_cache_ttl_seconds == 0
    finally:
        await pool.stop()


def test_by_default_hung_servers_are_found_within_ten_seconds_and_down_servers_keep_their_tools() -> None:
    settings = parse_config({}).toolscout.pool
    assert settings.ping_interval + settings.ping_timeout <= 10
    assert settings.unavailable_grace is None
    assert settings.failed_retry_interval <= 60
    assert settings.max_backoff <= 5


async def test_a_lost_session_is_out_of_service_before_its_teardown_ends() -> None:
    servers = {"s": FakeServer(teardown_release=asyncio.Event())}
    pool = make_pool(servers)
    await pool.start(wait=5)
    try:
        servers["s"].crash()
        await asyncio.wait_for(servers["s"].teardown_started.wait(), 5)
        # The dying session is still being torn down: no call may be routed to it.
        assert state(pool, "s") is ServerState.RECONNECTING
        with pytest.raises(ServerUnavailableError, match="'s' is reconnecting; the call was not sent"):
            await asyncio.wait_for(pool.call_tool(server="s", tool="a"), 5)
    finally:
        release = servers["s"].teardown_release
        assert release is not None
        release.set()
        await pool.stop()


async def test_a_failed_server_is_probed_with_backoff_and_recovers_without_waiting_out_the_cap() -> None:
    servers = {"bad": FakeServer(fail=True)}
    pool = make_pool(servers, crash_loop_restarts=1, failed_retry_interval=60)
    await pool.start()
    try:
        await pool.wait_until(lambda: state(pool, "bad") is ServerState.FAILED, 5)
        assert pool.server_status("bad").next_retry_unix > 0
        servers["bad"].fail = False
        await pool.wait_until(lambda: state(pool, "bad") is ServerState.READY, 5)
        assert pool.server_status("bad").next_retry_unix == 0
        assert pool.server_status("bad").last_error == ""
    finally:
        await pool.stop()


async def test_an_unreachable_remote_server_is_reconnecting_never_failed_and_ready_once_back() -> None:
    servers = {"remote": FakeServer(fail=True)}
    pool = make_pool(servers, remote=True, crash_loop_restarts=2, failed_retry_interval=60)
    states: list[ServerState] = []
    pool.add_listener(lambda name: states.append(state(pool, name)))
    await pool.start()
    try:
        await pool.wait_until(lambda: servers["remote"].connects >= 8, 5)
        assert ServerState.FAILED not in states
        assert state(pool, "remote") is ServerState.RECONNECTING
        servers["remote"].fail = False
        await pool.wait_until(lambda: state(pool, "remote") is ServerState.READY, 5)
    finally:
        await pool.stop()


async def test_calls_to_tools_of_a_down_server_are_unavailable_naming_the_server_and_its_state() -> None:
    servers = {"s": FakeServer(), "bad": FakeServer(fail=True)}
    pool = make_pool(servers, blip_grace=0.05, crash_loop_restarts=100)
    await pool.start(wait=5)
    try:
        servers["s"].fail = True
        servers["s"].crash()
        await pool.wait_until(lambda: not any(t.available for t in pool.catalog.snapshot().tools), 5)
        assert [t.llm_name for t in pool.list_tools(include_unavailable=True).tools] == ["s__a", "s__b"]
        with pytest.raises(ServerUnavailableError, match="'s' is reconnecting; the call was not sent"):
            await pool.call_tool(llm_name="s__a")
        # A server down since start never listed its tools: still its state, not "unknown tool".
        with pytest.raises(ServerUnavailableError, match="'bad' is reconnecting"):
            await pool.call_tool(llm_name="bad__a")
    finally:
        await pool.stop()


async def test_a_call_that_may_change_tools_lists_them_at_once_and_calls_after_a_heard_notice_do_not() -> (
    None
):
    servers = {"s": FakeServer()}
    pool = make_pool(servers)  # no TTL: every listing after the first is for a call or a notice
    await pool.start(wait=5)
    try:
        sup = pool._servers.running["s"]
        assert servers["s"].listings == 1
        servers["s"].tools.append("c")
        sup.call_may_have_changed_tools()
        await pool.wait_until(lambda: pool.server_status("s").tool_count == 3, 5)
        assert servers["s"].listings == 2
        # A change notice arrives: notices reach this connection, calls no longer trigger listings.
        assert servers["s"].on_event is not None
        servers["s"].tools.append("d")
        servers["s"].on_event("tools_changed", "")
        await pool.wait_until(lambda: pool.server_status("s").tool_count == 4, 5)
        assert servers["s"].listings == 3
        for _ in range(10):
            sup.call_may_have_changed_tools()
        assert not sup.listing.after_call_pending  # nothing due: the next change will be announced
        servers["s"].tools.append("e")
        servers["s"].on_event("tools_changed", "")
        await pool.wait_until(lambda: pool.server_status("s").tool_count == 5, 5)
        assert servers["s"].listings == 4
    finally:
        await pool.stop()
