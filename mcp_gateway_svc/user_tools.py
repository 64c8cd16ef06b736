"""The tools of ``per_user`` servers as one caller sees them.

Discovery's plans (:mod:`mcp_gateway_svc.views`) hold what every server listed to the stack's own
session, the same for every caller. A ``per_user`` server lists its tools to each user under their
own authorization, and the list may differ per user. For a caller (a principal), the gateway asks
the pool for what each ``per_user`` server lists to them (``ListTools`` with the principal: the pool
lists it on their own session and keeps it with that session for 10 s) and serves, instead of the
stack's entries of those servers:

- **all**: every tool the server lists to them (within the endpoint's toolset);
- **meta / progressive**: those of their tools that load eagerly (the partition rule of the config,
  :meth:`~toolscout_kit.config.ToolscoutConfig.deferred`), and, in progressive mode, the ones their
  searches found (discovery searches their own tools: ``SearchRequest.principal``);
- a call by name of a tool listed to them only is resolved here.

A server they have not signed in to lists nothing to them (never what it listed to the stack) and
is named in :attr:`UserTools.unsigned`, which the gateway's ``initialize`` instructions turn into a
sign-in link. Kept per principal for ``ttl`` seconds and one catalog version, at most ``size``
principals (the least recently used goes first); a listing that misses a server (not signed in,
or the pool did not answer) is not kept, so that a sign-in shows at once on every replica. A caller without a principal, or a config without
``per_user`` servers, gets the plans' lists unchanged (nothing is asked).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import toolscout.client as tc

from mcp_gateway_svc.tool_lists import tools_for
from mcp_gateway_svc.views import ToolsetView
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger

__all__ = ["UserToolViews", "UserTools", "tools_as_seen_by"]

_log = get_logger(__name__)

# Seconds to wait for the pool to list a per_user server's tools for a caller.
_LIST_DEADLINE = 15.0
# Callers whose views are kept (the least recently used goes first), and for how many seconds
# (the pool keeps what it listed to them as long).
_KEEP_USERS = 256
_KEEP_SECONDS = 10.0


@dataclass(frozen=True)
class UserTools:
    """What the ``per_user`` servers list to one principal (every server's, before a toolset)."""

    # The per_user servers of the config (their stack entries are never served to the principal).
    servers: frozenset[str]
    tools: tuple[tc.Tool, ...]
    # The per_user servers they have not signed in to (or whose token was revoked).
    unsigned: tuple[str, ...]
    by_name: Mapping[str, tc.Tool] = field(default_factory=dict)
    # A version of this listing (with the catalog version: list cursors and signatures).
    digest: str = ""

    def of_toolset(self, config: ToolscoutConfig, toolset: str) -> UserTools:
        """Only what ``toolset`` allows."""
        if not toolset:
            return self
        tools = tuple(t for t in self.tools if config.in_toolset(toolset, t.server, t.name))
        unsigned = tuple(s for s in self.unsigned if config.toolset_has_server(toolset, s))
        return _user_tools(self.servers, tools, unsigned)

    def version(self, catalog_version: str) -> str:
        return f"{catalog_version}.{self.digest}"


def _user_tools(servers: frozenset[str], tools: tuple[tc.Tool, ...], unsigned: tuple[str, ...]) -> UserTools:
    digest = hashlib.sha256("\x00".join(unsigned).encode())
    for tool in tools:
        digest.update(f"\x01{tool.server}\x00{tool.llm_name}\x00{tool.description}\x00".encode())
        digest.update(tool.input_schema_json.encode())
    by_name = MappingProxyType({t.llm_name: t for t in tools})
    return UserTools(servers, tools, unsigned, by_name, digest.hexdigest()[:12])


def tools_as_seen_by(
    view: ToolsetView,
    mode: tc.GatewayMode,
    user: UserTools,
    config: ToolscoutConfig,
    loaded: Sequence[str] = (),
    search_tool: tc.Tool | None = None,
) -> list[tc.Tool]:
    """What ``mode`` lists to the principal of ``user`` (see the module docstring): the view's
    list without the ``per_user`` servers' stack entries, with their own tools in their place."""
    base = tools_for(view, mode, (), search_tool)
    kept = [t for t in base if t.server not in user.servers]
    if view.search_tool is None or mode == tc.GatewayMode.ALL:
        return [*kept, *user.tools]
    eager = [t for t in user.tools if not config.deferred(t.server, t.name)]
    stack_eager = [t for t in view.eager if t.server not in user.servers]
    synthetic = kept[len(stack_eager) :]
    listed = [*stack_eager, *eager, *synthetic]
    if mode == tc.GatewayMode.PROGRESSIVE:
        shown = {t.llm_name for t in listed}
        for name in dict.fromkeys(loaded):
            found = user.by_name.get(name)
            if found is None:
                stack = view.by_name.get(name)
                found = stack if stack is not None and stack.server not in user.servers else None
            if found is not None and found.llm_name not in shown:
                shown.add(found.llm_name)
                listed.append(found)
    return listed


class UserToolViews:
    """Per principal, what the ``per_user`` servers list to them (see the module docstring)."""

    def __init__(self, pool: tc.AsyncShardedPoolClient, config: ToolscoutConfig) -> None:
        self._pool = pool
        self._config = config
        self._servers = config.per_user_servers
        self._users: OrderedDict[str, tuple[float, str, UserTools]] = OrderedDict()

    @property
    def config(self) -> ToolscoutConfig:
        return self._config

    async def of(self, principal: str, catalog_version: str, toolset: str) -> UserTools | None:
        """What ``principal`` sees of the ``per_user`` servers in ``toolset``; None when nothing
        differs from the plans (no principal, or no ``per_user`` server in the toolset)."""
        if not principal or not any(self._config.toolset_has_server(toolset, s) for s in self._servers):
            return None
        now = time.monotonic()
        kept = self._users.get(principal)
        if kept is not None and kept[1] == catalog_version and now - kept[0] < _KEEP_SECONDS:
            self._users.move_to_end(principal)
            return kept[2].of_toolset(self._config, toolset)
        tools: list[tc.Tool] = []
        unsigned: list[str] = []
        complete = True
        for server in sorted(self._servers):
            try:
                listed = await self._pool.list_tools([server], principal=principal, deadline=_LIST_DEADLINE)
            except tc.ToolscoutClientError as err:
                if tc.authorization_required(err) is not None:
                    unsigned.append(server)
                else:
                    # Served without it this time (and not kept: the next request asks again).
                    _log.warning(
                        "listing a per-user server's tools for its caller failed",
                        server=server,
                        error=err.message,
                    )
                    complete = False
                continue
            tools.extend(listed.tools)
        user = _user_tools(self._servers, tuple(tools), tuple(unsigned))
        # A listing that misses a server is not kept: a sign-in (at any replica) shows at once.
        if complete and not unsigned:
            self._users[principal] = (now, catalog_version, user)
            self._users.move_to_end(principal)
            while len(self._users) > _KEEP_USERS:
                self._users.popitem(last=False)
        return user.of_toolset(self._config, toolset)
