"""Large tool results for MCP hosts: the resource_link to a kept result, ``resources/read`` of it,
and the gateway's ``read_result`` tool.

The pool shapes a result to the host's budget (``gateway.result_budget``, per host
``gateway.result_budgets`` by the glob of its ``clientInfo.name``) and keeps the whole behind a
handle bound to the caller: the principal (the tenant of the bearer token, ``""`` without tokens)
and the conversation (the MCP session id on endpoints that keep sessions; the stateless meta mode
has none, so there the principal alone). The gateway adds a ``resource_link`` block to the
preview, ``toolscout://results/<handle>``; ``resources/read`` of it answers a page of the result
within the host's budget (``?offset=N`` reads on, as the page's last line says), and hosts that do
not read resource links call ``read_result`` (discovery's definition, listed beside call_tool in
meta mode) to page, grep or project it. Anyone else's handle is "not found", as the pool answers.

The gateway serves no other resources here: ``resources/list`` is empty (kept results are
reached by their links only) and any other URI is not found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import mcp_types as types
from mcp.shared.exceptions import MCPError
from toolscout.client import (
    READ_RESULT_NAME,
    AsyncShardedPoolClient,
    InvalidArgumentError,
    NotFoundError,
    ReadRequest,
    ToolscoutClientError,
)

from toolscout_kit.logging import get_logger
from toolscout_kit.result_tool import read_arguments, read_refused_text

__all__ = ["RESULT_URI_PREFIX", "KeptResults", "ResultOwner", "handle_of_uri", "result_link"]

_log = get_logger(__name__)

RESULT_URI_PREFIX = "toolscout://results/"
# MCP's error code for a resource that does not exist (the specification's "Resource not found").
_RESOURCE_NOT_FOUND = -32002


@dataclass(frozen=True, slots=True)
class ResultOwner:
    """Who calls, for result shaping: the budget of its host (0: none) and what handles bind to."""

    budget: int
    principal: str
    conversation: str


def result_link(handle: str, what: str) -> types.ResourceLink:
    """The ``resource_link`` block to the whole of a result kept under ``handle``."""
    return types.ResourceLink(
        type="resource_link",
        uri=f"{RESULT_URI_PREFIX}{handle}",
        name=f"result-{handle}",
        title=f"The whole result of {what}",
        description=(
            "The whole tool result the preview above abbreviates: resources/read returns it a page "
            f"at a time (?offset=N reads on); or call {READ_RESULT_NAME} with this handle."
        ),
    )


def handle_of_uri(uri: str) -> tuple[str, int] | None:
    """(handle, offset) of a ``toolscout://results/<handle>[?offset=N]`` URI, else None."""
    if not uri.startswith(RESULT_URI_PREFIX):
        return None
    parts = urlsplit(uri)
    handle = parts.path.lstrip("/")
    if not handle or "/" in handle:
        return None
    raw = parse_qs(parts.query).get("offset", ["0"])[-1]
    if not raw.isdigit():
        return None
    return handle, int(raw)


class KeptResults:
    """Reads results the pool kept, for MCP hosts (resources/read and the read_result tool)."""

    def __init__(self, pool: AsyncShardedPoolClient) -> None:
        self._pool = pool

    async def read_resource(self, uri: str, owner: ResultOwner) -> types.ReadResourceResult:
        """A page of the kept result ``uri`` names.

        Raises:
            MCPError: -32002 (not found: not such a URI, another caller's handle, or expired: the
                message then says which tool to run again), INVALID_PARAMS (an offset past the
                end), INTERNAL_ERROR (the pool did not answer).
        """
        parsed = handle_of_uri(uri)
        if parsed is None:
            raise MCPError(_RESOURCE_NOT_FOUND, f"no resource {uri!r}")
        handle, offset = parsed
        request = ReadRequest(
            handle=handle,
            principal=owner.principal,
            conversation=owner.conversation,
            offset=offset,
            budget_tokens=owner.budget,
        )
        try:
            read = await self._pool.read_result(request)
        except NotFoundError as err:
            raise MCPError(_RESOURCE_NOT_FOUND, err.message) from None
        except InvalidArgumentError as err:
            raise MCPError(types.INVALID_PARAMS, err.message) from None
        except ToolscoutClientError as err:
            _log.warning("reading a kept result failed", error=err.message)
            raise MCPError(
                types.INTERNAL_ERROR, "the result could not be read right now; try again"
            ) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=read.text)]
        )

    async def read_tool(self, arguments: Mapping[str, Any], owner: ResultOwner) -> types.CallToolResult:
        """A ``read_result`` call: the read's text, or an error result the model can act on."""
        request = read_arguments(arguments, principal=owner.principal, conversation=owner.conversation)
        if isinstance(request, str):
            return _error(request)
        if owner.budget:
            request = dataclasses.replace(request, budget_tokens=owner.budget)
        try:
            read = await self._pool.read_result(request)
        except (NotFoundError, InvalidArgumentError) as err:
            return _error(read_refused_text(err.message))
        except ToolscoutClientError as err:
            _log.warning("read_result failed", error=err.message)
            return _error(f"{READ_RESULT_NAME} is unavailable right now (the pool did not answer); try again")
        return types.CallToolResult(content=[types.TextContent(type="text", text=read.text)])


def _error(text: str) -> types.CallToolResult:
    # As calls.error_result (which imports this module for the link).
    text = text if text.startswith("Error") else f"Error: {text}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
