"""toolscout's Python packages: ``toolscout.client`` and the generated gRPC stubs.

Importing this package imports ``grpc`` with one default of gRPC's C core, unless the environment
sets ``GRPC_EXPERIMENTS`` itself: ``-event_engine_client,-event_engine_listener``. It runs gRPC's
connections on the core's own poller instead of its EventEngine. On this project's 2-core
machines that made one message on an open stream between two processes 0.23 ms instead of
0.31 ms (bench/README, "gRPC's poller"). gRPC reads the variable once, while ``grpc`` is first
imported; the default is set only for that import and then removed, so processes this one starts
(MCP servers included) see the environment as it was. A value of your own (even an empty one)
always wins, and a process that imported ``grpc`` before ``toolscout`` keeps gRPC's own default.

The default is applied only on the grpcio releases it was measured on (:data:`GRPC_MEASURED`):
a later gRPC may drop these experiments (its core then logs "Unknown experiment" at start), so a
newer grpcio keeps its own default until it is measured and added here.
"""

import os
import sys
from importlib.metadata import PackageNotFoundError, version

GRPC_EXPERIMENTS_DEFAULT = "-event_engine_client,-event_engine_listener"
# The grpcio releases (major.minor) the default was measured and tested on.
GRPC_MEASURED = frozenset({"1.85"})


def grpc_default_applies(grpcio_version: str) -> bool:
    """Whether :data:`GRPC_EXPERIMENTS_DEFAULT` is for this grpcio release."""
    return ".".join(grpcio_version.split(".")[:2]) in GRPC_MEASURED


def _grpcio_version() -> str:
    try:
        return version("grpcio")
    except PackageNotFoundError:
        return ""


if (
    "grpc" not in sys.modules
    and "GRPC_EXPERIMENTS" not in os.environ
    and grpc_default_applies(_grpcio_version())
):
    os.environ["GRPC_EXPERIMENTS"] = GRPC_EXPERIMENTS_DEFAULT
    try:
        import grpc  # noqa: F401
    finally:
        del os.environ["GRPC_EXPERIMENTS"]
