"""A 1,000-server fleet on the DEFAULT pool settings: time until every server is READY, and whether
they stay READY.

The fleet is bench/mcp_fleet.py (1,000 streamable-HTTP servers, 50 real tools each, 50,000 tools, in
one process on 127.0.0.1), its config from ``mcp_fleet.fleet_config`` with nothing of the pool's
settings changed (``ping_interval`` 5 s, the probe budget of ``mcp_pool_svc/probes.py``). One pool
process (``toolscout serve pool``) is spawned; ``ListServers`` is polled every second:

  * ready_s: spawn → every server READY (or how many were READY when ``--within`` ran out);
  * then ``--hold`` more seconds of polling: restarts counted by the pool in that time (healthy
    servers that a pool too busy to hear their answers would restart) and the fewest READY seen;
  * the pool's and the fleet's CPU time over the run, the load average beside the figures.

``--stack`` then starts discovery and the gateway on the same config (as ``toolscout up`` runs
them) and reports the RSS of each of the three once the gateway is ready (discovery has planned
the 50,000-tool catalog). ``--services-root DIR`` runs another checkout's services (before vs
after).

``--up`` instead runs ``toolscout up --json`` on the config (one process: the pool, discovery, the
orchestrator and the gateway on one event loop, as a user starts it) and reports, from its spawn:
every server READY (``ListServers``), discovery holding every tool (``PlanTools``), the
gateway's ``/readyz``, and the first ``search_tools`` through the gateway answered with tools
(``up_ready_s``: the stack ready to use); then the process's CPU time and RSS.

Run: uv run --frozen python bench/fleet_ready.py [--servers 1000] [--within 120] [--hold 60]
    [--stack | --up] [--services-root DIR] [--out FILE]
Prints the figures and writes bench/results/fleet_ready.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs
from toolscout import client as tc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp_fleet import fleet_config
from mcp_fleet_load import Fleet

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "fleet_ready.json"
CLI = [sys.executable, "-m", "toolscout_cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _statuses(address: str) -> tuple[tc.ServerStatus, ...]:
    async with tc.AsyncPoolClient.connect(address, max_attempts=1) as pool:
        return await pool.list_servers(deadline=20)


async def _watch(address: str, servers: int, within: float, hold: float) -> dict[str, Any]:
    started = time.monotonic()
    ready_s: float | None = None
    ready = 0
    curve: list[tuple[float, int]] = []
    while time.monotonic() - started < within:
        with contextlib.suppress(tc.ToolscoutClientError):
            statuses = await _statuses(address)
            ready = sum(s.state == "ready" for s in statuses)
            curve.append((round(time.monotonic() - started, 1), ready))
            if ready >= servers:
                ready_s = time.monotonic() - started
                break
        await asyncio.sleep(1.0)
    out: dict[str, Any] = {"ready_s": None if ready_s is None else round(ready_s, 1), "ready_at_end": ready}
    out["ready_curve"] = curve[:: max(len(curve) // 20, 1)]
    if ready_s is None:
        return out
    restarts_at_ready = sum(s.restarts for s in await _statuses(address))
    fewest = servers
    end = time.monotonic() + hold
    while time.monotonic() < end:
        with contextlib.suppress(tc.ToolscoutClientError):
            fewest = min(fewest, sum(s.state == "ready" for s in await _statuses(address)))
        await asyncio.sleep(1.0)
    restarts = sum(s.restarts for s in await _statuses(address)) - restarts_at_ready
    out.update({"hold_s": hold, "restarts_during_hold": restarts, "fewest_ready_during_hold": fewest})
    return out


def _wait_ready(url: str, within: float) -> float:
    """Seconds until ``url`` answers 200 (the gateway's /readyz: discovery has answered)."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        with contextlib.suppress(httpx2.HTTPError):
            if httpx2.get(url, timeout=5).status_code == 200:
                return time.monotonic() - started
        time.sleep(1.0)
    raise RuntimeError(f"{url} was not ready within {within:g}s")


async def _watch_up(ports: dict[str, int], servers: int, within: float) -> dict[str, Any]:
    """Seconds from now until each stage of ``toolscout up`` is ready (None: not within ``within``)."""
    started = time.monotonic()
    out: dict[str, Any] = {}
    deadline = started + within
    pool = f"127.0.0.1:{ports['pool']}"
    while time.monotonic() < deadline and "ready_s" not in out:
        with contextlib.suppress(tc.ToolscoutClientError):
            if sum(s.state == "ready" for s in await _statuses(pool)) >= servers:
                out["ready_s"] = round(time.monotonic() - started, 1)
        await asyncio.sleep(0.5)
    async with tc.AsyncDiscoveryClient.connect(f"127.0.0.1:{ports['discovery']}") as discovery:
        while time.monotonic() < deadline and "catalog_s" not in out:
            with contextlib.suppress(tc.ToolscoutClientError):
                # PlanTools: what the gateway asks anyway (GetManifest also counts every
                # server's tokens per call: too heavy a probe for a process this busy).
                if (await discovery.plan_tools(deadline=60)).total_tools >= servers * 50:
                    out["catalog_s"] = round(time.monotonic() - started, 1)
            await asyncio.sleep(0.5)
    gateway = f"http://127.0.0.1:{ports['gateway']}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "search_tools",
            "arguments": {"query": "send an email to a contact"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "fleet-ready", "version": "1"},
            },
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "search_tools",
    }
    async with httpx2.AsyncClient(timeout=30) as client:
        while time.monotonic() < deadline and "up_ready_s" not in out:
            with contextlib.suppress(httpx2.HTTPError, ValueError, KeyError):
                if (await client.get(f"{gateway}/readyz")).status_code == 200:
                    out.setdefault("gateway_readyz_s", round(time.monotonic() - started, 1))
                    answer = (await client.post(f"{gateway}/mcp", json=body, headers=headers)).json()
                    if answer["result"]["structuredContent"]["tools"]:
                        out["up_ready_s"] = round(time.monotonic() - started, 1)
            await asyncio.sleep(0.5)
    return out


def run_up(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """``toolscout up --json`` on the fleet's config (see the module's docstring)."""
    fleet = Fleet(args.servers, args.tools, workdir / "fleet.err")
    try:
        config = fleet_config(fleet.base_url, args.servers)
        ports = {name: _free_port() for name in ("pool", "discovery", "orchestrator", "gateway")}
        for name, port in ports.items():
            config["toolscout"].setdefault(name, {}).update(
                {"listen": f"127.0.0.1:{port}", "metrics_port": -1}
            )
        path = workdir / "toolscout.json"
        path.write_text(json.dumps(config))
        fleet_cpu = fleet.sample()["cpu_s"]
        log = (args.log or workdir / "up.log").open("wb")
        up = subprocess.Popen(
            [*CLI, "up", "--json", "-c", str(path), *(["--log-level", "INFO"] if args.log else [])],
            cwd=args.services_root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        try:
            figures = asyncio.run(_watch_up(ports, args.servers, args.within))
            cpu = psutil.Process(up.pid).cpu_times()
            figures["up_cpu_s"] = round(cpu.user + cpu.system, 1)
            figures["up_rss_mb"] = round(psutil.Process(up.pid).memory_info().rss / 2**20, 1)
        finally:
            os.killpg(up.pid, signal.SIGTERM)
            try:
                up.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
            log.close()
        figures["fleet_cpu_s"] = round(fleet.sample()["cpu_s"] - fleet_cpu, 1)
        figures["fleet_start_s"] = round(fleet.ready_s, 1)
    finally:
        fleet.stop()
    return figures


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    fleet = Fleet(args.servers, args.tools, workdir / "fleet.err")
    try:
        config = fleet_config(fleet.base_url, args.servers)
        address = f"127.0.0.1:{_free_port()}"
        discovery_address, gateway_address = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
        config["toolscout"]["discovery"] = {"pool_target": address, "metrics_port": -1}
        config["toolscout"]["gateway"] = {
            "listen": gateway_address,
            "discovery_target": discovery_address,
            "pool_target": address,
            "metrics_port": -1,
        }
        path = workdir / "toolscout.json"
        path.write_text(json.dumps(config))
        fleet_cpu = fleet.sample()["cpu_s"]
        log = (workdir / "pool.log").open("wb")
        pool = subprocess.Popen(
            [*CLI, "serve", "pool", "--listen", address, "--metrics-port", "-1", "-c", str(path)],
            cwd=args.services_root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        others: list[subprocess.Popen[bytes]] = []
        try:
            figures = asyncio.run(_watch(address, args.servers, args.within, args.hold))
            cpu = psutil.Process(pool.pid).cpu_times()
            figures["pool_cpu_s"] = round(cpu.user + cpu.system, 1)
            figures["pool_rss_mb"] = round(psutil.Process(pool.pid).memory_info().rss / 2**20, 1)
            if args.stack and figures["ready_s"] is not None:
                for service, listen in (("discovery", discovery_address), ("gateway", None)):
                    command = [*CLI, "serve", service, "-c", str(path)]
                    command += ["--listen", listen, "--metrics-port", "-1"] if listen else []
                    others.append(
                        subprocess.Popen(
                            command,
                            cwd=args.services_root,
                            stdin=subprocess.DEVNULL,
                            stdout=log,
                            stderr=log,
                            start_new_session=True,
                        )
                    )
                figures["stack_ready_s"] = round(_wait_ready(f"http://{gateway_address}/readyz", 600), 1)
                rss = {
                    name: round(psutil.Process(p.pid).memory_info().rss / 2**20, 1)
                    for name, p in (("pool", pool), ("discovery", others[0]), ("gateway", others[1]))
                }
                figures["rss_mb"] = rss | {"total": round(sum(rss.values()), 1)}
        finally:
            for process in [*others, pool]:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
            log.close()
        figures["fleet_cpu_s"] = round(fleet.sample()["cpu_s"] - fleet_cpu, 1)
        figures["fleet_start_s"] = round(fleet.ready_s, 1)
    finally:
        fleet.stop()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--within", type=float, default=120.0, help="seconds to wait for every server")
    parser.add_argument("--hold", type=float, default=60.0, help="seconds to keep watching once ready")
    parser.add_argument(
        "--stack", action="store_true", help="then discovery and the gateway: RSS of the three"
    )
    parser.add_argument(
        "--up", action="store_true", help="time `toolscout up` (one process) instead of a pool process"
    )
    parser.add_argument("--log", type=Path, help="with --up: keep toolscout up's output (INFO) in this file")
    parser.add_argument("--services-root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        figures = (run_up if args.up else run)(args, Path(tmp))
    figures.update(
        {
            "servers": args.servers,
            "tools": args.servers * args.tools,
            "services_root": str(args.services_root),
            "load_1m_start": round(load, 2),
            "load_1m_end": round(os.getloadavg()[0], 2),
        }
    )
    if args.up:
        print(
            f"toolscout up, {args.servers} servers / {figures['tools']:,} tools, default config "
            f"({args.services_root}): every server READY {figures.get('ready_s')} s, discovery holds every tool "
            f"{figures.get('catalog_s')} s, gateway /readyz {figures.get('gateway_readyz_s')} s, first "
            f"search_tools answered {figures.get('up_ready_s')} s (None: not within {args.within:g} s); "
            f"CPU {figures['up_cpu_s']} s, RSS {figures['up_rss_mb']} MB, fleet CPU {figures['fleet_cpu_s']} s"
            f"   load {figures['load_1m_start']} -> {figures['load_1m_end']}"
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"saved {args.out}")
        return 0
    ready = f"{figures['ready_s']} s" if figures["ready_s"] is not None else f"not within {args.within:g} s"
    print(
        f"{args.servers} servers / {figures['tools']:,} tools, default pool settings ({args.services_root}): "
        f"all READY {ready} ({figures['ready_at_end']} READY at the end of the wait)"
        + (
            f"; over the next {figures['hold_s']:g} s: {figures['restarts_during_hold']} restarts, "
            f"fewest READY {figures['fewest_ready_during_hold']}"
            if "hold_s" in figures
            else ""
        )
        + f"; pool CPU {figures['pool_cpu_s']} s, fleet CPU {figures['fleet_cpu_s']} s, pool RSS {figures['pool_rss_mb']} MB"
        + f"   load {figures['load_1m_start']} -> {figures['load_1m_end']}"
    )
    if "rss_mb" in figures:
        rss = figures["rss_mb"]
        print(
            f"stack ready {figures['stack_ready_s']} s after discovery and the gateway started; RSS pool "
            f"{rss['pool']} MB, discovery {rss['discovery']} MB, gateway {rss['gateway']} MB, total {rss['total']} MB"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
