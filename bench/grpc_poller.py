"""One gRPC message each way between two processes, on gRPC's EventEngine and on the core's own poller.

Two ``grpc.aio`` processes on 127.0.0.1: a server echoing what it reads on a bidirectional stream
(and on a unary method), and a client that writes one message of ``--size`` bytes and waits for the
echo, ``--rounds`` times per try. Each try starts both processes afresh with one value of
``GRPC_EXPERIMENTS`` in their environment, set before ``grpc`` is imported (gRPC reads it then):

* ``EventEngine`` — the variable empty: gRPC 1.85's defaults;
* ``core poller`` — ``toolscout.GRPC_EXPERIMENTS_DEFAULT``, what every toolscout process sets for
  itself unless the environment says otherwise (``clients/src/toolscout/__init__.py``).

The two settings take turns, ``--tries`` each, so that the machine's load weighs on both alike.
Reported per setting: p50 and p90 of the round trip on the open stream and of a unary call (the
median over the tries), with the 1-minute load average. The floor beside them: the same message
echoed by a plain asyncio TCP server in the same server process (no gRPC), timed in the same loop.

Run: uv run --frozen python bench/grpc_poller.py [--rounds 3000] [--tries 4] [--size 300]
Writes bench/results/grpc_poller.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from toolscout import GRPC_EXPERIMENTS_DEFAULT

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # save_json

ROOT = gb.ROOT
SETTINGS = {"EventEngine": "", "core poller": GRPC_EXPERIMENTS_DEFAULT}
KINDS = ("stream", "unary", "asyncio")

# Both ends in one script: ``serve`` prints its port; ``ping ADDRESS ROUNDS SIZE`` prints the figures.
PROGRAM = r"""
import asyncio, json, sys, time
import grpc

def same(data):
    return data

async def serve():
    async def echo_stream(requests, context):
        async for message in requests:
            yield message
    async def echo(request, context):
        return request
    handlers = grpc.method_handlers_generic_handler("bench.Echo", {
        "Stream": grpc.stream_stream_rpc_method_handler(echo_stream, same, same),
        "Unary": grpc.unary_unary_rpc_method_handler(echo, same, same),
    })
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handlers,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()

    async def echo_bytes(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)

    plain = await asyncio.start_server(echo_bytes, "127.0.0.1", 0)
    print(port, plain.sockets[0].getsockname()[1], flush=True)
    await server.wait_for_termination()

def quantiles(samples):
    samples.sort()
    return {"p50": samples[len(samples) // 2] * 1e3, "p90": samples[int(len(samples) * 0.9)] * 1e3}

async def ping(port, plain_port, rounds, size):
    message = b"x" * size
    reader, writer = await asyncio.open_connection("127.0.0.1", plain_port)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stream = channel.stream_stream("/bench.Echo/Stream", same, same)()
        unary = channel.unary_unary("/bench.Echo/Unary", same, same)
        on_stream, calls, plain = [], [], []
        for i in range(rounds + 200):
            started = time.perf_counter()
            await stream.write(message)
            await stream.read()
            middle = time.perf_counter()
            await unary(message)
            last = time.perf_counter()
            writer.write(message)
            await reader.readexactly(size)
            if i >= 200:
                on_stream.append(middle - started)
                calls.append(last - middle)
                plain.append(time.perf_counter() - last)
        await stream.done_writing()
    writer.close()
    print(json.dumps({"stream": quantiles(on_stream), "unary": quantiles(calls), "asyncio": quantiles(plain)}))

if sys.argv[1] == "serve":
    asyncio.run(serve())
else:
    asyncio.run(ping(*map(int, sys.argv[2:6])))
"""


def _try(experiments: str, rounds: int, size: int) -> dict[str, dict[str, float]]:
    env = {**os.environ, "GRPC_EXPERIMENTS": experiments, "GRPC_VERBOSITY": "ERROR"}
    server = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, "serve"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        ports = server.stdout.readline().split()
        if len(ports) != 2 or not all(port.isdigit() for port in ports):
            raise RuntimeError(f"the echo server did not start: {ports!r}")
        done = subprocess.run(
            [sys.executable, "-c", PROGRAM, "ping", *ports, str(rounds), str(size)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        figures: dict[str, dict[str, float]] = json.loads(done.stdout)
        return figures
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3000, help="round trips per try")
    parser.add_argument("--tries", type=int, default=4, help="tries per setting, taking turns")
    parser.add_argument("--size", type=int, default=300, help="bytes per message")
    args = parser.parse_args()
    tries: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in SETTINGS}
    loads = [os.getloadavg()[0]]
    for i in range(args.tries):
        for name, experiments in SETTINGS.items():
            started = time.monotonic()
            tries[name].append(_try(experiments, args.rounds, args.size))
            loads.append(os.getloadavg()[0])
            print(
                f"  try {i + 1}/{args.tries} {name:<12} stream p50 {tries[name][-1]['stream']['p50']:.3f} ms"
                f"  unary p50 {tries[name][-1]['unary']['p50']:.3f} ms  ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    summary = {
        name: {
            kind: {q: statistics.median(t[kind][q] for t in runs) for q in ("p50", "p90")} for kind in KINDS
        }
        for name, runs in tries.items()
    }
    print(
        f"one {args.size}-byte message each way between two grpc.aio processes, {args.rounds} rounds,"
        f" median of {args.tries} tries; load {min(loads):.1f}-{max(loads):.1f}:"
    )
    for name, kinds in summary.items():
        print(
            f"  {name:<12} GRPC_EXPERIMENTS={SETTINGS[name] or '(empty)':<44}"
            f" stream p50 {kinds['stream']['p50']:.3f} p90 {kinds['stream']['p90']:.3f} ms"
            f"   unary p50 {kinds['unary']['p50']:.3f} p90 {kinds['unary']['p90']:.3f} ms"
            f"   (asyncio p50 {kinds['asyncio']['p50']:.3f} ms)"
        )
    out = ROOT / "bench" / "results" / "grpc_poller.json"
    gb.save_json(
        out,
        {
            "rounds": args.rounds,
            "tries": args.tries,
            "size": args.size,
            "load": [min(loads), max(loads)],
            "settings": SETTINGS,
            "summary": summary,
            "tries_by_setting": tries,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
