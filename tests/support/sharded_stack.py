"""A sharded stack as real processes: N pool shards, discovery and (optionally) the orchestrator.

Every service is ``toolscout serve <service>`` in its own process on 127.0.0.1, sharing one config
file whose ``toolscout.pool.shards.addresses`` lists the shards' ports (picked free beforehand, one
more than needed so the count can grow). ``set_shard_count`` rewrites the file; ``reload`` sends
SIGHUP so a process applies it (``reload_interval`` is 0: only SIGHUP reloads, no timing involved).
With ``shards=0`` the pool is one unsharded ``toolscout serve pool`` (no ``shards`` section; the
other services find it through ``pool_target``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.mcp_servers import REPO_ROOT, free_port

__all__ = ["Service", "ShardedStack", "running_sharded_stack", "scrape"]

CLI = [sys.executable, "-m", "toolscout_cli"]
POOL_SERVICE = "toolscout.mcp_pool.v1.McpPool"
DISCOVERY_SERVICE = "toolscout.discovery.v1.Discovery"
ORCHESTRATOR_SERVICE = "toolscout.orchestrator.v1.Orchestrator"


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


@dataclass
class Service:
    name: str
    address: str
    metrics_port: int
    process: asyncio.subprocess.Process
    log: Path


async def wait_serving(address: str, service: str, within: float = 60.0) -> None:
    """Waits (bounded) until ``service`` at ``address`` reports SERVING on grpc.health.v1."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"{service} at {address} was not SERVING within {within}s")
            try:
                reply = await stub.Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=remaining, wait_for_ready=True
                )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError as err:
                if err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND):
                    raise
            # Discovery is NOT_SERVING until its first catalog: ask again shortly (bounded above).
            await asyncio.sleep(0.1)


def _started_line(log: Path, offset: int) -> dict[str, Any] | None:
    with log.open("rb") as f:
        f.seek(offset)
        for raw in f.read().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and line.get("event") == "server started":
                return line
    return None


async def _started(log: Path, offset: int, process: asyncio.subprocess.Process) -> dict[str, Any]:
    """The ``server started`` line a ``toolscout serve`` process logs (JSON) after ``offset``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while loop.time() < deadline:
        line = _started_line(log, offset)
        if line is not None:
            return line
        if process.returncode is not None:
            break
        await asyncio.sleep(0.05)
    raise RuntimeError(f"no 'server started' line in {log.name}:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


@dataclass
class ShardedStack:
    tmp: Path
    document: dict[str, Any]
    ports: list[int]
    count: int
    config: Path = field(init=False)
    pools: dict[int, Service] = field(default_factory=dict)
    discovery: Service | None = None
    orchestrator: Service | None = None

    def __post_init__(self) -> None:
        self.config = self.tmp / "toolscout.json"
        self.set_shard_count(self.count)

    def shard_address(self, index: int) -> str:
        return f"127.0.0.1:{self.ports[index]}"

    @property
    def unsharded(self) -> bool:
        return self.count == 0

    def set_shard_count(self, count: int) -> None:
        """Writes the config for ``count`` shards (the processes apply it on :meth:`reload`).

        0: one unsharded pool, which discovery and the orchestrator reach by ``pool_target``.
        """
        self.count = count
        section = self.document.setdefault("toolscout", {})
        pool = section.setdefault("pool", {})
        if count == 0:
            pool.pop("shards", None)
            for service in ("discovery", "orchestrator"):
                section.setdefault(service, {})["pool_target"] = self.shard_address(0)
            self.config.write_text(json.dumps(self.document, indent=1))
            return
        pool["shards"] = {
            "count": count,
            "addresses": [self.shard_address(k) for k in range(count)],
            "reload_interval": 0,
        }
        self.config.write_text(json.dumps(self.document, indent=1))

    async def _spawn(self, name: str, args: list[str], address: str) -> Service:
        """Starts ``toolscout serve ...`` on ``address`` (port 0: any free one) with a metrics port
        of its own choosing, and returns once its log says where both listen.

        Only the shards' addresses (named in the config) are picked beforehand, below the kernel's
        ephemeral range (:func:`~tests.support.mcp_servers.free_port`): one picked inside it was
        taken by another process's outgoing connection in the meantime (a fresh run, once).
        """
        log = self.tmp / f"{name}.log"
        start = log.stat().st_size if log.exists() else 0
        handle = log.open("ab")
        try:
            process = await asyncio.create_subprocess_exec(
                *CLI,
                "serve",
                *args,
                "--listen",
                address,
                "--metrics-port",
                "0",
                "-c",
                str(self.config),
                cwd=REPO_ROOT,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=handle,
                stderr=handle,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            )
        finally:
            handle.close()
        started = await _started(log, start, process)
        return Service(name, f"127.0.0.1:{started['port']}", int(started["metrics_port"]), process, log)

    async def start_pool(self, index: int) -> Service:
        address = self.shard_address(index)
        shard = [] if self.unsharded else ["--shard", f"{index}/{self.count}"]
        service = await self._spawn(f"pool-{index}", ["pool", *shard], address)
        self.pools[index] = service
        await wait_serving(address, POOL_SERVICE)
        return service

    async def start_discovery(self) -> Service:
        self.discovery = await self._spawn("discovery", ["discovery"], "127.0.0.1:0")
        await wait_serving(self.discovery.address, DISCOVERY_SERVICE)
        return self.discovery

    async def start_orchestrator(self) -> Service:
        # The orchestrator finds discovery through the config.
        self.document["toolscout"].setdefault("orchestrator", {})["discovery_target"] = self.discovery_address
        self.config.write_text(json.dumps(self.document, indent=1))
        self.orchestrator = await self._spawn("orchestrator", ["orchestrator"], "127.0.0.1:0")
        await wait_serving(self.orchestrator.address, ORCHESTRATOR_SERVICE)
        return self.orchestrator

    @property
    def discovery_address(self) -> str:
        assert self.discovery is not None
        return self.discovery.address

    def services(self) -> list[Service]:
        return [*self.pools.values(), *(s for s in (self.discovery, self.orchestrator) if s is not None)]

    def reload(self, *services: Service) -> None:
        """SIGHUP: the processes read the config file again (a new shard count)."""
        for service in services or self.services():
            service.process.send_signal(signal.SIGHUP)

    async def kill(self, service: Service) -> None:
        """kill -9, as a node failure would: no drain, no goodbye."""
        service.process.kill()
        await asyncio.wait_for(service.process.wait(), 30)

    async def stop(self) -> None:
        for service in self.services():
            if service.process.returncode is None:
                service.process.send_signal(signal.SIGTERM)
        for service in self.services():
            try:
                await asyncio.wait_for(service.process.wait(), 30)
            except TimeoutError:
                service.process.kill()
                await service.process.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {s.name}\n{s.log.read_text(errors='replace')[-4000:]}" for s in self.services()
        )


@asynccontextmanager
async def running_sharded_stack(
    tmp: Path, document: dict[str, Any], *, shards: int, spare: int = 1, orchestrator: bool = False
) -> AsyncIterator[ShardedStack]:
    """``shards`` pool processes (0: one unsharded pool) and discovery (and the orchestrator), all
    stopped on exit."""
    stack = ShardedStack(tmp, document, [free_port() for _ in range(max(shards, 1) + spare)], shards)
    try:
        await asyncio.gather(*(stack.start_pool(k) for k in range(max(shards, 1))))
        await stack.start_discovery()
        if orchestrator:
            await stack.start_orchestrator()
        yield stack
    except BaseException:
        sys.stderr.write(stack.logs())
        raise
    finally:
        await stack.stop()
