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

from toolscout.client import Tool

from discovery_svc.planner import PlanParts, PreparedToolset, read_discovered
from discovery_svc.scope import SearchScope
from discovery_svc.tokens import TokenEncoding

__all__ = ["user_parts"]


def user_parts(
    prepared: PreparedToolset,
    shared: SearchScope,
    own: SearchScope,
    per_user: frozenset[str],
    discovered: Sequence[str],
    enc: TokenEncoding,
) -> PlanParts:
    """What :func:`~discovery_svc.planner.plan_tools` would plan, as the principal of ``own`` sees
    the toolset (``shared``: its scope without the ``per_user`` servers' tools); the plan is
    :func:`~discovery_svc.planner.assemble_plan` of it."""
    totals = prepared.totals(enc)

    def find(name: str) -> Tool | bool:
        # Their own tool of the name first, then the toolset's other servers' (never the stack's
        # entry of a per_user server: ``shared`` has none).
        scope = own if own.has(name) else shared if shared.has(name) else None
        if scope is None:
            return False
        return True if name in scope.eager else scope.tool(name)

    extra, dropped, seen = read_discovered(discovered, find)
    stack = [t for t in prepared.partition.tools if t.server in per_user]
    stack_eager = [t for t in prepared.partition.loaded if t.server in per_user]
    own_eager = [t for t in own.tools if t.llm_name in own.eager]
    return PlanParts(
        eager=(*(t for t in prepared.partition.loaded if t.server not in per_user), *own_eager),
        extra=tuple(extra),
        dropped=tuple(dropped),
        deferred=(
            *(t for t in prepared.partition.deferred if t.server not in per_user),
            *(t for t in own.tools if t.llm_name not in own.eager),
        ),
        seen=seen,
        all_definitions=totals.all_definitions
        - _tokens(stack, prepared, enc)
        + _tokens(own.tools, prepared, enc),
        eager_tokens=totals.eager - _tokens(stack_eager, prepared, enc) + _tokens(own_eager, prepared, enc),
    )


def _tokens(tools: Sequence[Tool], prepared: PreparedToolset, enc: TokenEncoding) -> int:
    return sum(prepared.count_tool(t, enc) for t in tools)
