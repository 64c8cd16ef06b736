"""gRPC's defaults set by the client library's root (``toolscout/__init__.py``).

gRPC reads ``GRPC_EXPERIMENTS`` once, while ``grpc`` is first imported, so what matters is the
environment at that moment in each process toolscout starts: every service's and the CLI's entry
point must reach ``toolscout`` before ``grpc``. The default must not outlive that import (an MCP
server the pool starts inherits the environment). Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest
from toolscout import GRPC_EXPERIMENTS_DEFAULT, grpc_default_applies

ENTRY_POINTS = [
    "mcp_pool_svc.__main__",
    "mcp_gateway_svc.__main__",
    "discovery_svc.__main__",
    "orchestrator_svc.__main__",
    "toolscout_cli.__main__",
    "toolscout.client",
    "toolscout_kit.server",
]

# Records GRPC_EXPERIMENTS as it is when something first imports grpc, then imports the module.
_AT_GRPC_IMPORT = textwrap.dedent(
    """
    import importlib, json, os, sys
    seen = []
    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name == "grpc" and not seen:
                seen.append(os.environ.get("GRPC_EXPERIMENTS"))
            return None
    sys.meta_path.insert(0, Watch())
    importlib.import_module(sys.argv[1])
    print(json.dumps({
        "imported_grpc": bool(seen),
        "value": seen[0] if seen else None,
        "after": os.environ.get("GRPC_EXPERIMENTS"),
    }))
    """
)


def _run(args: list[str], env_changes: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_default_is_for_the_grpcio_installed() -> None:
    """A grpcio upgrade fails here until the default is measured on it (bench/grpc_poller.py,
    bench/gateway_call_overhead.py) and its release added to ``toolscout.GRPC_MEASURED``."""
    installed = metadata.version("grpcio")
    assert grpc_default_applies(installed), f"grpcio {installed}: not measured with the default"


def test_other_grpcio_releases_keep_grpcs_own_default() -> None:
    assert grpc_default_applies("1.85.1")
    assert grpc_default_applies("1.85.0rc1")
    assert not grpc_default_applies("1.86.0")
    assert not grpc_default_applies("2.0.0")
    assert not grpc_default_applies("")


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_every_entry_point_sets_the_default_before_grpc_is_imported(module: str) -> None:
    done = _run(["-c", _AT_GRPC_IMPORT, module], {"GRPC_EXPERIMENTS": None})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "imported_grpc": True,
        "value": GRPC_EXPERIMENTS_DEFAULT,
        "after": None,  # set for gRPC's import only: processes started later see the user's environment
    }


@pytest.mark.parametrize("value", ["", "-event_engine_client"])
def test_a_value_of_the_users_own_wins(value: str) -> None:
    done = _run(["-c", _AT_GRPC_IMPORT, "mcp_pool_svc.__main__"], {"GRPC_EXPERIMENTS": value})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert (seen["value"], seen["after"]) == (value, value)


def test_grpc_knows_the_default_and_serves_with_it() -> None:
    """An experiment gRPC no longer has is logged as an error by its core: a gRPC upgrade shows here."""
    script = textwrap.dedent(
        """
        import asyncio
        import toolscout
        import grpc

        async def main():
            echo = grpc.unary_unary_rpc_method_handler(lambda request, context: request[::-1])
            server = grpc.aio.server()
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", {"E": echo}),))
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                answer = await channel.unary_unary("/t.T/E")(b"abc", timeout=10)
            await server.stop(None)
            print(answer.decode())

        asyncio.run(main())
        """
    )
    done = _run(["-c", script], {"GRPC_EXPERIMENTS": None, "GRPC_VERBOSITY": "ERROR"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cba"
    assert "experiment" not in done.stderr.lower(), done.stderr
