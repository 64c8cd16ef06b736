"""One wording for every "not found" the CLI reports (exit 3), with the closest names.

The three services word their NOT_FOUND messages each in their own way; the CLI finds out which
of the names it was given is unknown and says so the same way every time:
``unknown <kind> '<name>' (closest: a, b)`` or, with nothing close, ``(<kind>s: a, b, c)``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from toolscout.client import NotFoundError, ToolscoutClient, ToolscoutClientError

from toolscout_kit.names import unknown_name

__all__ = ["closest_tools", "explain_not_found", "unknown"]


def unknown(
    kind: str, name: str, known: Sequence[str], closest: Sequence[str] | None = None, *, where: str = ""
) -> str:
    """``unknown tool 'x' (closest: ...)``; the known names when nothing is close."""
    return unknown_name(kind, name, known, closest, where=where)


def closest_tools(ts: ToolscoutClient, name: str) -> list[str]:
    """Discovery's closest names for a tool name (what ``search --tool NAME`` suggests)."""
    result = ts.discovery.search_tools(tool_names=[name])
    return [c for missing in result.not_found for c in missing.closest]


def _first_unknown(ts: ToolscoutClient, args: argparse.Namespace) -> str | None:
    checks: list[tuple[str, str | None, Callable[[], Sequence[str]]]] = [
        (
            "toolset",
            getattr(args, "toolset", None),
            lambda: [t.name for t in ts.orchestrator.list_toolsets()],
        ),
        ("model", getattr(args, "model", None), lambda: [m.name for m in ts.orchestrator.list_models()]),
        ("server", getattr(args, "server", None), lambda: [s.name for s in ts.pool.list_servers()]),
    ]
    for kind, name, names in checks:
        if name and name not in (known := names()):
            return unknown(kind, name, known)
    tool = getattr(args, "tool", None)
    if not isinstance(tool, str) or not tool:
        return None
    server = getattr(args, "server", None)
    if server:
        own = [t.name for t in ts.pool.list_tools([server]).tools]
        return None if tool in own else unknown("tool", tool, own, where=f" on server '{server}'")
    catalog = [t.llm_name for t in ts.pool.list_tools().tools]
    if tool in catalog:
        return None
    return unknown("tool", tool, catalog, closest_tools(ts, tool) or None)


def explain_not_found(ts: ToolscoutClient, args: argparse.Namespace, err: NotFoundError) -> str:
    """The message for a NOT_FOUND from the stack, in the CLI's one wording when it can tell which
    name was unknown (else the service's own message)."""
    try:
        return _first_unknown(ts, args) or err.message
    except ToolscoutClientError:
        return err.message
