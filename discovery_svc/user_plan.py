"""PlanTools for one principal: the toolset's plan with ``per_user`` servers' tools as listed to them.

A plan that names a principal (``PlanRequest.principal``) is the toolset's plan
(:func:`~discovery_svc.planner.plan_tools`) with the stack's entries of the ``per_user`` servers
taken out and the principal's own ones in their place (their scope of
:class:`~discovery_svc.user_index.UserIndexes`, partitioned by the same config rules): their eager
tools are loaded after the toolset's, a discovered name resolves against their tools first (then
the toolset's other servers, never the stack's entry of a ``per_user`` server), and the deferred
names and definitions, counts and token figures are theirs. The manifest and ``search_tools`` are
the toolset's (they name a ``per_user`` server without the stack's tools of it).
"""

from __future__ import annotations

from collections.abc import Sequence

from toolscout.client import TokenAccounting, Tool, ToolPlan, ToolSurface

from discovery_svc.planner import PreparedToolset
from discovery_svc.scope import SearchScope
from discovery_svc.search_args import SEARCH_TOOL_NAME
from discovery_svc.surface import READ_RESULT_TOOL
from discovery_svc.tokens import TokenEncoding

__all__ = ["plan_as_user"]


def plan_as_user(
    prepared: PreparedToolset,
    shared: SearchScope,
    own: SearchScope,
    per_user: frozenset[str],
    discovered: Sequence[str],
    enc: TokenEncoding,
    *,
    include_deferred_names: bool = False,
    include_deferred_tools: bool = False,
    surface: ToolSurface = ToolSurface.APPEND,
) -> ToolPlan:
    """The plan of :func:`~discovery_svc.planner.plan_tools` as the principal of ``own`` sees the
    toolset: ``shared`` is the toolset's scope without the ``per_user`` servers' tools."""
    totals = prepared.totals(enc)
    count = prepared.count_tool
    extra: list[Tool] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for name in discovered:
        if name in seen or name == SEARCH_TOOL_NAME:
            continue
        seen.add(name)
        scope = own if own.has(name) else shared if shared.has(name) else None
        if scope is None:
            dropped.append(name)
        elif name not in scope.eager:
            extra.append(scope.tool(name))
    stack = [t for t in prepared.partition.tools if t.server in per_user]
    stack_eager = [t for t in prepared.partition.loaded if t.server in per_user]
    own_eager = [t for t in own.tools if t.llm_name in own.eager]
    own_deferred = [t for t in own.tools if t.llm_name not in own.eager]
    all_definitions = (
        totals.all_definitions - _tokens(stack, prepared, enc) + _tokens(own.tools, prepared, enc)
    )
    eager_tokens = totals.eager - _tokens(stack_eager, prepared, enc) + _tokens(own_eager, prepared, enc)
    eager = (*(t for t in prepared.partition.loaded if t.server not in per_user), *own_eager)
    stable = surface is ToolSurface.STABLE
    if stable:
        loaded = eager
        sent = eager_tokens + totals.stable_tools + totals.system_message
    else:
        loaded = (*eager, *extra)
        sent = eager_tokens + sum(count(t, enc) for t in extra) + totals.search_tool + totals.system_message
    deferred = (*(t for t in prepared.partition.deferred if t.server not in per_user), *own_deferred)
    search_tool = prepared.stable_search_tool if stable else prepared.search_tool
    return ToolPlan(
        loaded_tools=loaded,
        has_search_tool=search_tool is not None,
        search_tool=search_tool,
        manifest=prepared.manifest.text,
        manifest_placement=prepared.placement,
        manifest_system_message=prepared.system_message,
        total_tools=len(prepared.partition.tools) - len(stack) + len(own.tools),
        loaded_count=len(loaded),
        deferred_count=len(deferred) - len(extra),
        catalog_version=prepared.catalog_version,
        tokens=TokenAccounting(
            all_definitions_tokens=all_definitions,
            sent_tokens=sent,
            saved_tokens=max(all_definitions - sent, 0),
            encoding=enc.name,
            estimate=enc.estimate,
        ),
        deferred_tool_names=tuple(t.llm_name for t in deferred if t.llm_name not in seen)
        if include_deferred_names
        else (),
        dropped_tools=tuple(dropped),
        discovered_tools=tuple(t.llm_name for t in extra),
        deferred_tools=deferred if include_deferred_tools else (),
        call_tool=prepared.call_tool if stable else None,
        surface=surface,
        read_result_tool=READ_RESULT_TOOL,
        read_result_tokens=totals.read_result,
        found_tools=tuple(extra) if stable else (),
    )


def _tokens(tools: Sequence[Tool], prepared: PreparedToolset, enc: TokenEncoding) -> int:
    return sum(prepared.count_tool(t, enc) for t in tools)
