"""The orchestrator service: runs the provider tool loop with tool discovery over gRPC.

Start it with ``python -m orchestrator_svc --config PATH`` or ``orchestrator_svc.server.build_server``.
A launcher such as ``toolscout up`` may check a config before anything starts with
:func:`check_templates` (every model's system prompt template loads; ``build_server`` checks it too).
"""

from orchestrator_svc.loop import ChatLoop, ChatOutcome, ChatRequest
from orchestrator_svc.prompts import check_templates

__all__ = ["ChatLoop", "ChatOutcome", "ChatRequest", "check_templates"]
