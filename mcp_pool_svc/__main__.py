"""``python -m mcp_pool_svc --config PATH [--shard K/N]`` (or ``TOOLSCOUT_CONFIG``): run the MCP pool.

A sharded pool process learns its shard from ``--shard K/N`` or, in a StatefulSet, from its pod
name in ``TOOLSCOUT_POD_NAME`` (``<statefulset>-<K>``, set from the downward API) with the
configured ``toolscout.pool.shards.count``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mcp_pool_svc.server import build_server
from toolscout_kit.entrypoint import run_service

POD_NAME_ENV = "TOOLSCOUT_POD_NAME"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help=f"this process is shard K of N (default: from ${POD_NAME_ENV}, else unsharded)",
    )


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {"shard_spec": args.shard, "pod_name": os.environ.get(POD_NAME_ENV) or None}


def main() -> int:
    return run_service("mcp_pool_svc", build_server, add_arguments=_arguments, options=_options)


if __name__ == "__main__":
    sys.exit(main())
