"""Reliability, round 3 (issue 30): one figure per item, with real processes on 127.0.0.1.

  * gateway_open: HTTP status of an anonymous tools/list while the services ask for a token
    (TOOLSCOUT_AUTH_TOKEN set, no gateway.tokens);
  * surrogate: the JSON-RPC error code of a tools/call whose arguments hold a lone surrogate, on the
    2026-07-28 stateless path, and whether a traceback was logged;
  * abandoned_sessions: 30 sessions opened and abandoned (max_sessions 40), then 15 more opened:
    how many were refused;
  * half_sent_bodies: 50 connections that send headers and half a body: seconds until the gateway
    dropped them all (cap 30 s), and traceback lines logged;
  * post_kill_call: a call 1 s after npm server-everything (streamableHttp) was SIGKILLed, on three
    session generations (call_timeout 20 s): seconds and outcome;
  * sharded_idle_stop: `toolscout up --pool-shards 3`, idle, SIGINT → exit, seconds;
  * held_port: the preflight of a port an outgoing connection holds (nothing listening) that is
    released 0.3 s later: refused or free.

Run: uv run --frozen python bench/reliability_round3.py [--only NAME[,NAME]]
Prints the figures and writes bench/results/reliability_round3.json (or, with --out, elsewhere:
"before" figures are this script run on an export of the commit before, with PYTHONPATH pointing
there).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_ROOT))

from tests.support.cli_stack import UpProcess, stack_config  # noqa: E402
from tests.support.gateway import MODERN, gateway_stack, post  # noqa: E402
from tests.support.mcp_servers import _running, everything_bin, example_server_config, free_port  # noqa: E402
from toolscout_kit.config import parse_config  # noqa: E402

_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}


def _config(tmp: Path, **gateway: Any) -> Any:
    return parse_config(
        {
            "servers": {"text": example_server_config("text")},
            "tool_sets": {"every": {"servers": {"text": True}}},
            "toolscout": {"gateway": {"modes": {"every": "all"}, **gateway}},
        },
        base_dir=tmp,
    )


@contextlib.contextmanager
def _captured() -> Any:
    """stdout and stderr (the services' logs) into a buffer."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        yield buffer


async def gateway_open() -> dict[str, Any]:
    os.environ["TOOLSCOUT_AUTH_TOKEN"] = "bench-services-token"  # noqa: S105 - a throwaway test token
    try:
        async with gateway_stack(_config(Path(tempfile.mkdtemp()))) as gw:
            anonymous = await post(gw.url, _LIST, modern=True)
    finally:
        del os.environ["TOOLSCOUT_AUTH_TOKEN"]
    return {"anonymous_tools_list_status": anonymous.status_code}


async def surrogate() -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "text__slugify", "arguments": {"text": "@s@"}, "_meta": _ENVELOPE},
    }
    raw = json.dumps(body).replace('"@s@"', '"\\ud800"').encode()
    with _captured() as logs:
        async with gateway_stack(_config(Path(tempfile.mkdtemp()))) as gw:
            # The revision's routing headers, as a 2026-07-28 client sends them with the body.
            headers = {"mcp-method": "tools/call", "mcp-name": "text__slugify"}
            answer = await post(gw.url + "/every", raw, modern=True, headers=headers)
    return {"code": answer.json()["error"]["code"], "traceback_logged": "Traceback" in logs.getvalue()}


_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "b", "version": "1"},
    },
}


async def abandoned_sessions() -> dict[str, Any]:
    async with gateway_stack(_config(Path(tempfile.mkdtemp()), max_sessions=40)) as gw:
        url = gw.gateway.toolset_url("every")
        for _ in range(30):
            await post(url, _INIT)
        later = [await post(url, _INIT) for _ in range(15)]
        evicted = gw.gateway.registry.get_sample_value(
            "toolscout_gateway_session_evictions_total", {"reason": "max_sessions"}
        )
    return {
        "abandoned": 30,
        "max_sessions": 40,
        "opened_after": 15,
        "refused": sum(r.status_code == 503 for r in later),
        "evicted": evicted or 0,
    }


async def half_sent_bodies(count: int = 50, cap: float = 30.0) -> dict[str, Any]:
    with _captured() as logs:
        async with gateway_stack(_config(Path(tempfile.mkdtemp()))) as gw:
            port = gw.gateway.port
            started = time.perf_counter()

            async def one() -> float | None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(
                    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n"
                    b'{"jsonrpc": "2.0", '
                )
                await writer.drain()
                try:
                    await asyncio.wait_for(reader.read(), cap)
                    return time.perf_counter() - started
                except TimeoutError:
                    return None
                finally:
                    writer.close()

            dropped = await asyncio.gather(*(one() for _ in range(count)))
    done = [d for d in dropped if d is not None]
    text = logs.getvalue()
    return {
        "connections": count,
        "dropped_by_server": len(done),
        "seconds_until_all_dropped": round(max(done), 2) if len(done) == count else None,
        "cap_seconds": cap,
        "traceback_lines": text.count("Traceback"),
    }


async def post_kill_call(generations: int = 3) -> dict[str, Any]:
    from mcp_pool_svc.pool import McpPool
    from mcp_pool_svc.supervisor import ServerState

    port = free_port()
    argv = [str(everything_bin()), "streamableHttp"]
    seen: list[dict[str, Any]] = []
    pool: Any = None
    try:
        for _ in range(generations):
            with _running(argv, port=port, path="/mcp") as server:
                if pool is None:
                    config = parse_config(
                        {"servers": {"s": {"url": server.url, "transport": "http", "call_timeout": 20}}}
                    )
                    pool = McpPool(config)
                    await pool.start(wait=60)
                live = pool

                def ready(p: Any = live) -> bool:
                    return bool(p.server_status("s").state is ServerState.READY)

                await live.wait_until(ready, 60)
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait(timeout=10)
                await asyncio.sleep(1.0)
                started = time.perf_counter()
                try:
                    await live.call_tool(server="s", tool="echo", arguments={"message": "x"})
                    outcome = "ok"
                except Exception as err:  # the outcome is the figure
                    outcome = type(err).__name__
                seen.append({"seconds": round(time.perf_counter() - started, 3), "outcome": outcome})
    finally:
        if pool is not None:
            await pool.stop()
    return {"call_timeout": 20, "calls": seen}


def sharded_idle_stop(runs: int = 2) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp())
    config = stack_config(tmp / "c.json", ports=(free_port(), free_port(), free_port()))
    seconds = []
    for _ in range(runs):
        up = UpProcess(config, "--pool-shards", "3")
        up.wait_ready(timeout=180)
        time.sleep(3)
        started = time.monotonic()
        code = up.stop(signal.SIGINT, timeout=60)
        seconds.append(round(time.monotonic() - started, 2))
        assert code == 0, up.stderr
    return {"shards": 3, "seconds": seconds}


def held_port() -> dict[str, Any]:
    from toolscout_kit.errors import ConfigError
    from toolscout_kit.preflight import Endpoint, check_free

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        port = client.getsockname()[1]

        def release() -> None:
            accepted.close()
            client.recv(1)
            client.close()

        threading.Timer(0.3, release).start()
        started = time.perf_counter()
        try:
            check_free([Endpoint("gateway HTTP", "127.0.0.1", port)])
            answer = "free"
        except ConfigError as err:
            answer = err.message.splitlines()[0]
    return {
        "released_after_seconds": 0.3,
        "answer": answer,
        "seconds": round(time.perf_counter() - started, 2),
    }


_STEPS: dict[str, Callable[[], Any]] = {
    "gateway_open": gateway_open,
    "surrogate": surrogate,
    "abandoned_sessions": abandoned_sessions,
    "half_sent_bodies": half_sent_bodies,
    "post_kill_call": post_kill_call,
    "sharded_idle_stop": sharded_idle_stop,
    "held_port": held_port,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated step names")
    parser.add_argument("--out", default=str(_ROOT / "bench" / "results" / "reliability_round3.json"))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(_STEPS)
    os.environ.setdefault("TOOLSCOUT_RUNTIME_DIR", tempfile.mkdtemp())
    out = Path(args.out)
    figures: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    for name in names:
        step = _STEPS[name]
        result = asyncio.run(step()) if asyncio.iscoroutinefunction(step) else step()
        figures[name] = {
            "result": result,
            "command": f"uv run --frozen python bench/reliability_round3.py --only {name}",
            "load_average": os.getloadavg()[0],
        }
        print(name, json.dumps(result), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
