"""Pieces of a ``tools/call``'s path timed hot (back to back) and cold (the CPU caches thrashed
before each run), in one process: what a piece costs in a microbenchmark against what it costs in
a service that sleeps between calls while other processes use the machine.

A service in the stack wakes once or twice per call; in between, the client, the other services
and the MCP server run on the same two cores, and its code and data leave the CPU caches. The
pieces: the client library's conversions of a call's request and result (the gateway's and the
pool's side of the call stream), the pool's validation of an MCP server's result
(``mcp_types.CallToolResult``) and a JSON-RPC request's parse and an answer's dump. "Cold": before
each timed run the script writes one byte per cache line of a buffer larger than the machine's
caches and parses a few hundred small JSON documents (other code and data through the caches).

Run: uv run --frozen python bench/hot_cold.py [--runs 300] [--thrash-mb 16]
Writes bench/results/hot_cold.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types
from toolscout.client import CallRequest, CallToolResult, ContentBlock, wire

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # save_json, ROOT

_REQUEST = (
    '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"call_tool","arguments":'
    '{"name":"text__reverse","arguments":{"text":"abc"}},"_meta":{"io.modelcontextprotocol/'
    'protocolVersion":"2026-07-28"}}}'
)
_SERVER_RESULT = {
    "content": [{"type": "text", "text": "cba"}],
    "structuredContent": {"result": "cba"},
    "isError": False,
}


def pieces() -> dict[str, Callable[[], Any]]:
    """The timed pieces, each a call without arguments."""
    result = CallToolResult(
        content=(ContentBlock("text", text="cba"),),
        structured_content_json='{"result":"cba"}',
        server="text",
        tool="reverse",
        duration_seconds=0.003,
    )
    result_pb = wire.call_tool_result_pb(result)
    request = CallRequest(tool="text__reverse", arguments_json='{"text":"abc"}', timeout_seconds=30.0)
    request_pb = wire.call_request_pb(request)
    validate = mcp_types.CallToolResult.model_validate
    answer = {"jsonrpc": "2.0", "id": 7, "result": _SERVER_RESULT}
    return {
        "gateway: call request to its message (wire.call_request_pb)": lambda: wire.call_request_pb(request),
        "pool: call request from its message (wire.call_request)": lambda: wire.call_request(request_pb),
        "pool: MCP server's result validated (mcp_types.CallToolResult)": lambda: validate(_SERVER_RESULT),
        "pool: result to its message (wire.call_tool_result_pb)": lambda: wire.call_tool_result_pb(result),
        "gateway: result from its message (wire.call_tool_result)": lambda: wire.call_tool_result(result_pb),
        "gateway: JSON-RPC request parsed (json.loads)": lambda: json.loads(_REQUEST),
        "gateway: JSON-RPC answer written (json.dumps)": lambda: json.dumps(answer, separators=(",", ":")),
    }


def _thrasher(megabytes: int) -> Callable[[], None]:
    buffer = bytearray(megabytes * 1024 * 1024)
    documents = [json.dumps({f"k{i}": list(range(50))}) for i in range(2000)]
    chooser = random.Random(0)

    def thrash() -> None:
        for i in range(0, len(buffer), 64):
            buffer[i] = (buffer[i] + 1) & 0xFF
        for document in chooser.sample(documents, 300):
            json.loads(document)

    return thrash


def _p50_us(piece: Callable[[], Any], runs: int, before: Callable[[], None] | None) -> float:
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        started = time.perf_counter_ns()
        piece()
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--thrash-mb", type=int, default=16, help="the buffer written before a cold run")
    args = parser.parse_args()
    thrash = _thrasher(args.thrash_mb)
    load = round(os.getloadavg()[0], 2)
    rows: dict[str, dict[str, float]] = {}
    print(f"p50 microseconds per run, {args.runs} runs each, load {load}:")
    print(f"  {'piece':<66} {'hot':>7} {'cold':>7} {'cold/hot':>8}")
    for name, piece in pieces().items():
        for _ in range(50):  # warm-up: imports, caches of the libraries
            piece()
        hot = _p50_us(piece, args.runs, None)
        cold = _p50_us(piece, args.runs, thrash)
        rows[name] = {"hot_us": round(hot, 2), "cold_us": round(cold, 2)}
        print(f"  {name:<66} {hot:7.1f} {cold:7.1f} {cold / hot:7.1f}x")
    hot_sum = sum(r["hot_us"] for r in rows.values())
    cold_sum = sum(r["cold_us"] for r in rows.values())
    print(f"  {'all together':<66} {hot_sum:7.1f} {cold_sum:7.1f} {cold_sum / hot_sum:7.1f}x")
    gb.save_json(
        gb.ROOT / "bench" / "results" / "hot_cold.json",
        {
            "command": f"uv run --frozen python bench/hot_cold.py --runs {args.runs} --thrash-mb {args.thrash_mb}",
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_1m": load,
            "pieces": rows,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
