"""toolscout's Python packages: ``toolscout.client`` and the generated gRPC stubs.

Importing this package imports ``grpc`` with one default of gRPC's C core, unless the environment
sets ``GRPC_EXPERIMENTS`` itself: ``-event_engine_client,-event_engine_listener``. It runs gRPC's
connections on the core's own poller instead of its EventEngine. On this project's 2-core
machines that made one message on an open stream between two processes 0.16 ms instead of
0.27 ms (bench/README, "gRPC's poller"). gRPC reads the variable once, while ``grpc`` is first
imported; the default is set only for that import and then removed, so processes this one starts
(MCP servers included) see the environment as it was. A value of your own (even an empty one)
always wins, and a process that imported ``grpc`` before ``toolscout`` keeps gRPC's own default.
"""

import os
import sys

GRPC_EXPERIMENTS_DEFAULT = "-event_engine_client,-event_engine_listener"

if "grpc" not in sys.modules and "GRPC_EXPERIMENTS" not in os.environ:
    os.environ["GRPC_EXPERIMENTS"] = GRPC_EXPERIMENTS_DEFAULT
    try:
        import grpc  # noqa: F401
    finally:
        del os.environ["GRPC_EXPERIMENTS"]
