"""The gateway's own MCP resources: what it has to say beside its tools, read-only.

Today one: the full manifest of the toolset's deferred tools (``search_tools``' description holds
a short one within hosts' 2 KB limit; a call without arguments answers the same text). Resources
of the MCP servers behind the gateway are not served here.
"""

from __future__ import annotations

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_gateway_svc.views import ToolsetView

__all__ = ["MANIFEST_URI", "gateway_resources", "read_gateway_resource"]

MANIFEST_URI = "toolscout://manifest"
_TEXT = "text/plain"


def gateway_resources(view: ToolsetView) -> list[types.Resource]:
    """The gateway's resources for one toolset (none when nothing is deferred)."""
    if not view.manifest:
        return []
    return [
        types.Resource(
            uri=MANIFEST_URI,
            name="manifest",
            title="Servers and tools behind search_tools",
            description="Every server whose tools search_tools finds, with its tools' names and purpose.",
            mime_type=_TEXT,
            size=len(view.manifest.encode()),
        )
    ]


def read_gateway_resource(view: ToolsetView, uri: str) -> types.ReadResourceResult:
    """The contents of one of :func:`gateway_resources`.

    Raises:
        MCPError: no such resource (INVALID_PARAMS).
    """
    if uri == MANIFEST_URI and view.manifest:
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=_TEXT, text=view.manifest)]
        )
    raise MCPError(types.INVALID_PARAMS, f"unknown resource '{uri}'")
