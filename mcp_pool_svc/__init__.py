"""toolscout's MCP pool service: supervised sessions to MCP servers, the tool catalog, tool calls."""

from mcp_pool_svc.catalog import Catalog, CatalogSnapshot, CatalogTool, ListedTool
from mcp_pool_svc.naming import NameTable, llm_name
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.results import ContentItem, ToolResult
from mcp_pool_svc.supervisor import ServerState, ServerStatus

__all__ = [
    "Catalog",
    "CatalogSnapshot",
    "CatalogTool",
    "ContentItem",
    "ListedTool",
    "McpPool",
    "NameTable",
    "ServerState",
    "ServerStatus",
    "ToolResult",
    "llm_name",
]
