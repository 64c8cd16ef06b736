"""What the LLM reads from ``search_tools``: each found tool with its parameters, and the hints.

This text is the product: the orchestrator hands it to the model verbatim, so its wording is
tested exactly.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscout.client import Tool

from discovery_svc.search_args import SearchArgs, SearchMode
from discovery_svc.surface import CALL_TOOL_NAME, format_tool_with_schema, stable_call_hint

__all__ = ["Answer", "Missing", "format_tool", "guidance_text", "result_text", "unsigned_note"]

# A name that was asked for and not found, with the closest existing names.
Missing = tuple[str, Sequence[str]]

_DESCRIPTION_CHARS = 400
_PARAM_DESCRIPTION_CHARS = 160
# Nested fields of object parameters: levels below a parameter, and lines per tool at most.
_MAX_NESTING = 3
_NESTED_LINES = 40
_WS = re.compile(r"\s+")


def _one_line(text: str, limit: int) -> str:
    text = _WS.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _type_of(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        result = "|".join(str(k) for k in kind)
    elif kind == "array":
        items = schema.get("items")
        inner = _type_of(items) if isinstance(items, Mapping) else "any"
        result = f"array of {inner}" if inner != "any" else "array"
    elif isinstance(kind, str):
        result = kind
    else:
        variants = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(variants, list) and variants:
            result = "|".join(dict.fromkeys(_type_of(v) for v in variants))
        elif "enum" in schema:
            result = "enum"
        else:
            result = "object" if "$ref" in schema or "properties" in schema else "any"
    return result


def _resolve(node: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node`` with a local ``$ref`` (``#/$defs/Location``) followed, bounded against cycles."""
    for _ in range(_MAX_NESTING * 4):
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        if not isinstance(ref, str) or not ref.startswith("#/"):
            break
        target: Any = root
        for key in ref[2:].split("/"):
            target = (
                target.get(key.replace("~1", "/").replace("~0", "~")) if isinstance(target, Mapping) else None
            )
        if not isinstance(target, Mapping):
            break
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node if isinstance(node, Mapping) else {}


def _object_inside(prop: Any, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object schema a parameter holds (through ``$ref``, ``anyOf [X, null]`` and array items)."""
    node = _resolve(prop, root)
    for _ in range(2):
        variants = node.get("anyOf") or node.get("oneOf")
        if isinstance(variants, list):
            objects = [_resolve(v, root) for v in variants]
            objects = [v for v in objects if isinstance(v.get("properties"), Mapping)]
            node = objects[0] if len(objects) == 1 else node
        if node.get("type") == "array":
            node = _resolve(node.get("items"), root)
    return node if isinstance(node.get("properties"), Mapping) and node.get("properties") else None


def _parameters(
    schema: Mapping[str, Any],
    root: Mapping[str, Any] | None = None,
    depth: int = 0,
    budget: list[int] | None = None,
) -> list[str]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return []
    root = schema if root is None else root
    budget = [_NESTED_LINES] if budget is None else budget
    required = schema.get("required")
    required_set = set(required) if isinstance(required, list) else set()
    indent = "    " + "  " * depth
    lines = []
    for i, (name, prop) in enumerate(props.items()):
        if depth:
            if budget[0] <= 0:
                lines.append(f"{indent}- ... and {len(props) - i} more")
                break
            budget[0] -= 1
        flag = ", required" if name in required_set else ""
        desc = prop.get("description") if isinstance(prop, Mapping) else None
        text = (
            f": {_one_line(desc, _PARAM_DESCRIPTION_CHARS)}" if isinstance(desc, str) and desc.strip() else ""
        )
        lines.append(f"{indent}- {name} ({_type_of(prop)}{flag}){text}")
        # An object parameter lists its own fields below it: "location (object)" alone does not
        # tell the model that it wants {"location": {"city": ...}}.
        inner = _object_inside(prop, root) if depth < _MAX_NESTING else None
        if inner is not None:
            lines.extend(_parameters(inner, root, depth + 1, budget))
    return lines


# A tool's text only changes with the tool itself, and the same tools are found again and again:
# formatting dominated a search's cost before this cache (bench/discovery_bench.py).
@functools.lru_cache(maxsize=8192)
def format_tool(tool: Tool, *, parameters: bool = True) -> str:
    """One tool as the LLM reads it: name to call, server, description and (unless the provider
    loads its definition itself: native deferral) its parameters."""
    lines = [f"- {tool.llm_name} (server: {tool.server}, tool: {tool.name})"]
    lines.append(f"  {_one_line(tool.description, _DESCRIPTION_CHARS) or '(no description)'}")
    if not parameters:
        return "\n".join(lines)
    params = _parameters(tool.input_schema)
    if params:
        lines.append("  Parameters:")
        lines.extend(params)
    else:
        lines.append("  Parameters: none")
    return "\n".join(lines)


def _not_found_line(missing: Sequence[Missing]) -> str:
    parts = []
    for name, suggestions in missing:
        closest = f"closest: {', '.join(suggestions)}" if suggestions else "no similar names"
        parts.append(f"'{name}' ({closest})")
    return "Not found: " + "; ".join(parts) + "."


def _empty_text(args: SearchArgs, mode: SearchMode, missing: Sequence[Missing]) -> str:
    server = args.server_name
    if mode is SearchMode.TOOL_NAMES:
        where = f" in server '{server}'" if server else ""
        return (
            f"No tools found with those names{where}. {_not_found_line(missing)} "
            "Use exact names from the manifest, or search with a query."
        )
    parts = [f"No tools found matching '{args.query}'"]
    if server:
        parts.append(
            f" in server '{server}'. Try other keywords, or call search_tools with only "
            f'server_name="{server}" to list its tools.'
        )
    else:
        parts.append(
            ". Try fewer or different keywords (an action and an object, e.g. 'send email'), "
            "or list a server's tools with server_name."
        )
    text = "".join(parts)
    return f"{text} {_not_found_line(missing)}" if missing else text


def _already_loaded(old: Sequence[Tool], eager: Collection[str] | None) -> list[str]:
    if eager is None:
        return ["Already loaded (call directly): " + ", ".join(t.llm_name for t in old)]
    # The stable surface: eager tools are in the tool list, tools found earlier are not.
    direct = [t.llm_name for t in old if t.llm_name in eager]
    through = [t.llm_name for t in old if t.llm_name not in eager]
    lines = []
    if direct:
        lines.append("Already in your tool list (call directly): " + ", ".join(direct))
    if through:
        lines.append(f"Found earlier (call with {CALL_TOOL_NAME}): " + ", ".join(through))
    return lines


@dataclass(frozen=True, slots=True)
class Answer:
    """What one search found, as its texts tell it: ``new`` tools (loaded by this search), ``old``
    ones (already loaded), the servers named that do not exist (``missing``), and ``page``,
    ``(start, end, total)`` when a server's tools are being browsed."""

    args: SearchArgs
    mode: SearchMode
    new: Sequence[Tool]
    old: Sequence[Tool]
    missing: Sequence[Missing]
    page: tuple[int, int, int] | None


def result_text(
    answer: Answer, *, parameters: bool = True, stable_eager: Collection[str] | None = None
) -> str:
    """The text the LLM reads for one search: new tools in full, old (already loaded) by name.

    Without ``parameters`` (native deferral: the provider loads each found tool's whole
    definition by reference) the tools are listed by name and description only, so nothing is
    sent twice. ``stable_eager`` (the toolset's eager tools) selects the cache-stable surface:
    each new tool comes with its whole input schema, to be called through call_tool.
    """
    args, new, old, page = answer.args, answer.new, answer.old, answer.page
    if not new and not old:
        return _empty_text(args, answer.mode, answer.missing)
    stable = stable_eager is not None
    sections: list[str] = []
    if page is not None:
        start, end, total = page
        sections.append(f"Server '{args.server_name}' has {total} tools; showing {start + 1}-{end}:")
    else:
        count = len(new) + len(old)
        word = "tool" if count == 1 else "tools"
        sections.append(f"Found {count} {word}:")
    if new and stable:
        blocks = (format_tool_with_schema(t, format_tool(t, parameters=False)) for t in new)
        sections.append("\n\n".join(blocks))
    elif new:
        sections.append("\n\n".join(format_tool(t, parameters=parameters) for t in new))
    sections.extend(_guidance(answer, stable_eager))
    return "\n\n".join(sections)


def guidance_text(answer: Answer, *, stable_eager: Collection[str] | None = None) -> str:
    """What :func:`result_text` says besides the tools: the no-match hint, what to call and how,
    the next page (a host that shows the model only an answer's ``structuredContent`` needs it
    there too)."""
    if not answer.new and not answer.old:
        return _empty_text(answer.args, answer.mode, answer.missing)
    return "\n\n".join(_guidance(answer, stable_eager))


def _guidance(answer: Answer, stable_eager: Collection[str] | None) -> list[str]:
    args, new, old, missing, page = answer.args, answer.new, answer.old, answer.missing, answer.page
    stable = stable_eager is not None
    sections: list[str] = []
    if old:
        sections.extend(_already_loaded(old, stable_eager))
    if missing:
        sections.append(_not_found_line(missing))
    if new and stable:
        sections.append(stable_call_hint(new))
    elif new:
        sections.append("These tools are now loaded and available to call.")
    else:
        sections.append("No new tools were loaded: every match is already available to call.")
    if page is not None and page[1] < page[2]:
        start, end, total = page
        sections.append(
            f"Showing {start + 1}-{end} of {total}. Call search_tools again with "
            f'server_name="{args.server_name}" and offset={end} for more.'
        )
    return sections


def unsigned_note(servers: Sequence[str]) -> str:
    """What a principal's search adds about the ``per_user`` servers of the toolset they have not
    signed in to (their tools are found once they have): "" when there are none."""
    if not servers:
        return ""
    return f"\n\nNot searched: {_unsigned(servers)}; they are found here once you have."


def unsigned_server_text(server: str) -> str:
    """The answer to a principal's browse (``server_name``) of a ``per_user`` server they have not
    signed in to: no tools of it yet, and why."""
    return f"No tools of server '{server}' yet: {_unsigned([server])}; browse it again once you have."


def _unsigned(servers: Sequence[str]) -> str:
    names = ", ".join(f"'{s}'" for s in servers)
    several = len(servers) > 1
    return (
        f"MCP server{'s' if several else ''} {names} "
        f"{'list their' if several else 'lists its'} tools to each user under their own sign-in, "
        "and you have not signed in yet"
    )
