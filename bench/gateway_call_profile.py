"""Where the gateway's (or the pool's) CPU goes during ``tools/call``: py-spy samples shared out by owner.

The services of ``bench/gateway_bench.py``'s ``process_stack`` run as their own processes (the
text server over streamable HTTP); the gateway (``--process pool``: the pool) is sampled with
py-spy (``record --native --format raw``, 250 Hz) while calls go through the gateway, each round a
raw 2026-07-28 POST and an ``mcp`` SDK client session call of ``call_tool`` for the unannotated and
the read-only tool. A sample whose innermost frame is a wait (``epoll_wait``, a futex, ...) is
left out: py-spy's own idle detection does not see these on every machine (on a Firecracker VM it
counted the event loop's and gRPC's poller's waits as busy, 30-40 % of all samples). Each other
sample goes to the innermost frame that names an owner (the table's rows; gRPC's Cython and
native frames count as gRPC's); the shares are scaled to the process's CPU per call over the
sampling (``psutil`` user + system, every thread). py-spy is not a dependency: give its path
(``--py-spy``; e.g. ``uv venv /tmp/spy && uv pip install --python /tmp/spy/bin/python py-spy``).
The profiler itself slows the process. ``--baseline COMMIT`` runs that commit's services too (a
``git archive`` copy, as ``bench/gateway_call_overhead.py`` does) and samples both at once, the
calls interleaved round by round, so that the machine's load weighs on both alike.

Run: uv run --frozen python bench/gateway_call_profile.py --py-spy /tmp/spy/bin/py-spy [--seconds 30]
     [--process gateway|pool] [--baseline db9b8ff] [--raw DIR (keeps py-spy's raw samples)]
Writes bench/results/gateway_call_profile.json (``pool_call_profile.json`` with ``--process pool``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2
import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # the bench's stack
import gateway_call_overhead as gco  # its timed callers

ROOT = gb.ROOT
# Owner -> path fragments of its frames; the first owner matching the innermost frame that names
# one wins (so the gateway's own modules are listed before the package they sit in).
OWNERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("uvicorn, h11 / httptools, starlette (HTTP server)", ("uvicorn/", "h11/", "httptools/", "starlette/")),
    ("grpc.aio, Python side (the CallTool RPC)", ("grpc/",)),
    (
        "mcp SDK (server transport and sessions, shared code)",
        ("mcp/server/", "mcp/shared/", "sse_starlette/"),
    ),
    ("mcp_types / pydantic (validation, results)", ("mcp_types/", "pydantic/", "pydantic_core/")),
    (
        "the front and the lean path (admission, body, replies)",
        (
            "mcp_gateway_svc/front.py",
            "mcp_gateway_svc/bodies.py",
            "mcp_gateway_svc/host_modes.py",
            "mcp_gateway_svc/sessions.py",
            "mcp_gateway_svc/lean.py",
        ),
    ),
    ("handlers, ToolCaller, metrics", ("mcp_gateway_svc/",)),
    (
        "the pool's POST to the MCP server (lean path, HTTP/1.1)",
        ("mcp_pool_svc/lean.py", "mcp_pool_svc/http11.py"),
    ),
    ("the pool's call stream, call path and results", ("mcp_pool_svc/",)),
    ("client library (stub, wire conversion)", ("toolscout/client/",)),
    ("toolscout_kit (argument check, logging, tracing)", ("toolscout_kit/",)),
    ("anyio", ("anyio/",)),
    ("json", ("json/",)),
    ("prometheus_client", ("prometheus_client/",)),
)
OTHER = "asyncio, the event loop, other"
# A Python frame ``name (path:line)``, a native one ``name (file.c:line)``, ``name (lib.so)`` or
# ``0x7f.. (lib.so)``: the path or library.
_FRAME_PATH = re.compile(r"\(([^()]*?)(?::\d+)?\)$")
# Innermost frames of a thread that waits (the event loop's poll, gRPC's poller, a lock).
WAITS = frozenset(
    {
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "poll",
        "ppoll",
        "select",
        "pselect",
        "nanosleep",
        "clock_nanosleep",
        "futex_wait",
        "futex_abstimed_wait",
        "__futex_abstimed_wait_common",
        "__futex_abstimed_wait_common64",
        "syscall",
        "do_futex_wait",
        "sem_wait",
        "sem_timedwait",
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "sem_clockwait",
        "PyThread_acquire_lock_timed",
        "EpollSelector.select",
    }
)


_LOOP_RUNNERS = ("Runner.run (", "run_until_complete (", "BaseEventLoop.run_forever (")


def owner_of(stack: str) -> str | None:
    """The owner of one py-spy raw stack (``frame;frame;...``), None for a thread waiting."""
    frames = stack.split(";")
    # The innermost frame with a name (libc's own are often bare addresses).
    named = next((frame for frame in reversed(frames) if not frame.startswith("0x")), "")
    if named.split(" (", 1)[0] in WAITS:
        return None
    # Only what runs inside the event loop: the frames that started it (the entry point,
    # ``toolscout_kit.event_loop.run``) name no owner of the work.
    starts = [i for i, frame in enumerate(frames) if frame.startswith(_LOOP_RUNNERS)]
    if starts:
        frames = frames[starts[-1] + 1 :]
    for frame in reversed(frames):
        match = _FRAME_PATH.search(frame)
        path = match.group(1) if match else ""
        for name, fragments in OWNERS:
            if any(fragment in path for fragment in fragments):
                return name
    return OTHER


def shares(raw: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        owner = owner_of(stack) if count.isdigit() else None
        if owner is not None:
            counts[owner] += int(count)
    return counts


async def _drive(
    urls: dict[str, str], pids: dict[str, int], seconds: float, py_spy: str, work: Path
) -> dict[str, tuple[int, float]]:
    """Calls through each deployment's gateway in turn while py-spy samples the processes in
    ``pids``; per deployment, (calls, the sampled process's CPU ms per call)."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(httpx2.AsyncClient(timeout=60))
        callers: dict[str, tuple[gco.Timed, gco.Timed]] = {}
        for name, url in urls.items():
            streams = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            await session.initialize()
            callers[name] = (gco._raw(client, url, True), gco._sdk(session, True))
        for _ in range(20):  # warm-up
            for pair in callers.values():
                for call in pair:
                    await call("unannotated")
        sampled = {name: psutil.Process(pid) for name, pid in pids.items()}
        spies = [
            await asyncio.create_subprocess_exec(
                *(py_spy, "record", "--native", "-r", "250", "--format", "raw", "-d", str(int(seconds))),
                *("-o", str(work / f"{name}.raw"), "--pid", str(process.pid)),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            for name, process in sampled.items()
        ]
        await asyncio.sleep(1)  # py-spy attached
        before = {name: sum(p.cpu_times()[:2]) for name, p in sampled.items()}
        started, rounds = time.monotonic(), 0
        while time.monotonic() - started < seconds - 2:
            # The deployments in turn, their order alternating: the load hits both alike.
            for name in list(callers) if rounds % 2 else reversed(list(callers)):
                for kind in gb.CALL_TOOLS:
                    for call in callers[name]:
                        await call(kind)
            rounds += 1
        spent = {name: sum(p.cpu_times()[:2]) - before[name] for name, p in sampled.items()}
        for spy in spies:
            await spy.wait()
    calls = rounds * len(gb.CALL_TOOLS) * 2
    return {name: (calls, spent[name] * 1000 / calls) for name in urls}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--py-spy", required=True, help="the py-spy executable")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument(
        "--process", choices=("gateway", "pool"), default="gateway", help="the service sampled"
    )
    parser.add_argument(
        "--baseline",
        help="a commit whose services are sampled beside this tree's (git archive), calls interleaved",
    )
    parser.add_argument("--raw", type=Path, help="a folder to keep py-spy's raw samples in")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="toolscout-profile-") as work_dir,
        contextlib.ExitStack() as stack,
    ):
        work = Path(work_dir)
        roots = {"this tree": ROOT}
        if args.baseline:
            roots[args.baseline] = gb.checkout(args.baseline, work / "baseline")
        text_url = stack.enter_context(gb._example_http_server())
        urls, pids = {}, {}
        for name, root in roots.items():
            (work / f"stack-{len(urls)}").mkdir()
            urls[name], _ = stack.enter_context(gb.process_stack(text_url, work / f"stack-{len(urls)}", root))
            pids[name] = gb.STACK_PIDS[args.process]
        measured = asyncio.run(_drive(urls, pids, args.seconds, args.py_spy, work))
        counted = {name: shares(work / f"{name}.raw") for name in urls}
        if args.raw:
            args.raw.mkdir(parents=True, exist_ok=True)
            for name in urls:
                (args.raw / f"{name.replace(' ', '-')}.raw").write_bytes((work / f"{name}.raw").read_bytes())
    load = round(os.getloadavg()[0], 1)
    record: dict[str, Any] = {
        "command": "uv run --frozen python bench/gateway_call_profile.py --py-spy PY_SPY "
        f"--seconds {args.seconds:g} --process {args.process}"
        + (f" --baseline {args.baseline}" if args.baseline else ""),
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_1m": load,
        "process": args.process,
        "deployments": {},
    }
    for name, (calls, cpu_ms) in measured.items():
        total = sum(counted[name].values()) or 1
        rows = {owner: round(cpu_ms * n / total, 3) for owner, n in counted[name].most_common()}
        record["deployments"][name] = {
            "calls": calls,
            "samples": total,
            "cpu_ms_per_call": round(cpu_ms, 3),
            "by_owner_ms": rows,
        }
        print(
            f"{args.process} CPU ms per call by owner, {name} ({calls} calls, {total} samples, load {load}):"
        )
        for owner, value in rows.items():
            print(f"  {owner:<58} {value:6.2f}")
        print(f"  {'total':<58} {cpu_ms:6.2f}")
    out = ROOT / "bench" / "results" / f"{args.process}_call_profile.json"
    gb.save_json(out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
