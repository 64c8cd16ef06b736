"""The cache-stable tool surface: the one ``search_tools`` / ``call_tool`` pair every consumer serves.

On the stable surface the tool list is the toolset's eager tools, ``search_tools`` and
``call_tool``, and nothing else for a whole catalog version: a search never changes it, so a prompt
cache keyed on the tools survives every search (the MCP client best practices' remedy for cache
churn). A search answers with each found tool's full definition as text the model reads and as
data (an MCP ``structuredContent``); the model then calls ``call_tool`` with the tool's name and
arguments, which the caller validates against the tool's input schema before the pool runs it
(:mod:`toolscout_kit.call_tool` owns that contract: the definition, reading and checking a call,
and every refusal).

Discovery owns these definitions and texts so that the orchestrator (``deferral: stable``) and the
MCP gateway (meta mode) send the same bytes. It owns ``read_result`` the same way: every plan
carries its definition (any surface), which a caller offers while a tool result it got is a
preview with a live handle (the orchestrator: while its history shows one; the gateway: beside
call_tool in meta mode). Its arguments are read by :func:`toolscout_kit.result_tool.read_arguments`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolscout.client import CALL_TOOL_NAME, READ_RESULT_NAME, Tool

from discovery_svc.catalog import ParsedTool
from toolscout_kit.call_tool import CALL_TOOL_DESCRIPTION, CALL_TOOL_PARAMETERS

__all__ = [
    "CALL_TOOL_NAME",
    "CALL_TOOL_PARAMETERS",
    "READ_RESULT_PARAMETERS",
    "READ_RESULT_TOOL",
    "call_tool_definition",
    "format_tool_with_schema",
    "stable_call_hint",
    "structured_result",
]


def call_tool_definition() -> ParsedTool:
    """The ``call_tool`` tool (its bytes never depend on the catalog); the contract, its
    definition included, is :mod:`toolscout_kit.call_tool`'s."""
    return ParsedTool.own(CALL_TOOL_NAME, CALL_TOOL_DESCRIPTION, CALL_TOOL_PARAMETERS)


READ_RESULT_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "handle": {
            "type": "string",
            "description": "The handle a result preview gave (e.g. 'r0-AbC...').",
        },
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "Read a page from this character offset (the default when no pattern or path).",
        },
        "pattern": {
            "type": "string",
            "description": "Return the lines containing this text (literal, case-insensitive).",
        },
        "context_lines": {
            "type": "integer",
            "minimum": 0,
            "maximum": 20,
            "description": "With pattern: lines shown before and after each match.",
        },
        "path": {
            "type": "string",
            "description": "For a JSON result: a JMESPath expression, e.g. items[0] or items[?id==`3`].name.",
        },
    },
    "required": ["handle"],
}

_READ_RESULT_DESCRIPTION = (
    "Read more of a tool result that was too large and came back as a preview with a handle: "
    "a page from a character offset, the lines matching a pattern (with context lines), or a "
    "JMESPath path of a JSON result. Only handles shown in this conversation can be read."
)

# Built once: its bytes never depend on the catalog (prompt caches, and the gateway's lists).
READ_RESULT_TOOL = ParsedTool.own(READ_RESULT_NAME, _READ_RESULT_DESCRIPTION, READ_RESULT_PARAMETERS)


def _schema_text(tool: Tool) -> str:
    return json.dumps(tool.input_schema, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def format_tool_with_schema(tool: Tool, head: str) -> str:
    """One found tool on the stable surface: ``head`` (name, server, description) and its whole
    input schema as compact JSON, which is what the model must fit its call_tool arguments to."""
    return f"{head}\n  Input schema: {_schema_text(tool)}"


def stable_call_hint(new: Sequence[Tool]) -> str:
    """The closing sentence after found tools: how to call them through call_tool."""
    first = new[0].llm_name
    return (
        f"Call them with {CALL_TOOL_NAME}, e.g. "
        f'{{"name": "{first}", "arguments": {{...}}}} with arguments that fit the input schema.'
    )


def structured_result(
    new: Sequence[Tool],
    old: Sequence[Tool],
    missing: Sequence[tuple[str, Sequence[str]]],
    total: int,
    guidance: str = "",
) -> dict[str, Any]:
    """The search answer as data (an MCP tool result's ``structuredContent``); ``guidance`` is
    what the text says besides the tools (the no-match hint, how to call what was found)."""
    return {
        "tools": [
            {
                "name": t.llm_name,
                "server": t.server,
                "tool": t.name,
                "description": t.description,
                "inputSchema": dict(t.input_schema),
            }
            for t in new
        ],
        "alreadyLoaded": [t.llm_name for t in old],
        "notFound": [{"name": name, "closest": list(closest)} for name, closest in missing],
        "totalMatches": total,
        "guidance": guidance,
    }
