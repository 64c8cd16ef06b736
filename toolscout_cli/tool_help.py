"""What a tool takes: ``toolscout describe TOOL``, and the expected shape after a failed ``call``."""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence

from toolscout.client import Tool, ToolscoutClient

from toolscout_cli.connection import EXIT_NOT_FOUND, EXIT_OK, CliError, Targets, program
from toolscout_cli.not_found import closest_tools, unknown
from toolscout_cli.output import Output
from toolscout_kit.arguments import argument_tree, example_arguments
from toolscout_kit.json_text import json_object_or_none

__all__ = ["describe", "find_tool", "invocation", "report_argument_problems", "show_expected_shape"]

# Flags that say where the stack is: repeated in the example so that it reaches the same stack.
_WHERE = (
    ("config", "-c"),
    ("target", "--target"),
    ("pool_target", "--pool-target"),
    ("discovery_target", "--discovery-target"),
    ("orchestrator_target", "--orchestrator-target"),
    ("ca_file", "--ca-file"),
)


def invocation(args: argparse.Namespace) -> str:
    """The command line prefix that reaches the same stack as this run (program + where-flags)."""
    given = getattr(args, "invocation", None)  # the walkthrough knows it already
    if isinstance(given, str) and given:
        return given
    parts = [program()]
    for attr, flag in _WHERE:
        value = getattr(args, attr, None)
        if value:
            parts += [flag, shlex.quote(str(value))]
    if getattr(args, "tls", False) and not getattr(args, "ca_file", None):
        parts.append("--tls")
    return " ".join(parts)


def find_tool(ts: ToolscoutClient, name: str, server: str = "") -> Tool | None:
    """The catalog entry for an LLM name, or for a tool's own name on ``server``."""
    for tool in ts.pool.list_tools([server] if server else []).tools:
        if tool.llm_name == name or (server and tool.name == name):
            return tool
    return None


def _unknown_tool(ts: ToolscoutClient, name: str, server: str) -> CliError:
    if server:
        own = [t.name for t in ts.pool.list_tools([server]).tools]
        return CliError(unknown("tool", name, own, where=f" on server '{server}'"), EXIT_NOT_FOUND)
    known = [t.llm_name for t in ts.pool.list_tools().tools]
    return CliError(unknown("tool", name, known, closest_tools(ts, name) or None), EXIT_NOT_FOUND)


def _example_call(args: argparse.Namespace, tool: Tool) -> str:
    arguments = json.dumps(example_arguments(tool.input_schema), ensure_ascii=False)
    return f"{invocation(args)} call {tool.llm_name} --args {shlex.quote(arguments)}"


def _annotations(tool: Tool) -> list[str]:
    raw = json_object_or_none(tool.annotations_json)
    if raw is None:
        return []
    hints = {
        "readOnlyHint": "read-only",
        "destructiveHint": "destructive",
        "idempotentHint": "idempotent",
        "openWorldHint": "open world",
    }
    return [label for key, label in hints.items() if raw.get(key) is True]


def describe(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    """``toolscout describe TOOL``: description, the full argument tree and an example call."""
    tool = find_tool(ts, args.tool, args.server or "")
    if tool is None:
        raise _unknown_tool(ts, args.tool, args.server or "")
    plan = ts.discovery.plan_tools(include_deferred_names=True)
    status = "deferred (found with search_tools)" if tool.llm_name in plan.deferred_tool_names else "loaded"
    example = example_arguments(tool.input_schema)
    if out.json_mode:
        out.json(
            {
                "name": tool.llm_name,
                "server": tool.server,
                "tool": tool.name,
                "title": tool.title,
                "description": tool.description,
                "status": status,
                "available": tool.available,
                "annotations": _annotations(tool),
                "input_schema": tool.input_schema,
                "example_arguments": example,
            }
        )
        return EXIT_OK
    title = f" — {tool.title}" if tool.title else ""
    facts = [f"server {tool.server}", f"tool {tool.name}", status, *_annotations(tool)]
    if not tool.available:
        facts.append("unavailable (its server is down)")
    out.line(f"{tool.llm_name}{title}")
    out.line(f"  {' · '.join(facts)}")
    if tool.description:
        out.line(f"  {' '.join(tool.description.split())}")
    out.line("")
    tree = argument_tree(tool.input_schema)
    if tree:
        out.line("Arguments:")
        for line in tree:
            out.line(line)
    else:
        out.line("Arguments: none")
    out.line("")
    out.line("Example:")
    out.line(f"  {_example_call(args, tool)}")
    return EXIT_OK


def report_argument_problems(
    args: argparse.Namespace, tool: Tool, problems: Sequence[str], out: Output
) -> None:
    """Arguments that do not fit the tool's schema, found before the call (which is then not
    sent): each problem once, what the tool takes and an example (stderr)."""
    out.note(f"toolscout: the arguments do not fit what {tool.llm_name} takes (the call was not sent):")
    for problem in problems:
        out.note(f"  {problem}")
    show_expected_shape(args, tool, out)


def show_expected_shape(args: argparse.Namespace, tool: Tool, out: Output) -> None:
    """What ``tool`` takes, nested arguments included, and an example call (stderr)."""
    tree = argument_tree(tool.input_schema)
    out.note("expected arguments:" if tree else "expected arguments: none")
    for line in tree:
        out.note(line)
    out.note(f"example: {_example_call(args, tool)}")
