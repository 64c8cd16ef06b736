"""The orchestrator service: runs the provider tool loop with tool discovery over gRPC.

Start it with ``python -m orchestrator_svc --config PATH`` or ``orchestrator_svc.server.build_server``.
"""

from orchestrator_svc.loop import ChatLoop, ChatOutcome, ChatRequest

__all__ = ["ChatLoop", "ChatOutcome", "ChatRequest"]
