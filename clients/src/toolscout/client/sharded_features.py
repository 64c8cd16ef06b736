"""Resources, templates, prompts, completion and logging over every shard of a sharded pool.

Each shard lists the features of the servers it runs; these methods merge the shards' listings
(a server run on every shard counted once) and send each request to the shard whose servers
offer it: shards are asked in turn, a ``NOT_FOUND`` or a refusal (neither sent anything) passing
the request on to the next, as a tool call named by an unknown route is.

Names and URIs are given by each shard for its own servers (the pool's rule,
:mod:`mcp_pool_svc.features`); the merge applies the same rule across shards: a prompt name or a
URI (or template) that servers on different shards both serve is served by neither under it, but
by each under its qualified name (``ServerFeature.qualified_name``: ``<server>__<prompt>``,
``toolscout://server/<server>/<uri>``), which the shard running that server answers. A request
for the bare name of such a clash is refused as unknown (``NOT_FOUND``, naming the qualified
names) instead of going to whichever shard answers first, once this client has merged a listing
that shows the clash (the gateway follows ``watch_features`` from its start).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, TypedDict, TypeVar, Unpack

import grpc

from toolscout.client import types as t
from toolscout.client._calls import FeatureListings, Metadata
from toolscout.client.aio import AsyncPoolClient
from toolscout.client.errors import NotFoundError, ToolscoutClientError, UnavailableError
from toolscout.client.sync import PoolClient

__all__ = [
    "CallOptions",
    "FeaturePage",
    "ShardedFeatureRequests",
    "ShardedFeatureRequestsSync",
    "merge_feature_snapshots",
]

R = TypeVar("R")
ReplyR = TypeVar("ReplyR")
_KIND_ORDER = {t.FeatureKind.RESOURCE: 0, t.FeatureKind.RESOURCE_TEMPLATE: 1, t.FeatureKind.PROMPT: 2}


def merge_feature_snapshots(snapshots: Sequence[t.FeatureSnapshot]) -> t.FeatureSnapshot:
    """One snapshot of several shards' (a server on several shards once; a name two servers serve
    under their qualified names, see the module's docstring)."""
    return _merged(snapshots)[0]


# A name several servers serve (kind, served name) -> the qualified names they are served under.
Clashes = Mapping[tuple[t.FeatureKind, str], tuple[str, ...]]


def _merged(snapshots: Sequence[t.FeatureSnapshot]) -> tuple[t.FeatureSnapshot, Clashes]:
    features: dict[tuple[t.FeatureKind, str, str], t.ServerFeature] = {}
    offers: dict[str, t.ServerOffers] = {}
    changed: set[t.FeatureKind] = set()
    for snapshot in snapshots:
        for feature in snapshot.features:
            features.setdefault((feature.kind, feature.server, feature.own_name), feature)
        for offer in snapshot.offers:
            offers.setdefault(offer.server, offer)
        changed.update(snapshot.changed_kinds)
    claims: dict[tuple[t.FeatureKind, str], list[t.ServerFeature]] = {}
    for feature in features.values():
        claims.setdefault((feature.kind, feature.served_name), []).append(feature)
    clashes: dict[tuple[t.FeatureKind, str], tuple[str, ...]] = {}
    for key, claimants in claims.items():
        if len(claimants) > 1 and all(f.qualified_name for f in claimants):
            clashes[key] = tuple(sorted(f.qualified_name for f in claimants))
            for f in claimants:
                features[(f.kind, f.server, f.own_name)] = _qualified(f)
    ordered = sorted(features.values(), key=lambda f: (_KIND_ORDER[f.kind], f.server, f.own_name))
    version = (
        "+".join(s.features_version for s in snapshots)
        if len(snapshots) > 1
        else (snapshots[0].features_version if snapshots else "")
    )
    merged = t.FeatureSnapshot(
        version,
        tuple(ordered),
        tuple(offers[s] for s in sorted(offers)),
        tuple(sorted(changed, key=_KIND_ORDER.__getitem__)),
    )
    return merged, clashes


def _qualified(feature: t.ServerFeature) -> t.ServerFeature:
    """``feature`` served under its qualified name (its definition's key too)."""
    definition = {**feature.definition, feature.kind.key_field: feature.qualified_name}
    return dataclasses.replace(
        feature,
        served_name=feature.qualified_name,
        definition_json=json.dumps(definition, ensure_ascii=False, separators=(",", ":")),
    )


def _refuse_clashed(clashes: Clashes, kind: t.FeatureKind, name: str) -> None:
    """Raises NotFoundError when ``name`` is served by several servers (under their qualified names)."""
    qualified = clashes.get((kind, name))
    if qualified:
        raise NotFoundError(
            f"several MCP servers offer '{name}': ask for one of {', '.join(qualified)}",
            code=grpc.StatusCode.NOT_FOUND,
        )


class FeaturePage(TypedDict, total=False):
    """The page and call options of :meth:`ShardedFeatureRequests.list_features`."""

    cursor: str
    page_size: int
    deadline: float | None
    metadata: Metadata
    # A per_user server's features as it lists them to this principal (``servers`` named: the
    # shard that runs them answers).
    principal: str


class CallOptions(TypedDict, total=False):
    """A request's deadline (seconds) and gRPC metadata."""

    deadline: float | None
    metadata: Metadata


class _RoutedRequests(Generic[ReplyR]):
    """Reads, prompts and completions of a sharded client, each asked of the shards in turn (the
    first that has the URI, prompt or template answers); async or blocking by ``_ask_in_turn``."""

    # ``_ask_in_turn(attempt)``: ``attempt(shard_client)`` of each shard until one has it.
    _ask_in_turn: Callable[..., ReplyR]
    # The names several servers on different shards serve, as of the last merged listing.
    _clashes: Clashes = MappingProxyType({})

    def _merge(self, snapshots: Sequence[t.FeatureSnapshot]) -> t.FeatureSnapshot:
        merged, self._clashes = _merged(snapshots)
        return merged

    def _unclashed(self, kind: t.FeatureKind, name: str, attempt: Callable[[Any], R]) -> Callable[[Any], R]:
        """``attempt``, refused (NotFoundError, no shard asked) when ``name`` is a clash: raised
        where a shard's NOT_FOUND is, so the blocking and async clients alike answer with it."""
        clashes = self._clashes

        def unclashed(client: Any) -> R:
            _refuse_clashed(clashes, kind, name)
            return attempt(client)

        return unclashed

    def read_resource(self, request: t.ResourceReadRequest, **call: Unpack[CallOptions]) -> ReplyR:
        """``resources/read`` on the shard that has the URI (errors as the one-pool client's;
        NotFoundError for a URI servers on several shards list: read its qualified form)."""
        return self._ask_in_turn(
            self._unclashed(t.FeatureKind.RESOURCE, request.uri, lambda c: c.read_resource(request, **call))
        )

    def get_prompt(self, request: t.PromptRequest, **call: Unpack[CallOptions]) -> ReplyR:
        """``prompts/get`` on the shard that has the prompt (NotFoundError: a name several
        shards' servers serve, asked for bare)."""
        return self._ask_in_turn(
            self._unclashed(t.FeatureKind.PROMPT, request.name, lambda c: c.get_prompt(request, **call))
        )

    def complete(self, request: t.CompletionRequest, **call: Unpack[CallOptions]) -> ReplyR:
        """``completion/complete`` on the shard that has the prompt or template."""
        return self._ask_in_turn(
            self._unclashed(request.ref_kind, request.ref, lambda c: c.complete(request, **call))
        )


class ShardedFeatureRequests(
    FeatureListings[Coroutine[Any, Any, t.FeatureList]], _RoutedRequests[Coroutine[Any, Any, t.FeatureReply]]
):
    """The feature requests of :class:`~toolscout.client.sharded.AsyncShardedPoolClient`."""

    _shards: list[AsyncPoolClient]

    async def _ask_in_turn(self, attempt: Callable[[AsyncPoolClient], Awaitable[R]]) -> R:
        """The first shard's answer that is not NOT_FOUND or a refusal (not sent); else the error."""
        missing: ToolscoutClientError | None = None
        for client in self._shards:
            try:
                return await attempt(client)
            except NotFoundError as err:
                missing = missing or err
            except UnavailableError as err:
                if len(self._shards) == 1:
                    raise
                missing = missing or err
        raise missing or NotFoundError("no pool shard offers this", code=grpc.StatusCode.NOT_FOUND)

    async def list_features(
        self, kind: t.FeatureKind, servers: Sequence[str] = (), **page: Unpack[FeaturePage]
    ) -> t.FeatureList:
        """Every shard's features of ``kind`` merged into one list (one page: ``cursor`` and
        ``page_size`` apply to a single shard only). Raises UnavailableError: a shard did not answer."""
        if len(self._shards) == 1:
            return await self._shards[0].list_features(kind, servers, **page)
        if page.get("principal") and servers:
            return await self._ask_in_turn(lambda client: client.list_features(kind, servers, **page))
        deadline, metadata = page.get("deadline"), page.get("metadata")
        snapshot = await self.feature_snapshot(deadline=deadline, metadata=metadata)
        wanted = set(servers)
        return t.FeatureList(
            tuple(f for f in snapshot.features if f.kind is kind and (not wanted or f.server in wanted)),
            "",
            snapshot.features_version,
            offers=tuple(o for o in snapshot.offers if not wanted or o.server in wanted),
        )

    async def feature_snapshot(
        self, *, deadline: float | None = None, metadata: Metadata = None
    ) -> t.FeatureSnapshot:
        """Every shard's features now, merged (the first message of each shard's WatchFeatures)."""

        async def first(client: AsyncPoolClient) -> t.FeatureSnapshot:
            async with contextlib.aclosing(
                client.watch_features(deadline=deadline, metadata=metadata)
            ) as stream:
                async for snapshot in stream:
                    return snapshot
            raise UnavailableError("a pool shard ended its feature stream", code=grpc.StatusCode.UNAVAILABLE)

        return self._merge(await asyncio.gather(*(first(c) for c in self._shards)))

    async def watch_features(
        self, known_version: str = "", *, metadata: Metadata = None
    ) -> AsyncGenerator[t.FeatureSnapshot, None]:
        """Every shard's features merged, then again whenever a shard's change; ends with the first
        error of any shard (follow again)."""
        if len(self._shards) == 1:
            async with contextlib.aclosing(
                self._shards[0].watch_features(known_version, metadata=metadata)
            ) as one:
                async for snapshot in one:
                    yield snapshot
            return
        latest: dict[int, t.FeatureSnapshot] = {}
        queue: asyncio.Queue[tuple[int, t.FeatureSnapshot] | BaseException] = asyncio.Queue()

        async def follow(index: int, client: AsyncPoolClient) -> None:
            try:
                async for snapshot in client.watch_features(metadata=metadata):
                    queue.put_nowait((index, snapshot))
            except BaseException as err:
                queue.put_nowait(err)

        tasks = [asyncio.create_task(follow(k, c)) for k, c in enumerate(self._shards)]
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                latest[item[0]] = item[1]
                if len(latest) == len(self._shards):
                    merged = self._merge([latest[k] for k in sorted(latest)])
                    if merged.features_version != known_version:
                        known_version = merged.features_version
                        yield merged
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def set_logging_level(
        self, level: str, servers: Sequence[str] = (), **call: Unpack[CallOptions]
    ) -> tuple[str, ...]:
        """``logging/setLevel`` on every shard's servers offering logging; those that accepted it."""
        if len(self._shards) == 1:
            return await self._shards[0].set_logging_level(level, servers, **call)
        answers = await asyncio.gather(
            *(c.set_logging_level(level, **call) for c in self._shards),
            return_exceptions=True,
        )
        accepted: set[str] = set()
        for answer in answers:
            if isinstance(answer, BaseException):
                if len(self._shards) == 1 or not isinstance(answer, ToolscoutClientError):
                    raise answer
                continue
            accepted.update(answer)
        wanted = set(servers)
        return tuple(sorted(s for s in accepted if not wanted or s in wanted))

    async def watch_resource(
        self, uri: str, *, principal: str = "", metadata: Metadata = None
    ) -> AsyncGenerator[tuple[str, bool], None]:
        """Subscribes on the shard that has the URI (see :meth:`AsyncPoolClient.watch_resource`;
        NotFoundError for a URI servers on several shards list: subscribe to its qualified form)."""
        _refuse_clashed(self._clashes, t.FeatureKind.RESOURCE, uri)
        missing: ToolscoutClientError | None = None
        for client in self._shards:
            stream = client.watch_resource(uri, principal=principal, metadata=metadata)
            try:
                first = await anext(stream)
            except (NotFoundError, UnavailableError) as err:
                await stream.aclose()
                if len(self._shards) == 1:
                    raise
                missing = missing or err
                continue
            async with contextlib.aclosing(stream):
                yield first
                async for update in stream:
                    yield update
            return
        raise missing or NotFoundError("no pool shard has this resource", code=grpc.StatusCode.NOT_FOUND)


class ShardedFeatureRequestsSync(FeatureListings[t.FeatureList], _RoutedRequests[t.FeatureReply]):
    """The feature requests of :class:`~toolscout.client.sharded.ShardedPoolClient` (blocking):
    listings merged from every shard, requests asked of the shards in turn. Following changes
    (``watch_features``) is offered on one shard's client, not merged here."""

    _shards: list[PoolClient]

    def _ask_in_turn(self, attempt: Callable[[PoolClient], R]) -> R:
        missing: ToolscoutClientError | None = None
        for client in self._shards:
            try:
                return attempt(client)
            except (NotFoundError, UnavailableError) as err:
                if len(self._shards) == 1:
                    raise
                missing = missing or err
        raise missing or NotFoundError("no pool shard offers this", code=grpc.StatusCode.NOT_FOUND)

    def list_features(
        self, kind: t.FeatureKind, servers: Sequence[str] = (), **page: Unpack[FeaturePage]
    ) -> t.FeatureList:
        """Every shard's features of ``kind`` merged (see :meth:`ShardedFeatureRequests.list_features`)."""
        if len(self._shards) == 1:
            return self._shards[0].list_features(kind, servers, **page)
        if page.get("principal") and servers:
            return self._ask_in_turn(lambda client: client.list_features(kind, servers, **page))
        deadline, metadata = page.get("deadline"), page.get("metadata")
        lists: list[t.FeatureSnapshot] = []
        for client in self._shards:
            pages = [client.list_features(kind, deadline=deadline, metadata=metadata)]
            while pages[-1].next_cursor:
                pages.append(
                    client.list_features(
                        kind, cursor=pages[-1].next_cursor, deadline=deadline, metadata=metadata
                    )
                )
            features = tuple(f for p in pages for f in p.features)
            lists.append(t.FeatureSnapshot(pages[-1].features_version, features, pages[0].offers))
        merged = self._merge(lists)
        wanted = set(servers)
        return t.FeatureList(
            tuple(f for f in merged.features if not wanted or f.server in wanted),
            "",
            merged.features_version,
            offers=tuple(o for o in merged.offers if not wanted or o.server in wanted),
        )

    def set_logging_level(
        self, level: str, servers: Sequence[str] = (), **call: Unpack[CallOptions]
    ) -> tuple[str, ...]:
        """``logging/setLevel`` on every shard's servers offering logging; those that accepted it."""
        if len(self._shards) == 1:
            return self._shards[0].set_logging_level(level, servers, **call)
        accepted = {s for c in self._shards for s in c.set_logging_level(level, **call)}
        return tuple(sorted(s for s in accepted if not servers or s in servers))
