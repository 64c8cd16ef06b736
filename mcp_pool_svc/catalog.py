"""The merged tool catalog of every server, its version hash and change watchers.

Plain data: the supervisors tell it what each server listed and whether the server is usable; it
keeps the tools sorted by ``(server, name)``, names them for the LLM, hashes the contents into a
``catalog_version`` and wakes watchers with the names of the servers that changed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from toolscout.client import (
    EMPTY_INPUT_SCHEMA_JSON,
    CatalogSnapshot,
    Tool,
    ToolCatalog,
    catalog_version,
    row_of,
    server_digest,
)

from mcp_pool_svc.naming import RESERVED_NAMES, NameTable, bare_name
from toolscout_kit.logging import get_logger

__all__ = ["Catalog", "ListedTool", "PoolTool", "listed_tool_from_mcp"]

log = get_logger(__name__)


def _json_or_empty(value: Any) -> str:
    if value is None:
        return ""
    # Key order as the server sent it; no sorting, so `$defs` and friends stay as they were.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class ListedTool:
    """One tool as its server listed it (JSON documents kept as JSON strings)."""

    name: str
    title: str = ""
    description: str = ""
    input_schema_json: str = EMPTY_INPUT_SCHEMA_JSON
    output_schema_json: str = ""
    annotations_json: str = ""
    # Every other field of the definition (icons, execution, _meta, ...) as a JSON object, or "".
    extra_json: str = ""
    # From the MCP annotations: readOnlyHint (no side effects: not serialized, may be retried)
    # and idempotentHint (repeating it changes nothing more: may be retried).
    read_only: bool = False
    idempotent: bool = False


# The definition's fields a ListedTool carries in fields of their own.
_OWN_FIELDS = frozenset({"name", "title", "description", "inputSchema", "outputSchema", "annotations"})


def listed_tool_from_mcp(tool: Any) -> ListedTool:
    """A :class:`ListedTool` from an ``mcp_types.Tool`` (every field of it kept)."""
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    title = tool.title or (annotations or {}).get("title") or ""
    whole = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    extra = {key: value for key, value in whole.items() if key not in _OWN_FIELDS}
    return ListedTool(
        name=tool.name,
        title=title,
        description=tool.description or "",
        input_schema_json=_json_or_empty(tool.input_schema) or EMPTY_INPUT_SCHEMA_JSON,
        output_schema_json=_json_or_empty(tool.output_schema),
        annotations_json=_json_or_empty(annotations),
        extra_json=_json_or_empty(extra) if extra else "",
        read_only=(annotations or {}).get("readOnlyHint") is True,
        idempotent=(annotations or {}).get("idempotentHint") is True,
    )


@dataclass(frozen=True, slots=True)
class PoolTool(Tool):
    """One tool in the pool's catalog: the shared :class:`~toolscout.client.Tool` (named for the
    LLM, with its server and availability), and what the pool decides by before a call."""

    # readOnlyHint (no side effects: not serialized, may be retried) and idempotentHint
    # (repeating it changes nothing more: may be retried), from the annotations.
    read_only: bool = field(default=False, compare=False, repr=False)
    idempotent: bool = field(default=False, compare=False, repr=False)

    @classmethod
    def of(cls, server: str, llm_name: str, available: bool, listed: ListedTool) -> PoolTool:
        """The catalog's entry for ``listed``: every field of the listing, and what the catalog adds."""
        return cls(server=server, llm_name=llm_name, available=available, **asdict(listed))


@dataclass
class _Watcher:
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    changed: set[str] = field(default_factory=set)


@dataclass
class _Entry:
    tools: tuple[ListedTool, ...]
    available: bool = True
    # Derived, rebuilt only when this entry (or the naming of the catalog) changes.
    built: tuple[PoolTool, ...] | None = None
    digest: bytes = b""
    # (not read-only, without annotations), counted once per listing: every ListServers asks.
    write_counts: tuple[int, int] | None = None


class Catalog:
    """Per-server tool listings merged into one versioned catalog.

    Updates only mark what changed; the merged tuple, the name table and the version are rebuilt
    on the next read, reusing every unchanged server's tools and digest. A pool connecting to a
    thousand servers therefore does not rebuild 50,000 tools once per server.
    """

    def __init__(self, namespaced: Callable[[str], bool] | None = None) -> None:
        """``namespaced(server)``: whether the server's tools are named ``<server>__<tool>``
        (default: every server's) or by their own names (see :mod:`mcp_pool_svc.naming`)."""
        self._namespaced = namespaced or (lambda server: True)
        self._entries: dict[str, _Entry] = {}
        self._names = NameTable()
        self._tools: tuple[PoolTool, ...] = ()
        self._by_pair: dict[tuple[str, str], PoolTool] = {}
        self._version = catalog_version(())
        self._watchers: list[_Watcher] = []
        self._dirty = False
        self._names_dirty = False

    # --- updates (each returns whether anything changed) ---------------------------------

    def set_tools(self, server: str, tools: Iterable[ListedTool]) -> bool:
        """Records a fresh listing of ``server``; its tools become available."""
        # A server may list a name twice; the first definition wins so lookups stay unambiguous.
        unique: dict[str, ListedTool] = {}
        for tool in tools:
            unique.setdefault(tool.name, tool)
        listed = tuple(sorted(unique.values(), key=lambda t: t.name))
        current = self._entries.get(server)
        if current is not None and current.tools == listed and current.available:
            return False
        self._entries[server] = _Entry(listed, True)
        self._changed([server], names=current is None or {t.name for t in current.tools} != set(unique))
        return True

    def set_available(self, server: str, available: bool) -> bool:
        """Marks the tools of ``server`` (un)available without forgetting them."""
        entry = self._entries.get(server)
        if entry is None or entry.available == available:
            return False
        entry.available = available
        entry.built = None
        self._changed([server], names=False)
        return True

    def drop(self, server: str) -> bool:
        """Forgets every tool of ``server``."""
        if self._entries.pop(server, None) is None:
            return False
        self._changed([server], names=True)
        return True

    # --- reads --------------------------------------------------------------------------

    @property
    def version(self) -> str:
        self._rebuild()
        return self._version

    def snapshot(
        self, *, include_unavailable: bool = True, servers: Iterable[str] | None = None
    ) -> ToolCatalog:
        self._rebuild()
        wanted = set(servers) if servers is not None else None
        if include_unavailable and wanted is None:
            return ToolCatalog(self._tools, self._version)
        tools = tuple(
            t
            for t in self._tools
            if (include_unavailable or t.available) and (wanted is None or t.server in wanted)
        )
        return ToolCatalog(tools, self._version)

    def lookup(self, server: str, tool: str) -> PoolTool | None:
        self._rebuild()
        return self._by_pair.get((server, tool))

    def resolve(self, llm_name: str) -> PoolTool | None:
        self._rebuild()
        pair = self._names.resolve(llm_name)
        return self._by_pair.get(pair) if pair else None

    def named(self, server: str, listed: Iterable[ListedTool]) -> tuple[PoolTool, ...]:
        """Tools ``server`` listed outside the catalog (to one user: :mod:`mcp_pool_svc.user_tools`),
        named as the catalog names them: a tool it holds keeps its name, another gets the name its
        pair would get (its bare name on a server that is not namespaced, unless another tool has
        it), so that the same tool has the same name in every user's list."""
        self._rebuild()
        unique: dict[str, ListedTool] = {}
        for tool in listed:
            unique.setdefault(tool.name, tool)
        named: list[PoolTool] = []
        for tool in sorted(unique.values(), key=lambda t: t.name):
            name = self._names.name_for(server, tool.name)
            if (server, tool.name) not in self._by_pair and not self._namespaced(server):
                bare = bare_name(tool.name)
                if self._names.resolve(bare) is None and bare not in RESERVED_NAMES:
                    name = bare
            named.append(PoolTool.of(server, name, True, tool))
        return tuple(named)

    def has_listing(self, server: str) -> bool:
        return server in self._entries

    def tool_count(self, server: str) -> int:
        entry = self._entries.get(server)
        return len(entry.tools) if entry else 0

    def write_counts(self, server: str) -> tuple[int, int]:
        """``(not read-only, without annotations)``: the server's tools that ``serialize_writes``
        serializes, and those that carry no annotations at all."""
        entry = self._entries.get(server)
        if entry is None:
            return 0, 0
        if entry.write_counts is None:
            tools = entry.tools
            entry.write_counts = (
                sum(not t.read_only for t in tools),
                sum(not t.annotations_json for t in tools),
            )
        return entry.write_counts

    def counts(self) -> Mapping[str, int]:
        return {server: len(entry.tools) for server, entry in self._entries.items()}

    async def watch(self, known_version: str = "") -> AsyncGenerator[CatalogSnapshot, None]:
        """The current snapshot (unless still ``known_version``), then one per change.

        A slow consumer never queues snapshots: it gets the latest one, with the union of the
        servers that changed since the one it saw last.
        """
        watcher = _Watcher()
        self._watchers.append(watcher)
        try:
            seen = self.version
            if seen != known_version:
                now = self.snapshot()
                yield CatalogSnapshot(now.catalog_version, now.tools)
            while True:
                await watcher.wake.wait()
                watcher.wake.clear()
                changed = tuple(sorted(watcher.changed))
                watcher.changed.clear()
                snapshot = self.snapshot()
                if snapshot.catalog_version == seen:
                    # Changed and changed back before this watcher looked: nothing to send.
                    continue
                seen = snapshot.catalog_version
                yield CatalogSnapshot(seen, snapshot.tools, changed)
        finally:
            self._watchers.remove(watcher)

    # --- internals ----------------------------------------------------------------------

    def _changed(self, servers: list[str], *, names: bool) -> None:
        self._dirty = True
        if names:
            self._names_dirty = True
        for watcher in self._watchers:
            watcher.changed.update(servers)
            watcher.wake.set()

    def _rebuild(self) -> None:
        if not self._dirty:
            return
        renamed = False
        if self._names_dirty:
            names = NameTable(
                ((server, t.name) for server, e in self._entries.items() for t in e.tools), self._namespaced
            )
            # Names are a function of their own pair; only the fallbacks (a clash of bare names,
            # the astronomically unlikely hash collision) depend on the others, and then every
            # server is renamed.
            renamed = names.collisions != self._names.collisions
            for name, servers in names.clashes.items():
                if self._names.clashes.get(name) != servers:
                    log.warning(
                        "tool_name_clash",
                        name=name,
                        servers=list(servers),
                        detail="several servers offer this tool name; each is served as <server>__<tool> "
                        "(set namespace_tools on one of the servers to choose)",
                    )
            self._names = names
            self._names_dirty = False
        tools: list[PoolTool] = []
        digests: list[tuple[str, bytes]] = []
        for server in sorted(self._entries):
            entry = self._entries[server]
            if entry.built is None or renamed:
                entry.built = tuple(
                    PoolTool.of(server, self._names.name_for(server, t.name), entry.available, t)
                    for t in entry.tools
                )
                entry.digest = server_digest(row_of(t) for t in entry.built)
            tools.extend(entry.built)
            if entry.built:
                digests.append((server, entry.digest))
        self._tools = tuple(tools)
        self._by_pair = {(t.server, t.name): t for t in self._tools}
        self._version = catalog_version(digests)
        self._dirty = False
