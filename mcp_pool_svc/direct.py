"""One connection to one MCP server outside any pool, made with the pool's own code.

What ``toolscout connect URL`` and ``toolscout auth login SERVER`` open: the pool's transports,
revision negotiation and OAuth 2.1 client (:mod:`toolscout_kit.oauth_client`), without supervision,
a catalog or a process reaper of the pool's (a stdio server still gets one of its own).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp_pool_svc.session import Connection, open_connection
from toolscout_kit.config import RemoteServerConfig, StdioServerConfig
from toolscout_kit.oauth_client import OAuthProvider

__all__ = ["Connection", "connect_server"]

# A reply line's limit: one connection shown to a person, not many held by a pool.
_MAX_LINE_BYTES = 64 * 1024 * 1024


@asynccontextmanager
async def connect_server(
    config: RemoteServerConfig | StdioServerConfig, *, auth: OAuthProvider | None = None
) -> AsyncIterator[Connection]:
    """Connects and negotiates within ``config.connect_timeout``; a remote server is authorized with
    ``auth`` when given. A stdio server runs in the current directory.

    Raises:
        toolscout_kit.oauth_approval.AuthorizationError: the server wants an authorization that failed.
        TimeoutError: the server did not answer in time.
        OSError: the command could not be started.
        mcp.MCPError: the server refused or closed the connection.
    """
    async with open_connection(
        config,
        lambda kind, detail: None,
        base_dir=Path.cwd(),
        on_stderr=lambda line: None,
        max_line_bytes=_MAX_LINE_BYTES,
        auth=auth,
    ) as conn:
        yield conn
