"""The web console at ``/console`` on the gateway's HTTP server: servers, catalog and manifest,
the search playground, a chat with its tool calls, and token figures (see README, "Console").

:class:`mcp_gateway_svc.console.app.Console` is the application; this package's top level holds
only its path rule, which the gateway's front imports.
"""

from mcp_gateway_svc.console.paths import PREFIX, is_console_path, is_event_stream

__all__ = ["PREFIX", "is_console_path", "is_event_stream"]
