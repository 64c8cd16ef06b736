"""toolscout's MCP pool service: supervised sessions to MCP servers, the tool catalog, tool calls.

What it reports and returns is the client library's vocabulary (``toolscout.client``); its own
types are what it keeps about a server (:class:`ListedTool`, :class:`PoolTool`, :class:`ServerState`).

Besides ``mcp_pool_svc.server.build_server``, a launcher may open one connection to one MCP server
with the pool's own code (:func:`connect_server`, yielding a :class:`Connection`): ``toolscout
connect`` and ``toolscout auth login`` do.
"""

from mcp_pool_svc.catalog import Catalog, ListedTool, PoolTool
from mcp_pool_svc.direct import Connection, connect_server
from mcp_pool_svc.naming import NameTable, llm_name
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState

__all__ = [
    "Catalog",
    "Connection",
    "ListedTool",
    "McpPool",
    "NameTable",
    "PoolTool",
    "ServerState",
    "connect_server",
    "llm_name",
]
