"""How soon a catalog change reaches MCP clients of the gateway's meta endpoint.

    uv run --frozen python bench/change_delivery.py [--rounds N]

A real pool (the misbehaving fixture over stdio), discovery and the gateway on 127.0.0.1. Two
clients stay connected to ``/mcp`` (meta): a handshake-revision client with a session (it hears
``notifications/tools/list_changed`` on its stream) and a 2026-07-28 client on
``subscriptions/listen``. Each round (a fresh stack) calls the fixture's ``add_tool`` through
``call_tool``; the
server adds a tool and says so, the pool re-lists, discovery plans a new catalog version, the
gateway announces it. Measured: seconds from the start of the ``add_tool`` call (the server says
the list changed before it answers) to each client's notification (p50 / max over the rounds). Saved to bench/results/change_delivery.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.session import IncomingMessage  # noqa: E402
from mcp.client.subscriptions import listen  # noqa: E402

from tests.support.gateway import MODERN, gateway_stack  # noqa: E402
from tests.support.mcp_servers import misbehaving_config  # noqa: E402
from toolscout_kit.config import parse_config  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "change_delivery.json"
WAIT = 30.0


async def _one_round() -> tuple[float, float]:
    """Seconds from the add_tool call to the legacy session's and the listener's news."""
    with tempfile.TemporaryDirectory() as tmp:
        config = parse_config(
            {
                "servers": {"fixture": misbehaving_config(defer_loading=True)},
                "tool_discovery": {"enabled": True},
            },
            base_dir=Path(tmp),
        )
        legacy_seen: asyncio.Queue[float] = asyncio.Queue()

        async def handler(message: IncomingMessage) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                legacy_seen.put_nowait(time.perf_counter())

        async with (
            gateway_stack(config) as gw,
            Client(gw.url, mode="legacy", message_handler=handler) as legacy,
            Client(gw.url, mode=MODERN) as modern,
        ):
            await legacy.list_tools()
            async with listen(modern.session, tools_list_changed=True) as subscription:
                with anyio.fail_after(WAIT):
                    # The fixture adds its one extra tool once: one change per stack. Timed from
                    # before the call: the server announces the change before it answers.
                    done = time.perf_counter()
                    await legacy.call_tool("call_tool", {"name": "fixture__add_tool", "arguments": {}})
                    await subscription.__anext__()
                    listener = time.perf_counter() - done
                    legacy_after = await legacy_seen.get() - done
    return legacy_after, listener


async def measure(rounds: int) -> dict[str, Any]:
    legacy_times: list[float] = []
    modern_times: list[float] = []
    for _ in range(rounds):
        legacy, modern = await _one_round()
        legacy_times.append(legacy)
        modern_times.append(modern)
    return {
        "rounds": rounds,
        "legacy_session_seconds": _summary(legacy_times),
        "subscriptions_listen_seconds": _summary(modern_times),
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 4), "max": round(max(values), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="changes measured (a fresh stack each)")
    args = parser.parse_args()
    report = asyncio.run(measure(args.rounds))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
