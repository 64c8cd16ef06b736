"""The tool catalog as discovery sees it: an immutable snapshot fed from the pool.

A :class:`Catalog` is built once per catalog version (the pool's content hash) and shared by
every request until the pool reports a new version, so everything derived from it (partitions,
indexes, manifests, token counts) can be cached per version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from toolscout.client import EMPTY_INPUT_SCHEMA_JSON, Tool

from toolscout_kit.json_text import json_object_or_none

__all__ = ["Catalog", "ParsedTool"]

# Shared by every tool without a usable schema (never mutated).
_EMPTY_SCHEMA: dict[str, Any] = json.loads(EMPTY_INPUT_SCHEMA_JSON)


@dataclass(frozen=True, slots=True)
class ParsedTool(Tool):
    """A catalog tool (the shared :class:`~toolscout.client.Tool`) with its input schema parsed
    once per catalog version, which indexing, result texts and token counts read again and again.

    It is a ``Tool``: plans and search results hold it as it is, and it goes on the wire as one.
    """

    # Parsed from input_schema_json; never part of equality (it is derived). Read, never changed.
    parsed_schema: dict[str, Any] = field(default_factory=lambda: _EMPTY_SCHEMA, compare=False, repr=False)

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.parsed_schema

    @classmethod
    def create(
        cls,
        *,
        server: str,
        name: str,
        llm_name: str,
        description: str = "",
        input_schema: Mapping[str, Any] | None = None,
        input_schema_json: str | None = None,
        title: str = "",
        output_schema_json: str = "",
        annotations_json: str = "",
        available: bool = True,
        extra_json: str = "",
    ) -> ParsedTool:
        """A tool from either a schema object or its JSON text (an invalid schema becomes empty)."""
        if input_schema_json is None:
            schema: dict[str, Any] = dict(input_schema) if input_schema is not None else _EMPTY_SCHEMA
            input_schema_json = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        else:
            schema = json_object_or_none(input_schema_json) or _EMPTY_SCHEMA
        return cls(
            server=server,
            name=name,
            llm_name=llm_name,
            title=title,
            description=description,
            input_schema_json=input_schema_json,
            output_schema_json=output_schema_json,
            annotations_json=annotations_json,
            available=available,
            extra_json=extra_json,
            parsed_schema=schema,
        )

    @classmethod
    def of(cls, tool: Tool, schemas: dict[str, dict[str, Any]] | None = None) -> ParsedTool:
        """``tool`` (as the pool listed it) with its schema parsed; ``schemas``: schemas parsed
        already, by their JSON text, shared by every tool with that text (and added to)."""
        if schemas is None:
            return cls.create(**{f.name: getattr(tool, f.name) for f in fields(Tool)})
        parsed = schemas.get(tool.input_schema_json)
        if parsed is None:
            parsed = json_object_or_none(tool.input_schema_json) or _EMPTY_SCHEMA
            schemas[tool.input_schema_json] = parsed
        return cls(**{f.name: getattr(tool, f.name) for f in fields(Tool)}, parsed_schema=parsed)

    @classmethod
    def own(cls, name: str, description: str, input_schema: Mapping[str, Any]) -> ParsedTool:
        """One of discovery's own tools (search_tools, call_tool): no server, named as it is."""
        return cls.create(
            server="", name=name, llm_name=name, description=description, input_schema=input_schema
        )


class Catalog:
    """An immutable catalog snapshot with lookups by LLM name and by server."""

    __slots__ = ("_by_llm_name", "_by_server", "tools", "version")

    def __init__(self, version: str, tools: Iterable[ParsedTool]) -> None:
        self.version = version
        # The pool sends tools sorted by (server, name); sort anyway so order never depends on it.
        self.tools: tuple[ParsedTool, ...] = tuple(sorted(tools, key=lambda t: (t.server, t.name)))
        self._by_llm_name: dict[str, ParsedTool] = {t.llm_name: t for t in self.tools}
        by_server: dict[str, list[ParsedTool]] = {}
        for tool in self.tools:
            by_server.setdefault(tool.server, []).append(tool)
        self._by_server: dict[str, tuple[ParsedTool, ...]] = {s: tuple(ts) for s, ts in by_server.items()}

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def servers(self) -> Sequence[str]:
        """Servers with at least one tool, sorted."""
        return sorted(self._by_server)

    def by_llm_name(self, llm_name: str) -> ParsedTool | None:
        return self._by_llm_name.get(llm_name)

    def server_tools(self, server: str) -> tuple[ParsedTool, ...]:
        return self._by_server.get(server, ())
