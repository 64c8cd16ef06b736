"""The gateway's domain errors, in the kit's categories.

Most failures the gateway meets are answered as tool results (``isError``) for the model to act on;
these are the few that end a request as a JSON-RPC error instead.
"""

from __future__ import annotations

from toolscout_kit.errors import UnavailableError

__all__ = ["GatewayUnavailableError"]


class GatewayUnavailableError(UnavailableError):
    """Discovery has not given the gateway a plan for the toolset (unreachable, or unknown toolset)."""
