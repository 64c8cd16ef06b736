"""The discovery facade: PlanTools, SearchTools and GetManifest over the current catalog.

One :class:`~discovery_svc.catalog_index.CatalogIndex` (the BM25 index and name lookups) is built
per catalog version, off the event loop, and shared by every toolset. A toolset — configured, or
given inline by a caller and keyed by its canonical hash — gets a small
:class:`PreparedToolset` (partition, candidate mask, manifest, token totals), kept in an LRU and
reused by every request until the pool reports a new catalog version. With hybrid search on, a
:class:`~discovery_svc.hybrid_stage.HybridStage` embeds each catalog version in the background and
queries are embedded off the event loop. Requests carry the conversation's discovered tools, so
nothing about a conversation lives here: after a rebuild the same names resolve against the new
catalog and stay loaded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections import OrderedDict
from collections.abc import AsyncIterator

from toolscout.client import (
    Manifest,
    PlanRequest,
    SearchRequest,
    SearchResult,
    ServerTokens,
    ToolPlan,
    ToolsetLike,
    ToolsetRef,
    ToolSurface,
)

from discovery_svc.catalog import Catalog
from discovery_svc.catalog_index import CatalogIndex, IndexFactory
from discovery_svc.errors import SearchArgumentError
from discovery_svc.hybrid_stage import HybridStage
from discovery_svc.index import SearchIndex
from discovery_svc.manifest import manifest_answer
from discovery_svc.metrics import DiscoveryMetrics
from discovery_svc.partition import InlineToolset, Toolset, partition_tools, resolve_toolset, select_toolset
from discovery_svc.planner import PreparedToolset, assemble_plan, plan_tools
from discovery_svc.result_text import unsigned_note
from discovery_svc.scope import SearchScope, ToolScope
from discovery_svc.search_args import SearchArgs, SearchMode, parse_arguments_json, validate_arguments
from discovery_svc.search_tool import execute_search
from discovery_svc.tokens import TokenCounter, TokenEncoding
from discovery_svc.user_index import MergedScope, UserIndexes
from discovery_svc.user_plan import user_parts
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.errors import ToolscoutError, UnavailableError
from toolscout_kit.logging import get_logger
from toolscout_kit.tracing import set_attributes

__all__ = ["DiscoveryEngine", "settled_after"]

_log = get_logger(__name__)

# A toolset as one principal sees it: its scope without the per_user servers' tools, their own
# scope of those servers, and the per_user servers they have not signed in to.
UserScopes = tuple[SearchScope, SearchScope, tuple[str, ...]]


# A catalog that has not changed for this long is built without waiting out the pause after the
# last build (see DiscoveryEngine.prepared) — or for longer, while versions come further apart
# (the catalog follower paces its reads): 1.5 times the last gap between versions, at most 30 s.
_SETTLED_SECONDS = 1.0
_SETTLED_GAPS = 1.5
_MAX_SETTLED_SECONDS = 30.0


def settled_after(version_gap: float) -> float:
    """How long a catalog must stay unchanged to count as settled, when the last two versions
    came ``version_gap`` seconds apart."""
    return min(max(_SETTLED_SECONDS, version_gap * _SETTLED_GAPS), _MAX_SETTLED_SECONDS)


class DiscoveryEngine:
    """Domain entry point used by the servicer (and in-process by benchmarks and tests)."""

    def __init__(
        self,
        config: ToolscoutConfig,
        *,
        counter: TokenCounter | None = None,
        index_factory: IndexFactory = SearchIndex,
        cache_size: int = 64,
        metrics: DiscoveryMetrics | None = None,
        hybrid: HybridStage | None = None,
        users: UserIndexes | None = None,
    ) -> None:
        """``cache_size`` bounds the prepared toolset states kept (configured and inline ones);
        ``users``: what ``per_user`` servers list to each principal (searches that name one)."""
        self._users = users
        self._config = config
        self._settings = config.toolscout.discovery
        self._current: Catalog | None = None
        self._base: CatalogIndex | None = None
        self._counter = counter or TokenCounter()
        self._index_factory = index_factory
        self._cache: OrderedDict[tuple[str, str], PreparedToolset] = OrderedDict()
        self._cache_size = cache_size
        self._build_lock = asyncio.Lock()
        self._metrics = metrics or DiscoveryMetrics()
        self._hybrid = hybrid
        # Set (and replaced) each time a new catalog version is installed: plan watchers wait on it.
        self._changed = asyncio.Event()
        if hybrid is None:
            self._metrics.set_search_mode("bm25")
        self.builds = 0  # prepared toolset states built
        # When the next build for a newer catalog version may start, and when the catalog last
        # changed (see prepared()).
        self._next_build_at = 0.0
        self._changed_at = 0.0
        self._version_gap = 0.0
        self.index_builds = 0  # catalog indexes built (one per catalog version)

    # --- catalog ---------------------------------------------------------------------------

    def set_catalog(self, catalog: Catalog) -> bool:
        """Installs a catalog snapshot; returns False when the version is unchanged."""
        if self._current is not None and self._current.version == catalog.version:
            return False
        self._current = catalog
        now = time.monotonic()
        if self._changed_at:
            self._version_gap = now - self._changed_at
        self._changed_at = now
        # Prepared states of older versions can never be hit again.
        for key in [k for k in self._cache if k[0] != catalog.version]:
            del self._cache[key]
        self._counter.retain(frozenset(catalog.tools))
        _log.info("catalog installed", catalog_version=catalog.version, tools=len(catalog))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        return True

    @property
    def catalog(self) -> Catalog:
        """The current catalog.

        Raises:
            UnavailableError: none has arrived from the pool yet.
        """
        catalog = self._current
        if catalog is None:
            raise UnavailableError("no tool catalog from the pool yet; retry shortly")
        return catalog

    async def close(self) -> None:
        """Stops background work (an embedding build in progress)."""
        if self._hybrid is not None:
            await self._hybrid.close()

    async def wait_hybrid_ready(self) -> None:
        """Returns once the current catalog answers with hybrid search (never in BM25 mode:
        bound the wait)."""
        if self._hybrid is None:
            await asyncio.Event().wait()
        else:
            await self._hybrid.wait_ready()

    async def _catalog_index(self, catalog: Catalog) -> CatalogIndex:
        """The index of ``catalog`` (built once per version; call with the build lock held)."""
        base = self._base
        if base is not None and base.version == catalog.version:
            return base
        started = time.perf_counter()
        base = await asyncio.to_thread(CatalogIndex, catalog, self._index_factory)
        elapsed = time.perf_counter() - started
        self.index_builds += 1
        self._metrics.index_built(elapsed)
        _log.info(
            "catalog index built",
            catalog_version=catalog.version,
            tools=len(catalog),
            seconds=round(elapsed, 4),
        )
        if catalog.version == self.catalog.version:
            self._base = base
            if self._hybrid is not None:
                self._hybrid.start(base)
        return base

    async def prepared(self, toolset: ToolsetLike | Toolset) -> PreparedToolset:
        """The prepared state for ``toolset`` at the current catalog version (built at most once).

        Raises:
            UnavailableError: no catalog yet.
            InvalidToolsetError: a malformed inline toolset, or a name and an inline one together.
            ToolsetNotFoundError: unknown or invalid toolset.
        """
        if not isinstance(toolset, str | InlineToolset):
            toolset = resolve_toolset(ToolsetRef.of(toolset))
        catalog = self.catalog
        name = toolset.key if isinstance(toolset, InlineToolset) else toolset
        key = (catalog.version, name)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        async with self._build_lock:
            while self._base is not None and self._base.version != self.catalog.version:
                # A catalog that keeps changing (a fleet coming up: a new version per server) is
                # indexed again at most half the time, leaving the other half to the pool (in the
                # same process under `toolscout up`); once it has not changed for a moment (longer
                # than the versions have been coming apart) it is built at once. Other toolsets of
                # an indexed version never wait.
                now = time.monotonic()
                settled_at = self._changed_at + settled_after(self._version_gap)
                pause = min(self._next_build_at - now, settled_at - now)
                if pause <= 0:
                    break
                await asyncio.sleep(pause)
            # The latest version: a request queued behind the build of an older one builds no
            # version of its own that is already out of date.
            catalog = self.catalog
            key = (catalog.version, name)
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            build_started = time.monotonic()
            base = await self._catalog_index(catalog)
            tools = select_toolset(catalog, self._config, toolset)
            started = time.perf_counter()
            prepared = await asyncio.to_thread(
                PreparedToolset,
                base=base,
                toolset=name,
                per_user=self._config.per_user_servers,
                partition=partition_tools(tools, self._config),
                counter=self._counter,
                manifest_budget=self._settings.manifest_budget_tokens,
                placement=self._settings.manifest_placement,
            )
            elapsed = time.perf_counter() - started
            self.builds += 1
            self._metrics.toolset_builds.labels(
                "inline" if isinstance(toolset, InlineToolset) else "configured"
            ).inc()
            _log.info(
                "toolset prepared",
                catalog_version=catalog.version,
                toolset=name,
                tools=len(tools),
                deferred=len(prepared.partition.deferred),
                manifest_tokens=prepared.manifest.tokens,
                seconds=round(elapsed, 4),
            )
            if catalog.version == self.catalog.version:
                self._cache[key] = prepared
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
            now = time.monotonic()
            self._next_build_at = now + (now - build_started)
            return prepared

    async def warm(self, toolset: ToolsetLike = "", provider: str = "openai") -> None:
        """Builds the state and token totals for ``toolset`` ahead of the first request."""
        prepared = await self.prepared(toolset)
        enc = self._counter.encoding_for(provider)
        if not prepared.has_totals(enc):
            await asyncio.to_thread(prepared.totals, enc)

    # --- RPCs ------------------------------------------------------------------------------

    async def plan_tools(self, request: PlanRequest) -> ToolPlan:
        """Loaded definitions, search_tools, manifest and token accounting for one LLM call.

        ``include_deferred_names`` / ``include_deferred_tools`` add the names / definitions of
        every deferred tool (the list can be long; native deferral declares them all). ``surface``
        stable plans eager tools + search_tools + call_tool (:mod:`discovery_svc.surface`).

        Raises:
            InvalidArgumentError: unknown provider, or a malformed inline toolset.
            UnavailableError: no catalog yet.
            ToolsetNotFoundError: unknown or invalid toolset.
        """
        toolset = resolve_toolset(request.toolset)
        prepared = await self.prepared(toolset)
        return await self._plan(
            prepared,
            request.discovered_tools,
            request.provider,
            include_deferred_names=request.include_deferred_names,
            include_deferred_tools=request.include_deferred_tools,
            surface=request.surface or ToolSurface.APPEND,
            user=await self._user_scopes(prepared, toolset, request.principal),
        )

    async def watch_plans(self, request: PlanRequest, known_version: str = "") -> AsyncIterator[ToolPlan]:
        """The plan (as :meth:`plan_tools`) once the catalog differs from ``known_version``, then
        again after every new catalog version, until the caller stops iterating.

        Raises:
            As :meth:`plan_tools` (an unknown toolset fails the first plan; a toolset that stops
            being valid after a catalog change ends the stream with that error).
        """
        version = known_version
        while True:
            changed = self._changed
            current = self._current
            if current is None or current.version == version:
                await changed.wait()
                continue
            plan = await self.plan_tools(request)
            version = plan.catalog_version
            yield plan

    async def _plan(
        self,
        prepared: PreparedToolset,
        discovered: tuple[str, ...],
        provider: str,
        *,
        include_deferred_names: bool = False,
        include_deferred_tools: bool = False,
        surface: ToolSurface = ToolSurface.APPEND,
        user: UserScopes | None = None,
    ) -> ToolPlan:
        """``user``: the toolset as a principal sees it (:meth:`_user_scopes`; the plan is then
        theirs: :mod:`discovery_svc.user_plan`)."""
        enc = self._counter.encoding_for(provider)
        if not prepared.has_totals(enc):
            await asyncio.to_thread(prepared.totals, enc)
        if user is not None:
            return assemble_plan(
                prepared,
                enc,
                user_parts(prepared, user[0], user[1], self._config.per_user_servers, discovered, enc),
                include_deferred_names=include_deferred_names,
                include_deferred_tools=include_deferred_tools,
                surface=surface,
            )
        return plan_tools(
            prepared,
            discovered,
            enc,
            include_deferred_names=include_deferred_names,
            include_deferred_tools=include_deferred_tools,
            surface=surface,
        )

    async def search_tools(self, request: SearchRequest, *, time_limit: float | None = None) -> SearchResult:
        """Executes one search_tools call; ``time_limit``: the seconds the caller will wait (its
        deadline), of which a query embedding gets at most half.

        With ``include_plan`` the result carries the plan for the next LLM call.

        Raises:
            SearchArgumentError: malformed arguments (message written for the LLM), or a
                negative ``max_results``.
            UnknownServerError: server_name not in the toolset (message lists valid servers).
            InvalidArgumentError: unknown provider (with ``include_plan``), or a malformed inline
                toolset.
            UnavailableError: no catalog yet.
            ToolsetNotFoundError: unknown or invalid toolset.
        """
        toolset = resolve_toolset(request.toolset)
        surface = request.surface or ToolSurface.APPEND
        started = time.perf_counter()
        mode = "unknown"
        try:
            args = _search_args(request, browse=surface is ToolSurface.STABLE)
            mode = args.mode.value
            set_attributes({"toolscout.search.query_length": len(args.query or "")})
            prepared = await self.prepared(toolset)
            user = await self._user_scopes(prepared, toolset, request.principal)
            scope, threaded, unsigned = await self._scope(prepared, user, args.query, time_limit)
            search = functools.partial(
                execute_search,
                scope,
                args,
                loaded=request.loaded_tools,
                max_results=request.max_results or self._config.tool_discovery.max_search_results,
                # An explicit max_results pages a server browse too (the LLM's calls never set it).
                browse_limit=request.max_results or self._settings.server_browse_limit,
                parameters=not request.compact_text,
                surface=surface,
                manifest=manifest_answer(prepared.manifest) if args.mode is SearchMode.MANIFEST else "",
                unsigned=unsigned,
            )
            # Hybrid ranking multiplies the query with every candidate's vector (ms at 50k tools):
            # not on the event loop. BM25 answers in well under a millisecond: in place.
            result = await asyncio.to_thread(search) if threaded else search()
        except ToolscoutError:
            self._metrics.search(mode, "error", time.perf_counter() - started)
            raise
        plan = None
        if request.include_plan:
            discovered = [*request.discovered_tools, *(t.llm_name for t in result.newly_loaded)]
            plan = await self._plan(prepared, tuple(discovered), request.provider, surface=surface, user=user)
        ranking = ""
        if result.mode in (SearchMode.QUERY, SearchMode.SERVER_QUERY):
            # Threaded: the query has its vector, so the hybrid index ranked it.
            ranking = "hybrid" if threaded else "bm25"
        result = dataclasses.replace(
            result,
            catalog_version=prepared.catalog_version,
            plan=plan,
            ranking=ranking,
            # A browse of a server they have not signed in to says so itself.
            result_text=result.result_text + unsigned_note([s for s in unsigned if s != args.server_name]),
        )
        mode = result.mode
        self._metrics.search(mode, "found" if result.matches else "empty", time.perf_counter() - started)
        self._metrics.tools_discovered.inc(len(result.newly_loaded))
        return result

    async def _user_scopes(
        self, prepared: PreparedToolset, toolset: Toolset, principal: str
    ) -> UserScopes | None:
        """The toolset as ``principal`` sees it (:meth:`UserIndexes.scopes`); None when that is the
        toolset's own scope (no principal named, or no ``per_user`` server in the toolset)."""
        if not principal or self._users is None or not self._users.applies(toolset):
            return None
        return await self._users.scopes(prepared, toolset, principal)

    async def _scope(
        self,
        prepared: PreparedToolset,
        user: UserScopes | None,
        query: str | None,
        time_limit: float | None,
    ) -> tuple[ToolScope, bool, tuple[str, ...]]:
        """What a search runs on: the toolset's scope (hybrid when ready: then ``True``, run it in
        a thread), merged with what ``per_user`` servers list to a principal (``user``:
        :mod:`discovery_svc.user_index`); and the ``per_user`` servers they have not signed in to."""
        shared, threaded = prepared.scope, False
        own: SearchScope | None = None
        unsigned: tuple[str, ...] = ()
        if user is not None:
            shared, own, unsigned = user
        if self._hybrid is not None:
            waiting = time.perf_counter()
            shared, threaded = await self._hybrid.scope_for(shared, query, time_limit)
            set_attributes({"toolscout.search.embedding_wait_seconds": time.perf_counter() - waiting})
        return (shared if own is None else MergedScope(shared, own)), threaded, unsigned

    async def get_manifest(self, toolset: ToolsetLike = "", provider: str = "") -> Manifest:
        """The manifest for ``toolset`` and its size in ``provider``'s encoding.

        Raises:
            InvalidArgumentError: unknown provider, or a malformed inline toolset.
            UnavailableError: no catalog yet.
            ToolsetNotFoundError: unknown or invalid toolset.
        """
        resolved = resolve_toolset(ToolsetRef.of(toolset))
        enc = self._counter.encoding_for(provider)
        prepared = await self.prepared(resolved)
        manifest = prepared.manifest
        servers = await asyncio.to_thread(self._server_tokens, prepared, enc)
        return Manifest(
            manifest=manifest.text,
            tokens=self._counter.count_text(manifest.text, enc.name),
            budget_tokens=self._settings.manifest_budget_tokens,
            deferred_servers=manifest.deferred_servers,
            deferred_tools=manifest.deferred_tools,
            catalog_version=prepared.catalog_version,
            servers=servers,
            encoding=enc.name,
            estimate=enc.estimate,
        )

    def _server_tokens(self, prepared: PreparedToolset, enc: TokenEncoding) -> tuple[ServerTokens, ...]:
        # Counts are cached per tool, so this costs a dictionary lookup per tool after the first time.
        rows: dict[str, list[int]] = {}
        for tool in prepared.partition.tools:
            row = rows.setdefault(tool.server, [0, 0, 0, 0])
            tokens = prepared.count_tool(tool, enc)
            deferred = prepared.is_deferred(tool.llm_name) is not None
            row[0] += 1
            row[1] += deferred
            row[2] += tokens
            row[3] += 0 if deferred else tokens
        return tuple(ServerTokens(server, *row) for server, row in sorted(rows.items()))


def _search_args(request: SearchRequest, *, browse: bool) -> SearchArgs:
    """The search's arguments (the LLM's ``arguments_json``, or the typed fields); ``browse``: a
    call without any (the stable surface) asks for the manifest.

    Raises:
        SearchArgumentError: malformed arguments, or a negative ``max_results``.
    """
    if request.max_results < 0:
        raise SearchArgumentError(
            f"max_results must be 0 (the configured default) or more, got {request.max_results}"
        )
    if request.arguments_json:
        return parse_arguments_json(request.arguments_json, browse=browse)
    return validate_arguments(
        request.query,
        request.server_name,
        list(request.tool_names) if request.tool_names else None,
        request.offset,
        browse=browse,
    )
