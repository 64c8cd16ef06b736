"""round_robin over several addresses and client-side health checks, as with a headless Service.

A DNS name of a headless Kubernetes Service resolves to every pod; the ``ipv4:`` target with a
list of addresses gives the channel the same picture without a DNS server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from grpc_health.v1 import health_pb2
from toolscout import client as tc

from tests.support.fake_services import FakeStack, fake_stack


@pytest.fixture
async def backends() -> AsyncIterator[tuple[FakeStack, FakeStack]]:
    async with fake_stack(health=True) as one, fake_stack(health=True) as two:
        yield one, two


def _target(*stacks: FakeStack) -> str:
    return "ipv4:" + ",".join(f"127.0.0.1:{s.port}" for s in stacks)


async def test_calls_are_spread_over_every_address(backends: tuple[FakeStack, FakeStack]) -> None:
    one, two = backends
    async with tc.AsyncPoolClient.connect(_target(one, two)) as pool:
        for _ in range(20):
            await pool.list_servers()
    assert one.state.attempts["ListServers"] + two.state.attempts["ListServers"] == 20
    assert one.state.attempts["ListServers"] >= 5
    assert two.state.attempts["ListServers"] >= 5


async def test_a_backend_reporting_not_serving_gets_no_more_calls(
    backends: tuple[FakeStack, FakeStack],
) -> None:
    one, two = backends
    async with tc.AsyncPoolClient.connect(_target(one, two)) as pool:
        await pool.list_servers()
        # What a toolscout server does on SIGTERM: the overall status goes NOT_SERVING first.
        await one.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        async with asyncio.timeout(10):
            # The health watch is a stream; wait (bounded) until the channel has seen the change.
            while True:
                before = one.state.attempts["ListServers"]
                for _ in range(4):
                    await pool.list_servers()
                if one.state.attempts["ListServers"] == before:
                    break
        before = one.state.attempts["ListServers"]
        for _ in range(10):
            await pool.list_servers()
    assert one.state.attempts["ListServers"] == before
