"""The seam to the pool: follow its catalog through the client library and hand snapshots to discovery.

On start (and after every disconnect) each shard's stream calls ``ListTools`` for the full catalog,
then follows ``WatchCatalog`` from that version. When a shard restarts or its stream breaks it
reconnects with exponential backoff. Client errors become domain errors here and nowhere else.

The pool is followed shard by shard (:class:`CatalogFollower`; an unsharded pool is one shard):
each shard's catalog goes into a :class:`~toolscout.client.CatalogMerger`, and discovery gets one
catalog with one version, the same names and the same version as an unsharded pool with those
tools (one shard's catalog is passed on as it is, version included). A shard that cannot be
reached keeps its tools in the catalog, marked unavailable (after ``down_grace``, so a restart of a
moment changes nothing); the other shards' tools are untouched. Only the servers whose tools
changed are converted again, so a change on one shard costs what that shard changed.

A catalog that keeps changing (a fleet coming up: a new version per server) is followed at a pace:
after handling a snapshot the stream waits :data:`FOLLOW_PACE` times as long as that took before it
reads the next (at most :data:`MAX_FOLLOW_PAUSE`): at most a quarter of the wall time goes to
merging while the catalog keeps changing (under ``toolscout up`` the pool's pings share the
process), and a small catalog (milliseconds to merge) is followed at once. A pause of
:data:`REOPEN_AFTER` or more is taken with the stream closed, and a new stream (which starts with
the catalog as it is then) opened after it: the snapshots a stream has on the way to a slow reader
are out of date when it reads them (one per cycle, each older than the last change: at 1,000
servers discovery trailed the pool by ~45 s). The versions in between are skipped, not queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolscout.client import AsyncPoolClient, CatalogMerger, Tool, ToolscoutClientError

from discovery_svc.catalog import Catalog, ParsedTool
from discovery_svc.metrics import DiscoveryMetrics
from toolscout_kit.logging import get_logger
from toolscout_kit.memory import release_soon
from toolscout_kit.status import error_from_client

__all__ = [
    "FOLLOW_PACE",
    "MAX_FOLLOW_PAUSE",
    "REOPEN_AFTER",
    "CatalogFollower",
    "catalog_from_pool",
    "follow_pause",
]

_log = get_logger(__name__)

# After a snapshot took t seconds to handle, the next is read no sooner than FOLLOW_PACE * t later
# (and never more than MAX_FOLLOW_PAUSE later).
FOLLOW_PACE = 3.0
MAX_FOLLOW_PAUSE = 10.0
# A pause at least this long is taken with the stream closed (reopened after it).
REOPEN_AFTER = 0.5


def follow_pause(
    handling_seconds: float, *, pace: float = FOLLOW_PACE, cap: float = MAX_FOLLOW_PAUSE
) -> float:
    """How long to wait before reading the next snapshot after one took ``handling_seconds``."""
    return min(max(handling_seconds, 0.0) * pace, cap)


def _same_but_availability(old: Tool, new: Tool) -> bool:
    return (
        old.server == new.server
        and old.name == new.name
        and old.llm_name == new.llm_name
        and old.description == new.description
        and old.input_schema_json == new.input_schema_json
        and old.title == new.title
        and old.output_schema_json == new.output_schema_json
        and old.annotations_json == new.annotations_json
        and old.extra_json == new.extra_json
    )


def catalog_from_pool(version: str, tools: Iterable[Tool]) -> Catalog:
    """A domain catalog from the pool's tools (schemas parsed once, here; one parsed copy of
    each distinct schema)."""
    schemas: dict[str, dict[str, Any]] = {}
    return Catalog(version, (ParsedTool.of(t, schemas) for t in tools))


# The texts of a definition that many servers of a fleet share (the same server run for many
# teams, the same SDK's generic tools): kept once per process (:func:`_shared_texts`).
_TEXT_FIELDS = (
    "name",
    "title",
    "description",
    "input_schema_json",
    "output_schema_json",
    "annotations_json",
    "extra_json",
)


def _shared_texts(tools: Iterable[Tool], texts: dict[str, str]) -> tuple[Tool, ...]:
    """``tools`` with every text equal to one seen before replaced by that one string object.

    Decoding a catalog makes a new string of every field of every tool; at 50,000 tools of
    repeated definitions most of the catalog's text is copies (the fleet of bench/mcp_fleet.py:
    15.6 MB of schema JSON, 2.6 MB of it distinct)."""
    out = []
    for tool in tools:
        shared: dict[str, Any] = {f: texts.setdefault(v, v) for f in _TEXT_FIELDS if (v := getattr(tool, f))}
        out.append(dataclasses.replace(tool, **shared) if shared else tool)
    return tuple(out)


class _Stream:
    """Follows one pool (or shard): ListTools, then WatchCatalog, reconnecting with backoff."""

    def __init__(
        self,
        pool: AsyncPoolClient,
        on_snapshot: Callable[[str, tuple[Tool, ...]], Any],
        *,
        on_lost: Callable[[], Any] | None = None,
        name: str = "pool",
        initial_backoff: float,
        max_backoff: float,
        list_timeout: float,
        pace: float = FOLLOW_PACE,
        reopen_after: float = REOPEN_AFTER,
    ) -> None:
        self.pool = pool
        self._pace = pace
        self._reopen_after = reopen_after
        self.paused_seconds = 0.0  # waited in all, pacing the reads (see follow_pause)
        self.streams_opened = 0  # WatchCatalog calls
        self._on_snapshot = on_snapshot
        self._on_lost = on_lost
        self._name = name
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._list_timeout = list_timeout
        self.version = ""
        self.connected = asyncio.Event()

    async def _follow_once(self) -> None:
        listing = await self.pool.list_tools(
            include_unavailable=True, wait_for_ready=True, deadline=self._list_timeout
        )
        pause = await self._handle(listing.catalog_version, listing.tools)
        self.connected.set()
        _log.info(
            "following pool catalog",
            pool=self._name,
            catalog_version=listing.catalog_version,
            tools=len(listing.tools),
        )
        while True:
            if pause >= self._reopen_after:
                # A long pause is taken with no stream open: the snapshots a stream has on the way
                # to a slow reader are out of date when it reads them. A stream opened after it
                # starts with the catalog as it is then (unless unchanged).
                await self._pause(pause)
            watched = await self._watch()
            if watched is None:
                return  # the stream ended
            pause = watched

    async def _watch(self) -> float | None:
        """Follows WatchCatalog until a snapshot asks for a long pause (returned, with the stream
        closed); None: the stream ended."""
        self.streams_opened += 1
        # Closed explicitly: a cancelled follower must end the stream now, not when the generator
        # is garbage-collected (possibly after its event loop is gone).
        async with contextlib.aclosing(self.pool.watch_catalog(self.version)) as updates:
            async for update in updates:
                pause = await self._handle(update.catalog_version, update.tools)
                if pause >= self._reopen_after:
                    return pause
                await self._pause(pause)
        return None

    async def _handle(self, version: str, tools: tuple[Tool, ...]) -> float:
        started = time.perf_counter()
        await self._on_snapshot(version, tools)
        self.version = version
        return follow_pause(time.perf_counter() - started, pace=self._pace)

    async def _pause(self, seconds: float) -> None:
        if seconds > 0:
            self.paused_seconds += seconds
            await asyncio.sleep(seconds)

    async def run(self) -> None:
        """Follows forever, reconnecting with backoff; returns only when cancelled."""
        backoff = self._initial_backoff
        while True:
            try:
                await self._follow_once()
                problem = "catalog stream ended"
            except ToolscoutClientError as err:
                problem = error_from_client(err, self._name).message
            except Exception as err:
                # A fault in handling a snapshot must not end the following for good (discovery
                # would serve a stale catalog until restarted): logged, then followed afresh.
                _log.exception("handling a pool catalog snapshot failed", pool=self._name)
                problem = f"handling a snapshot failed ({type(err).__name__})"
            if self.connected.is_set():
                # The session was healthy: the next outage starts with a short wait again.
                backoff = self._initial_backoff
                self.connected.clear()
            if self._on_lost is not None:
                self._on_lost()
            _log.warning(
                "pool catalog unavailable; reconnecting",
                pool=self._name,
                error=problem,
                retry_in=round(backoff, 2),
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)


class CatalogFollower:
    """Follows every shard of the pool (one, when it is not sharded) and keeps discovery's one
    merged catalog in step until cancelled.

    ``shards[k]`` is a client of shard ``k``. ``configured`` names the configured servers: one
    that vanishes from every shard (moving to another during a resharding) keeps its tools,
    unavailable, until its new owner lists it. The first catalog is handed over once every shard
    has sent its catalog or been found unreachable (``down_grace`` after its first failed attempt),
    and at least one has sent one, so discovery never starts with a part of the tools that looks
    like the whole, nor with no tools while no shard has answered yet.
    """

    def __init__(
        self,
        shards: Mapping[int, AsyncPoolClient],
        on_catalog: Callable[[Catalog], None],
        *,
        configured: Iterable[str] = (),
        down_grace: float = 2.0,
        initial_backoff: float = 0.2,
        max_backoff: float = 10.0,
        list_timeout: float = 10.0,
        pace: float = FOLLOW_PACE,
        reopen_after: float = REOPEN_AFTER,
        metrics: DiscoveryMetrics | None = None,
    ) -> None:
        """``pace``: see :func:`follow_pause` (0 reads every snapshot as soon as it comes);
        ``reopen_after``: the shortest pause taken with the stream closed (reopened after it)."""
        self._on_catalog = on_catalog
        self._pace = pace
        self._reopen_after = reopen_after
        self._merger = CatalogMerger(keep=dict.fromkeys(configured))
        self._down_grace = down_grace
        self._backoff = (initial_backoff, max_backoff, list_timeout)
        self._metrics = metrics or DiscoveryMetrics()
        self._lock = asyncio.Lock()
        # Converted tools by server digest: this catalog's, and the previous one's (a shard that
        # went down and came back finds its tools still converted).
        self._tools: dict[bytes, tuple[ParsedTool, ...]] = {}
        self._previous: dict[bytes, tuple[ParsedTool, ...]] = {}
        self._by_server: dict[str, tuple[ParsedTool, ...]] = {}
        # One string per distinct text and one parsed schema per distinct schema, across shards
        # and catalog versions (pruned to the current catalog's after each build).
        self._texts: dict[str, str] = {}
        self._schemas: dict[str, dict[str, Any]] = {}
        self._version = ""
        self._streams: dict[int, _Stream] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._downs: dict[int, asyncio.Task[None]] = {}
        self._running = False
        self._complete = False
        self.last_merge_seconds = 0.0
        for index, client in shards.items():
            self._streams[index] = self._stream(index, client)

    def _stream(self, index: int, client: AsyncPoolClient) -> _Stream:
        initial, cap, list_timeout = self._backoff

        async def on_snapshot(version: str, tools: tuple[Tool, ...]) -> None:
            await self._update(index, version, tools)

        return _Stream(
            client,
            on_snapshot,
            on_lost=lambda: self._lost(index),
            name=f"pool shard {index}",
            initial_backoff=initial,
            max_backoff=cap,
            list_timeout=list_timeout,
            pace=self._pace,
            reopen_after=self._reopen_after,
        )

    @property
    def shards(self) -> list[int]:
        return sorted(self._streams)

    def connected(self, index: int) -> asyncio.Event:
        return self._streams[index].connected

    @property
    def paused_seconds(self) -> float:
        """Seconds the shards' streams have waited in all, pacing their reads (:func:`follow_pause`)."""
        return sum(stream.paused_seconds for stream in self._streams.values())

    @property
    def streams_opened(self) -> int:
        """``WatchCatalog`` calls of the shards (one per (re)connect and per long pause)."""
        return sum(stream.streams_opened for stream in self._streams.values())

    # --- merging ------------------------------------------------------------------------------

    async def _update(self, index: int, version: str, tools: tuple[Tool, ...]) -> None:
        down = self._downs.pop(index, None)
        if down is not None:
            down.cancel()
        started = time.perf_counter()
        async with self._lock:
            if index not in self._streams:
                return  # the shard was removed while its update was on the way
            changed = await asyncio.to_thread(self._merge, index, version, tools)
            # Until the first catalog is out, a shard that adds nothing (no servers) still counts.
            if changed or not self._complete:
                await self._publish(started)

    def _merge(self, index: int, version: str, tools: tuple[Tool, ...]) -> bool:
        return self._merger.update(index, version, _shared_texts(tools, self._texts))

    def _lost(self, index: int) -> None:
        if index in self._downs or index not in self._streams:
            return
        self._downs[index] = asyncio.create_task(self._mark_down(index), name=f"shard-{index}-down")

    async def _mark_down(self, index: int) -> None:
        await asyncio.sleep(self._down_grace)
        started = time.perf_counter()
        async with self._lock:
            stream = self._streams.get(index)
            if stream is not None and not stream.connected.is_set():
                changed = self._merger.shard_down(index)
                _log.warning("pool shard unreachable; its tools are unavailable", shard=index)
                if changed or not self._complete:
                    await self._publish(started)
        self._downs.pop(index, None)

    async def _publish(self, started: float) -> None:
        if not self._complete:
            # Every shard heard from (a catalog, or found down): from then on every change counts.
            heard = [self._merger.has_catalog(k) for k in self._streams]
            self._complete = any(heard) and all(
                has or self._merger.is_down(k) for k, has in zip(self._streams, heard, strict=True)
            )
            if not self._complete:
                return
        catalog = await asyncio.to_thread(self._build)
        if catalog is None:
            return
        seconds = time.perf_counter() - started
        self.last_merge_seconds = seconds
        self._metrics.merged(seconds)
        _log.info(
            "merged pool shard catalogs",
            catalog_version=catalog.version,
            tools=len(catalog),
            seconds=round(seconds, 4),
        )
        self._on_catalog(catalog)
        release_soon(len(catalog))  # the shards' decoded snapshots and the build's garbage

    def _convert(self, server: str, digest: bytes, listed: tuple[Tool, ...]) -> tuple[ParsedTool, ...]:
        cached = self._tools.get(digest) or self._previous.get(digest)
        if cached is not None:
            return cached
        prior = self._by_server.get(server)
        if (
            prior is not None
            and len(prior) == len(listed)
            and all(map(_same_but_availability, prior, listed))
        ):
            # Only availability changed (a shard went down or came back): no schema to parse again.
            return tuple(
                old if old.available == new.available else dataclasses.replace(old, available=new.available)
                for old, new in zip(prior, listed, strict=True)
            )
        return tuple(ParsedTool.of(t, self._schemas) for t in listed)

    def _build(self) -> Catalog | None:
        """The merged discovery catalog; only servers whose tools changed are converted again."""
        merged = self._merger.catalog()
        if merged.catalog_version == self._version:
            return None
        tools: dict[bytes, tuple[ParsedTool, ...]] = {}
        by_server: dict[str, tuple[ParsedTool, ...]] = {}
        for server, digest, listed in self._merger.listings():
            tools[digest] = by_server[server] = self._convert(server, digest, listed)
        self._previous, self._tools, self._by_server = self._tools, tools, by_server
        self._version = merged.catalog_version
        catalog = Catalog(merged.catalog_version, (t for converted in tools.values() for t in converted))
        self._prune(catalog)
        return catalog

    def _prune(self, catalog: Catalog) -> None:
        """Forgets the texts and schemas no tool of ``catalog`` or of the previous one holds."""
        kept = [*catalog.tools, *(t for converted in self._previous.values() for t in converted)]
        self._schemas = {t.input_schema_json: t.parsed_schema for t in kept}
        self._texts = {v: v for t in kept for f in _TEXT_FIELDS if (v := getattr(t, f))}

    # --- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Follows every shard until cancelled."""
        self._running = True
        for index, stream in self._streams.items():
            self._start(index, stream)
        try:
            await asyncio.Event().wait()
        finally:
            self._running = False
            tasks = [*self._tasks.values(), *self._downs.values()]
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._tasks.clear()
            self._downs.clear()

    def _start(self, index: int, stream: _Stream) -> None:
        self._tasks[index] = asyncio.create_task(stream.run(), name=f"discovery-shard-{index}")

    async def reshard(
        self, shards: Mapping[int, AsyncPoolClient], configured: Iterable[str]
    ) -> list[AsyncPoolClient]:
        """Follows ``shards`` from now on (a changed shard count); returns the clients no longer used.

        A shard whose client is the same object keeps its stream; removed shards' tools leave the
        merge (servers that are still configured stay, unavailable, until their new owner lists them).
        """
        unused: list[AsyncPoolClient] = []
        started = time.perf_counter()
        async with self._lock:
            self._merger.set_keep(configured)
            for index in sorted(self._streams):
                stream = self._streams[index]
                if shards.get(index) is stream.pool:
                    continue
                del self._streams[index]
                task = self._tasks.pop(index, None)
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                down = self._downs.pop(index, None)
                if down is not None:
                    down.cancel()
                self._merger.remove_shard(index)
                unused.append(stream.pool)
            for index, client in shards.items():
                if index not in self._streams:
                    self._streams[index] = stream = self._stream(index, client)
                    if self._running:
                        self._start(index, stream)
            await self._publish(started)
        return unused
