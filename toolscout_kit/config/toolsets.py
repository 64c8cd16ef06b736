"""casual-mcp's ``tool_sets`` and ``tool_discovery``: which tools of which servers a chat may use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Discriminator, Field, StrictBool, Tag

from toolscout_kit.config._base import Flag, Strict

__all__ = ["ExcludeSpec", "ToolDiscoveryConfig", "ToolSetConfig", "ToolSpec"]


class ExcludeSpec(Strict):
    exclude: list[str]


def _tool_spec_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return "list[str]"
    if isinstance(value, Mapping | ExcludeSpec):
        return "ExcludeSpec"
    return None  # "yes", 1, null: not a filter (lax coercion would have read "yes" as true)


# A toolset's filter of one server: true/false (JSON booleans only), tool names, or exclusions.
ToolSpec = Annotated[
    Annotated[StrictBool, Tag("bool")]
    | Annotated[list[str], Tag("list[str]")]
    | Annotated[ExcludeSpec, Tag("ExcludeSpec")],
    Discriminator(
        _tool_spec_kind,
        custom_error_type="tool_spec",
        custom_error_message='expected true, false, a list of tool names or {"exclude": [...]}',
    ),
]


class ToolSetConfig(Strict):
    """A named toolset: which tools of which servers a chat may use."""

    description: str = ""
    servers: dict[str, ToolSpec] = Field(default_factory=dict)

    def allows(self, server: str, tool: str) -> bool:
        """Whether tool ``tool`` of ``server`` is in this toolset."""
        spec = self.servers.get(server, False)
        if isinstance(spec, bool):
            return spec
        if isinstance(spec, list):
            return tool in spec
        return tool not in spec.exclude


class ToolDiscoveryConfig(Strict):
    enabled: Flag = False
    defer_all: Flag = False
    max_search_results: int = Field(default=5, ge=1, le=100)
