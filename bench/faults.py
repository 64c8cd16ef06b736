"""Fault, load and bad-input figures of the pool (issue 10): what a demanding operator would try.

Measures, with real processes on 127.0.0.1:
  * executions per killed call: CallTool through the client library (default retry policy) to
    the pool service in its own process, on a tool whose server dies mid-call (must be 1);
  * time to READY after a remote outage: a streamable-HTTP server stopped for --outage seconds,
    then started again on the same port (default settings; issue target: within 10 s);
  * writes lost out of 100 concurrent ``create_entities`` to the npm memory server, with the
    default settings (must be 0) and, for comparison, with ``serialize_writes: false``;
  * orphans after a restart and a stop, from a server that starts a child and a detached (setsid)
    grandchild (must be 0);
  * hang detection: a SIGSTOPped server, default ping settings (target <= 10 s);
  * large results: 10 / 20 / 50 MB in one reply line, read time (target for 50 MB: <= 2 s) and
    the latency of another server's calls meanwhile;
  * shutdown of the pool service, idle, with a WatchCatalog stream open (target < 1 s);
  * fuzz: malformed protobuf payloads (random bytes, truncations, bit flips) and bad field values
    sent over a raw channel with identity serializers to the pool's and discovery's methods,
    counted by status code (UNKNOWN and INTERNAL must be 0).
  * a hung embedder (issue 19 §3): hybrid SearchTools over gRPC while the /v1/embeddings endpoint
    stops answering — search p50 before and after the circuit breaker opens (target < 5 ms), the
    time until searches are BM25 and, once it answers again, until they are hybrid again; and the
    same hang without a breaker, for comparison.

Issue 19 (processes, "not sent", list_changed, the write lock):
  * a pool process killed mid-call, unsharded and one of 3 shards (`toolscout serve pool`
    processes): executions of the tool and what the caller got (must be 1 and outcome-unknown),
    through the sharded client and through a Chat (what the LLM read);
  * zombies after `--restarts` leader kills of a plain and of a `bash -c`-wrapped server (must be
    0), each kill → READY in a row, idle stop and processes left;
  * leader kill → READY with a fresh backoff (target <= 3 s), busy stop with a write in flight;
  * list_changed per protocol revision with real SDK servers: whether the notice reaches the
    pool's session at all, and change → catalog (target <= 0.5 s);
  * 32 concurrent 100 ms unannotated calls with and without serialize_writes: wall time, lock wait.

Run: uv run --frozen python bench/faults.py [--outage 15] [--fuzz 100] [--quick] [--only NAME[,NAME] ...]
Prints the figures and writes bench/results/faults.json (with --only, the other figures in the
file are kept; each step records its own command and load).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import psutil  # type: ignore[import-untyped]  # dev dependency, as in the tests
from prometheus_client import CollectorRegistry
from toolscout import client as tc
from toolscout.discovery.v1 import discovery_pb2
from toolscout.mcp_pool.v1 import mcp_pool_pb2

from discovery_svc.server import build_server as build_discovery
from mcp_pool_svc.errors import ToolOutcomeUnknownError
from mcp_pool_svc.metrics import PoolMetrics
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.server import build_server as build_pool
from mcp_pool_svc.session import open_connection
from mcp_pool_svc.supervisor import ServerState
from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.mcp_servers import (
    MISBEHAVING_SERVER,
    REPO_ROOT,
    free_port,
    memory_server_config,
    misbehaving_config,
    running_example_http,
)
from tests.support.protocol_servers import PROTOCOL_SERVER
from tests.support.sharded_stack import running_sharded_stack
from toolscout_kit.config import StdioServerConfig, ToolscoutConfig, parse_config
from toolscout_kit.logging import configure_logging
from toolscout_kit.shards import placement_for

RESULTS = REPO_ROOT / "bench" / "results" / "faults.json"


def _config(servers: dict[str, Any], **pool: Any) -> ToolscoutConfig:
    return parse_config({"servers": servers, "toolscout": {"pool": pool}}, base_dir=REPO_ROOT)


@asynccontextmanager
async def _pool(servers: dict[str, Any], **settings: Any) -> AsyncIterator[McpPool]:
    pool = McpPool(_config(servers, **settings))
    await pool.start(wait=60)
    try:
        yield pool
    finally:
        await pool.stop()


async def _service(config: dict[str, Any], workdir: Path) -> asyncio.subprocess.Process:
    """``python -m mcp_pool_svc`` in its own process, as deployed."""
    path = workdir / f"pool-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(config))
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mcp_pool_svc",
        "--config",
        str(path),
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )


async def _serving(port: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        await asyncio.wait_for(channel.channel_ready(), 60)


async def _end(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


# --- 1. executions per killed call -----------------------------------------------------------


async def executions_per_killed_call(workdir: Path, calls: int) -> dict[str, Any]:
    log = workdir / "killed-calls.log"
    port = free_port()
    process = await _service(
        {
            "servers": {"fixture": misbehaving_config("--call-log", str(log))},
            "toolscout": {"pool": {"listen": f"127.0.0.1:{port}", "metrics_port": -1}},
        },
        workdir,
    )
    codes: Counter[str] = Counter()
    executions: list[int] = []
    try:
        await _serving(port)
        async with tc.AsyncPoolClient.connect(f"127.0.0.1:{port}") as client:
            for n in range(calls):
                before = len(log.read_text().splitlines()) if log.exists() else 0
                try:
                    await client.call_tool(
                        "fixture__crash_once", {"marker": str(workdir / f"marker-{n}")}, deadline=30
                    )
                    codes["OK"] += 1
                except tc.ToolscoutClientError as err:
                    codes[err.code.name] += 1
                # The server restarts; a replay (if any) would have reached it by the time it is READY.
                for _ in range(300):
                    [status] = await client.list_servers()
                    if status.state == "ready" and status.restarts > n:
                        break
                    await asyncio.sleep(0.05)
                executions.append(len(log.read_text().splitlines()) - before)
    finally:
        await _end(process)
    return {
        "calls": calls,
        "executions": executions,
        "max_executions": max(executions),
        "replies": dict(codes),
    }


# --- 2. time to READY after a remote outage ---------------------------------------------------


async def remote_outage(outage: float) -> dict[str, Any]:
    port = free_port()
    with ExitStack() as stack:
        first = await asyncio.to_thread(
            stack.enter_context, running_example_http("text", "streamable-http", port=port)
        )
        async with _pool({"text": {"url": first.url}}) as pool:
            states: list[str] = []
            pool.add_listener(lambda name: states.append(pool.server_status(name).state.value))
            stack.close()  # the remote server goes away
            await pool.wait_until(lambda: pool.server_status("text").state is not ServerState.READY, 60)
            await asyncio.sleep(outage)
            with ExitStack() as again:
                await asyncio.to_thread(
                    again.enter_context, running_example_http("text", "streamable-http", port=port)
                )
                back = time.monotonic()
                await pool.wait_until(lambda: pool.server_status("text").state is ServerState.READY, 120)
                ready_after = time.monotonic() - back
    return {
        "outage_seconds": outage,
        "ready_seconds_after_return": round(ready_after, 3),
        "was_failed": "failed" in states,
        "states_seen": sorted(set(states)),
    }


# --- 3. writes lost ---------------------------------------------------------------------------


async def writes_lost(workdir: Path, serialize: bool) -> dict[str, Any]:
    memory = workdir / f"memory-{serialize}.jsonl"
    entry = memory_server_config(memory, serialize_writes=serialize)
    async with _pool({"memory": entry}) as pool:

        async def create(n: int) -> bool:
            entity = {"name": f"e-{n}", "entityType": "bench", "observations": [f"o {n}"]}
            result = await pool.call_tool(
                server="memory", tool="create_entities", arguments={"entities": [entity]}, timeout_seconds=120
            )
            return not result.is_error

        started = time.perf_counter()
        acknowledged = sum(await asyncio.gather(*(create(n) for n in range(100))))
        seconds = time.perf_counter() - started
        graph = await pool.call_tool(server="memory", tool="read_graph", timeout_seconds=60)
        payload = json.loads(graph.structured_content_json or graph.content[0].text)
        kept = {e["name"] for e in payload["entities"]}
    return {
        "serialize_writes": serialize,
        "acknowledged": acknowledged,
        "kept": len(kept),
        "lost": acknowledged - len(kept),
        "seconds": round(seconds, 3),
    }


# --- 4. orphans -------------------------------------------------------------------------------


def _alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.add(pid)
        except psutil.NoSuchProcess:
            continue
    return out


async def orphans(workdir: Path) -> dict[str, Any]:
    pid_file = workdir / "orphan-pids"
    seen: set[int] = set()
    flags = ("--spawn-child", "--spawn-detached", "--pid-file", str(pid_file))
    async with _pool({"fixture": misbehaving_config(*flags)}) as pool:
        seen |= {int(p) for p in pid_file.read_text().split()}
        # The crash is the point; its error (outcome unknown) is not what is measured here.
        with contextlib.suppress(ToolOutcomeUnknownError):
            await pool.call_tool(server="fixture", tool="crash")
        await pool.wait_until(
            lambda: (
                pool.server_status("fixture").state is ServerState.READY
                and pool.server_status("fixture").restarts == 1
            ),
            30,
        )
        after_restart = _alive(seen)
        seen |= {int(p) for p in pid_file.read_text().split()}
    await asyncio.sleep(0)  # processes are gone when stop() returns; nothing to wait for
    return {
        "processes_started": len(seen),
        "left_after_restart_of_first_incarnation": len(after_restart),
        "left_after_stop": len(_alive(seen)),
    }


# --- 5. hang detection ------------------------------------------------------------------------


async def hang_detection(workdir: Path) -> dict[str, Any]:
    pid_file = workdir / "hang-pids"
    async with _pool({"fixture": misbehaving_config("--pid-file", str(pid_file))}) as pool:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        await pool.wait_until(lambda: pool.server_status("fixture").state is not ServerState.READY, 60)
        detected = time.monotonic() - stopped
        await pool.wait_until(lambda: pool.server_status("fixture").state is ServerState.READY, 60)
        ready = time.monotonic() - stopped
    return {"detected_seconds": round(detected, 3), "ready_again_seconds": round(ready, 3)}


# --- 6. large results -------------------------------------------------------------------------


async def large_results(sizes: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    servers = {"big": misbehaving_config(), "other": misbehaving_config()}
    async with _pool(servers, max_result_bytes=64_000_000) as pool:
        for size in sizes:
            done = asyncio.Event()
            others: list[float] = []

            async def probe(done: asyncio.Event = done, others: list[float] = others) -> None:
                while not done.is_set():
                    t0 = time.perf_counter()
                    await pool.call_tool(server="other", tool="echo", arguments={"text": "x"})
                    others.append((time.perf_counter() - t0) * 1000)
                    await asyncio.sleep(0.02)

            prober = asyncio.create_task(probe())
            t0 = time.perf_counter()
            result = await pool.call_tool(
                server="big", tool="big", arguments={"size": size}, timeout_seconds=300
            )
            seconds = time.perf_counter() - t0
            done.set()
            await prober
            out[f"{size // 1_000_000}MB"] = {
                "seconds": round(seconds, 3),
                "bytes": len(result.content[0].text),
                "other_server_calls": len(others),
                "other_server_p50_ms": round(statistics.median(others), 2) if others else None,
                "other_server_max_ms": round(max(others), 2) if others else None,
            }
    return out


# --- 7. shutdown with a watch open ------------------------------------------------------------


async def shutdown_with_watch(workdir: Path) -> dict[str, Any]:
    port = free_port()
    process = await _service(
        {
            "servers": {"fixture": misbehaving_config()},
            "toolscout": {"pool": {"listen": f"127.0.0.1:{port}", "metrics_port": -1}},
        },
        workdir,
    )
    try:
        await _serving(port)
        async with tc.AsyncPoolClient.connect(f"127.0.0.1:{port}") as client:
            watch = client.watch_catalog()
            await asyncio.wait_for(anext(watch), 30)
            process.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            code = await asyncio.wait_for(process.wait(), 60)
            seconds = time.monotonic() - t0
            await watch.aclose()
    finally:
        await _end(process)
    return {"exit_seconds": round(seconds, 3), "exit_code": code, "shutdown_grace": 10}


# --- 8. fuzz ----------------------------------------------------------------------------------


def _mutations(rng: random.Random, valid: bytes, count: int) -> list[bytes]:
    out: list[bytes] = []
    for n in range(count):
        kind = n % 3
        if kind == 0 or not valid:
            out.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))))
        elif kind == 1:
            out.append(valid[: rng.randint(0, max(len(valid) - 1, 0))] + bytes([rng.getrandbits(8)]))
        else:
            flipped = bytearray(valid)
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            out.append(bytes(flipped))
    return out


_DEEP = '{"a":' + "[" * 100_000 + "]" * 100_000 + "}"
BAD_VALUES: list[tuple[str, bytes]] = [
    (
        "/toolscout.mcp_pool.v1.McpPool/CallTool",
        mcp_pool_pb2.CallToolRequest(
            llm_name="fixture__echo", timeout_seconds=float("nan")
        ).SerializeToString(),
    ),
    (
        "/toolscout.mcp_pool.v1.McpPool/CallTool",
        mcp_pool_pb2.CallToolRequest(
            llm_name="fixture__echo", timeout_seconds=float("inf")
        ).SerializeToString(),
    ),
    (
        "/toolscout.mcp_pool.v1.McpPool/CallTool",
        mcp_pool_pb2.CallToolRequest(llm_name="fixture__echo", timeout_seconds=-1).SerializeToString(),
    ),
    (
        "/toolscout.mcp_pool.v1.McpPool/CallTool",
        mcp_pool_pb2.CallToolRequest(llm_name="fixture__echo", arguments_json=_DEEP).SerializeToString(),
    ),
    (
        "/toolscout.mcp_pool.v1.McpPool/CallTool",
        mcp_pool_pb2.CallToolRequest(llm_name="fixture__echo", arguments_json="[1]").SerializeToString(),
    ),
    ("/toolscout.mcp_pool.v1.McpPool/CallTool", mcp_pool_pb2.CallToolRequest().SerializeToString()),
    (
        "/toolscout.mcp_pool.v1.McpPool/ListTools",
        mcp_pool_pb2.ListToolsRequest(servers=["\x00nope"]).SerializeToString(),
    ),
    (
        "/toolscout.discovery.v1.Discovery/SearchTools",
        discovery_pb2.SearchToolsRequest(query="time", max_results=-1).SerializeToString(),
    ),
    (
        "/toolscout.discovery.v1.Discovery/SearchTools",
        discovery_pb2.SearchToolsRequest(arguments_json=_DEEP).SerializeToString(),
    ),
    (
        "/toolscout.discovery.v1.Discovery/SearchTools",
        discovery_pb2.SearchToolsRequest(arguments_json='{"tool_names": "x"}').SerializeToString(),
    ),
    (
        "/toolscout.discovery.v1.Discovery/PlanTools",
        discovery_pb2.PlanToolsRequest(toolset="nope", provider="nope").SerializeToString(),
    ),
]

FUZZED: list[tuple[str, bool, bytes]] = [
    ("/toolscout.mcp_pool.v1.McpPool/ListServers", False, b""),
    (
        "/toolscout.mcp_pool.v1.McpPool/ListTools",
        False,
        mcp_pool_pb2.ListToolsRequest(servers=["fixture"]).SerializeToString(),
    ),
    (
        "/toolscout.mcp_pool.v1.McpPool/CallTool",
        False,
        mcp_pool_pb2.CallToolRequest(
            llm_name="fixture__echo", arguments_json='{"text": "hi"}', timeout_seconds=5
        ).SerializeToString(),
    ),
    (
        "/toolscout.mcp_pool.v1.McpPool/WatchCatalog",
        True,
        mcp_pool_pb2.WatchCatalogRequest(known_version="v").SerializeToString(),
    ),
    (
        "/toolscout.discovery.v1.Discovery/PlanTools",
        False,
        discovery_pb2.PlanToolsRequest(toolset="").SerializeToString(),
    ),
    (
        "/toolscout.discovery.v1.Discovery/SearchTools",
        False,
        discovery_pb2.SearchToolsRequest(query="echo text").SerializeToString(),
    ),
    (
        "/toolscout.discovery.v1.Discovery/GetManifest",
        False,
        discovery_pb2.GetManifestRequest().SerializeToString(),
    ),
]


async def _send(channel: grpc.aio.Channel, method: str, streaming: bool, payload: bytes) -> str:
    try:
        if streaming:
            call = channel.unary_stream(method, request_serializer=None, response_deserializer=None)(
                payload, timeout=5
            )
            async for _ in call:
                call.cancel()
                break
        else:
            await channel.unary_unary(method, request_serializer=None, response_deserializer=None)(
                payload, timeout=10
            )
    except grpc.aio.AioRpcError as err:
        return str(err.code().name)
    except asyncio.CancelledError:
        return "OK"
    return "OK"


async def fuzz(per_method: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)  # reproducible fuzz input, not cryptography
    config = parse_config(
        {
            "servers": {"fixture": misbehaving_config(defer_loading=True)},
            "tool_discovery": {"enabled": True},
            "toolscout": {"pool": {"max_result_bytes": 4096}},
        },
        base_dir=REPO_ROOT,
    )
    pool = await build_pool(config, listen="127.0.0.1:0", metrics_port=-1)
    discovery = await build_discovery(config, listen="127.0.0.1:0", metrics_port=-1, pool_target=pool.address)
    by_method: dict[str, Counter[str]] = {}
    total: Counter[str] = Counter()
    sent = 0
    try:
        targets = {"McpPool": pool.address, "Discovery": discovery.address}
        channels = {name: grpc.aio.insecure_channel(address) for name, address in targets.items()}
        for channel in channels.values():
            await asyncio.wait_for(channel.channel_ready(), 30)
        jobs: list[tuple[str, bool, bytes]] = [
            (method, streaming, payload)
            for method, streaming, valid in FUZZED
            for payload in _mutations(rng, valid, per_method)
        ]
        jobs += [(method, False, payload) for method, payload in BAD_VALUES]
        for method, streaming, payload in jobs:
            service = "Discovery" if ".discovery." in method else "McpPool"
            code = await _send(channels[service], method, streaming, payload)
            by_method.setdefault(method.rsplit("/", 1)[-1], Counter())[code] += 1
            total[code] += 1
            sent += 1
        for channel in channels.values():
            await channel.close()
    finally:
        await discovery.stop(0.5)
        await pool.stop(0.5)
    return {
        "requests": sent,
        "by_status": dict(total.most_common()),
        "by_method": {m: dict(c.most_common()) for m, c in sorted(by_method.items())},
        "bad_value_cases": len(BAD_VALUES),
        "seed": seed,
    }


# --- 10. a hung embedder: the circuit breaker (issue 19 §3) ----------------------------------


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 2),
    }


async def embedder_hang(tools: int, searches: int, concurrency: int, breaker: bool) -> dict[str, Any]:
    """Hybrid SearchTools through discovery's gRPC server (client library) over ``tools`` synthetic
    tools, with the openai SDK against a local /v1/embeddings server that then hangs and recovers.

    ``concurrency`` clients search in a loop, each query new (the query-vector cache never hits).
    Phases: healthy (``searches`` searches), the endpoint hanging (until the breaker has opened and
    ``searches`` more were answered; without ``breaker``, ``searches`` in all), the endpoint back
    (until the searches are hybrid again). Times are from the moment of the change.
    """
    from prometheus_client import CollectorRegistry
    from toolscout.discovery.v1 import discovery_pb2_grpc

    from discovery_svc.embeddings import OpenAICompatibleEmbedder
    from discovery_svc.engine import DiscoveryEngine
    from discovery_svc.hybrid_stage import HybridStage
    from discovery_svc.metrics import DiscoveryMetrics
    from discovery_svc.servicer import DiscoveryServicer
    from tests.support.discovery_catalogs import catalog, synthetic_tools
    from tests.support.fake_embeddings import FakeEmbeddings
    from toolscout_kit.server import ServiceBinding, start_server

    registry = CollectorRegistry()
    metrics = DiscoveryMetrics(registry)
    settings = parse_config({}).toolscout.search.embedder  # the defaults: query_timeout, breaker
    async with FakeEmbeddings(dim=64) as fake:
        embedder = OpenAICompatibleEmbedder(
            base_url=fake.base_url, model="bench", query_timeout=settings.query_timeout, max_retries=0
        )
        stage = HybridStage(
            embedder,
            metrics=metrics,
            query_timeout=settings.query_timeout,
            breaker_failures=settings.breaker_failures if breaker else 10**9,
            breaker_probe_interval=settings.breaker_probe_interval,
        )
        engine = DiscoveryEngine(parse_config({}), metrics=metrics, hybrid=stage)
        engine.set_catalog(catalog(synthetic_tools(tools)))
        await engine.warm()
        await asyncio.wait_for(engine.wait_hybrid_ready(), 120)
        config = parse_config({})
        running = await start_server(
            [
                ServiceBinding(
                    "toolscout.discovery.v1.Discovery",
                    discovery_pb2_grpc.add_DiscoveryServicer_to_server,
                    DiscoveryServicer(engine),
                )
            ],
            config.toolscout.discovery,
            config.toolscout.security,
            registry=registry,
            listen="127.0.0.1:0",
            metrics_port=-1,
        )

        def mode() -> str:
            return (
                "hybrid"
                if registry.get_sample_value("toolscout_discovery_search_mode_active", {"mode": "hybrid"})
                else "bm25"
            )

        counter = iter(range(10**9))
        timeline: list[tuple[float, float, str]] = []  # (started, seconds, mode after it)

        async def search(client: tc.AsyncDiscoveryClient) -> None:
            started = time.monotonic()
            await client.search_tools(f"create invoice record {next(counter)}", deadline=30)
            timeline.append((started, time.monotonic() - started, mode()))

        async def phase(
            client: tc.AsyncDiscoveryClient, done: Callable[[], bool]
        ) -> list[tuple[float, float, str]]:
            first = len(timeline)

            async def worker() -> None:
                while not done():
                    await search(client)

            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return timeline[first:]

        try:
            async with tc.AsyncDiscoveryClient.connect(running.address) as client:
                healthy = await phase(client, lambda: len(timeline) >= searches)
                hang_at = time.monotonic()
                fake.hold = asyncio.Event()
                opened: list[float] = []

                def hung_enough() -> bool:
                    if mode() == "bm25" and not opened:
                        opened.append(time.monotonic())
                    after = [t for t in timeline if opened and t[0] >= opened[0]]
                    return len(after) >= searches if breaker else len(timeline) >= 2 * searches

                hung = await phase(client, hung_enough)
                hold, fake.hold = fake.hold, None
                back_at = time.monotonic()
                hold.set()
                recovered: list[float] = []

                def hybrid_again() -> bool:
                    if mode() == "hybrid" and not recovered:
                        recovered.append(time.monotonic())
                    return bool(recovered) or time.monotonic() - back_at > 60

                await phase(client, hybrid_again)
        finally:
            await running.stop(0)
            await engine.close()
    result: dict[str, Any] = {
        "tools": tools,
        "concurrency": concurrency,
        "query_timeout_s": settings.query_timeout,
        "healthy_hybrid": _ms([t[1] for t in healthy]),
    }
    if breaker:
        result["breaker"] = {
            "failures": settings.breaker_failures,
            "probe_interval_s": settings.breaker_probe_interval,
        }
        result["hung_before_breaker_opened"] = _ms([t[1] for t in hung if t[0] < opened[0]])
        result["hung_after_breaker_opened"] = _ms([t[1] for t in hung if t[0] >= opened[0]])
        result["seconds_to_bm25_after_hang"] = round(opened[0] - hang_at, 2)
        result["seconds_to_hybrid_after_return"] = round(recovered[0] - back_at, 2) if recovered else None
    else:
        result["hung_without_breaker"] = _ms([t[1] for t in hung])
    return result


# --- issue 19: processes, "not sent", list_changed, the write lock ------------------------------
#
# Every pool here is `toolscout serve pool` in its own process (unsharded, or three `--shard K/3`),
# except the list_changed and write-lock figures, which measure the pool in process.


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50": None, "max": None}
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50": round(statistics.median(ordered), 3),
        "max": round(ordered[-1], 3),
    }


async def _poll(check: Callable[[], Any], within: float, every: float = 0.02) -> bool:
    """Polls ``check`` (sync or async; another process gives no event to wait on) until true or
    ``within`` passes."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return True
        await asyncio.sleep(every)
    return False


def _owner_of(stack: Any, server: str) -> int:
    if stack.unsharded:
        return 0
    config = parse_config(stack.document, base_dir=stack.tmp)
    return placement_for(config, stack.count).owners(server)[0]


async def pool_process_killed_mid_call(workdir: Path, shards: int, calls: int) -> dict[str, Any]:
    """The pool process (or the shard that runs the server) SIGKILLed while a write is in flight.

    Through the sharded client (the orchestrator's path), then through a Chat with a real
    orchestrator and the fake provider: executions of the tool, what the caller got, and whether
    the LLM read "may or may not have run" without transport text.
    """
    tmp = workdir / f"killed-{shards}-{time.monotonic_ns()}"
    tmp.mkdir()
    log = tmp / "slow.calls"

    def respond(request: RecordedRequest) -> Reply:
        if request.body["messages"][-1]["role"] == "user":
            return Reply.calls(ScriptedCall("slow__hang", {}))
        return Reply.answer("done")

    def executed() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    def beyond(count: int) -> Callable[[], bool]:
        return lambda: executed() > count

    replies: Counter[str] = Counter()
    executions: list[int] = []
    chat_texts: list[str] = []
    async with FakeProvider() as fake:
        fake.responder = respond
        document = {
            "clients": {"oai": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "k"}},
            "models": {"gpt": {"client": "oai", "model": "gpt-test"}},
            "servers": {"slow": misbehaving_config("--call-log", str(log)), "other": misbehaving_config()},
        }
        async with running_sharded_stack(tmp, document, shards=shards, orchestrator=True) as stack:
            owner = _owner_of(stack, "slow")
            targets = [stack.shard_address(k) for k in range(max(shards, 1))]
            async with tc.AsyncShardedPoolClient.connect(targets) as pool:
                for n in range(calls):
                    if n:
                        await stack.start_pool(owner)
                    before = executed()
                    call = asyncio.ensure_future(pool.call_tool("slow__hang", {}, deadline=60))
                    await _poll(beyond(before), 60)
                    await stack.kill(stack.pools[owner])
                    try:
                        await call
                        replies["OK"] += 1
                    except tc.ToolscoutClientError as err:
                        replies[f"{type(err).__name__} ({err.code.name})"] += 1
                    # Anything replayed would have reached the (one) server by now: the call is over.
                    executions.append(executed() - before)
            await stack.start_pool(owner)
            assert stack.orchestrator is not None
            async with tc.AsyncOrchestratorClient.connect(stack.orchestrator.address) as orchestrator:
                before = executed()
                chat = asyncio.ensure_future(orchestrator.chat("run it", model="gpt", deadline=60))
                await _poll(beyond(before), 60)
                await stack.kill(stack.pools[owner])
                result = await chat
                chat_executions = executed() - before
            chat_texts = [m["content"] for m in fake.requests[-1].body["messages"] if m["role"] == "tool"]
    transport = ("Socket closed", "Stream removed", "Connection reset", "unavailable", "ipv4:")
    return {
        "topology": "unsharded serve pool"
        if shards == 0
        else f"{shards} shards (serve pool --shard K/{shards})",
        "client_calls": calls,
        "client_executions": executions,
        "client_replies": dict(replies),
        "chat_executions": chat_executions,
        "chat_llm_told_may_or_may_not_have_run": any("may or may not have run" in t for t in chat_texts),
        "chat_llm_saw_transport_text": any(w in t for t in chat_texts for w in transport),
        "chat_answer": result.messages[-1].content,
    }


async def _serve_pool(
    workdir: Path, servers: dict[str, Any], name: str, *, up: bool = False
) -> tuple[asyncio.subprocess.Process, str]:
    """``toolscout serve pool`` (or, with ``up``, the whole ``toolscout up`` stack) on free ports."""
    services = ("pool", "discovery", "orchestrator") if up else ("pool",)
    ports = [free_port() for _ in services]
    settings = {
        svc: {"listen": f"127.0.0.1:{port}", "metrics_port": -1}
        for svc, port in zip(services, ports, strict=True)
    }
    path = workdir / f"{name}.json"
    path.write_text(json.dumps({"servers": servers, "toolscout": settings}))
    command = ["up", "-c", str(path), "--json"] if up else ["serve", "pool", "-c", str(path)]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolscout_cli", *command,
        cwd=REPO_ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    await _serving(ports[0])
    return process, f"127.0.0.1:{ports[0]}"


def _plain_and_wrapped(workdir: Path) -> dict[str, Any]:
    server = f"{sys.executable} {MISBEHAVING_SERVER}"
    return {
        "plain": misbehaving_config("--pid-file", str(workdir / "plain.pid")),
        # The subshell leaves an orphaned `sleep` to the pool at every start, too.
        "wrapped": {
            "command": "bash",
            "args": ["-c", f"(sleep 0.3 &); {server} --pid-file {workdir / 'wrapped.pid'}; exit $?"],
        },
    }


def _leader(workdir: Path, name: str) -> int:
    server = int((workdir / f"{name}.pid").read_text().split()[0])
    return int(psutil.Process(server).ppid()) if name == "wrapped" else server


def _zombies(pid: int) -> int:
    count = 0
    for child in psutil.Process(pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            count += child.status() == psutil.STATUS_ZOMBIE
    return count


async def _kill_leader_until_ready(pool: tc.AsyncPoolClient, workdir: Path, name: str) -> float:
    before = {s.name: s.restarts for s in await pool.list_servers()}[name]
    os.kill(_leader(workdir, name), signal.SIGKILL)
    killed = time.monotonic()

    async def back() -> bool:
        status = {s.name: s for s in await pool.list_servers()}[name]
        return status.state == "ready" and status.restarts > before

    await _poll(back, 60)
    return time.monotonic() - killed


async def _timed_stop(
    process: asyncio.subprocess.Process, sig: int = signal.SIGTERM
) -> tuple[set[int], float]:
    """``sig`` → exit: the process's descendants just before, and the seconds it took."""
    tree = {c.pid for c in psutil.Process(process.pid).children(recursive=True)}
    process.send_signal(sig)
    started = time.monotonic()
    await asyncio.wait_for(process.wait(), 60)
    return tree, time.monotonic() - started


async def zombies_and_stop(workdir: Path, restarts: int, *, up: bool = False) -> dict[str, Any]:
    """``restarts`` leader kills of a plain and of a `bash -c`-wrapped server in quick succession,
    then the zombies left and the idle stop (SIGTERM → exit; ``toolscout up``: SIGINT, Ctrl-C)
    with the processes left after it."""
    tmp = workdir / f"zombies-{time.monotonic_ns()}"
    tmp.mkdir()
    process, address = await _serve_pool(tmp, _plain_and_wrapped(tmp), "zombies", up=up)
    ready: dict[str, list[float]] = {"plain": [], "wrapped": []}
    try:
        async with tc.AsyncPoolClient.connect(address) as pool:
            for name, times in ready.items():
                for _ in range(restarts):
                    times.append(round(await _kill_leader_until_ready(pool, tmp, name), 3))
        zombies_at_once = _zombies(process.pid)
        await asyncio.sleep(1.0)  # the reaper sweeps every 0.5 s
        zombies_after_1s = _zombies(process.pid)
        tree, stop_seconds = await _timed_stop(process, signal.SIGINT if up else signal.SIGTERM)
    finally:
        await _end(process)
    return {
        "process": "toolscout up" if up else "toolscout serve pool",
        "restarts": {name: len(times) for name, times in ready.items()},
        "zombies_when_last_ready": zombies_at_once,
        "zombies_1s_later": zombies_after_1s,
        "kill_to_ready_seconds_in_a_row": ready,
        "idle_stop_seconds": round(stop_seconds, 3),
        "processes_left_after_stop": len(_alive(tree)),
    }


async def leader_kill_to_ready(workdir: Path, kills: int) -> dict[str, Any]:
    """Leader kill → READY with a fresh backoff: each kill after the session ran 10 s (stable)."""
    tmp = workdir / f"leader-{time.monotonic_ns()}"
    tmp.mkdir()
    process, address = await _serve_pool(tmp, _plain_and_wrapped(tmp), "leader")
    out: dict[str, Any] = {}
    try:
        async with tc.AsyncPoolClient.connect(address) as pool:
            for name in ("plain", "wrapped"):
                times = []
                for _ in range(kills):
                    await asyncio.sleep(10.5)  # a session this old counts as stable: no growing backoff
                    times.append(await _kill_leader_until_ready(pool, tmp, name))
                out[name] = _quantiles(times)
    finally:
        await _end(process)
    return out


async def busy_stop(workdir: Path) -> dict[str, Any]:
    """SIGTERM with a write in flight (default shutdown_grace 10 s): exit time and the caller's status."""
    tmp = workdir / f"busy-{time.monotonic_ns()}"
    tmp.mkdir()
    log = tmp / "calls"
    servers = {"fixture": misbehaving_config("--call-log", str(log)), **_plain_and_wrapped(tmp)}
    process, address = await _serve_pool(tmp, servers, "busy")
    reply = ""
    try:
        async with tc.AsyncPoolClient.connect(address) as pool:
            call = asyncio.ensure_future(pool.call_tool("fixture__hang", {}, deadline=60))
            await _poll(lambda: log.exists() and bool(log.read_text()), 30)
            tree, stop_seconds = await _timed_stop(process)
            try:
                await call
                reply = "OK"
            except tc.ToolscoutClientError as err:
                reply = f"{type(err).__name__} ({err.code.name})"
    finally:
        await _end(process)
    return {
        "busy_stop_seconds": round(stop_seconds, 3),
        "shutdown_grace": 10,
        "caller_got": reply,
        "executions": len(log.read_text().splitlines()),
        "processes_left_after_stop": len(_alive(tree)),
    }


LIST_CHANGED_CASES: dict[str, tuple[list[str], str]] = {
    # name -> (protocol fixture flags, the way the server announces the change)
    "2026-07-28 listen stream (ctx.notify_tools_changed)": (["--era", "modern", "--announce", "bus"], "bus"),
    "2026-07-28 session notice (ctx.session.send_tool_list_changed)": (
        ["--era", "dual", "--announce", "session"],
        "session",
    ),
    **{
        f"{v} session notice": (["--era", "legacy", "--versions", v, "--announce", "session"], "session")
        for v in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    },
}


def _listed(pool: McpPool, server: str, tool: str) -> Callable[[], bool]:
    return lambda: pool.catalog.lookup(server, tool) is not None


async def list_changed_latency(workdir: Path, rounds: int) -> dict[str, Any]:
    """A tool added by a real SDK server (``MCPServer``) → in the pool's catalog, per revision.

    The catalog TTL and the servers' ``ttlMs`` are an hour: only the change can bring the tool in.
    Timed from the moment the add_tool call returned (the server has changed its list).
    """
    servers = {
        f"s{i}": {
            "command": sys.executable,
            "args": [str(PROTOCOL_SERVER), *flags, "--api", "mcpserver", "--ttl-ms", "3600000"],
        }
        for i, (flags, _) in enumerate(LIST_CHANGED_CASES.values())
    }
    out: dict[str, Any] = {}
    async with _pool(servers, tool_cache_ttl=3600) as pool:
        for i, label in enumerate(LIST_CHANGED_CASES):
            server = f"s{i}"
            times: list[float] = []
            for n in range(rounds):
                name = f"added_{n}"
                await pool.call_tool(server=server, tool="add_tool", arguments={"name": name})
                t0 = time.monotonic()
                try:
                    await pool.wait_until(_listed(pool, server, name), 10)
                    times.append(time.monotonic() - t0)
                except TimeoutError:
                    times.append(float("inf"))
            status = pool.server_status(server)
            out[label] = {
                "negotiated": status.protocol_version,
                "seconds": _quantiles(times),
            }
    return out


async def list_changed_notices(workdir: Path, rounds: int) -> dict[str, Any]:
    """Where a change notice gets lost: a session negotiated as the pool does (``open_connection``),
    add_tool called on it, and the time until the notice (a ``tools_changed`` event from the
    session or the listen stream) arrives — or that none did within 2 s. No re-listing here."""
    out: dict[str, Any] = {}
    for label, (flags, _) in LIST_CHANGED_CASES.items():
        config = StdioServerConfig(
            command=sys.executable, args=[str(PROTOCOL_SERVER), *flags, "--api", "mcpserver"]
        )
        arrived = asyncio.Event()

        def on_event(kind: str, _detail: str, arrived: asyncio.Event = arrived) -> None:
            if kind == "tools_changed":
                arrived.set()

        times: list[float] = []
        missed = 0
        async with open_connection(
            config, on_event, base_dir=workdir, on_stderr=lambda _line: None, max_line_bytes=1 << 20
        ) as conn:
            negotiated = conn.protocol_version
            for n in range(rounds):
                arrived.clear()
                t0 = time.monotonic()
                await conn.session.call_tool("add_tool", {"name": f"notice_{n}"})
                try:
                    await asyncio.wait_for(arrived.wait(), 2.0)
                    times.append(time.monotonic() - t0)
                except TimeoutError:
                    missed += 1
        out[label] = {"negotiated": negotiated, "notices_missed": missed, "seconds": _quantiles(times)}
    return out


async def serialized_wait(calls: int, seconds: float) -> dict[str, Any]:
    """``calls`` concurrent calls of an unannotated 100 ms tool (the example text server's ``wait``),
    with the default ``serialize_writes: true`` and with ``false``: wall time and lock waits."""
    out: dict[str, Any] = {}
    for serialize in (True, False):
        registry = CollectorRegistry()
        entry = {"command": sys.executable, "args": [str(REPO_ROOT / "examples" / "servers" / "text.py")]}
        pool = McpPool(
            _config({"text": {**entry, "serialize_writes": serialize, "max_concurrency": calls}}),
            metrics=PoolMetrics(registry),
        )
        await pool.start(wait=60)
        try:
            t0 = time.perf_counter()
            await asyncio.gather(
                *(
                    pool.call_tool(server="text", tool="wait", arguments={"seconds": seconds})
                    for _ in range(calls)
                )
            )
            wall = time.perf_counter() - t0
        finally:
            await pool.stop()
        count = registry.get_sample_value("toolscout_pool_write_lock_wait_seconds_count", {"server": "text"})
        total = registry.get_sample_value("toolscout_pool_write_lock_wait_seconds_sum", {"server": "text"})
        out[f"serialize_writes_{str(serialize).lower()}"] = {
            "wall_seconds": round(wall, 3),
            "lock_waits_recorded": int(count or 0),
            "lock_wait_mean_seconds": round(total / count, 3) if count and total is not None else None,
            "lock_wait_total_seconds": round(total, 3) if total is not None else None,
        }
    return {"calls": calls, "tool_seconds": seconds, **out}


# --- main -------------------------------------------------------------------------------------


async def main(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("executions_per_killed_call", lambda: executions_per_killed_call(workdir, args.killed_calls)),
        ("remote_outage", lambda: remote_outage(args.outage)),
        ("writes_lost_default", lambda: writes_lost(workdir, serialize=True)),
        ("writes_lost_serialize_writes_false", lambda: writes_lost(workdir, serialize=False)),
        ("orphans", lambda: orphans(workdir)),
        ("hang_detection", lambda: hang_detection(workdir)),
        ("large_results", lambda: large_results(args.sizes)),
        ("shutdown_with_watch_open", lambda: shutdown_with_watch(workdir)),
        ("fuzz", lambda: fuzz(args.fuzz, args.seed)),
        ("embedder_hang_breaker", lambda: embedder_hang(args.embedder_tools, args.searches, 4, breaker=True)),
        ("embedder_hang_no_breaker", lambda: embedder_hang(args.embedder_tools, 8, 4, breaker=False)),
        # issue 19: processes, "not sent", list_changed, the write lock
        (
            "killed_unsharded_pool_mid_call",
            lambda: pool_process_killed_mid_call(workdir, 0, args.killed_calls),
        ),
        ("killed_shard_mid_call", lambda: pool_process_killed_mid_call(workdir, 3, args.killed_calls)),
        ("zombies_and_idle_stop", lambda: zombies_and_stop(workdir, args.restarts)),
        ("up_zombies_and_idle_stop", lambda: zombies_and_stop(workdir, args.restarts, up=True)),
        ("leader_kill_to_ready", lambda: leader_kill_to_ready(workdir, args.leader_kills)),
        ("busy_stop", lambda: busy_stop(workdir)),
        ("list_changed_notices", lambda: list_changed_notices(workdir, args.list_changed_rounds)),
        ("list_changed_latency", lambda: list_changed_latency(workdir, args.list_changed_rounds)),
        ("serialized_call_wait", lambda: serialized_wait(32, 0.1)),
    ]
    if args.only:
        # Names given as several arguments or comma-separated.
        wanted = {name for arg in args.only for name in arg.split(",") if name}
        unknown = wanted - {name for name, _ in steps}
        if unknown:
            raise SystemExit(f"unknown steps: {', '.join(sorted(unknown))}")
        steps = [(name, step) for name, step in steps if name in wanted]
    figures: dict[str, Any] = {}
    for name, step in steps:
        started = time.monotonic()
        print(f"[faults] {name} ...", file=sys.stderr, flush=True)
        figures[name] = await step()
        print(
            f"[faults] {name}: {json.dumps(figures[name])} ({time.monotonic() - started:.1f}s)",
            file=sys.stderr,
            flush=True,
        )
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage", type=float, default=15.0, help="seconds the remote server stays down")
    parser.add_argument("--fuzz", type=int, default=100, help="fuzzed payloads per method")
    parser.add_argument("--killed-calls", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000_000, 20_000_000, 50_000_000])
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="shorter outage, fewer payloads (a smoke run)")
    parser.add_argument("--log-level", default="WARNING", help="log level of the in-process pools")
    parser.add_argument("--embedder-tools", type=int, default=1000, help="catalog size of the embedder hang")
    parser.add_argument("--searches", type=int, default=200, help="searches per phase of the embedder hang")
    parser.add_argument("--restarts", type=int, default=6, help="leader kills per server (plain, wrapped)")
    parser.add_argument("--leader-kills", type=int, default=3, help="spaced leader kills per server")
    parser.add_argument("--list-changed-rounds", type=int, default=5)
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="run only these steps (space- or comma-separated); keep the others",
    )
    args = parser.parse_args()
    if args.quick:
        args.outage, args.fuzz, args.killed_calls, args.sizes = 5.0, 20, 1, [10_000_000]
        args.leader_kills, args.list_changed_rounds = 1, 2
    configure_logging(args.log_level)
    with tempfile.TemporaryDirectory() as tmp:
        figures = asyncio.run(main(args, Path(tmp)))
    result = {
        "command": " ".join(["uv run --frozen python bench/faults.py", *sys.argv[1:]]),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        },
        **figures,
    }
    if args.only and RESULTS.exists():
        # Only these figures are new: each carries its own command and machine; the rest stay.
        result = {
            **json.loads(RESULTS.read_text()),
            **{
                name: {**figures[name], "command": result["command"], "machine": result["machine"]}
                for name in figures
            },
        }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
