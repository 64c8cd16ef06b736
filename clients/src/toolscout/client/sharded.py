"""The pool client for a sharded pool: every call goes to the shard that runs its server.

    from toolscout.client import AsyncShardedPoolClient

    async with AsyncShardedPoolClient.connect(["pool-0:50051", "pool-1:50051", "pool-2:50051"]) as pool:
        result = await pool.call_tool("get_forecast", {"city": "Oslo"}, server="weather")

Routing is by server name (see :mod:`toolscout.client.sharding` for the owner function); pass the
configured ``placement`` of pinned (``shard: K``) and ``placement: all`` servers, or let the client
learn them: a shard that receives a call for a server it does not run refuses it before sending
anything (``UNAVAILABLE`` marked "not sent", with the owners in its trailing metadata), and the
client sends the call to the owner. A call is therefore never run twice by this routing: only
refusals are re-sent, and a shard that dies with the call in flight is ``OutcomeUnknownError``.

:class:`ShardedPoolClient` is the same over blocking channels (``ToolscoutClient.connect`` makes one
when ``pool`` names several shards); both route with one :class:`ShardRouter`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Generic, Self, TypeVar, Unpack

import grpc

from toolscout.client import types as t
from toolscout.client._base import ConnectFields
from toolscout.client._calls import AsyncCloses, Closes, Metadata, ToolCalls
from toolscout.client.aio import AsyncPoolClient, ProgressCallback
from toolscout.client.errors import NotFoundError, ToolscoutClientError, UnavailableError, not_sent_error
from toolscout.client.relay import CallRelay
from toolscout.client.sharded_features import ShardedFeatureRequests, ShardedFeatureRequestsSync
from toolscout.client.sharding import CatalogMerger, Placement, ServerPlacement, handle_shard
from toolscout.client.sync import PoolClient

__all__ = [
    "SHARD_COUNT_KEY",
    "SHARD_OWNERS_KEY",
    "AsyncShardedPoolClient",
    "ShardRouter",
    "ShardedPoolClient",
    "parse_owners",
]

# Trailing metadata of a shard's refusal of a call for a server it does not run.
SHARD_OWNERS_KEY = "toolscout-shard-owners"
SHARD_COUNT_KEY = "toolscout-shard-count"
# An LLM-facing name in its readable form is "<server>__<tool>"; used only to guess a route.
_SEPARATOR = "__"


def parse_owners(err: ToolscoutClientError) -> tuple[tuple[int, ...], int] | None:
    """The owners and shard count named by a shard's "not mine" refusal, or None for other errors."""
    owners_text = err.metadata_value(SHARD_OWNERS_KEY)
    if owners_text is None or not isinstance(err, UnavailableError):
        return None
    try:
        owners = tuple(int(part) for part in owners_text.split(",") if part.strip())
        count = int(err.metadata_value(SHARD_COUNT_KEY) or "0")
    except ValueError:
        return None
    if not owners or count < 1 or any(not 0 <= k < count for k in owners):
        return None
    return owners, count


def _unknown_handle() -> NotFoundError:
    return NotFoundError("no such result handle", code=grpc.StatusCode.NOT_FOUND)


def _shard_of_handle(handle: str) -> int:
    """The shard the handle names.

    Raises:
        NotFoundError: not a result handle.
    """
    shard = handle_shard(handle)
    if shard is None:
        raise _unknown_handle()
    return shard


class ShardRouter:
    """Which shard a call goes to: placement, owners learned from refusals, what to do after one.

    Shared by the async and the blocking sharded client; holds no channels. ``count`` is the shard
    count routed for.
    """

    def __init__(
        self,
        count: int,
        placement: Mapping[str, ServerPlacement] | None = None,
        *,
        max_reroutes: int = 3,
    ) -> None:
        if count < 1:
            raise ValueError("a sharded pool client needs at least one shard")
        self.placement = Placement(count, placement, strict=False)
        self.max_reroutes = max_reroutes
        # Owners learned from refusals, with the shard count they are for.
        self._learned: dict[str, tuple[tuple[int, ...], int]] = {}
        self._turn = itertools.count()

    def reset(self, count: int, placement: Mapping[str, ServerPlacement] | None = None) -> None:
        """Routes for ``count`` shards from now on (and ``placement``, if given); forgets what it learned."""
        if count < 1:
            raise ValueError("a sharded pool client needs at least one shard")
        rules = {name: self.placement.rule(name) for name in self.placement.servers}
        self.placement = Placement(count, rules if placement is None else placement, strict=False)
        self._learned.clear()

    @property
    def count(self) -> int:
        return self.placement.count

    def owners(self, server: str) -> tuple[int, ...]:
        """The shards that run ``server`` as far as this router knows."""
        learned = self._learned.get(server)
        if learned is not None and learned[1] >= self.count:
            return learned[0]
        return self.placement.owners(server)

    def pick(self, server: str, failing: Callable[[int], bool] = lambda _: False) -> int:
        """The shard a call for ``server`` goes to: its owner, or one of them in turn.

        With several owners, one whose channel ``failing`` reports is passed over while another runs it.
        """
        owners = self.owners(server)
        if len(owners) == 1:
            return owners[0]
        start = next(self._turn)
        rotated = [owners[(start + i) % len(owners)] for i in range(len(owners))]
        return next((k for k in rotated if not failing(k)), rotated[0])

    @staticmethod
    def route(name: str, server: str, server_hint: str) -> tuple[str, bool]:
        """The server to route a call by, and whether it was only guessed from an LLM-facing name."""
        route = server or server_hint
        if not route and _SEPARATOR in name:
            return name.split(_SEPARATOR, 1)[0], True
        return route, False

    def after_refusal(self, route: str, err: UnavailableError, can_open_more: bool) -> int:
        """The shard to send a call to after ``err``; re-raises ``err`` unless it is a "not mine" refusal."""
        refusal = parse_owners(err)
        if refusal is None:
            raise err
        owners, count = refusal
        self._learned[route] = refusal
        if count > self.count and not can_open_more and max(owners) >= self.count:
            raise err
        return owners[0] if len(owners) == 1 else self.pick(route)

    def disagreement(self, route: str) -> UnavailableError:
        return not_sent_error(
            f"the pool shards disagree on who runs server {route!r} (a resharding in progress?); "
            "the call was not sent"
        )

    def unknown_shard(self, shard: int) -> UnavailableError:
        return not_sent_error(
            f"pool shard {shard} is not known to this client (it routes for {self.count} shards); "
            "the call was not sent"
        )


class _Scan:
    """Asking shards in turn for a tool: NOT_FOUND and refusals are not sent, so the next is asked."""

    def __init__(self, first: int | None) -> None:
        self.first = first
        self.missing: NotFoundError | None = None
        self.unreachable: UnavailableError | None = None

    def failed(self, err: NotFoundError | UnavailableError) -> None:
        if isinstance(err, NotFoundError):
            self.missing = self.missing or err
        elif parse_owners(err) is None:
            self.unreachable = self.unreachable or err

    def error(self) -> ToolscoutClientError:
        if self.unreachable is not None:
            return self.unreachable
        if self.missing is not None:
            return self.missing
        where = f" (asked shard {self.first})" if self.first is not None else ""
        return NotFoundError(f"no pool shard knows this tool{where}", code=grpc.StatusCode.NOT_FOUND)


def merge_server_lists(
    answers: Sequence[Sequence[t.ServerStatus] | BaseException],
) -> tuple[t.ServerStatus, ...]:
    """Every server of the shards that answered, sorted by name (a server on every shard once, ready
    first; its result-token totals summed over the shards that run it).

    Raises:
        the first failure, when no shard answered.
    """
    best: dict[str, t.ServerStatus] = {}
    results: dict[str, tuple[int, int, int]] = {}
    failures = [a for a in answers if isinstance(a, BaseException)]
    for answer in answers:
        if isinstance(answer, BaseException):
            continue
        for status in answer:
            current = best.get(status.name)
            if current is None or (current.state != "ready" and status.state == "ready"):
                best[status.name] = status
            returned, delivered, kept = results.get(status.name, (0, 0, 0))
            results[status.name] = (
                returned + status.result_tokens_returned,
                delivered + status.result_tokens_delivered,
                kept + status.results_kept,
            )
    if failures and len(failures) == len(answers):
        raise failures[0]
    return tuple(
        dataclasses.replace(
            best[name],
            result_tokens_returned=results[name][0],
            result_tokens_delivered=results[name][1],
            results_kept=results[name][2],
        )
        for name in sorted(best)
    )


def merge_catalogs(catalogs: Sequence[t.ToolCatalog], servers: Sequence[str] = ()) -> t.ToolCatalog:
    """The shards' catalogs (``catalogs[k]`` from shard ``k``) as one, optionally only ``servers``."""
    merger = CatalogMerger()
    for index, catalog in enumerate(catalogs):
        merger.update(index, catalog.catalog_version, catalog.tools)
    merged = merger.catalog()
    if not servers:
        return merged
    wanted = set(servers)
    return t.ToolCatalog(
        tools=tuple(tool for tool in merged.tools if tool.server in wanted),
        catalog_version=merged.catalog_version,
    )


ShardT = TypeVar("ShardT")


class _Shards(Generic[ShardT]):
    """What the sharded pool clients share: the shard clients and the router that picks among them."""

    def __init__(
        self,
        shards: Sequence[ShardT],
        placement: Mapping[str, ServerPlacement] | None,
        *,
        owns_clients: bool,
        max_reroutes: int,
    ) -> None:
        self._router = ShardRouter(len(shards), placement, max_reroutes=max_reroutes)
        self._shards: list[ShardT] = list(shards)
        self._owns_clients = owns_clients

    @property
    def count(self) -> int:
        """The shard count this client routes for."""
        return self._router.count

    @property
    def shards(self) -> tuple[ShardT, ...]:
        return tuple(self._shards)

    def owners(self, server: str) -> tuple[int, ...]:
        """The shards that run ``server`` as far as this client knows."""
        return self._router.owners(server)


class AsyncShardedPoolClient(
    _Shards[AsyncPoolClient],
    AsyncCloses,
    ToolCalls[Coroutine[Any, Any, t.CallToolResult]],
    ShardedFeatureRequests,
):
    """``McpPool`` over every shard of a sharded pool, routing each call by its server.

    ``shards[k]`` is a client of shard ``k``. ``placement`` gives the configured placement of
    servers that are pinned or run everywhere (others are placed by the hash). ``open_shard(k)``
    opens a client for a shard beyond ``shards`` that a refusal names (the shard count grew before
    this client was told); without it such a call fails as UNAVAILABLE (not sent).
    """

    def __init__(
        self,
        shards: Sequence[AsyncPoolClient],
        *,
        placement: Mapping[str, ServerPlacement] | None = None,
        open_shard: Callable[[int], AsyncPoolClient | None] | None = None,
        owns_clients: bool = False,
        max_reroutes: int = 3,
    ) -> None:
        super().__init__(shards, placement, owns_clients=owns_clients, max_reroutes=max_reroutes)
        self._open_shard = open_shard
        self._opened: dict[int, AsyncPoolClient] = {}

    @classmethod
    def connect(
        cls,
        targets: Sequence[str],
        *,
        placement: Mapping[str, ServerPlacement] | None = None,
        target_of: Callable[[int], str | None] | None = None,
        **fields: Unpack[ConnectFields],
    ) -> Self:
        """A client with one channel per shard; ``targets[k]`` is where shard ``k`` listens.

        ``target_of(k)`` gives the address of a shard beyond ``targets`` (e.g. from a
        ``dns:///toolscout-pool-{ordinal}…`` pattern), for when the shard count grows. ``fields``
        as for :meth:`AsyncPoolClient.connect`.
        """

        def open_client(target: str) -> AsyncPoolClient:
            return AsyncPoolClient.connect(target, **fields)

        def open_shard(index: int) -> AsyncPoolClient | None:
            target = target_of(index) if target_of is not None else None
            return open_client(target) if target else None

        return cls(
            [open_client(target) for target in targets],
            placement=placement,
            open_shard=open_shard if target_of is not None else None,
            owns_clients=True,
        )

    # --- topology -----------------------------------------------------------------------------

    def reshard(
        self, shards: Sequence[AsyncPoolClient], placement: Mapping[str, ServerPlacement] | None = None
    ) -> list[AsyncPoolClient]:
        """Routes for a new set of shards from now on; returns the clients no longer used (close them).

        Calls already on their way finish where they are; one that reaches a shard that no longer
        runs its server is refused there and routed again.
        """
        self._router.reset(len(shards), placement)
        unused = [c for c in [*self._shards, *self._opened.values()] if all(c is not s for s in shards)]
        self._shards = list(shards)
        self._opened = {}
        return unused

    def shard_of(self, server: str) -> int:
        """The shard a call for ``server`` goes to: its owner, or one of them in turn."""
        return self._router.pick(server, self._failing)

    def _failing(self, index: int) -> bool:
        client = self._client(index)
        return client is None or client.channel.get_state() is grpc.ChannelConnectivity.TRANSIENT_FAILURE

    def _client(self, index: int) -> AsyncPoolClient | None:
        if index < len(self._shards):
            return self._shards[index]
        opened = self._opened.get(index)
        if opened is None and self._open_shard is not None:
            opened = self._open_shard(index)
            if opened is not None:
                self._opened[index] = opened
        return opened

    # --- calls --------------------------------------------------------------------------------

    async def read_result(
        self, request: t.ReadRequest, *, deadline: float | None = None, metadata: Metadata = None
    ) -> t.ResultRead:
        """Reads a kept result on the shard that keeps it (the handle names it); errors as
        :meth:`AsyncPoolClient.read_result`, and NotFoundError for a handle no shard made."""
        client = self._client(_shard_of_handle(request.handle))
        if client is None:
            raise _unknown_handle()
        return await client.read_result(request, deadline=deadline, metadata=metadata)

    async def call(
        self,
        request: t.CallRequest,
        *,
        server_hint: str = "",
        deadline: float | None = None,
        metadata: Metadata = None,
        progress: ProgressCallback | None = None,
        relay: CallRelay | None = None,
    ) -> t.CallToolResult:
        """Runs ``request`` on the shard that runs its server; errors as :meth:`AsyncPoolClient.call`
        (``progress`` and ``relay`` too).

        Name the tool by its own name on a server, or by its LLM-facing name alone; with an
        LLM-facing name, ``server_hint`` (the server the plan or catalog gave for it) picks the
        shard. Without either, the route is guessed from the name and, if that shard does not know
        the tool, the other shards are asked in turn (a NOT_FOUND answer means nothing was sent).

        Raises:
            UnavailableError: not sent (server down, or its shard unreachable / unknown to this client).
            OutcomeUnknownError: sent, and its shard (or its server) went away before answering.
            the errors of :meth:`AsyncPoolClient.call`.
        """
        router = self._router
        route, guessed = router.route(request.name, request.server, server_hint)

        async def attempt(shard: int) -> t.CallToolResult:
            client = self._client(shard)
            if client is None:
                raise router.unknown_shard(shard)
            return await client.call(
                request, deadline=deadline, metadata=metadata, progress=progress, relay=relay
            )

        if not route:
            return await self._scan(attempt, range(self.count))
        shard = self.shard_of(route)
        for _ in range(router.max_reroutes + 1):
            try:
                return await attempt(shard)
            except UnavailableError as err:
                shard = router.after_refusal(route, err, self._open_shard is not None)
            except NotFoundError:
                if not guessed:
                    raise
                return await self._scan(attempt, [k for k in range(self.count) if k != shard], first=shard)
        raise router.disagreement(route)

    async def _scan(
        self,
        attempt: Callable[[int], Awaitable[t.CallToolResult]],
        shards: Sequence[int] | range,
        *,
        first: int | None = None,
    ) -> t.CallToolResult:
        """Asks ``shards`` in turn until one knows the tool (NOT_FOUND and refusals are not sent)."""
        scan = _Scan(first)
        for shard in shards:
            try:
                return await attempt(shard)
            except (NotFoundError, UnavailableError) as err:
                scan.failed(err)
        raise scan.error()

    async def list_servers(
        self, *, deadline: float | None = None, metadata: Metadata = None
    ) -> tuple[t.ServerStatus, ...]:
        """Every server of every reachable shard, sorted by name (a server on every shard once, ready first).

        Raises:
            UnavailableError (or another client error): no shard answered.
        """
        answers = await asyncio.gather(
            *(c.list_servers(deadline=deadline, metadata=metadata) for c in self._shards),
            return_exceptions=True,
        )
        return merge_server_lists(answers)

    async def list_tools(
        self,
        servers: Sequence[str] = (),
        *,
        include_unavailable: bool = False,
        deadline: float | None = None,
        metadata: Metadata = None,
        principal: str = "",
    ) -> t.ToolCatalog:
        """The catalogs of every shard merged into one (same names and version as an unsharded pool).
        With a ``principal`` (see :meth:`toolscout.client.aio.AsyncPoolClient.list_tools`) and
        ``servers``: the answer of the shard that runs them.

        Raises:
            UnavailableError (or another client error): a shard did not answer.
        """
        if principal and servers:
            return await self._ask_in_turn(
                lambda c: c.list_tools(
                    servers,
                    include_unavailable=include_unavailable,
                    deadline=deadline,
                    metadata=metadata,
                    principal=principal,
                )
            )
        catalogs = await asyncio.gather(
            *(
                c.list_tools(
                    include_unavailable=include_unavailable,
                    deadline=deadline,
                    metadata=metadata,
                    principal=principal,
                )
                for c in self._shards
            )
        )
        return merge_catalogs(catalogs, servers)

    # --- lifecycle ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Closes the shard clients (and those ``open_shard`` gave) when this client owns them."""
        opened = list(self._opened.values())
        self._opened = {}
        if self._owns_clients:
            for client in [*self._shards, *opened]:
                await client.close()


class ShardedPoolClient(_Shards[PoolClient], Closes, ToolCalls[t.CallToolResult], ShardedFeatureRequestsSync):
    """:class:`AsyncShardedPoolClient` over blocking channels: ``list_servers``, ``list_tools`` and
    ``call_tool`` for every shard of a sharded pool, each call routed to the shard that runs its server.

    ``shards[k]`` is a client of shard ``k``; ``placement`` as for the async client. Shards are
    asked one after another where the async client asks them at once.
    """

    def __init__(
        self,
        shards: Sequence[PoolClient],
        *,
        placement: Mapping[str, ServerPlacement] | None = None,
        owns_clients: bool = False,
        max_reroutes: int = 3,
    ) -> None:
        super().__init__(shards, placement, owns_clients=owns_clients, max_reroutes=max_reroutes)

    def read_result(
        self, request: t.ReadRequest, *, deadline: float | None = None, metadata: Metadata = None
    ) -> t.ResultRead:
        """Reads a kept result on the shard that keeps it (see :meth:`AsyncShardedPoolClient.read_result`)."""
        shard = _shard_of_handle(request.handle)
        if shard >= len(self._shards):
            raise _unknown_handle()
        return self._shards[shard].read_result(request, deadline=deadline, metadata=metadata)

    def call(
        self,
        request: t.CallRequest,
        *,
        server_hint: str = "",
        deadline: float | None = None,
        metadata: Metadata = None,
    ) -> t.CallToolResult:
        """Runs ``request`` on the shard that runs its server (see :meth:`AsyncShardedPoolClient.call`)."""
        router = self._router
        route, guessed = router.route(request.name, request.server, server_hint)

        def attempt(shard: int) -> t.CallToolResult:
            if shard >= len(self._shards):
                raise router.unknown_shard(shard)
            return self._shards[shard].call(request, deadline=deadline, metadata=metadata)

        if not route:
            return self._scan(attempt, range(self.count))
        shard = router.pick(route)
        for _ in range(router.max_reroutes + 1):
            try:
                return attempt(shard)
            except UnavailableError as err:
                shard = router.after_refusal(route, err, can_open_more=False)
            except NotFoundError:
                if not guessed:
                    raise
                return self._scan(attempt, [k for k in range(self.count) if k != shard], first=shard)
        raise router.disagreement(route)

    @staticmethod
    def _scan(
        attempt: Callable[[int], t.CallToolResult], shards: Sequence[int] | range, *, first: int | None = None
    ) -> t.CallToolResult:
        scan = _Scan(first)
        for shard in shards:
            try:
                return attempt(shard)
            except (NotFoundError, UnavailableError) as err:
                scan.failed(err)
        raise scan.error()

    def list_servers(
        self, *, deadline: float | None = None, metadata: Metadata = None
    ) -> tuple[t.ServerStatus, ...]:
        """Every server of every reachable shard, sorted by name (see :func:`merge_server_lists`)."""
        answers: list[Sequence[t.ServerStatus] | BaseException] = []
        for client in self._shards:
            try:
                answers.append(client.list_servers(deadline=deadline, metadata=metadata))
            except ToolscoutClientError as err:
                answers.append(err)
        return merge_server_lists(answers)

    def list_tools(
        self,
        servers: Sequence[str] = (),
        *,
        include_unavailable: bool = False,
        deadline: float | None = None,
        metadata: Metadata = None,
        principal: str = "",
    ) -> t.ToolCatalog:
        """The catalogs of every shard merged into one (as ``principal`` sees them: see
        :meth:`AsyncShardedPoolClient.list_tools`). Raises the error of a shard that did not answer."""
        if principal and servers:
            return self._ask_in_turn(
                lambda c: c.list_tools(
                    servers,
                    include_unavailable=include_unavailable,
                    deadline=deadline,
                    metadata=metadata,
                    principal=principal,
                )
            )
        catalogs = [
            c.list_tools(
                include_unavailable=include_unavailable,
                deadline=deadline,
                metadata=metadata,
                principal=principal,
            )
            for c in self._shards
        ]
        return merge_catalogs(catalogs, servers)

    def close(self) -> None:
        if self._owns_clients:
            for client in self._shards:
                client.close()
