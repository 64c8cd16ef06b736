"""How ``toolscout up`` stops the services it runs in its process: one after another (those that call
the pool first), under one deadline. Real ``RunningServer`` lifecycles on listeners that only record
the grace each was given."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from toolscout_cli.stack import _stop_all
from toolscout_kit.host import RunningServer


class _Listener:
    """Closing takes ``takes`` seconds of the grace it is given (a request that never ends takes
    all of it)."""

    def __init__(self, takes: float) -> None:
        self.takes = takes
        self.graces: list[float] = []

    async def refuse(self) -> None:
        pass

    async def close(self, grace: float) -> None:
        self.graces.append(grace)
        await asyncio.sleep(min(self.takes, grace))

    async def closed(self) -> None:
        await asyncio.Event().wait()


def _stack(**services: tuple[float, float]) -> tuple[list[tuple[str, RunningServer]], dict[str, _Listener]]:
    """``name=(shutdown_grace, seconds its close takes)``, in start order."""
    servers, listeners = [], {}
    for name, (grace, takes) in services.items():
        listeners[name] = _Listener(takes)
        servers.append(
            (
                name,
                RunningServer(
                    listeners[name], port=0, registry=CollectorRegistry(), metrics=None, shutdown_grace=grace
                ),
            )
        )
    return servers, listeners


async def test_what_the_gateway_waited_for_is_not_waited_for_again_by_the_services_behind_it() -> None:
    # The gateway had a call that never ended: it took its whole grace. The services stopped after
    # it get what is left of the one deadline (nothing), not a grace each.
    servers, listeners = _stack(
        pool=(0.3, 0.3), discovery=(0.3, 0.3), orchestrator=(0.3, 0.3), gateway=(0.3, 0.3)
    )
    await _stop_all(servers, 0.3)
    # (bounds on what depends on the clock: a slow machine leaves less of the deadline, never more)
    assert 0.0 < listeners.pop("gateway").graces[0] <= 0.3
    assert {name: listener.graces for name, listener in listeners.items()} == {
        "orchestrator": [0.0],
        "discovery": [0.0],
        "pool": [0.0],
    }
    assert all(running.stopping for _, running in servers)


async def test_each_service_gets_what_is_left_of_the_deadline_and_never_more_than_its_own_grace() -> None:
    servers, listeners = _stack(
        pool=(5.0, 0.0), discovery=(0.05, 0.0), orchestrator=(5.0, 0.0), gateway=(1.0, 0.1)
    )
    await _stop_all(servers, 1.0)
    assert 0.0 < listeners["gateway"].graces[0] <= 1.0
    assert 0.0 <= listeners["orchestrator"].graces[0] <= 0.9
    assert listeners["discovery"].graces == [0.05]
    assert 0.0 <= listeners["pool"].graces[0] <= 0.9
