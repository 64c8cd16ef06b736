"""Latency the pool adds to a tool call, and whether concurrent calls really run concurrently.

Measures, against the same stdio server (examples/servers/text.py):
  * direct: the MCP SDK's ClientSession calling ``reverse`` on its own subprocess;
  * pool:   McpPool.call_tool in process (supervision, catalog lookup, limits, conversion);
  * grpc:   CallTool on the service itself (``python -m mcp_pool_svc`` in its own process, as
            deployed) over 127.0.0.1: what other services pay;
  * floor:  ListServers on that service, an RPC without MCP work (the cost of gRPC itself).
Calls alternate between the three so that drift hits them equally, direct and pool taking turns to
go first (the one after it finds the event loop warm). Tracing off vs on: the in-process pool and
the service are each run twice, the second with OpenTelemetry tracing on (sample ratio 1, OTLP over
gRPC to a local receiver, tests/support/otlp_receiver.py), their calls interleaved with the others;
the added p50 per CallTool is reported side by side (target: at most 0.2 ms). Wall time on a shared machine mostly measures
the other processes; the CPU time this process spends per call (direct: the SDK's client side; pool:
that plus the pool) is what the pool adds whatever the load, and is recorded beside it. Then 32 concurrent calls of
``wait`` (0.1 s each) through gRPC: one shared session should finish them in about 0.1 s (the same
burst straight through the SDK is measured alongside, as the server's own floor).

Run: uv run --frozen python bench/pool_latency.py [--calls 1000] [--log-level INFO]
Prints the results (after the service's own log lines) and writes bench/results/pool_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp_pool_svc.pool import McpPool  # noqa: E402
from tests.support.otlp_receiver import OtlpReceiver  # noqa: E402
from toolscout_kit.config import parse_config  # noqa: E402
from toolscout_kit.logging import configure_logging  # noqa: E402
from toolscout_kit.tracing import tracing_for  # noqa: E402

SERVER = ROOT / "examples" / "servers" / "text.py"
RESULTS = ROOT / "bench" / "results" / "pool_latency.json"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(_pct(ms, 0.50), 4),
        "p90_ms": round(_pct(ms, 0.90), 4),
        "p99_ms": round(_pct(ms, 0.99), 4),
        "mean_ms": round(statistics.fmean(ms), 4),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _start_service(
    server_entry: dict[str, Any], log_level: str, workdir: Path, name: str, tracing: dict[str, Any]
) -> tuple[asyncio.subprocess.Process, int]:
    """The pool as deployed: its own process (python -m mcp_pool_svc); this one is the client."""
    port = _free_port()
    service_config = workdir / f"{name}.json"
    service_config.write_text(
        json.dumps(
            {
                "servers": {"text": server_entry},
                "toolscout": {
                    "log_level": log_level,
                    "pool": {"listen": f"127.0.0.1:{port}", "metrics_port": -1},
                    "tracing": tracing,
                },
            }
        )
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mcp_pool_svc",
        "--config",
        str(service_config),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
    )
    return process, port


def _tracing_result(off: list[float], on: list[float]) -> dict[str, Any]:
    return {
        "off": _summary(off),
        "on": _summary(on),
        "added_p50_ms": round(_pct(on, 0.5) - _pct(off, 0.5), 4),
        # Median of per-iteration differences: robust to load spikes that hit one of the pair.
        "added_ms_paired_median": round(statistics.median(n - f for n, f in zip(on, off, strict=True)), 4),
    }


async def main(
    calls: int, warmup: int, log_level: str, workdir: Path, receiver: OtlpReceiver
) -> dict[str, Any]:
    # max_concurrency above 32: the default per-server limit (16) would run the burst in two waves.
    # serialize_writes off: `wait` is not annotated read-only, so by default the pool would run the
    # burst one call at a time (3.2 s), which is the point of that setting, not of this measurement.
    server_entry = {
        "command": sys.executable,
        "args": [str(SERVER)],
        "max_concurrency": 64,
        "serialize_writes": False,
    }
    pool = McpPool(parse_config({"servers": {"text": server_entry}}, base_dir=ROOT))
    await pool.start(wait=60)
    on = {"endpoint": receiver.grpc_endpoint, "sample_ratio": 1.0}
    traced_config = parse_config(
        {"servers": {"text": server_entry}, "toolscout": {"tracing": on}}, base_dir=ROOT
    )
    tracing = tracing_for(traced_config, "pool")
    traced_pool = McpPool(traced_config, tracing=tracing)
    await traced_pool.start(wait=60)
    service, port = await _start_service(server_entry, log_level, workdir, "pool_latency_off", {})
    traced_service, traced_port = await _start_service(
        server_entry, log_level, workdir, "pool_latency_on", on
    )
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    direct_ms: list[float] = []
    pool_ms: list[float] = []
    # CPU time of this process per call (all its threads): the SDK client, and the pool on top.
    direct_cpu_ms: list[float] = []
    pool_cpu_ms: list[float] = []
    grpc_ms: list[float] = []
    rpc_floor_ms: list[float] = []
    traced_pool_ms: list[float] = []
    traced_grpc_ms: list[float] = []
    try:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
            grpc.aio.insecure_channel(f"127.0.0.1:{traced_port}") as traced_channel,
        ):
            await session.initialize()
            stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
            traced_stub = mcp_pool_pb2_grpc.McpPoolStub(traced_channel)
            request = mcp_pool_pb2.CallToolRequest(
                server="text", tool="reverse", arguments_json='{"text": "abc"}'
            )
            list_servers = mcp_pool_pb2.ListServersRequest()
            await stub.CallTool(request, timeout=60, wait_for_ready=True)
            await traced_stub.CallTool(request, timeout=60, wait_for_ready=True)

            async def direct() -> tuple[float, float]:
                c0, t0 = time.process_time(), time.perf_counter()
                await session.call_tool("reverse", {"text": "abc"})
                return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000

            async def in_pool() -> tuple[float, float]:
                c0, t0 = time.process_time(), time.perf_counter()
                await pool.call_tool(server="text", tool="reverse", arguments={"text": "abc"})
                return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000

            async def in_traced_pool() -> float:
                t0 = time.perf_counter()
                await traced_pool.call_tool(server="text", tool="reverse", arguments={"text": "abc"})
                return (time.perf_counter() - t0) * 1000

            for i in range(warmup + calls):
                if i % 2:
                    pool_wall, pool_cpu = await in_pool()
                    direct_wall, direct_cpu = await direct()
                else:
                    direct_wall, direct_cpu = await direct()
                    pool_wall, pool_cpu = await in_pool()
                traced_wall = await in_traced_pool()
                t2 = time.perf_counter()
                await stub.CallTool(request, timeout=10)
                t3 = time.perf_counter()
                await stub.ListServers(list_servers, timeout=10)
                t4 = time.perf_counter()
                await traced_stub.CallTool(request, timeout=10)
                t5 = time.perf_counter()
                if i >= warmup:
                    direct_ms.append(direct_wall)
                    pool_ms.append(pool_wall)
                    direct_cpu_ms.append(direct_cpu)
                    pool_cpu_ms.append(pool_cpu)
                    grpc_ms.append((t3 - t2) * 1000)
                    rpc_floor_ms.append((t4 - t3) * 1000)
                    traced_pool_ms.append(traced_wall)
                    traced_grpc_ms.append((t5 - t4) * 1000)

            concurrent: list[float] = []
            concurrent_direct: list[float] = []
            wait = mcp_pool_pb2.CallToolRequest(server="text", tool="wait", arguments_json='{"seconds": 0.1}')
            for _ in range(5):
                t0 = time.perf_counter()
                await asyncio.gather(*(stub.CallTool(wait, timeout=30) for _ in range(32)))
                concurrent.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await asyncio.gather(*(session.call_tool("wait", {"seconds": 0.1}) for _ in range(32)))
                concurrent_direct.append(time.perf_counter() - t0)
    finally:
        await pool.stop()
        await traced_pool.stop()
        await tracing.shutdown()
        for process in (service, traced_service):
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 30)

    direct, via_pool, via_grpc = _summary(direct_ms), _summary(pool_ms), _summary(grpc_ms)
    return {
        "command": " ".join(["uv run --frozen python bench/pool_latency.py", *sys.argv[1:]]),
        "calls": calls,
        "server": "examples/servers/text.py (tool: reverse), stdio",
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            # Other work on the machine inflates every figure; recorded so runs can be compared.
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "direct_sdk": direct,
        "pool_in_process": via_pool,
        "pool_via_grpc": via_grpc,
        # A unary RPC that touches no MCP server (ListServers): the cost of gRPC + interceptors alone.
        "grpc_rpc_floor_list_servers": _summary(rpc_floor_ms),
        # Median of per-iteration differences: robust to load spikes that hit one call of a triple.
        "added_ms_paired_median": {
            "pool_in_process": round(
                statistics.median(p - d for p, d in zip(pool_ms, direct_ms, strict=True)), 4
            ),
            "grpc": round(statistics.median(g - d for g, d in zip(grpc_ms, direct_ms, strict=True)), 4),
        },
        # CPU time of this process per call (process_time, so other processes' load does not
        # count): what the pool costs on top of the SDK's client side.
        "cpu_ms": {"direct_sdk": _summary(direct_cpu_ms), "pool_in_process": _summary(pool_cpu_ms)},
        "added_cpu_ms_paired_median": round(
            statistics.median(p - d for p, d in zip(pool_cpu_ms, direct_cpu_ms, strict=True)), 4
        ),
        "cpu_cdf_ms": {
            name: [round(_pct(ms, i / 100), 4) for i in range(101)]
            for name, ms in (("direct_sdk", direct_cpu_ms), ("pool_in_process", pool_cpu_ms))
        },
        "added_ms": {
            "pool_in_process_p50": round(via_pool["p50_ms"] - direct["p50_ms"], 4),
            "pool_in_process_p99": round(via_pool["p99_ms"] - direct["p99_ms"], 4),
            "grpc_p50": round(via_grpc["p50_ms"] - direct["p50_ms"], 4),
            "grpc_p99": round(via_grpc["p99_ms"] - direct["p99_ms"], 4),
        },
        # Percentiles 0, 1, ..., 100 of each series: the latency CDF (bench/plots.py draws it).
        "cdf_ms": {
            name: [round(_pct(ms, i / 100), 4) for i in range(101)]
            for name, ms in (
                ("direct_sdk", direct_ms),
                ("pool_in_process", pool_ms),
                ("pool_via_grpc", grpc_ms),
            )
        },
        # Tracing off vs on (sample ratio 1, OTLP/gRPC to a local receiver): the in-process pool
        # (call_tool + MCP request spans) and CallTool over gRPC (+ the server span).
        "tracing": {
            "pool_in_process": _tracing_result(pool_ms, traced_pool_ms),
            "grpc_call_tool": _tracing_result(grpc_ms, traced_grpc_ms),
            "spans_received": len(receiver.spans),
        },
        "concurrent_32_x_100ms_sleep_seconds": {
            "runs": [round(s, 4) for s in concurrent],
            "median": round(statistics.median(concurrent), 4),
            # The same 32 calls straight through the SDK: what the server itself allows.
            "direct_sdk_runs": [round(s, 4) for s in concurrent_direct],
            "direct_sdk_median": round(statistics.median(concurrent_direct), 4),
            "serial_would_take": 3.2,
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument(
        "--log-level",
        default="INFO",
        help="the service's log level; INFO (its default) logs one line per RPC",
    )
    args = parser.parse_args()
    # The in-process pool logs like the service does (state changes only; no per-call lines).
    configure_logging(args.log_level)
    with tempfile.TemporaryDirectory() as tmp, OtlpReceiver() as receiver:
        result = asyncio.run(main(args.calls, args.warmup, args.log_level, Path(tmp), receiver))
    result["log_level"] = args.log_level
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
