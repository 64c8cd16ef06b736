"""Everything derived from one (catalog version, toolset), built once, and PlanTools on top of it.

A :class:`PreparedToolset` holds the partition, the toolset's candidate mask over the catalog's
shared index (:class:`~discovery_svc.catalog_index.CatalogIndex`), the manifest, the search_tools
definition and token totals: nothing that grows with the catalog but tuples of references and
masks of one byte per tool, so many toolsets (configured, or inline per request) cost little.
Answering PlanTools only touches the tools the caller has discovered, so the cost does not grow
with the catalog.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from toolscout.client import HOST_DESCRIPTION_MAX_BYTES, TokenAccounting, Tool, ToolPlan, ToolSurface

from discovery_svc.catalog import ParsedTool
from discovery_svc.catalog_index import CatalogIndex
from discovery_svc.manifest import (
    BuiltManifest,
    build_manifest,
    search_tool_description,
    stable_search_tool_description,
    system_message,
)
from discovery_svc.partition import Partition
from discovery_svc.scope import SearchScope
from discovery_svc.search_args import SEARCH_TOOL_NAME, SEARCH_TOOL_PARAMETERS
from discovery_svc.surface import READ_RESULT_TOOL, call_tool_definition
from discovery_svc.tokens import PROVIDERS, TokenCounter, TokenEncoding

__all__ = ["PlanParts", "PreparedToolset", "assemble_plan", "plan_tools", "read_discovered"]

Placement = Literal["tool_description", "system_message"]


@dataclass(frozen=True, slots=True)
class _Totals:
    all_definitions: int
    eager: int
    search_tool: int
    system_message: int
    # The stable surface's search_tools + call_tool.
    stable_tools: int = 0
    # read_result (every plan carries it; callers send it only while a handle is live).
    read_result: int = 0


def _search_tool(description: str) -> ParsedTool:
    return ParsedTool.own(SEARCH_TOOL_NAME, description, SEARCH_TOOL_PARAMETERS)


class PreparedToolset:
    """Partition, mask, manifest and token totals for one (catalog version, toolset)."""

    def __init__(
        self,
        *,
        base: CatalogIndex,
        toolset: str,
        partition: Partition,
        counter: TokenCounter,
        manifest_budget: int,
        placement: Placement,
        per_user: frozenset[str] = frozenset(),
    ) -> None:
        """``per_user``: the servers whose tools are listed per user (named in the manifest
        without their tools)."""
        self.catalog_version = base.version
        self.toolset = toolset
        self.partition = partition
        self.placement: Placement = placement
        self._counter = counter
        whole = len(partition.tools) == len(base)
        self.scope = SearchScope(
            base, None if whole else partition.tools, [t.llm_name for t in partition.loaded]
        )
        # One text for every provider (prompt caches), so it must fit the budget in every encoding.
        encodings = sorted({e.name for e in PROVIDERS.values()})
        self.manifest: BuiltManifest = build_manifest(
            partition.deferred,
            lambda text: max(counter.count_text(text, name) for name in encodings),
            manifest_budget,
            per_user,
        )
        self.search_tool: ParsedTool | None = None
        # The cache-stable surface's pair (discovery_svc.surface).
        self.stable_search_tool: ParsedTool | None = None
        self.call_tool: ParsedTool | None = None
        self.system_message = ""
        if partition.has_search_tool:
            embed = placement == "tool_description"
            self.search_tool = _search_tool(search_tool_description(self.manifest, embed=embed))
            self.stable_search_tool = _search_tool(
                stable_search_tool_description(partition.deferred, HOST_DESCRIPTION_MAX_BYTES, per_user)
                if embed
                else search_tool_description(self.manifest, embed=False, stable=True)
            )
            self.call_tool = call_tool_definition()
            if placement == "system_message":
                self.system_message = system_message(self.manifest)
        self._base = base
        # Masks, not dicts of names: 1 byte per catalog tool however large the toolset.
        if partition.deferred is partition.tools:
            self._deferred = self.scope.candidates
        else:
            self._deferred = base.bm25.mask(t.llm_name for t in partition.deferred)
        self._eager = self.scope.eager
        self._totals: dict[TokenEncoding, _Totals] = {}
        self._lock = threading.Lock()

    @property
    def deferred_names(self) -> tuple[str, ...]:
        """LLM names of every deferred tool, catalog order (built on demand: it can be long)."""
        return tuple(t.llm_name for t in self.partition.deferred)

    def has_totals(self, enc: TokenEncoding) -> bool:
        return enc in self._totals

    def totals(self, enc: TokenEncoding) -> _Totals:
        """Token totals in ``enc``, counted on first use (seconds at 50k tools: call off-loop)."""
        totals = self._totals.get(enc)
        if totals is not None:
            return totals
        with self._lock:
            totals = self._totals.get(enc)
            if totals is None:
                count = self._counter.count_tool
                eager = sum(count(t, enc) for t in self.partition.loaded)
                deferred = sum(count(t, enc) for t in self.partition.deferred)
                search = stable = 0
                if self.search_tool is not None:
                    search = count(self.search_tool, enc)
                if self.stable_search_tool is not None and self.call_tool is not None:
                    stable = count(self.stable_search_tool, enc) + count(self.call_tool, enc)
                totals = _Totals(
                    all_definitions=eager + deferred,
                    eager=eager,
                    search_tool=search,
                    system_message=self._counter.count_text(self.system_message, enc.name),
                    stable_tools=stable,
                    read_result=count(READ_RESULT_TOOL, enc),
                )
                self._totals[enc] = totals
        return totals

    def count_tool(self, tool: Tool, enc: TokenEncoding) -> int:
        return self._counter.count_tool(tool, enc)

    def is_deferred(self, llm_name: str) -> ParsedTool | None:
        if not self.partition.deferred or not self._base.contains(self._deferred, llm_name):
            return None
        return self._base.catalog.by_llm_name(llm_name)

    def is_eager(self, llm_name: str) -> bool:
        return llm_name in self._eager


def plan_tools(
    prepared: PreparedToolset,
    discovered: Sequence[str],
    enc: TokenEncoding,
    *,
    include_deferred_names: bool = False,
    include_deferred_tools: bool = False,
    surface: ToolSurface = ToolSurface.APPEND,
) -> ToolPlan:
    """What to send: eager tools, then discovered ones in the order given, plus search_tools.

    Discovered names that are no longer in the toolset are reported as dropped; eager ones and
    duplicates are ignored. On the stable ``surface`` discovered tools are reported but not sent
    (they are called through call_tool): the plan is eager tools + search_tools + call_tool, and
    carries the found tools' definitions (``found_tools``) for checking those calls.
    """
    totals = prepared.totals(enc)
    extra, dropped, seen = read_discovered(
        discovered, lambda n: prepared.is_deferred(n) or prepared.is_eager(n)
    )
    return assemble_plan(
        prepared,
        enc,
        PlanParts(
            eager=prepared.partition.loaded,
            extra=tuple(extra),
            dropped=tuple(dropped),
            deferred=prepared.partition.deferred,
            seen=seen,
            all_definitions=totals.all_definitions,
            eager_tokens=totals.eager,
        ),
        include_deferred_names=include_deferred_names,
        include_deferred_tools=include_deferred_tools,
        surface=surface,
    )


def read_discovered(
    discovered: Sequence[str], find: Callable[[str], Tool | bool]
) -> tuple[list[Tool], list[str], set[str]]:
    """The discovered tools to load (in the order given), the names no longer in the toolset, and
    every name read; ``find(name)``: its deferred tool, True for an eager one (loaded already),
    False when the toolset has no such tool. Duplicates and search_tools are skipped."""
    extra: list[Tool] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for name in discovered:
        if name in seen or name == SEARCH_TOOL_NAME:
            continue
        seen.add(name)
        found = find(name)
        if isinstance(found, Tool):
            extra.append(found)
        elif not found:
            dropped.append(name)
    return extra, dropped, seen


@dataclass(frozen=True, slots=True)
class PlanParts:
    """What a plan holds besides the toolset's fixed parts (manifest, search_tools, totals)."""

    # The eagerly loaded tools, and those discovered in the conversation (in the order given).
    eager: tuple[Tool, ...]
    extra: tuple[Tool, ...]
    dropped: tuple[str, ...]
    # Every deferred tool (catalog order), and the discovered names (not reported as deferred).
    deferred: tuple[Tool, ...]
    seen: set[str]
    # Tokens of every definition, and of the eager ones.
    all_definitions: int
    eager_tokens: int


def assemble_plan(
    prepared: PreparedToolset,
    enc: TokenEncoding,
    parts: PlanParts,
    *,
    include_deferred_names: bool = False,
    include_deferred_tools: bool = False,
    surface: ToolSurface = ToolSurface.APPEND,
) -> ToolPlan:
    """The :class:`ToolPlan` of ``parts`` over ``prepared``'s manifest, search_tools and totals."""
    totals = prepared.totals(enc)
    extra = parts.extra
    stable = surface is ToolSurface.STABLE
    if stable:
        loaded = parts.eager
        sent = parts.eager_tokens + totals.stable_tools + totals.system_message
    else:
        loaded = parts.eager + extra if extra else parts.eager
        sent = parts.eager_tokens + sum(prepared.count_tool(t, enc) for t in extra)
        sent += totals.search_tool + totals.system_message
    names: tuple[str, ...] = ()
    if include_deferred_names:
        names = tuple(t.llm_name for t in parts.deferred if t.llm_name not in parts.seen)
    search_tool = prepared.stable_search_tool if stable else prepared.search_tool
    return ToolPlan(
        loaded_tools=loaded,
        has_search_tool=search_tool is not None,
        search_tool=search_tool,
        manifest=prepared.manifest.text,
        manifest_placement=prepared.placement,
        manifest_system_message=prepared.system_message,
        total_tools=len(parts.eager) + len(parts.deferred),
        loaded_count=len(loaded),
        deferred_count=len(parts.deferred) - len(extra),
        catalog_version=prepared.catalog_version,
        tokens=TokenAccounting(
            all_definitions_tokens=parts.all_definitions,
            sent_tokens=sent,
            saved_tokens=max(parts.all_definitions - sent, 0),
            encoding=enc.name,
            estimate=enc.estimate,
        ),
        deferred_tool_names=names,
        dropped_tools=parts.dropped,
        discovered_tools=tuple(t.llm_name for t in extra),
        deferred_tools=parts.deferred if include_deferred_tools else (),
        call_tool=prepared.call_tool if stable else None,
        surface=surface,
        read_result_tool=READ_RESULT_TOOL,
        read_result_tokens=totals.read_result,
        # Held already: a stable caller checks call_tool arguments against them, no fetch needed.
        found_tools=extra if stable else (),
    )
