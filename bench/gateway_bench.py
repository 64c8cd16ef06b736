"""The MCP front door measured as an MCP host sees it, side by side with FastMCP 4's tool search.

    uv run --frozen python bench/gateway_bench.py [--quick] [--load-seconds 60] [--sessions 200]
        [--queries 300] [--calls 500] [--no-fastmcp] [--only calls]

Every figure goes through MCP over HTTP on 127.0.0.1 with the real services:

* **Tokens on a model's first call**: the tool definitions an MCP host hands its model when it lists
  tools — every server connected directly (every tool), the gateway's meta endpoint (eager tools +
  ``search_tools`` + ``call_tool``), its progressive endpoint (eager tools + ``search_tools``) and
  FastMCP 4 with ``BM25SearchTransform`` — on ``livemcpbench`` (527 real tools) and on the
  1,000-server fleet of bench/mcp_fleet.py (50,000 tools), every server deferred. Counted with o200k
  the way discovery counts a definition (name, description, parameters). And over a scripted
  3-search session: whether ``tools/list`` stayed byte-identical (meta must; progressive grows).
* **search_tools latency** through the gateway (meta, 2026-07-28 stateless POSTs) at 5,000 and
  50,000 tools of the fleet (BM25), p50/p99, beside discovery's ``SearchTools`` over gRPC alone.
* **call_tool latency the gateway adds**: ``call_tool`` through the gateway (pool and discovery as
  their own processes) vs the same tool called straight on the MCP server over streamable HTTP
  (``examples/servers/text.py``), interleaved, p50/p99: a read-only tool (``reverse``) and an
  unannotated one (``wait`` 0 s), each over raw HTTP posts and with the ``mcp`` SDK's client.
  ``--only calls`` runs just this part (bench/results/gateway_calls.json).
* **Load**: ``--sessions`` concurrent MCP sessions for ``--load-seconds`` each doing search + call:
  meta (stateless clients) and progressive (sessions of the handshake revision), errors, p99, and
  the gateway process's RSS per session.
* **FastMCP 4** (``fastmcp==4.1.2`` in an isolated environment, bench/_baselines/fastmcp_gateway.py)
  on the same catalogs: first-call tokens, ``search_tools`` latency, and R@5 on the five shared data
  sets through both MCP endpoints (``--recall-queries`` per set, the same sample for both; a query
  longer than ``search_tools``' 500-character limit is cut there for both).

Results are printed and saved to bench/results/gateway.json (plots: bench/plots.py). The machine's
load average is recorded beside the figures: wall-clock latencies on a shared 2-core machine
include other processes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from mcp_fleet import deal, load_catalogue, server_name  # noqa: E402
from retrieval import load_tools, read_jsonl, score  # noqa: E402
from toolscout.client import AsyncDiscoveryClient  # noqa: E402
from toolscout.discovery.v1 import discovery_pb2_grpc  # noqa: E402

from discovery_svc.catalog import Catalog, ParsedTool  # noqa: E402
from discovery_svc.engine import DiscoveryEngine  # noqa: E402
from discovery_svc.servicer import DiscoveryServicer  # noqa: E402
from discovery_svc.tokens import TokenCounter  # noqa: E402
from mcp_gateway_svc.server import build_server as build_gateway  # noqa: E402
from mcp_pool_svc.naming import NameTable  # noqa: E402
from toolscout_kit.config import ToolscoutConfig, parse_config  # noqa: E402
from toolscout_kit.server import ServiceBinding, start_server  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
RESULTS = BENCH / "results" / "gateway.json"
DATASETS = ("bfcl", "toolbench", "sealtools", "metatool", "restbench")
FASTMCP = ["fastmcp==4.1.2"]
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
_ACCEPT = "application/json, text/event-stream"


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _summary(ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(_pct(ms, 0.5), 3),
        "p99_ms": round(_pct(ms, 0.99), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "n": len(ms),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- MCP over raw HTTP (the least client overhead, the same for every server measured) ----------


def _modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "accept": _ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "gateway-bench", "version": "1"},
}


def _answer(response: httpx2.Response) -> dict[str, Any]:
    text = response.text
    if text.startswith(("event:", "data:", ":")):
        payloads = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        body: dict[str, Any] = json.loads(payloads[-1])
    else:
        body = json.loads(text)
    return body


async def modern_call(
    client: httpx2.AsyncClient, url: str, method: str, params: dict[str, Any], *, request_id: int = 1
) -> dict[str, Any]:
    """One 2026-07-28 request (no session); the JSON-RPC answer."""
    name = params.get("name") if method == "tools/call" else None
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": _ENVELOPE}}
    response = await client.post(url, json=body, headers=_modern_headers(method, name))
    return _answer(response)


class LegacySession:
    """A session of the handshake revision over raw HTTP (initialize, then Mcp-Session-Id)."""

    def __init__(self, client: httpx2.AsyncClient, url: str) -> None:
        self._client = client
        self._url = url
        self._id = 0
        self.session = ""

    def _headers(self) -> dict[str, str]:
        headers = {"accept": _ACCEPT, "content-type": "application/json", "mcp-protocol-version": LEGACY}
        if self.session:
            headers["mcp-session-id"] = self.session
        return headers

    async def open(self) -> None:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "gateway-bench", "version": "1"},
            },
        }
        response = await self._client.post(self._url, json=init, headers=self._headers())
        response.raise_for_status()
        self.session = response.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self._client.post(self._url, json=note, headers=self._headers())

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        return _answer(await self._client.post(self._url, json=body, headers=self._headers()))

    async def close(self) -> None:
        with contextlib.suppress(httpx2.HTTPError):
            await self._client.delete(self._url, headers=self._headers())


# --- catalogs ----------------------------------------------------------------------------------


def _tools_from_rows(rows: Sequence[dict[str, Any]]) -> list[ParsedTool]:
    names = NameTable((r["server"], r["name"]) for r in rows)
    return [
        ParsedTool.create(
            server=r["server"],
            name=r["name"],
            llm_name=names.name_for(r["server"], r["name"]),
            description=r.get("description") or "",
            input_schema=r.get("input_schema") if isinstance(r.get("input_schema"), dict) else None,
        )
        for r in rows
    ]


def livemcp_rows() -> list[dict[str, Any]]:
    return read_jsonl(DATA / "livemcpbench.tools.jsonl")


def fleet_rows(servers: int, per_server: int = 50) -> list[dict[str, Any]]:
    """The tools of bench/mcp_fleet.py's fleet of ``servers`` servers (the same deal)."""
    dealt = deal(load_catalogue(DATA), servers, per_server)
    return [
        {
            "server": server_name(i),
            "name": t.name,
            "description": t.description,
            "input_schema": t.input_schema,
        }
        for i, tools in enumerate(dealt)
        for t in tools
    ]


def _defer_all(**gateway: Any) -> ToolscoutConfig:
    return parse_config(
        {"tool_discovery": {"enabled": True, "defer_all": True}, "toolscout": {"gateway": gateway}}
    )


@contextlib.asynccontextmanager
async def catalog_gateway(tools: list[ParsedTool], **gateway: Any) -> AsyncIterator[tuple[str, str]]:
    """Discovery (in process, the catalog installed directly) and the gateway in front of it:
    ``(gateway URL, discovery address)``. Nothing here calls tools, so there is no pool."""
    config = _defer_all(**gateway)
    engine = DiscoveryEngine(config)
    engine.set_catalog(Catalog("bench", tools))
    await engine.warm()
    binding = ServiceBinding(
        "toolscout.discovery.v1.Discovery",
        discovery_pb2_grpc.add_DiscoveryServicer_to_server,
        DiscoveryServicer(engine),
        endless_streams=("WatchPlan",),
    )
    discovery = await start_server(
        [binding],
        config.toolscout.discovery,
        config.toolscout.security,
        listen="127.0.0.1:0",
        metrics_port=-1,
    )
    gw = await build_gateway(
        config,
        listen="127.0.0.1:0",
        metrics_port=-1,
        discovery_target=discovery.address,
        pool_target="127.0.0.1:9",
    )
    try:
        yield gw.url, discovery.address
    finally:
        await gw.stop(0.5)
        await discovery.stop(0.5)


# --- tokens ------------------------------------------------------------------------------------

_COUNTER = TokenCounter()
_ENC = _COUNTER.encoding_for("openai")


def _definition_tokens(tools: Sequence[dict[str, Any]]) -> int:
    """o200k tokens of MCP tool definitions as discovery counts one (name, description, parameters)."""
    return sum(
        _COUNTER.count_definition(
            t["name"], t.get("description") or "", json.dumps(t.get("inputSchema") or {}), _ENC
        )
        for t in tools
    )


async def _listed(client: httpx2.AsyncClient, url: str) -> tuple[list[dict[str, Any]], bytes]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": _ENVELOPE}}
    response = await client.post(url, json=body, headers=_modern_headers("tools/list"))
    tools: list[dict[str, Any]] = _answer(response)["result"]["tools"]
    return tools, response.content


async def _legacy_listed(client: httpx2.AsyncClient, url: str) -> list[dict[str, Any]]:
    session = LegacySession(client, url)
    await session.open()
    try:
        tools: list[dict[str, Any]] = (await session.call("tools/list", {}))["result"]["tools"]
    finally:
        await session.close()
    return tools


async def bench_tokens(rows: list[dict[str, Any]], fastmcp_url: str | None = None) -> dict[str, Any]:
    tools = _tools_from_rows(rows)
    direct = sum(_COUNTER.count_tool(t, _ENC) for t in tools)
    out: dict[str, Any] = {"tools": len(tools), "servers": len({t.server for t in tools}), "direct": direct}
    async with httpx2.AsyncClient(timeout=60) as client:
        async with catalog_gateway(tools) as (url, _):
            meta, _ = await _listed(client, url)
        async with catalog_gateway(tools, mode="progressive") as (url, _):
            progressive = await _legacy_listed(client, url)
        out["meta"] = _definition_tokens(meta)
        out["progressive"] = _definition_tokens(progressive)
        out["meta_tools"] = [t["name"] for t in meta]
    if fastmcp_url is not None:
        async with httpx2.AsyncClient(timeout=60) as client:
            listed, _ = await _listed(client, fastmcp_url)
            out["fastmcp"] = _definition_tokens(listed)
    for key in ("meta", "progressive", "fastmcp"):
        if key in out:
            out[f"{key}_share"] = round(out[key] / direct, 5)
    return out


async def bench_stable_list(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """tools/list before and after each of 3 searches: meta stays byte-identical, progressive grows."""
    tools = _tools_from_rows(rows)
    queries = ["search the web for news", "send an email to a contact", "read a file from disk"]
    async with httpx2.AsyncClient(timeout=60) as client:
        async with catalog_gateway(tools) as (url, _):
            meta_lists = [(await _listed(client, url))[1]]
            for query in queries:
                await modern_call(
                    client, url, "tools/call", {"name": "search_tools", "arguments": {"query": query}}
                )
                meta_lists.append((await _listed(client, url))[1])
        async with catalog_gateway(tools, mode="progressive") as (url, _):
            sizes = await _progressive_sizes(client, url, queries)
    return {
        "searches": len(queries),
        "meta_identical": len(set(meta_lists)) == 1,
        "meta_bytes": len(meta_lists[0]),
        "progressive_tools_listed": sizes,
    }


async def bench_all_list(rows: list[dict[str, Any]], runs: int) -> dict[str, Any]:
    """An ``all`` endpoint over the catalog: a new session (handshake revision: initialize, then
    the first ``tools/list`` page) and a 2026-07-28 first page, ``runs`` times each; then every
    page followed to the end once."""
    tools = _tools_from_rows(rows)
    session_ms: list[float] = []
    modern_ms: list[float] = []
    async with httpx2.AsyncClient(timeout=120) as client, catalog_gateway(tools, mode="all") as (url, _):
        first: dict[str, Any] = {}
        for i in range(runs + 3):
            t0 = time.perf_counter()
            session = LegacySession(client, url)
            await session.open()
            first = (await session.call("tools/list", {}))["result"]
            t1 = time.perf_counter()
            await session.close()
            t2 = time.perf_counter()
            await modern_call(client, url, "tools/list", {})
            t3 = time.perf_counter()
            if i >= 3:
                session_ms.append((t1 - t0) * 1000)
                modern_ms.append((t3 - t2) * 1000)
        pages, listed, cursor = 0, 0, None
        t0 = time.perf_counter()
        while True:
            page = (await modern_call(client, url, "tools/list", {"cursor": cursor} if cursor else {}))[
                "result"
            ]
            pages += 1
            listed += len(page["tools"])
            cursor = page.get("nextCursor")
            if not cursor:
                break
        whole_s = time.perf_counter() - t0
    return {
        "tools": len(tools),
        "load_1m": round(os.getloadavg()[0], 2),
        "first_page_tools": len(first["tools"]),
        "first_page_bytes": len(json.dumps(first)),
        "new_session_first_page": _summary(session_ms),
        "modern_first_page": _summary(modern_ms),
        "pages": pages,
        "listed": listed,
        "all_pages_s": round(whole_s, 2),
    }


def _print_all_list(a: dict[str, Any]) -> None:
    s, m = a["new_session_first_page"], a["modern_first_page"]
    print(
        f"\n`all` endpoint, {a['tools']:,} tools: new session + first page p50 {s['p50_ms']} p99 {s['p99_ms']} ms; "
        f"2026-07-28 first page p50 {m['p50_ms']} p99 {m['p99_ms']} ms; first page {a['first_page_tools']} tools, "
        f"{a['first_page_bytes']:,} bytes; {a['pages']} pages ({a['listed']:,} tools) in {a['all_pages_s']} s   load {a['load_1m']}"
    )


async def _progressive_sizes(client: httpx2.AsyncClient, url: str, queries: Sequence[str]) -> list[int]:
    session = LegacySession(client, url)
    await session.open()
    sizes = [len((await session.call("tools/list", {}))["result"]["tools"])]
    for query in queries:
        await session.call("tools/call", {"name": "search_tools", "arguments": {"query": query}})
        sizes.append(len((await session.call("tools/list", {}))["result"]["tools"]))
    await session.close()
    return sizes


# --- search latency ----------------------------------------------------------------------------


def _queries(count: int, seed: int = 22) -> list[str]:
    """Real queries from the five data sets (the same list for every engine)."""
    pool = [
        q["query"]
        for name in DATASETS
        for q in read_jsonl(DATA / f"{name}.queries.jsonl")
        if len(q["query"]) <= 500
    ]
    return random.Random(seed).sample(pool, count)


async def bench_search(rows: list[dict[str, Any]], queries: list[str]) -> dict[str, Any]:
    tools = _tools_from_rows(rows)
    gateway_ms: list[float] = []
    grpc_ms: list[float] = []
    async with (
        catalog_gateway(tools) as (url, discovery_address),
        httpx2.AsyncClient(timeout=60) as client,
        AsyncDiscoveryClient.connect(discovery_address) as discovery,
    ):
        for query in queries[:20]:  # warm both paths
            await modern_call(
                client, url, "tools/call", {"name": "search_tools", "arguments": {"query": query}}
            )
            await discovery.search_tools(query, surface="stable")
        for query in queries:
            arguments = {"name": "search_tools", "arguments": {"query": query}}
            t0 = time.perf_counter()
            answer = await modern_call(client, url, "tools/call", arguments)
            t1 = time.perf_counter()
            await discovery.search_tools(query, surface="stable")
            t2 = time.perf_counter()
            if "result" not in answer:
                raise RuntimeError(f"search failed: {answer}")
            gateway_ms.append((t1 - t0) * 1000)
            grpc_ms.append((t2 - t1) * 1000)
    return {"tools": len(tools), "gateway_http": _summary(gateway_ms), "discovery_grpc": _summary(grpc_ms)}


# --- the stack as processes (call latency, load) -----------------------------------------------


# The service processes of the running process_stack (for CPU time per call).
STACK_PIDS: dict[str, int] = {}


@contextlib.contextmanager
def _example_http_server() -> Any:
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "examples" / "servers" / "text.py"),
            "streamable-http",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    STACK_PIDS["text server"] = process.pid
    try:
        _wait_http(url, process, expect_any=True)
        yield url
    finally:
        _stop(process)


def save_json(path: Path, record: dict[str, Any]) -> Path:
    """A bench's figures written to ``path`` as indented JSON, and where said on stdout."""
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"saved in {path.relative_to(ROOT)}")
    return path


def checkout(commit: str, into: Path) -> Path:
    """``commit``'s tree extracted into the new folder ``into`` (``git archive``): another
    commit's services, run with this venv, beside this tree's."""
    into.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def _wait_http(
    url: str, process: subprocess.Popen[bytes], *, expect_any: bool = False, within: float = 60
) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {process.returncode}")
        with contextlib.suppress(httpx2.HTTPError):
            status = httpx2.get(url, timeout=2).status_code
            if expect_any or status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {within}s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextlib.contextmanager
def process_stack(text_url: str, workdir: Path, root: Path = ROOT, *, preload: Path | None = None) -> Any:
    """Pool, discovery and gateway as their own processes (``toolscout serve``), the text server
    reached over streamable HTTP and the weather example over stdio (deferred). ``root``: the
    checkout whose services run (``--services-root``: another one, to compare before and after).
    ``preload``: a folder put first on the services' ``PYTHONPATH`` (bench/call_timeline.py's
    ``sitecustomize``)."""
    ports = {name: _free_port() for name in ("pool", "discovery", "gateway")}
    config = {
        "servers": {
            "text": {"url": text_url, "transport": "streamable-http", "max_concurrency": 256},
            "weather": {
                "command": sys.executable,
                "args": [str(ROOT / "examples" / "servers" / "weather.py")],
            },
        },
        "tool_discovery": {"enabled": True, "defer_all": True},
        "tool_sets": {"wx": {"servers": {"text": True, "weather": True}}},
        "toolscout": {
            "log_level": "WARNING",
            "pool": {"listen": f"127.0.0.1:{ports['pool']}", "metrics_port": -1},
            "discovery": {
                "listen": f"127.0.0.1:{ports['discovery']}",
                "metrics_port": -1,
                "pool_target": f"127.0.0.1:{ports['pool']}",
            },
            "gateway": {
                "listen": f"127.0.0.1:{ports['gateway']}",
                "metrics_port": -1,
                "discovery_target": f"127.0.0.1:{ports['discovery']}",
                "pool_target": f"127.0.0.1:{ports['pool']}",
                "modes": {"wx": "progressive"},
                "max_sessions": 100_000,
            },
        },
    }
    path = workdir / "gateway_bench.json"
    path.write_text(json.dumps(config))
    processes = []
    try:
        for service in ("pool", "discovery", "gateway"):
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "toolscout_cli", "serve", service, "-c", str(path)],
                    cwd=root,
                    # Another checkout's client library too (the venv's is this tree's).
                    env={
                        **os.environ,
                        "PYTHONPATH": os.pathsep.join(
                            [*([str(preload)] if preload else []), str(root), str(root / "clients" / "src")]
                        ),
                    },
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        url = f"http://127.0.0.1:{ports['gateway']}/mcp"
        _wait_http(url.replace("/mcp", "/readyz"), processes[-1], within=120)
        STACK_PIDS.update(zip(("pool", "discovery", "gateway"), (p.pid for p in processes), strict=True))
        yield url, processes[-1]
    finally:
        for process in reversed(processes):
            _stop(process)


# The tools call_tool latency is measured on: the read-only one (annotated readOnlyHint, run
# concurrently) and an unannotated one (most real tools: the pool serializes its calls per server and
# re-lists the server's tools after them). ``wait`` with 0 seconds does no work of its own.
CALL_TOOLS: dict[str, tuple[str, dict[str, Any], str]] = {
    "read_only": ("reverse", {"text": "abc"}, "cba"),
    "unannotated": ("wait", {"seconds": 0}, "waited 0"),
}


def _answer_text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def _raw_pair(
    client: httpx2.AsyncClient, text_url: str, gateway_url: str, kind: str
) -> tuple[float, float]:
    """One direct call and the same call through the gateway (raw 2026-07-28 HTTP posts), in ms."""
    tool, arguments, expected = CALL_TOOLS[kind]
    direct_args = {"name": tool, "arguments": arguments}
    through = {"name": "call_tool", "arguments": {"name": f"text__{tool}", "arguments": arguments}}
    t0 = time.perf_counter()
    direct = await modern_call(client, text_url, "tools/call", direct_args)
    t1 = time.perf_counter()
    gateway = await modern_call(client, gateway_url, "tools/call", through)
    t2 = time.perf_counter()
    for answer in (direct, gateway):
        if not _answer_text(answer["result"]).startswith(expected):
            raise RuntimeError(f"unexpected answer: {answer}")
    return (t1 - t0) * 1000, (t2 - t1) * 1000


async def bench_call_latency(text_url: str, gateway_url: str, calls: int, warmup: int) -> dict[str, Any]:
    """call_tool through the gateway vs straight on the server, for a read-only and an unannotated
    tool, over raw HTTP and with the ``mcp`` SDK's client; every round runs each pair once, in turn,
    so drift in the machine's load hits all of them alike."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    samples: dict[str, dict[str, list[float]]] = {
        f"{client}_{kind}": {"direct": [], "gateway": []} for client in ("raw", "sdk") for kind in CALL_TOOLS
    }
    loads: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(httpx2.AsyncClient(timeout=60))
        sessions = {}
        for label, url in (("direct", text_url), ("gateway", gateway_url)):
            streams = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            await session.initialize()
            sessions[label] = session

        async def sdk_pair(kind: str) -> tuple[float, float]:
            tool, arguments, expected = CALL_TOOLS[kind]
            t0 = time.perf_counter()
            direct = await sessions["direct"].call_tool(tool, arguments)
            t1 = time.perf_counter()
            gateway = await sessions["gateway"].call_tool(
                "call_tool", {"name": f"text__{tool}", "arguments": arguments}
            )
            t2 = time.perf_counter()
            for answer in (direct, gateway):
                text = getattr(answer.content[0], "text", "")
                if not text.startswith(expected):
                    raise RuntimeError(f"unexpected answer: {answer}")
            return (t1 - t0) * 1000, (t2 - t1) * 1000

        for i in range(warmup + calls):
            for kind in CALL_TOOLS:
                for name, timed in (
                    ("raw", _raw_pair(client, text_url, gateway_url, kind)),
                    ("sdk", sdk_pair(kind)),
                ):
                    direct_ms, gateway_ms = await timed
                    if i >= warmup:
                        samples[f"{name}_{kind}"]["direct"].append(direct_ms)
                        samples[f"{name}_{kind}"]["gateway"].append(gateway_ms)
            if i % 50 == 0:
                loads.append(os.getloadavg()[0])
    out: dict[str, Any] = {"load_1m": round(statistics.fmean(loads), 2), "calls": calls}
    for key, pair in samples.items():
        direct_s, gateway_s = _summary(pair["direct"]), _summary(pair["gateway"])
        # Added latency per round (the gateway call minus the direct call just before it).
        added = [g - d for d, g in zip(pair["direct"], pair["gateway"], strict=True)]
        out[key] = {
            "direct": direct_s,
            "through_gateway": gateway_s,
            "added_p50_ms": round(gateway_s["p50_ms"] - direct_s["p50_ms"], 3),
            "added_p99_ms": round(gateway_s["p99_ms"] - direct_s["p99_ms"], 3),
            "added_per_round_p50_ms": round(statistics.median(added), 3),
        }
    return out


async def bench_call_cpu(text_url: str, gateway_url: str, calls: int) -> dict[str, Any]:
    """CPU time per call of each process on the path (the load on the machine does not inflate
    it much, unlike wall time): ``calls`` calls of one kind in a row, raw HTTP, each process's
    user + system time before and after."""
    processes = dict(STACK_PIDS)
    procs = {name: psutil.Process(pid) for name, pid in processes.items()}
    out: dict[str, Any] = {}
    async with httpx2.AsyncClient(timeout=60) as client:
        for label, url, kind in (
            ("direct", text_url, "read_only"),
            ("gateway_read_only", gateway_url, "read_only"),
            ("gateway_unannotated", gateway_url, "unannotated"),
        ):
            tool, arguments, _ = CALL_TOOLS[kind]
            if url == text_url:
                method_args = {"name": tool, "arguments": arguments}
            else:
                method_args = {
                    "name": "call_tool",
                    "arguments": {"name": f"text__{tool}", "arguments": arguments},
                }
            for _ in range(20):
                await modern_call(client, url, "tools/call", method_args)
            before = {name: sum(p.cpu_times()[:2]) for name, p in procs.items()}
            me = time.process_time()
            for _ in range(calls):
                await modern_call(client, url, "tools/call", method_args)
            row = {
                name: round((sum(p.cpu_times()[:2]) - before[name]) * 1000 / calls, 3)
                for name, p in procs.items()
            }
            row["client"] = round((time.process_time() - me) * 1000 / calls, 3)
            row["load_1m"] = round(os.getloadavg()[0], 2)
            out[label] = row
    return out


def _print_cpu(cpu: dict[str, Any]) -> None:
    print("\nCPU ms per call by process (calls of one kind in a row, raw HTTP):")
    for label, row in cpu.items():
        parts = ", ".join(f"{k} {v}" for k, v in row.items() if k != "load_1m")
        print(f"  {label:<20} {parts}   load {row['load_1m']}")


def _print_calls(c: dict[str, Any]) -> None:
    print(
        f"\ncall_tool through the gateway vs direct (streamable HTTP), load {c['load_1m']}, {c['calls']} rounds:"
    )
    for key in sorted(k for k in c if k.startswith(("raw_", "sdk_"))):
        row = c[key]
        print(
            f"  {key:<16} direct p50 {row['direct']['p50_ms']} p99 {row['direct']['p99_ms']} ms; "
            f"gateway p50 {row['through_gateway']['p50_ms']} p99 {row['through_gateway']['p99_ms']} ms; "
            f"added p50 {row['added_p50_ms']} ms (per round {row['added_per_round_p50_ms']})   load {c['load_1m']}"
        )


async def _meta_worker(
    client: httpx2.AsyncClient, url: str, stop: float, stats: dict[str, Any], n: int
) -> None:
    rid = n * 1_000_000
    while time.monotonic() < stop:
        for params in (
            {"name": "search_tools", "arguments": {"query": "reverse text"}},
            {"name": "call_tool", "arguments": {"name": "text__reverse", "arguments": {"text": "abc"}}},
        ):
            rid += 1
            t0 = time.perf_counter()
            try:
                answer = await modern_call(client, url, "tools/call", params, request_id=rid)
                ok = "result" in answer and not answer["result"].get("isError")
            except (httpx2.HTTPError, ValueError, KeyError):
                ok = False
            stats["ms"].append((time.perf_counter() - t0) * 1000)
            stats["errors"] += 0 if ok else 1


async def _progressive_worker(
    client: httpx2.AsyncClient,
    url: str,
    deadline: dict[str, float],
    stats: dict[str, Any],
    ready: asyncio.Barrier,
) -> None:
    session = LegacySession(client, url)
    try:
        await session.open()
        await session.call("tools/call", {"name": "search_tools", "arguments": {"query": "reverse text"}})
    except (httpx2.HTTPError, ValueError, KeyError):
        stats["errors"] += 1
    await ready.wait()
    while time.monotonic() < deadline["at"]:
        for params in (
            {"name": "search_tools", "arguments": {"query": "slug of a title"}},
            {"name": "text__reverse", "arguments": {"text": "abc"}},
        ):
            t0 = time.perf_counter()
            try:
                answer = await session.call("tools/call", params)
                ok = "result" in answer and not answer["result"].get("isError")
            except (httpx2.HTTPError, ValueError, KeyError):
                ok = False
            stats["ms"].append((time.perf_counter() - t0) * 1000)
            stats["errors"] += 0 if ok else 1
    await session.close()


async def bench_load(url: str, gateway: psutil.Process, sessions: int, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"sessions": sessions, "seconds": seconds}
    limits = httpx2.Limits(max_connections=sessions + 10, max_keepalive_connections=sessions + 10)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as client:
        for mode in ("meta", "progressive"):
            idle_mb = gateway.memory_info().rss / 2**20
            stats: dict[str, Any] = {"ms": [], "errors": 0}
            if mode == "meta":
                started = time.monotonic()
                stop = started + seconds
                await asyncio.gather(*(_meta_worker(client, url, stop, stats, n) for n in range(sessions)))
                loaded_mb = gateway.memory_info().rss / 2**20
            else:
                ready = asyncio.Barrier(sessions + 1)
                deadline = {"at": float("inf")}
                workers = [
                    asyncio.create_task(_progressive_worker(client, f"{url}/wx", deadline, stats, ready))
                    for _ in range(sessions)
                ]
                await ready.wait()
                # Every session is open and has loaded tools: what they hold in the gateway.
                loaded_mb = gateway.memory_info().rss / 2**20
                started = time.monotonic()
                deadline["at"] = started + seconds
                await asyncio.gather(*workers)
            elapsed = time.monotonic() - started
            ms = stats["ms"]
            out[mode] = {
                "requests": len(ms),
                "errors": stats["errors"],
                "requests_per_s": round(len(ms) / elapsed, 1),
                **_summary(ms),
                "rss_idle_mb": round(idle_mb, 1),
                "rss_loaded_mb": round(loaded_mb, 1),
                "rss_per_session_kb": round((loaded_mb - idle_mb) * 1024 / sessions, 1),
            }
    return out


# --- FastMCP 4 ---------------------------------------------------------------------------------


@contextlib.contextmanager
def fastmcp_server(rows: list[dict[str, Any]], workdir: Path) -> Any:
    """FastMCP 4 + BM25SearchTransform over ``rows`` (named as toolscout names them), as a process."""
    tools = load_tools_rows(rows)
    path = workdir / f"fastmcp-{len(rows)}-{random.random():.6f}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for t in tools:
            out.write(
                json.dumps(
                    {"key": t["key"], "description": t["description"], "input_schema": t["input_schema"]}
                )
                + "\n"
            )
    command = ["uv", "run", "--isolated", "--no-project", "--quiet"]
    for package in FASTMCP:
        command += ["--with", package]
    command += ["python", str(BENCH / "_baselines" / "fastmcp_gateway.py"), "--tools", str(path)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise RuntimeError(f"FastMCP did not start: {line!r}")
        yield line.removeprefix("listening ")
    finally:
        _stop(process)


def load_tools_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with ``key``: the LLM-facing name the pool gives each tool (as retrieval.py does)."""
    names = NameTable((r["server"], r["name"]) for r in rows)
    return [
        {**r, "key": names.name_for(r["server"], r["name"]), "description": r.get("description") or ""}
        for r in rows
    ]


async def _ranked(client: httpx2.AsyncClient, url: str, query: str, fastmcp: bool) -> list[str]:
    answer = await modern_call(
        client, url, "tools/call", {"name": "search_tools", "arguments": {"query": query}}
    )
    result = answer.get("result") or {}
    structured = result.get("structuredContent") or {}
    found = structured.get("result") if fastmcp else structured.get("tools")
    return [t["name"] for t in found or []]


async def bench_recall(dataset: str, max_queries: int, workdir: Path) -> dict[str, Any]:
    tools = load_tools(DATA / f"{dataset}.tools.jsonl")
    queries = read_jsonl(DATA / f"{dataset}.queries.jsonl")
    if len(queries) > max_queries:
        queries = random.Random(5).sample(queries, max_queries)
    key_of = {(t["server"], t["name"]): t["key"] for t in tools}
    catalog = _tools_from_rows(tools)
    out: dict[str, Any] = {"tools": len(tools)}
    timings: dict[str, list[float]] = {"toolscout": [], "fastmcp": []}
    rankings: dict[str, list[list[str]]] = {"toolscout": [], "fastmcp": []}
    with fastmcp_server(tools, workdir) as fastmcp_url:
        async with catalog_gateway(catalog) as (url, _), httpx2.AsyncClient(timeout=60) as client:
            for engine, target in (("toolscout", url), ("fastmcp", fastmcp_url)):
                for query in queries:
                    t0 = time.perf_counter()
                    rankings[engine].append(
                        await _ranked(client, target, query["query"], engine == "fastmcp")
                    )
                    timings[engine].append((time.perf_counter() - t0) * 1000)
    for engine in ("toolscout", "fastmcp"):
        out[engine] = {**score(rankings[engine], queries, key_of), "latency": _summary(timings[engine])}
    return out


# --- main --------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    if args.only == "recall":
        results["recall"] = {d: await bench_recall(d, args.recall_queries, workdir) for d in DATASETS}
        results["recall_load_1m"] = round(os.getloadavg()[0], 2)
        return results
    if args.only == "all-list":
        results["all_list"] = await bench_all_list(fleet_rows(args.fleet_servers), args.calls)
        return results
    if args.only == "calls":
        with (
            _example_http_server() as text_url,
            process_stack(text_url, workdir, args.services_root) as (gateway_url, _),
        ):
            results["call"] = await bench_call_latency(text_url, gateway_url, args.calls, args.warmup)
            results["call_cpu"] = await bench_call_cpu(text_url, gateway_url, args.calls)
        return results
    live = livemcp_rows()
    fleet = fleet_rows(args.fleet_servers)
    print("tokens on the first call ...", flush=True)
    if args.fastmcp:
        with fastmcp_server(live, workdir) as url:
            results["tokens_livemcpbench"] = await bench_tokens(live, url)
    else:
        results["tokens_livemcpbench"] = await bench_tokens(live)
    results["tokens_fleet"] = await bench_tokens(fleet)
    results["stable_list_livemcpbench"] = await bench_stable_list(live)
    print("search_tools latency ...", flush=True)
    queries = _queries(args.queries)
    results["search"] = {
        str(n): await bench_search(fleet_rows(n // 50), queries) for n in (5_000, args.fleet_servers * 50)
    }
    print("call_tool latency and load ...", flush=True)
    with _example_http_server() as text_url, process_stack(text_url, workdir) as (gateway_url, gateway):
        results["call"] = await bench_call_latency(text_url, gateway_url, args.calls, args.warmup)
        results["load"] = await bench_load(
            gateway_url, psutil.Process(gateway.pid), args.sessions, args.load_seconds
        )
    if args.fastmcp:
        print("FastMCP 4 side by side: R@5 through both MCP endpoints ...", flush=True)
        results["recall"] = {d: await bench_recall(d, args.recall_queries, workdir) for d in DATASETS}
    return results


def _print(results: dict[str, Any]) -> None:
    print("\nTool-definition tokens on a model's first call (o200k):")
    for label, key in (("livemcpbench", "tokens_livemcpbench"), ("fleet", "tokens_fleet")):
        t = results[key]
        fast = f", FastMCP 4 {t['fastmcp']:,} ({t['fastmcp_share']:.2%})" if "fastmcp" in t else ""
        print(
            f"  {label} ({t['tools']:,} tools, {t['servers']} servers): direct {t['direct']:,}; gateway meta "
            f"{t['meta']:,} ({t['meta_share']:.2%}), progressive {t['progressive']:,} ({t['progressive_share']:.2%}){fast}"
        )
    s = results["stable_list_livemcpbench"]
    print(
        f"  tools/list over {s['searches']} searches: meta byte-identical {s['meta_identical']} "
        f"({s['meta_bytes']:,} bytes); progressive lists {s['progressive_tools_listed']} tools"
    )
    print("\nsearch_tools latency (BM25, ms):")
    for n, row in results["search"].items():
        g, d = row["gateway_http"], row["discovery_grpc"]
        print(
            f"  {int(n):>6,} tools: gateway over HTTP p50 {g['p50_ms']} p99 {g['p99_ms']}; discovery gRPC p50 {d['p50_ms']} p99 {d['p99_ms']}"
        )
    _print_calls(results["call"])
    load = results["load"]
    for mode in ("meta", "progressive"):
        row = load[mode]
        print(
            f"load {mode}: {load['sessions']} sessions x {load['seconds']} s: {row['requests']:,} requests "
            f"({row['requests_per_s']}/s), {row['errors']} errors, p50 {row['p50_ms']} p99 {row['p99_ms']} ms, "
            f"RSS {row['rss_idle_mb']} -> {row['rss_loaded_mb']} MB ({row['rss_per_session_kb']} KB/session)"
        )
    if "recall" in results:
        _print_recall(results["recall"], results["run"]["load_average"] if "run" in results else None)


def _print_recall(recall: dict[str, Any], load: float | None) -> None:
    print(
        f"\nR@5 through the MCP endpoints (toolscout gateway vs FastMCP 4 BM25SearchTransform), load {load}:"
    )
    for dataset, row in recall.items():
        ours, theirs = row["toolscout"], row["fastmcp"]
        print(
            f"  {dataset:<10} toolscout {ours['R@5']:.3f} (p50 {ours['latency']['p50_ms']} ms)   "
            f"fastmcp {theirs['R@5']:.3f} (p50 {theirs['latency']['p50_ms']} ms)   n={ours['n']}   "
            f"latency ratio p50 x{theirs['latency']['p50_ms'] / ours['latency']['p50_ms']:.1f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes (a smoke test, not figures to quote)"
    )
    parser.add_argument("--fleet-servers", type=int, default=1000, help="fleet size (x 50 tools)")
    parser.add_argument("--queries", type=int, default=500, help="search_tools latency queries")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--recall-queries", type=int, default=300, help="queries per data set for R@5")
    parser.add_argument("--no-fastmcp", dest="fastmcp", action="store_false")
    parser.add_argument(
        "--only",
        choices=["calls", "all-list", "recall"],
        help="calls: only the call_tool latency (gateway_calls.json); all-list: only an `all` endpoint "
        "over the fleet (--fleet-servers x 50 tools), new session + first page, --calls times (gateway_all_list.json); "
        "recall: only R@5 and search latency through both MCP endpoints beside FastMCP 4 (gateway_recall.json)",
    )
    parser.add_argument(
        "--services-root", type=Path, default=ROOT, help="the checkout whose services run (default: this one)"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the shared data sets")
    args = parser.parse_args()
    globals()["DATA"] = args.data
    if args.quick:
        args.fleet_servers, args.queries, args.calls, args.warmup = 200, 100, 100, 10
        args.sessions, args.load_seconds, args.recall_queries = 50, 5.0, 40
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        results = asyncio.run(run(args, Path(tmp)))
    results["run"] = {
        "seconds": round(time.monotonic() - started, 1),
        "load_average": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "quick": args.quick,
        "arguments": {k: v for k, v in vars(args).items() if k != "out"},
    }
    if args.only == "calls":
        _print_calls(results["call"])
        _print_cpu(results["call_cpu"])
    elif args.only == "all-list":
        _print_all_list(results["all_list"])
    elif args.only == "recall":
        _print_recall(results["recall"], results["recall_load_1m"])
    else:
        _print(results)
    print(
        f"\nmachine load average {results['run']['load_average']} ({results['run']['cpus']} CPUs) at the end"
    )
    if args.out is None:
        args.out = RESULTS.with_name(f"gateway_{args.only.replace('-', '_')}.json") if args.only else RESULTS
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
