"""The ``call_tool`` contract: its definition, reading a call, checking it, and every refusal.

On the cache-stable surface (the MCP gateway's meta mode, the orchestrator's ``deferral: stable``)
the model calls a found tool through ``call_tool`` (``{"name": ..., "arguments": {...}}``). This
module is the one owner of that contract; the gateway, the orchestrator and the orchestrator's
history rebuild are adapters over it:

- :data:`CALL_TOOL_PARAMETERS` and :data:`CALL_TOOL_DESCRIPTION` define the tool (discovery
  serves them, :func:`discovery_svc.surface.call_tool_definition`);
- :func:`read_call` reads a call (the model's JSON text, or the object an MCP client sent) into
  the tool it names and the arguments to run it with — parsed once;
- :func:`check_arguments` checks those arguments once against the named tool's input schema
  (``jsonschema``, :mod:`toolscout_kit.arguments`);
- every sentence the model reads when a call is refused is written here, and each refusal is a
  :class:`Refusal` with a :class:`RefusalKind`, so callers decide by kind, never by text.

The same refusals answer tools called by their own name (an unknown tool, a deferred one called
before a search found it, arguments that are not a JSON object), so a model reads one wording
whichever way it called a tool.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscout.client import CALL_TOOL_NAME, SEARCH_TOOL_NAME, Tool

from toolscout_kit.arguments import expected_shape, schema_text_problems
from toolscout_kit.json_text import JsonTextError, json_object_or_none, parse_json_object

__all__ = [
    "CALL_TOOL_DESCRIPTION",
    "CALL_TOOL_PARAMETERS",
    "CallTarget",
    "Refusal",
    "RefusalKind",
    "UnknownHint",
    "check_arguments",
    "not_loaded",
    "not_loaded_error",
    "parse_arguments",
    "read_call",
    "unknown_tool",
]

CALL_TOOL_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": "The exact name of a tool that search_tools returned (or one in the manifest).",
        },
        "arguments": {
            "type": "object",
            "description": "The tool's arguments, matching the input schema search_tools showed for it.",
        },
    },
    "required": ["name"],
}

CALL_TOOL_DESCRIPTION = (
    "Call a tool that search_tools found, by its name, with arguments that fit its input schema. "
    "Search first: the tools behind this one are not in your tool list."
)

_SHAPE = f'{CALL_TOOL_NAME} takes {{"name": "<a tool search_tools found>", "arguments": {{...}}}}'
_UNKNOWN_LIST_LIMIT = 30


class RefusalKind(enum.Enum):
    """Why a tool call was not run."""

    # The call's arguments are not a JSON object (not JSON, too deep, an array, ...).
    NOT_JSON = enum.auto()
    # A call_tool call without a tool name, or whose "arguments" is not an object.
    MALFORMED = enum.auto()
    # call_tool naming itself, or search_tools where that is to be called directly.
    META_TOOL = enum.auto()
    # No tool of that name in the caller's toolset.
    UNKNOWN_TOOL = enum.auto()
    # A deferred tool no search of the conversation (or session) has found yet.
    NOT_LOADED = enum.auto()
    # The arguments do not fit the tool's input schema.
    MISFIT = enum.auto()


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call that is not run: its kind, the tool it names (``""`` when it names none) and the
    sentence for the model (an error result's text, starting with ``Error:``)."""

    kind: RefusalKind
    tool: str
    text: str


@dataclass(frozen=True, slots=True)
class CallTarget:
    """The tool a ``call_tool`` call names and the arguments to run it with."""

    name: str
    arguments: dict[str, Any]


class UnknownHint(enum.Enum):
    """Where a refusal of an unknown tool points the model."""

    NONE = enum.auto()
    SEARCH = enum.auto()  # search_tools is offered
    TOOLS_LIST = enum.auto()  # an MCP endpoint listing every tool


def parse_arguments(tool: str, raw: str) -> dict[str, Any] | Refusal:
    """A call's arguments (JSON text from a model; blank is ``{}``) as an object, or the refusal
    naming ``tool`` when they are not a JSON object."""
    try:
        return parse_json_object(raw, "the arguments")
    except JsonTextError as err:
        # "the arguments are not valid JSON (...)", "the arguments must be a JSON object, not array"
        problem = f"the arguments {'' if err.requirement else 'are '}{err.problem}"
        text = f"Error: invalid arguments for tool '{tool}': {problem}. Call it again with a JSON object."
        return Refusal(RefusalKind.NOT_JSON, tool, text)


def _inner(call: Mapping[str, Any]) -> Any:
    """The "arguments" of a call_tool call: left out (or blank text) is ``{}``; as some models
    write it, the JSON text of an object is that object."""
    value = call.get("arguments", {})
    if isinstance(value, str):
        if not value.strip():
            return {}
        parsed = json_object_or_none(value)
        return value if parsed is None else parsed
    return value


def read_call(arguments: str | Mapping[str, Any], *, search_through: bool = False) -> CallTarget | Refusal:
    """The tool a ``call_tool`` call names and the arguments to run it with, or its refusal.

    ``arguments`` are the call's own arguments: the JSON text a model wrote, or the object an MCP
    client sent. ``search_through``: a call naming search_tools is a target (the gateway runs the
    search), else it is refused (the orchestrator offers search_tools beside call_tool).
    """
    if isinstance(arguments, str):
        parsed = parse_arguments(CALL_TOOL_NAME, arguments)
        if isinstance(parsed, Refusal):
            return parsed
        arguments = parsed
    name = arguments.get("name")
    inner = _inner(arguments)
    named = name.strip() if isinstance(name, str) else ""
    problems = []
    if not named:
        problems.append("'name' must be a tool name")
    if not isinstance(inner, Mapping):
        problems.append("'arguments' must be an object")
    if problems or not isinstance(inner, Mapping):
        return Refusal(RefusalKind.MALFORMED, named, f"Error: {_SHAPE}: {'; '.join(problems)}")
    if named == CALL_TOOL_NAME:
        text = f"Error: {CALL_TOOL_NAME} calls the tools {SEARCH_TOOL_NAME} finds, not itself."
        return Refusal(RefusalKind.META_TOOL, named, text)
    if named == SEARCH_TOOL_NAME and not search_through:
        text = f"Error: call {SEARCH_TOOL_NAME} directly, not through {CALL_TOOL_NAME}."
        return Refusal(RefusalKind.META_TOOL, named, text)
    return CallTarget(named, dict(inner))


def check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> Refusal | None:
    """None when ``arguments`` fit ``tool``'s input schema, else the refusal showing the expected
    shape (the problems, every argument, example arguments), so the model can correct itself."""
    problems = schema_text_problems(tool.input_schema_json, arguments)
    if not problems:
        return None
    text = f"Error: {expected_shape(tool.llm_name, tool.input_schema, problems)}"
    return Refusal(RefusalKind.MISFIT, tool.llm_name, text)


def not_loaded_error(name: str) -> str:
    """The PRD's exact text for a deferred tool called before search_tools loaded it."""
    return (
        f"Error: Tool '{name}' is not yet loaded. "
        "Use the 'search_tools' tool to discover and load it first, then call it again."
    )


def not_loaded(name: str) -> Refusal:
    """The refusal of deferred tool ``name`` called before a search found it."""
    return Refusal(RefusalKind.NOT_LOADED, name, not_loaded_error(name))


def unknown_tool(
    name: str,
    hint: UnknownHint,
    *,
    closest: Sequence[str] = (),
    available: Sequence[str] | None = None,
) -> Refusal:
    """The refusal of a tool the toolset does not have: the closest names when known, the tools
    that can be called (``available``, at most 30 listed) when given, and where to look."""
    text = f"Error: Unknown tool '{name}'"
    if closest:
        text += f" (closest: {', '.join(closest)})"
    text += "."
    if available is not None:
        names = sorted(available)
        listed = ", ".join(names[:_UNKNOWN_LIST_LIMIT]) + (
            ", ..." if len(names) > _UNKNOWN_LIST_LIMIT else ""
        )
        text += f" Available tools: {listed or 'none'}."
    if hint is UnknownHint.SEARCH:
        text += f" Use '{SEARCH_TOOL_NAME}' to find other tools."
    elif hint is UnknownHint.TOOLS_LIST:
        text += " See tools/list."
    return Refusal(RefusalKind.UNKNOWN_TOOL, name, text)
