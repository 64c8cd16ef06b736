"""toolscout's MCP pool service: supervised sessions to MCP servers, the tool catalog, tool calls.

What it reports and returns is the client library's vocabulary (``toolscout.client``); its own
types are what it keeps about a server (:class:`ListedTool`, :class:`PoolTool`, :class:`ServerState`).
"""

from mcp_pool_svc.catalog import Catalog, ListedTool, PoolTool
from mcp_pool_svc.naming import NameTable, llm_name
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState

__all__ = ["Catalog", "ListedTool", "McpPool", "NameTable", "PoolTool", "ServerState", "llm_name"]
