"""The sharded pool at 1,000 MCP servers: start-up, memory, catalog merge, routed calls, resharding.

One process serves the simulated fleet (``bench/mcp_fleet.py``: 1,000 streamable-HTTP servers,
50 real tools each, 50,000 tools). For each shard count N in ``--shards`` (default 1 2 4), N pool
processes (``toolscout serve pool --shard K/N``) connect to the fleet, then a discovery process
follows all of them. Measured, per N:

  * ready_s: pool processes spawned → every one of the 1,000 servers READY on its shard
    (``ListServers`` of every shard, polled every 0.25 s);
  * rss_mb per shard (the pool process alone: the servers are remote), once all are READY;
  * discovery: spawn → SERVING with the merged catalog, its RSS, and the merge times it logs
    (``merged pool shard catalogs``): the first full merge, and the merges caused by one shard's
    catalog changing (that shard is stopped: after the grace its tools turn unavailable; it is
    started again: they return), each timed from that shard's update to the merged catalog;
  * calls: ``--calls`` CallTools to random tools, interleaved, through the orchestrator's own path
    (``orchestrator_svc.seams.ClientPool`` over ``AsyncShardedPoolClient``, the server taken
    from the catalog as from a plan) and directly to the owning shard (``AsyncPoolClient``), so
    that the difference of the two p50s is what routing adds; plus the in-process cost of one
    routing decision;
  * for the largest N (4 by default): a live reshard to N+1 (config rewritten, a new shard started,
    SIGHUP to the others): servers moved (vs the ≈ 1/(N+1) expected), and the time until every
    moved server is READY on the new shard.

Pool settings of the simulation: the defaults (the pool's probe budget, ``mcp_pool_svc/probes.py``,
stretches each server's ping interval at 1,000 servers; this used to set ``ping_interval`` 30 s).

Run: uv run --frozen python bench/shard_sim.py [--servers 1000] [--tools 50] [--shards 1 2 4] [--calls 2000]
Prints the figures and writes bench/results/shard_sim.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # no types-psutil in the dev group
from toolscout import client as tc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp_fleet import fleet_config
from mcp_fleet_load import Fleet
from toolscout.client import CallRequest, owners_of

from orchestrator_svc.seams import ClientPool

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "shard_sim.json"
CLI = [sys.executable, "-m", "toolscout_cli"]
READY_BOUND = 300.0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _rss_mb(pid: int) -> float:
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


@dataclass
class Proc:
    name: str
    process: subprocess.Popen[bytes]
    address: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


class Sim:
    """The pool shards and discovery of one run, sharing one config file."""

    def __init__(self, workdir: Path, base_url: str, servers: int, count: int) -> None:
        self.workdir = workdir
        self.base_url = base_url
        self.servers = servers
        self.ports = [_free_port() for _ in range(count + 1)]
        self.config = workdir / f"toolscout-{count}.json"
        self.pools: dict[int, Proc] = {}
        self.discovery: Proc | None = None
        self.write(count)

    def write(self, count: int) -> None:
        self.count = count
        doc = fleet_config(self.base_url, self.servers, shards=count)
        pool = doc["toolscout"]["pool"]
        pool["shards"]["addresses"] = [f"127.0.0.1:{p}" for p in self.ports[:count]]
        pool["shards"]["reload_interval"] = 0
        doc["toolscout"]["log_level"] = "INFO"
        self.config.write_text(json.dumps(doc))

    def _spawn(self, name: str, args: list[str], address: str) -> Proc:
        log = self.workdir / f"{name}-{self.count}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [*CLI, "serve", *args, "--listen", address, "--metrics-port", "-1", "-c", str(self.config)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                start_new_session=True,
            )
        return Proc(name, process, address, log)

    def start_pool(self, index: int) -> Proc:
        address = f"127.0.0.1:{self.ports[index]}"
        proc = self._spawn(f"pool-{index}", ["pool", "--shard", f"{index}/{self.count}"], address)
        self.pools[index] = proc
        return proc

    def start_discovery(self) -> Proc:
        self.discovery = self._spawn("discovery", ["discovery"], f"127.0.0.1:{_free_port()}")
        return self.discovery

    def stop(self) -> None:
        for proc in [*self.pools.values(), *([self.discovery] if self.discovery else [])]:
            proc.stop()


async def _shard_statuses(address: str) -> tuple[tc.ServerStatus, ...]:
    async with tc.AsyncPoolClient.connect(address, max_attempts=1) as pool:
        return await pool.list_servers(deadline=10)


async def _until_ready(addresses: list[str], expected: int, within: float = READY_BOUND) -> float:
    """Seconds until ``expected`` servers are READY across the shards (polled: other processes)."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        ready = 0
        for address in addresses:
            with contextlib.suppress(tc.ToolscoutClientError):
                ready += sum(s.state == "ready" for s in await _shard_statuses(address))
        if ready >= expected:
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    raise TimeoutError(f"not every server was READY within {within}s")


async def _until_serving(address: str, within: float = READY_BOUND) -> float:
    started = time.monotonic()
    async with tc.AsyncDiscoveryClient.connect(address) as discovery:
        while time.monotonic() - started < within:
            try:
                await discovery.plan_tools(deadline=30)
                return time.monotonic() - started
            except tc.ToolscoutClientError:
                await asyncio.sleep(0.25)
    raise TimeoutError("discovery did not serve a catalog in time")


def _merges(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if '"merged pool shard catalogs"' in line:
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return found


async def _wait_merges(log: Path, count: int, within: float = 120.0) -> list[dict[str, Any]]:
    started = time.monotonic()
    while time.monotonic() - started < within:
        merges = _merges(log)
        if len(merges) >= count:
            return merges
        await asyncio.sleep(0.1)
    raise TimeoutError(f"discovery logged fewer than {count} merges")


async def _calls(sim: Sim, catalog: tc.ToolCatalog, calls: int, seed: int = 15) -> dict[str, Any]:
    """Interleaved: the orchestrator's path (routed) and a direct call to the owning shard."""
    rng = random.Random(seed)
    tools = [t for t in catalog.tools if t.available]
    addresses = [sim.pools[k].address for k in range(sim.count)]
    shards = [tc.AsyncPoolClient.connect(a, deadlines={"CallTool": None}) for a in addresses]
    sharded = tc.AsyncShardedPoolClient(shards)
    routed_path = ClientPool(sharded)
    routed: list[float] = []
    direct: list[float] = []
    errors = 0
    kinds: dict[str, int] = {}
    try:
        for n in range(calls + 50):
            tool = rng.choice(tools)
            owner = shards[owners_of(tool.server, sim.count)[0]]
            order = (0, 1) if n % 2 else (1, 0)
            for which in order:
                started = time.perf_counter()
                try:
                    if which == 0:
                        await routed_path.call_tool(
                            CallRequest(llm_name=tool.llm_name, arguments_json='{"q": "x"}'),
                            server_hint=tool.server,  # what the plans tell the orchestrator
                            deadline=30,
                        )
                    else:
                        await owner.call_tool(tool.llm_name, '{"q": "x"}', deadline=30)
                except Exception as err:  # client errors, and the orchestrator seam's domain errors
                    errors += 1
                    kind = f"{'routed' if which == 0 else 'direct'} {type(err).__name__}: {str(err)[:120]}"
                    kinds[kind] = kinds.get(kind, 0) + 1
                elapsed = (time.perf_counter() - started) * 1000
                if n >= 50:  # warm-up excluded
                    (routed if which == 0 else direct).append(elapsed)
    finally:
        for client in shards:
            await client.close()
    # The routing decision alone, in process (what the client adds before the RPC).
    names = [t.server for t in tools[:1000]]
    started = time.perf_counter()
    for name in names * 10:
        sharded.shard_of(name)
    decide_us = (time.perf_counter() - started) / (len(names) * 10) * 1e6
    return {
        "calls": calls,
        "errors": errors,
        "error_kinds": kinds,
        "routed_p50_ms": round(_pct(routed, 0.5), 3),
        "routed_p99_ms": round(_pct(routed, 0.99), 3),
        "direct_p50_ms": round(_pct(direct, 0.5), 3),
        "direct_p99_ms": round(_pct(direct, 0.99), 3),
        "routing_adds_p50_ms": round(_pct(routed, 0.5) - _pct(direct, 0.5), 3),
        "routing_decision_us": round(decide_us, 2),
    }


async def run_count(
    fleet_url: str, servers: int, count: int, workdir: Path, calls: int, reshard: bool
) -> dict[str, Any]:
    sim = Sim(workdir, fleet_url, servers, count)
    result: dict[str, Any] = {"shards": count}
    try:
        for k in range(count):
            sim.start_pool(k)
        addresses = [sim.pools[k].address for k in range(count)]
        result["ready_s"] = round(await _until_ready(addresses, servers), 2)
        per_shard = {k: len(await _shard_statuses(sim.pools[k].address)) for k in range(count)}
        result["servers_per_shard"] = list(per_shard.values())
        result["rss_mb_per_shard"] = [_rss_mb(sim.pools[k].process.pid) for k in range(count)]
        result["rss_mb_max_shard"] = max(result["rss_mb_per_shard"])
        result["rss_mb_all_shards"] = round(sum(result["rss_mb_per_shard"]), 1)

        discovery = sim.start_discovery()
        result["discovery_serving_s"] = round(await _until_serving(discovery.address), 2)
        # One shard: discovery passes the pool's catalog on as it is (nothing to merge).
        first = await _wait_merges(discovery.log, 1) if count > 1 else [{"seconds": None}]
        result["discovery_first_merge_s"] = first[0]["seconds"]
        result["discovery_rss_mb"] = _rss_mb(discovery.process.pid)
        async with tc.AsyncShardedPoolClient.connect(addresses) as merged_client:
            catalog = await merged_client.list_tools()
        result["tools"] = len(catalog.tools)

        result["calls"] = await _calls(sim, catalog, calls)

        if count > 1:
            # One shard's catalog changes: stop it (its tools turn unavailable), start it again.
            before = len(_merges(discovery.log))
            victim = count - 1
            sim.pools[victim].stop()
            down = await _wait_merges(discovery.log, before + 1)
            sim.start_pool(victim)
            await _until_ready(addresses, servers)
            back = await _wait_merges(discovery.log, before + 2)
            result["discovery_changed_shard_merge_s"] = [down[before]["seconds"], back[-1]["seconds"]]
            result["discovery_rss_mb_after"] = _rss_mb(discovery.process.pid)

        if reshard:
            result["reshard"] = await _reshard(sim, servers)
    finally:
        sim.stop()
    return result


async def _reshard(sim: Sim, servers: int) -> dict[str, Any]:
    old = sim.count
    owners_before = {}
    for k in range(old):
        for status in await _shard_statuses(sim.pools[k].address):
            owners_before[status.name] = k
    sim.write(old + 1)
    started = time.monotonic()
    sim.start_pool(old)
    for k in range(old):
        sim.pools[k].process.send_signal(signal.SIGHUP)
    expected = sum(1 for name in owners_before if owners_of(name, old + 1)[0] != owners_before[name])
    # Every moved server READY on the new shard, and gone from the old ones.
    while time.monotonic() - started < READY_BOUND:
        try:
            on_new = [s for s in await _shard_statuses(sim.pools[old].address) if s.state == "ready"]
            left = 0
            for k in range(old):
                left += len(await _shard_statuses(sim.pools[k].address))
        except tc.ToolscoutClientError:
            await asyncio.sleep(0.25)
            continue
        if len(on_new) >= expected and left == servers - expected:
            break
        await asyncio.sleep(0.25)
    else:
        raise TimeoutError("the reshard did not settle in time")
    seconds = time.monotonic() - started
    moved = len(on_new)
    return {
        "from": old,
        "to": old + 1,
        "moved": moved,
        "moved_fraction": round(moved / servers, 3),
        "expected_fraction": round(1 / (old + 1), 3),
        "untouched": servers - moved,
        "settled_s": round(seconds, 2),
    }


async def main(servers: int, tools: int, counts: list[int], calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="shard-sim-") as tmp:
        workdir = Path(tmp)
        fleet = Fleet(servers, tools, workdir / "fleet.err")
        try:
            figures: dict[str, Any] = {
                "servers": servers,
                "tools_per_server": tools,
                "fleet_ready_s": round(fleet.ready_s, 2),
                "fleet_rss_mb": fleet.sample()["rss_mb"],
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "runs": [],
            }
            for count in counts:
                run = await run_count(
                    fleet.base_url, servers, count, workdir, calls, reshard=count == max(counts)
                )
                figures["runs"].append(run)
                print(json.dumps(run), flush=True)
            figures["fleet_rss_mb_end"] = fleet.sample()["rss_mb"]
        finally:
            fleet.stop()
    return figures


def _table(figures: dict[str, Any]) -> str:
    lines = [
        f"fleet: {figures['servers']} servers x {figures['tools_per_server']} tools, ready in "
        f"{figures['fleet_ready_s']} s, RSS {figures['fleet_rss_mb']} MB",
        "shards  all READY  RSS/shard max  all shards  discovery RSS  first merge  changed-shard merge  "
        "routed p50/p99  direct p50/p99  routing adds",
    ]
    for run in figures["runs"]:
        c = run["calls"]
        changed = run.get("discovery_changed_shard_merge_s", [])
        lines.append(
            f"{run['shards']:>6}  {run['ready_s']:>7} s  {run['rss_mb_max_shard']:>10} MB  "
            f"{run['rss_mb_all_shards']:>7} MB  {run['discovery_rss_mb']:>10} MB  "
            f"{run['discovery_first_merge_s'] if run['discovery_first_merge_s'] is not None else '-':>9} s  {', '.join(f'{x} s' for x in changed) or '-':>19}  "
            f"{c['routed_p50_ms']}/{c['routed_p99_ms']} ms  {c['direct_p50_ms']}/{c['direct_p99_ms']} ms  "
            f"{c['routing_adds_p50_ms']} ms"
        )
        if "reshard" in run:
            r = run["reshard"]
            lines.append(
                f"reshard {r['from']} -> {r['to']}: {r['moved']} of {figures['servers']} moved "
                f"({r['moved_fraction']}, expected ~{r['expected_fraction']}), settled in {r['settled_s']} s"
            )
    return "\n".join(lines)


def cli() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    figures = asyncio.run(main(args.servers, args.tools, sorted(args.shards), args.calls))
    print(_table(figures))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(cli())
