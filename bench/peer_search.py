"""``search_tools`` as a deployment serves it, beside FastMCP 4 and casual-mcp 1.0 run their users' way.

For each catalog size (``--sizes``, 50 tools a server: 5,000 tools = 100 servers) the fleet of
bench/mcp_fleet.py serves the servers over streamable HTTP, and toolscout runs as a deployment does:
``toolscout serve pool``, then ``discovery`` and ``gateway`` as three separate processes on the
fleet's config (the pool really connects to every server, lists it and publishes the catalog;
discovery follows it). Beside it, in the same run:

* **FastMCP 4** (``fastmcp==4.1.2`` in its isolated environment, bench/_baselines/fastmcp_gateway.py)
  serving the same tools under the same names with its ``BM25SearchTransform``, started with its own
  ``run(transport="http")``;
* **casual-mcp 1.0** (``casual-mcp==1.0.0``, isolated, bench/_baselines/casual_first_call.py): what
  its own code sends on a model's first call with every tool deferred (its search tool + the system
  message naming every deferred tool); casual-mcp is a client library, not an MCP server, so it has
  no over-the-wire search to time here (its index in process: bench/search_latency.py).

Measured:

* first-call tokens (o200k, counted as discovery counts a definition): every server directly, the
  gateway's meta ``tools/list`` (from the deployment), FastMCP's ``tools/list``, casual-mcp's first
  call; the same for ``livemcpbench`` (527 tools; the gateway in process there, as gateway_bench.py);
* ``search_tools`` over raw 2026-07-28 HTTP posts on one keep-alive connection per server, whole
  queries of the five shared sets (full sentences and paragraphs of up to 500 characters, the same
  seeded sample for both), the two engines interleaved query by query (the order alternating), plus
  discovery's ``SearchTools`` over gRPC; p50/p99 wall clock, the CPU milliseconds per search of the
  serving processes (gateway + discovery; FastMCP's process), the load average sampled over the run.
  FastMCP answers at 5,000 tools take a few hundred milliseconds each, so it gets the first
  ``--peer-queries`` of the queries. Above ``--peer-max-tools`` (default 5,000) FastMCP is not
  started: its ``add_tool`` checks every tool registered so far (``LocalProvider._check_version_mixing``),
  so registering 50,000 tools is quadratic and had not finished after 8 minutes of CPU.

Run: uv run --frozen python bench/peer_search.py [--sizes 5000 50000] [--queries 300] [--peer-queries 100]
Writes bench/results/peer_search.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs
from toolscout import client as tc

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # catalogs, raw MCP calls, token counting, FastMCP's server
from fleet_ready import _statuses
from mcp_fleet import fleet_config
from mcp_fleet_load import Fleet

ROOT = gb.ROOT
RESULTS = ROOT / "bench" / "results" / "peer_search.json"
CLI = [sys.executable, "-m", "toolscout_cli"]
CASUAL = "casual-mcp==1.0.0"


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _cpu_s(pids: list[int]) -> float:
    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


# --- the deployment --------------------------------------------------------------------------


@contextlib.contextmanager
def deployment(base_url: str, servers: int, workdir: Path) -> Iterator[dict[str, Any]]:
    """Pool, then discovery and gateway, as processes on the fleet's config, once the catalog is
    complete: ``{"url", "discovery", "pids", "ready"}`` (``ready``: seconds to each stage)."""
    ports = {name: gb._free_port() for name in ("pool", "discovery", "gateway")}
    pool, discovery = f"127.0.0.1:{ports['pool']}", f"127.0.0.1:{ports['discovery']}"
    config = fleet_config(base_url, servers)
    config["toolscout"]["log_level"] = "WARNING"
    config["toolscout"]["pool"].update({"listen": pool, "metrics_port": -1})
    config["toolscout"]["discovery"] = {"listen": discovery, "pool_target": pool, "metrics_port": -1}
    config["toolscout"]["gateway"] = {
        "listen": f"127.0.0.1:{ports['gateway']}",
        "discovery_target": discovery,
        "pool_target": pool,
        "metrics_port": -1,
        "max_sessions": 100_000,
    }
    path = workdir / f"deployment-{servers}.json"
    path.write_text(json.dumps(config))
    processes: list[subprocess.Popen[bytes]] = []

    def spawn(service: str) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [*CLI, "serve", service, "-c", str(path)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        processes.append(process)
        return process

    started = time.monotonic()
    ready: dict[str, float] = {}
    try:
        spawn("pool")
        asyncio.run(_every_server_ready(pool, servers, within=300))
        ready["pool_s"] = round(time.monotonic() - started, 1)
        spawn("discovery")
        gateway = spawn("gateway")
        url = f"http://127.0.0.1:{ports['gateway']}/mcp"
        gb._wait_http(url.replace("/mcp", "/readyz"), gateway, within=600)
        asyncio.run(_catalog_complete(discovery, servers * 50, within=600))
        ready["stack_s"] = round(time.monotonic() - started, 1)
        yield {
            "url": url,
            "discovery": discovery,
            "pids": {"pool": processes[0].pid, "discovery": processes[1].pid, "gateway": gateway.pid},
            "ready": ready,
        }
    finally:
        for process in reversed(processes):
            gb._stop(process)


async def _every_server_ready(address: str, servers: int, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(tc.ToolscoutClientError):
            if sum(s.state == "ready" for s in await _statuses(address)) >= servers:
                return
        await asyncio.sleep(1.0)
    raise RuntimeError(f"the pool did not have {servers} servers READY within {within:g}s")


async def _catalog_complete(address: str, tools: int, within: float) -> None:
    deadline = time.monotonic() + within
    async with tc.AsyncDiscoveryClient.connect(address) as discovery:
        while time.monotonic() < deadline:
            with contextlib.suppress(tc.ToolscoutClientError):
                if (await discovery.get_manifest(deadline=30)).deferred_tools >= tools:
                    return
            await asyncio.sleep(1.0)
    raise RuntimeError(f"discovery did not hold {tools} tools within {within:g}s")


# --- tokens ----------------------------------------------------------------------------------


def casual_first_call(rows: list[dict[str, Any]], workdir: Path) -> dict[str, Any]:
    """casual-mcp 1.0's first call over ``rows`` (its own code, isolated): tokens of each part."""
    path = workdir / f"casual-{len(rows)}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for row in gb.load_tools_rows(rows):
            schema = row.get("input_schema") if isinstance(row.get("input_schema"), dict) else None
            line = {k: row[k] for k in ("key", "server", "name", "description")} | {"input_schema": schema}
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    command = ["uv", "run", "--isolated", "--no-project", "--quiet", "--with", CASUAL, "python"]
    command += [str(ROOT / "bench" / "_baselines" / "casual_first_call.py"), "--tools", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=True, cwd=workdir)
    payload = json.loads(done.stdout)
    tool = gb._COUNTER.count_text(payload["search_tool_json"], gb._ENC.name)
    system = gb._COUNTER.count_text(payload["system_prompt"], gb._ENC.name)
    return {"search_tool": tool, "system_message": system, "first_call": tool + system}


def _direct_tokens(rows: list[dict[str, Any]]) -> int:
    return sum(gb._COUNTER.count_tool(t, gb._ENC) for t in gb._tools_from_rows(rows))


async def tokens(
    rows: list[dict[str, Any]], gateway_url: str, fastmcp_url: str | None, workdir: Path
) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=120) as client:
        meta, _ = await gb._listed(client, gateway_url)
        fastmcp = (await gb._listed(client, fastmcp_url))[0] if fastmcp_url else None
    out: dict[str, Any] = {
        "direct": _direct_tokens(rows),
        "gateway_meta": gb._definition_tokens(meta),
        "casual_mcp": casual_first_call(rows, workdir),
    }
    if fastmcp is not None:
        out["fastmcp"] = gb._definition_tokens(fastmcp)
    return _shares(out)


def _shares(out: dict[str, Any]) -> dict[str, Any]:
    for key in ("gateway_meta", "gateway_progressive", "fastmcp", "casual_mcp"):
        if key in out:
            value = out[key]["first_call"] if isinstance(out[key], dict) else out[key]
            out[f"{key}_share"] = round(value / out["direct"], 6)
    return out


async def livemcp_tokens(workdir: Path) -> dict[str, Any]:
    """livemcpbench: the gateway in process (gateway_bench.bench_tokens), FastMCP, casual-mcp."""
    rows = gb.livemcp_rows()
    with gb.fastmcp_server(rows, workdir) as fastmcp_url:
        measured = await gb.bench_tokens(rows, fastmcp_url)
    out: dict[str, Any] = {
        "direct": measured["direct"],
        "gateway_meta": measured["meta"],
        "gateway_progressive": measured["progressive"],
        "fastmcp": measured["fastmcp"],
        "casual_mcp": casual_first_call(rows, workdir),
    }
    return _shares(out)


# --- search ----------------------------------------------------------------------------------


async def search(
    stack: dict[str, Any], fastmcp_url: str | None, fastmcp_pid: int, queries: list[str], peer_queries: int
) -> dict[str, Any]:
    """Both engines on the same queries, interleaved (no FastMCP: ``fastmcp_url`` None)."""
    ms: dict[str, list[float]] = {"gateway": [], "fastmcp": [], "discovery_grpc": []}
    loads: list[float] = []
    ours = [stack["pids"]["gateway"], stack["pids"]["discovery"]]
    async with (
        httpx2.AsyncClient(timeout=600) as ours_client,
        httpx2.AsyncClient(timeout=600) as peer_client,
        tc.AsyncDiscoveryClient.connect(stack["discovery"]) as discovery,
    ):

        async def timed(client: httpx2.AsyncClient, url: str, query: str) -> float:
            arguments = {"name": "search_tools", "arguments": {"query": query}}
            t0 = time.perf_counter()
            answer = await gb.modern_call(client, url, "tools/call", arguments)
            elapsed = (time.perf_counter() - t0) * 1000
            if "result" not in answer or answer["result"].get("isError"):
                raise RuntimeError(f"search failed at {url}: {str(answer)[:300]}")
            return elapsed

        for query in queries[:5]:  # warm both (FastMCP builds its index on its first search)
            await timed(ours_client, stack["url"], query)
            if fastmcp_url is not None:
                await timed(peer_client, fastmcp_url, query)
        cpu: dict[str, float] = {"gateway": 0.0, "fastmcp": 0.0}
        for i, query in enumerate(queries):
            order = ["gateway", "fastmcp"] if i % 2 else ["fastmcp", "gateway"]
            for engine in order:
                if engine == "fastmcp" and (i >= peer_queries or fastmcp_url is None):
                    continue
                pids = ours if engine == "gateway" else [fastmcp_pid]
                c0 = _cpu_s(pids)
                if engine == "gateway":
                    ms[engine].append(await timed(ours_client, stack["url"], query))
                elif fastmcp_url is not None:
                    ms[engine].append(await timed(peer_client, fastmcp_url, query))
                cpu[engine] += _cpu_s(pids) - c0
            t0 = time.perf_counter()
            await discovery.search_tools(query, surface="stable")
            ms["discovery_grpc"].append((time.perf_counter() - t0) * 1000)
            if i % 10 == 0:
                loads.append(_load())
    out: dict[str, Any] = {name: gb._summary(values) for name, values in ms.items() if values}
    for engine in ("gateway", "fastmcp"):
        if ms[engine]:
            out[engine]["cpu_ms_per_search"] = round(cpu[engine] * 1000 / len(ms[engine]), 3)
    if ms["fastmcp"]:
        same = ms["gateway"][: len(ms["fastmcp"])]  # the queries both answered
        out["fastmcp_p50_over_gateway_p50_same_queries"] = round(
            statistics.median(ms["fastmcp"]) / statistics.median(same), 1
        )
        out["fastmcp_cpu_over_gateway_cpu"] = round(
            out["fastmcp"]["cpu_ms_per_search"] / out["gateway"]["cpu_ms_per_search"], 1
        )
    out["load_average"] = {"mean": round(statistics.fmean(loads), 2), "min": min(loads), "max": max(loads)}
    return out


def _python_child(pid: int) -> int:
    """The python process ``uv run`` started (whose CPU is FastMCP's)."""
    children = psutil.Process(pid).children(recursive=True)
    return int(children[-1].pid) if children else pid


@contextlib.contextmanager
def _fastmcp(rows: list[dict[str, Any]], workdir: Path) -> Iterator[tuple[str, int]]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with gb.fastmcp_server(rows, workdir) as url:
        spawned = [p for p in psutil.Process().children() if p.pid not in before]
        yield url, _python_child(spawned[-1].pid)


def run_size(
    tools: int, queries: list[str], peer_queries: int, workdir: Path, with_peer: bool = True
) -> dict[str, Any]:
    servers = tools // 50
    out: dict[str, Any] = {"tools": servers * 50, "servers": servers, "load_at_start": _load()}
    fleet = Fleet(servers, 50, workdir / f"fleet-{servers}.err")
    try:
        rows = gb.fleet_rows(servers)
        with deployment(fleet.base_url, servers, workdir) as stack:
            out["deployment_ready"] = stack["ready"] | {"load": _load()}
            print(f"  {tools:,} tools: deployment ready {stack['ready']} (load {_load()})", flush=True)
            if not with_peer:
                out["tokens"] = asyncio.run(tokens(rows, stack["url"], None, workdir))
                _print_tokens(f"fleet {tools:,}", out["tokens"], _load())
                out["search"] = asyncio.run(search(stack, None, 0, queries, 0))
                _print_search(tools, out["search"])
                out["rss_mb"] = _rss(stack)
                return out
            started = time.monotonic()
            with _fastmcp(rows, workdir) as (fastmcp_url, fastmcp_pid):
                out["fastmcp_start_s"] = round(time.monotonic() - started, 1)
                out["tokens"] = asyncio.run(tokens(rows, stack["url"], fastmcp_url, workdir))
                _print_tokens(f"fleet {tools:,}", out["tokens"], _load())
                out["search"] = asyncio.run(search(stack, fastmcp_url, fastmcp_pid, queries, peer_queries))
                _print_search(tools, out["search"])
            out["rss_mb"] = _rss(stack)
    finally:
        fleet.stop()
    return out


def _rss(stack: dict[str, Any]) -> dict[str, float]:
    return {
        name: round(psutil.Process(pid).memory_info().rss / 2**20, 1) for name, pid in stack["pids"].items()
    }


def _print_tokens(label: str, t: dict[str, Any], load: float) -> None:
    casual = t["casual_mcp"]
    fastmcp = f"FastMCP 4 {t['fastmcp']:,} ({t['fastmcp_share']:.3%}); " if "fastmcp" in t else ""
    print(
        f"  first-call tokens, {label}: direct {t['direct']:,}; gateway meta {t['gateway_meta']:,} "
        f"({t['gateway_meta_share']:.3%}); {fastmcp}casual-mcp 1.0 "
        f"{casual['first_call']:,} ({t['casual_mcp_share']:.2%}: search tool {casual['search_tool']:,} + "
        f"system message {casual['system_message']:,})   load {load}",
        flush=True,
    )


def _print_search(tools: int, s: dict[str, Any]) -> None:
    g, d = s["gateway"], s["discovery_grpc"]
    load = s["load_average"]
    lines = [
        f"  search_tools at {tools:,} tools (load {load['mean']}, {load['min']}-{load['max']}):",
        f"    toolscout gateway  p50 {g['p50_ms']:8.2f}  p99 {g['p99_ms']:8.2f} ms  "
        f"CPU {g['cpu_ms_per_search']:.2f} ms/search  n={g['n']}",
    ]
    if "fastmcp" in s:
        f = s["fastmcp"]
        lines.append(
            f"    FastMCP 4          p50 {f['p50_ms']:8.2f}  p99 {f['p99_ms']:8.2f} ms  "
            f"CPU {f['cpu_ms_per_search']:.2f} ms/search  n={f['n']}"
        )
    lines.append(f"    discovery gRPC     p50 {d['p50_ms']:8.2f}  p99 {d['p99_ms']:8.2f} ms")
    if "fastmcp" in s:
        lines.append(
            f"    FastMCP / toolscout: p50 x{s['fastmcp_p50_over_gateway_p50_same_queries']} (same queries), "
            f"CPU x{s['fastmcp_cpu_over_gateway_cpu']}"
        )
    print("\n".join(lines), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000])
    parser.add_argument("--queries", type=int, default=300, help="search_tools queries for toolscout")
    parser.add_argument("--peer-queries", type=int, default=100, help="of which FastMCP answers the first N")
    parser.add_argument(
        "--no-livemcp", dest="livemcp", action="store_false", help="skip livemcpbench's tokens"
    )
    parser.add_argument(
        "--peer-max-tools", type=int, default=5000, help="no FastMCP above this size (see above)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    queries = gb._queries(args.queries)
    results: dict[str, Any] = {
        "command": "uv run --frozen python bench/peer_search.py " + " ".join(sys.argv[1:]),
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory(prefix="toolscout-peers-") as tmp:
        work = Path(tmp)
        if args.livemcp:
            results["livemcpbench_tokens"] = asyncio.run(livemcp_tokens(work))
            results["livemcpbench_tokens"]["load"] = _load()
            _print_tokens("livemcpbench 527", results["livemcpbench_tokens"], _load())
        results["sizes"] = {}
        for size in args.sizes:
            results["sizes"][str(size)] = run_size(
                size, queries, args.peer_queries, work, with_peer=size <= args.peer_max_tools
            )
            args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    results["load_at_end"] = _load()
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"load average at the end {results['load_at_end']}; saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
