"""Searching as one principal: ``per_user`` servers' tools as they list them to that user.

The shared :class:`~discovery_svc.catalog_index.CatalogIndex` holds what every server listed to
the stack's own session. A ``per_user`` server may list other tools to each user (its tools
follow the user's own authorization), so a search that names a principal
(``SearchRequest.principal``) must find that user's tools of such a server, and neither the
stack's nor another user's. :class:`UserIndexes` keeps, per principal, a small index of what the
``per_user`` servers list to them (asked of the pool through the client library, which lists
them on the user's own session), and a search runs over a :class:`MergedScope`: the toolset's
shared scope without the ``per_user`` servers' tools, and the user's own scope (the same toolset
filter and partition rules), their rankings merged.

Bounded: at most ``size`` principals are kept (the least recently used goes first), each for
``ttl`` seconds and for one catalog version (a new version rebuilds it on its next search). A
server the user has not signed in to contributes nothing (and is named in :attr:`UserTools.unsigned`);
such a listing is not kept, so that their sign-in shows at their next search.
Nothing changes for a search without a principal: it runs on the toolset's shared scope as before.
"""

from __future__ import annotations

import difflib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Unpack

from toolscout.client import Tool, ToolscoutClientError

from discovery_svc.catalog import Catalog, ParsedTool
from discovery_svc.catalog_index import CatalogIndex, IndexFactory
from discovery_svc.index import ScopeFields, SearchHit, SearchIndex
from discovery_svc.partition import InlineToolset, Toolset, partition_tools, select_toolset
from discovery_svc.planner import PreparedToolset
from discovery_svc.scope import SearchScope
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger

__all__ = ["ListUserTools", "MergedScope", "UserIndexes", "UserTools"]

_log = get_logger(__name__)

# (server, principal) → the tools ``server`` lists to ``principal``; None: they have not signed
# in to it. Raises ToolscoutClientError when the pool could not answer.
ListUserTools = Callable[[str, str], Awaitable[tuple[Tool, ...] | None]]


@dataclass
class UserTools:
    """What the ``per_user`` servers list to one principal, indexed, at one catalog version."""

    catalog_version: str
    made: float
    index: CatalogIndex
    # The per_user servers they have not signed in to.
    unsigned: tuple[str, ...]
    # Their scope per toolset key.
    scopes: dict[str, SearchScope] = field(default_factory=dict)


class _MergedIndex:
    """Ranked search over two scopes: each ranks its own tools; exact names first, then score."""

    def __init__(self, shared: SearchScope, own: SearchScope) -> None:
        self._shared = shared
        self._own = own

    def __len__(self) -> int:
        return len(self._shared) + len(self._own)

    def search(self, query: str, limit: int, **scope: Unpack[ScopeFields]) -> list[SearchHit]:
        server = scope.get("server")
        hits = [
            *(self._shared.index.search(query, limit, server=server) if _holds(self._shared, server) else ()),
            *(self._own.index.search(query, limit, server=server) if _holds(self._own, server) else ()),
        ]
        return sorted(hits, key=lambda h: (not h.exact, -h.score, h.key))[:limit]


def _holds(scope: SearchScope, server: object) -> bool:
    return server is None or (isinstance(server, str) and scope.has_server(server))


class MergedScope:
    """A toolset as one principal sees it: the shared scope (without the ``per_user`` servers'
    tools) and their own scope of those servers; the interface of :class:`SearchScope` that
    :func:`~discovery_svc.search_tool.execute_search` uses."""

    __slots__ = ("_own", "_shared", "eager", "servers")

    def __init__(self, shared: SearchScope, own: SearchScope) -> None:
        self._shared = shared
        self._own = own
        self.eager = shared.eager | own.eager
        self.servers: tuple[str, ...] = tuple(sorted({*shared.servers, *own.servers}))

    @property
    def index(self) -> _MergedIndex:
        return _MergedIndex(self._shared, self._own)

    def __len__(self) -> int:
        return len(self._shared) + len(self._own)

    def has(self, llm_name: str) -> bool:
        return self._own.has(llm_name) or self._shared.has(llm_name)

    def tool(self, llm_name: str) -> Tool:
        """Raises KeyError when neither scope has it."""
        if self._own.has(llm_name):
            return self._own.tool(llm_name)
        return self._shared.tool(llm_name)

    def has_server(self, server: str) -> bool:
        return server in self.servers

    def server_tools(self, server: str) -> tuple[Tool, ...]:
        if self._own.has_server(server):
            return self._own.server_tools(server)
        return self._shared.server_tools(server)

    def resolve(self, name: str) -> tuple[Tool, ...]:
        return (*self._own.resolve(name), *self._shared.resolve(name))

    def closest(self, name: str, server: str | None, n: int = 3) -> tuple[str, ...]:
        found = [
            *(self._own.closest(name, server, n) if _holds(self._own, server) else ()),
            *(self._shared.closest(name, server, n) if _holds(self._shared, server) else ()),
        ]
        close = difflib.get_close_matches(name, found, n=n, cutoff=0.0)
        return tuple(dict.fromkeys([*close, *found]))[:n]


class UserIndexes:
    """Per-principal indexes of ``per_user`` servers' tools (see the module docstring)."""

    def __init__(
        self,
        config: ToolscoutConfig,
        fetch: ListUserTools,
        *,
        index_factory: IndexFactory = SearchIndex,
        size: int = 256,
        ttl: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._fetch = fetch
        self._index_factory = index_factory
        self._size = size
        self._ttl = ttl
        self._clock = clock
        self._users: OrderedDict[str, UserTools] = OrderedDict()
        # The toolsets' shared scopes without the per_user servers' tools, by (version, toolset).
        self._shared: OrderedDict[tuple[str, str], SearchScope] = OrderedDict()
        self.builds = 0  # per-principal indexes built

    def applies(self, toolset: Toolset) -> bool:
        """Whether ``toolset`` takes any ``per_user`` server (else a principal changes nothing)."""
        return any(self._in_toolset(s, toolset) for s in self._config.per_user_servers)

    def __len__(self) -> int:
        return len(self._users)

    async def scopes(
        self, prepared: PreparedToolset, toolset: Toolset, principal: str
    ) -> tuple[SearchScope, SearchScope, tuple[str, ...]]:
        """The toolset's shared scope without the ``per_user`` servers' tools, the principal's
        own scope of those servers, and the ``per_user`` servers of the toolset they have not
        signed in to.

        Raises:
            ToolscoutError: the pool could not list a server's tools for them.
        """
        user = await self._user(principal, prepared.catalog_version)
        key = toolset.key if isinstance(toolset, InlineToolset) else toolset
        own = user.scopes.get(key)
        if own is None:
            selected = select_toolset(user.index.catalog, self._config, toolset, validate=False)
            eager = [t.llm_name for t in partition_tools(selected, self._config).loaded]
            whole = len(selected) == len(user.index)
            own = user.scopes[key] = SearchScope(user.index, None if whole else selected, eager)
        unsigned = tuple(s for s in user.unsigned if self._in_toolset(s, toolset))
        return self._shared_scope(prepared), own, unsigned

    def _in_toolset(self, server: str, toolset: Toolset) -> bool:
        if not toolset:
            return True
        spec = toolset.spec if isinstance(toolset, InlineToolset) else self._config.tool_sets.get(toolset)
        return spec is not None and spec.servers.get(server, False) is not False

    def _shared_scope(self, prepared: PreparedToolset) -> SearchScope:
        scope = prepared.scope
        per_user = self._config.per_user_servers
        if not per_user.intersection(scope.servers):
            return scope
        key = (prepared.catalog_version, prepared.toolset)
        shared = self._shared.get(key)
        if shared is None:
            tools = [t for t in scope.tools if t.server not in per_user]
            shared = SearchScope(
                scope.base, tools, [n for n in scope.eager if _server_of(scope, n) not in per_user]
            )
            self._shared[key] = shared
            while len(self._shared) > 64:
                self._shared.popitem(last=False)
        self._shared.move_to_end(key)
        return shared

    async def _user(self, principal: str, version: str) -> UserTools:
        now = self._clock()
        user = self._users.get(principal)
        if user is not None and user.catalog_version == version and now - user.made < self._ttl:
            self._users.move_to_end(principal)
            return user
        tools: list[Tool] = []
        unsigned: list[str] = []
        complete = True
        for server in sorted(self._config.per_user_servers):
            try:
                listed = await self._fetch(server, principal)
            except ToolscoutClientError as err:
                # Searched without it this time (and not kept: the next search asks again).
                _log.warning(
                    "listing a per-user server for its caller failed", server=server, error=err.message
                )
                complete = False
                continue
            if listed is None:
                unsigned.append(server)
            else:
                tools.extend(listed)
        catalog = Catalog(f"{version}/{principal}", (ParsedTool.of(t) for t in tools))
        user = UserTools(version, now, CatalogIndex(catalog, self._index_factory), tuple(unsigned))
        self.builds += 1
        if not complete or unsigned:
            # Not kept: a sign-in shows at once (asking whether they have one is cheap).
            return user
        self._users[principal] = user
        self._users.move_to_end(principal)
        while len(self._users) > self._size:
            self._users.popitem(last=False)
        return user


def _server_of(scope: SearchScope, llm_name: str) -> str:
    tool = scope.base.catalog.by_llm_name(llm_name)
    return tool.server if tool is not None else ""
