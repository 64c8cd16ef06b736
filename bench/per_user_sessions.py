"""Memory per principal of per_user sessions (issue 33): the pool holds one MCP session per
(server, principal) of a server configured with ``auth.per_user``.

Starts the test authorization server (npm ``oidc-provider``) and the SDK resource server of
``tests/support``, signs in one user, copies that authorization to N principals (the memory is
the session's, whoever it is for), then calls the server as each principal through the pool in
process and reports the Python heap (tracemalloc) and RSS growth per open session, and the
first-call (session opening) and warm call latency.

    uv run --frozen python bench/per_user_sessions.py [--principals 200] [--heap]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from cryptography.fernet import Fernet
from mcp.shared.auth_utils import resource_url_from_server_url
from toolscout.client import CallRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_pool_svc.pool import McpPool
from tests.support.oauth_servers import (
    login_as,
    running_authorization_server,
    running_protected_server,
)
from toolscout_kit.config import parse_config
from toolscout_kit.token_store import STACK_PRINCIPAL, CredentialKey, TokenStore

RESULTS = Path(__file__).parent / "results" / "per_user_sessions.json"


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def _measure(url: str, count: int, env: dict[str, str], heap: bool) -> dict[str, float]:
    store = TokenStore.from_env(env)
    await login_as(url, store, STACK_PRINCIPAL, "operator")
    await login_as(url, store, "user-0", "alice")
    resource_url = resource_url_from_server_url(url)
    [(key, entry)] = [(k, e) for k, e in store.entries() if k.principal == "user-0"]
    for i in range(1, count):
        store.update(CredentialKey(f"user-{i}", key.issuer, resource_url), entry)
    config = parse_config(
        {
            "toolscout": {"pool": {"per_user_sessions": count + 10}},
            "servers": {"protected": {"url": url, "auth": {"type": "oauth", "per_user": True}}},
        }
    )
    pool = McpPool(config, environ=env)
    await pool.start(wait=60)
    try:
        # One session first (imports, caches), then the measured ones.
        await pool.call(CallRequest(server="protected", tool="whoami", principal="user-0"))
        if heap:
            tracemalloc.start()
        heap0, rss0 = tracemalloc.get_traced_memory()[0], _rss_mb()
        first: list[float] = []
        for i in range(1, count):
            started = time.perf_counter()
            await pool.call(CallRequest(server="protected", tool="whoami", principal=f"user-{i}"))
            first.append(time.perf_counter() - started)
        heap1, rss1 = tracemalloc.get_traced_memory()[0], _rss_mb()
        tracemalloc.stop()
        warm: list[float] = []
        for i in range(1, count):
            started = time.perf_counter()
            await pool.call(CallRequest(server="protected", tool="whoami", principal=f"user-{i}"))
            warm.append(time.perf_counter() - started)
        sessions = len(pool._users)
    finally:
        await pool.stop()
    opened = count - 1
    return {
        "principals": count,
        "sessions_open": sessions,
        # Python objects alone (tracemalloc), or the process's resident growth (tracemalloc off).
        **(
            {"heap_kb_per_session": round((heap1 - heap0) / opened / 1024, 1)}
            if heap
            else {"rss_kb_per_session": round((rss1 - rss0) * 1000 / opened, 1)}
        ),
        "first_call_ms_p50": round(statistics.median(first) * 1000, 2),
        "warm_call_ms_p50": round(statistics.median(warm) * 1000, 2),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--principals", type=int, default=200)
    parser.add_argument(
        "--heap", action="store_true", help="trace the Python heap (slower; RSS not reported)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"TOOLSCOUT_TOKEN_FILE": f"{tmp}/t.json", "TOOLSCOUT_TOKEN_KEY": Fernet.generate_key().decode()}
        with (
            running_authorization_server(account="operator") as auth,
            running_protected_server(auth.issuer) as protected,
        ):
            figures = asyncio.run(_measure(protected.url, args.principals, env, args.heap))
    print(json.dumps(figures, indent=1))
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    saved["heap" if args.heap else "rss"] = figures
    RESULTS.write_text(json.dumps(saved, indent=1) + "\n")


if __name__ == "__main__":
    main()
