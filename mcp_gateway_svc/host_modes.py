"""Which mode a client is served in: by the name it announces (``gateway.modes_by_client``).

Hosts differ in what they do with a tool list: some search every tool themselves (they want the
whole, search-ready list), some never refresh a list after ``list_changed`` or open a session per
call (only the stable meta surface works for them). A client names itself in ``initialize``
(``clientInfo.name``, the handshake revisions) or in each request's ``_meta``
(``io.modelcontextprotocol/clientInfo``, 2026-07-28); the first glob pattern matching that name,
case-insensitively, picks the mode, and a session keeps the mode it was opened with.

The HTTP front reads and checks a request's body before the SDK transport does (the transport
reads it again from a replay, :mod:`mcp_gateway_svc.bodies`): the SDK's transport hands no parsed
request to its caller before choosing the server that answers it, and that choice is what a mode
is. :func:`opening_of` reads the client's name from that checked request.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_types import CLIENT_INFO_META_KEY

from toolscout_kit.config import GatewayMode

__all__ = ["Opening", "matched_mode", "mode_for_client", "opening_of"]


@dataclass(frozen=True, slots=True)
class Opening:
    """What a session-less POST says about its client: whether it is ``initialize``, the client's
    name ("" when it gives none), and whether it asks for progress."""

    initialize: bool
    client_name: str
    # The request asks for progress notifications (``_meta.progressToken``).
    asks_progress: bool = False


def mode_for_client(name: str, patterns: Mapping[str, GatewayMode], default: GatewayMode) -> GatewayMode:
    """The mode of the first pattern matching ``name`` (case-insensitive globs), else ``default``."""
    return (matched_mode(name, patterns) if name else None) or default


def matched_mode(name: str, patterns: Mapping[str, GatewayMode]) -> GatewayMode | None:
    """The mode of the first pattern matching ``name`` (case-insensitive globs), else None."""
    lowered = name.lower()
    for pattern, mode in patterns.items():
        if fnmatch.fnmatchcase(lowered, pattern.lower()):
            return mode
    return None


def _client_name(info: Any) -> str:
    name = info.get("name") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else ""


def opening_of(request: Mapping[str, Any]) -> Opening:
    """What a JSON-RPC request (the body the front has read and checked) says about its client."""
    params = request.get("params")
    params = params if isinstance(params, Mapping) else {}
    if request.get("method") == "initialize":
        return Opening(True, _client_name(params.get("clientInfo")))
    meta = params.get("_meta")
    if not isinstance(meta, Mapping):
        return Opening(False, "")
    return Opening(False, _client_name(meta.get(CLIENT_INFO_META_KEY)), meta.get("progressToken") is not None)
