"""Where the wall time of a ``tools/call`` through the gateway goes: one timeline per call, across processes.

The stack of ``bench/gateway_bench.py`` (pool, discovery and gateway as their own processes, the
text server over streamable HTTP) runs with ``bench/_timeline/sitecustomize.py`` loaded into each
service: it wraps a few functions as their modules load and writes a mark with the machine's
monotonic clock as a call passes (the services' code is unchanged):

  C0/C1  this script: before the request, after the answer is read (raw 2026-07-28 POST, or the
         ``mcp`` SDK client's ``call_tool``)
  G1     the gateway's ASGI entry          G4  its answer starts to go out
  G2/G3  the gateway's pool client: ``AsyncPoolClient.call`` entered / returned
  Gw/Gx  its write of the call on the pool's call stream entered / returned (gRPC reported it sent)
  Pr     the pool read the call off the stream
  P1/P4  the pool: ``McpPool.call`` entered / returned
  P2/P3  the pool's lean POST to the MCP server: sent / answered
  Pa/Pb  the pool's write of the answer on the stream entered / returned
  Gd     the gateway's stream reader hands the answer to the waiting call

Each segment's p50 over the calls is printed (the marks in a call's order; Gx and Pb, which a
write's completion reports while the call has moved on, as their own spans), with the direct call (this script straight to the
text server, interleaved round by round) beside it: the gateway's added time is the timeline minus
the direct call. A mark whose function is gone in the measured code is left out (its segments
merge). ``--commit`` measures another commit (``git archive`` into a temporary folder, run with
this venv) instead of this tree.

``--result-chars N``: the read-only tool reverses a JSON listing of N characters instead of "abc"
(a result as large: where the time of a larger result goes).

Run: uv run --frozen python bench/call_timeline.py [--calls 500] [--client raw|sdk] [--commit COMMIT]
     [--result-chars 4000]
Writes bench/results/call_timeline_<client>.json (``call_timeline_<client>_<N>ch.json`` with ``--result-chars``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # the stack
import gateway_call_overhead as gco  # the timed callers

ROOT = gb.ROOT
ORDER = ("C0", "G1", "G2", "Gw", "Pr", "P1", "P2", "P3", "P4", "Pa", "Gd", "G3", "G4", "C1")
WHAT = {
    ("C0", "G1"): "client sends; gateway reads the request",
    ("G1", "G2"): "gateway: admission, body, checks, request to the pool",
    ("G2", "Gw"): "gateway: the call's message built",
    ("Gw", "Pr"): "gRPC to the pool; the pool reads it off the stream",
    ("Pr", "P1"): "pool: the call's task started, request decoded",
    ("P1", "P2"): "pool: routing, argument check, SDK request",
    ("P2", "P3"): "HTTP to the MCP server and its work (the direct call's part)",
    ("P3", "P4"): "pool: answer read, validated, converted",
    ("P4", "Pa"): "pool: the answer's message built",
    ("Pa", "Gd"): "gRPC back; the gateway's reader takes the answer",
    ("Gd", "G3"): "gateway: the call resumes, result decoded",
    ("G3", "G4"): "gateway: result to its JSON-RPC answer",
    ("G4", "C1"): "gateway writes; client reads the answer",
    # Not in a call's order: each write's completion, reported while the call goes on.
    ("Gw", "Gx"): "the gateway's write of the call, until gRPC reports it sent",
    ("Pa", "Pb"): "the pool's write of the answer, until gRPC reports it sent",
}
SPANS = (("Gw", "Gx"), ("Pa", "Pb"))


def _mark(path: Path, name: str) -> None:
    with path.open("a") as out:
        out.write(f"{name} {time.perf_counter_ns()}\n")


async def _drive(
    url: str, text_url: str, calls: int, client_kind: str, marks: Path, kinds: gco.Kinds
) -> tuple[list[float], list[float]]:
    """(direct ms, gateway ms) per round; the gateway calls are marked C0/C1 in ``marks``."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(httpx2.AsyncClient(timeout=60))
        if client_kind == "raw":
            through, direct = gco._raw(client, url, True, kinds), gco._raw(client, text_url, False, kinds)
        else:
            pair = []
            for target in (url, text_url):
                streams = await stack.enter_async_context(streamable_http_client(target))
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                await session.initialize()
                pair.append(session)
            through, direct = gco._sdk(pair[0], True, kinds), gco._sdk(pair[1], False, kinds)
        for _ in range(30):  # warm-up
            await direct("read_only")
            await through("read_only")
        _mark(marks, "START")
        directs, throughs = [], []
        for _ in range(calls):
            directs.append(await direct("read_only"))
            _mark(marks, "C0")
            throughs.append(await through("read_only"))
            _mark(marks, "C1")
    return directs, throughs


def _segments(marks: Path) -> tuple[dict[tuple[str, str], float], int]:
    """p50 ms of each segment between consecutive marks seen (and of each write's span), over the
    calls after START."""
    lines = marks.read_text().split()
    events = list(zip(lines[::2], map(int, lines[1::2]), strict=True))
    start = max(i for i, (name, _) in enumerate(events) if name == "START")
    calls: list[dict[str, int]] = []
    for name, ns in events[start + 1 :]:
        if name == "C0":
            calls.append({"C0": ns})
        elif calls:
            # The first time a call passes (a retry's marks repeat); a write's completion may be
            # reported after the client has its answer (C1), before the next call starts.
            calls[-1].setdefault(name, ns)
    calls = [c for c in calls if "C1" in c]
    seen = [m for m in ORDER if all(m in c for c in calls)]
    pairs = [*itertools.pairwise(seen), *(s for s in SPANS if all(m in c for c in calls for m in s))]
    return {(a, b): statistics.median((c[b] - c[a]) / 1e6 for c in calls) for a, b in pairs}, len(calls)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--client", choices=("raw", "sdk"), default="raw")
    parser.add_argument("--commit", help="measure this commit's services instead of this tree's")
    parser.add_argument(
        "--result-chars",
        type=int,
        default=0,
        help="the read-only tool reverses a JSON listing of this many characters (0: 'abc')",
    )
    args = parser.parse_args()
    kinds = dict(gb.CALL_TOOLS)
    if args.result_chars > 0:
        kinds["read_only"] = gco.sized_read_only(args.result_chars)
    with (
        tempfile.TemporaryDirectory(prefix="toolscout-timeline-") as work_dir,
        contextlib.ExitStack() as stack,
    ):
        work = Path(work_dir)
        root = ROOT
        if args.commit:
            root = gb.checkout(args.commit, work / "checkout")
        marks = work / "marks.txt"
        marks.touch()
        os.environ["TOOLSCOUT_TIMELINE"] = str(marks)  # read by the services' sitecustomize
        text_url = stack.enter_context(gb._example_http_server())
        url, _ = stack.enter_context(
            gb.process_stack(text_url, work, root, preload=ROOT / "bench" / "_timeline")
        )
        loads = [os.getloadavg()[0]]
        directs, throughs = asyncio.run(_drive(url, text_url, args.calls, args.client, marks, kinds))
        loads.append(os.getloadavg()[0])
        segments, counted = _segments(marks)
    direct, through = statistics.median(directs), statistics.median(throughs)
    what = args.commit or "this tree"
    print(
        f"tools/call timeline, {what}, {args.client} client, read-only tool"
        f"{f' ({args.result_chars}-character result)' if args.result_chars else ''}, {counted} calls, "
        f"load {loads[0]:.1f}-{loads[1]:.1f}:"
    )
    for (a, b), ms in segments.items():
        print(f"  {a}->{b}  {ms:6.3f} ms  {WHAT.get((a, b), '')}")
    print(
        f"  call through the gateway p50 {through:.3f} ms; direct p50 {direct:.3f} ms; added {through - direct:+.3f} ms"
    )
    sized = f"_{args.result_chars}ch" if args.result_chars else ""
    out = ROOT / "bench" / "results" / f"call_timeline_{args.client}{sized}.json"
    gb.save_json(
        out,
        {
            "command": "uv run --frozen python bench/call_timeline.py "
            f"--calls {args.calls} --client {args.client}"
            + (f" --commit {args.commit}" if args.commit else "")
            + (f" --result-chars {args.result_chars}" if args.result_chars else ""),
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_1m": [round(x, 2) for x in loads],
            "calls": counted,
            "segments_p50_ms": {f"{a}->{b}": round(ms, 3) for (a, b), ms in segments.items()},
            "through_p50_ms": round(through, 3),
            "direct_p50_ms": round(direct, 3),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
