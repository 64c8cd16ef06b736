"""What the MCP servers behind the gateway offer besides tools, served to hosts: resources,
resource templates, prompts, completion, ``logging/setLevel`` and resource subscriptions.

The gateway follows the pool's feature catalog (``WatchFeatures``, every shard merged) as it
follows discovery's plans for tools: lists are answered from the latest snapshot, filtered by the
endpoint's toolset (a toolset naming a server serves its resources and prompts too), in pages
with the tools' opaque cursors (:func:`~mcp_gateway_svc.tool_lists.page`: any replica at the same
version continues them); a ``per_user`` server's entries are, for an authenticated caller, what it
lists on their own session (asked of the pool with the principal, merged into the same pages).
Reads, prompts and completions go to the pool, which routes them to the
server that offers them (on the caller's own session of a ``per_user`` server); the server's
JSON-RPC error reaches the host as that error. A change of a kind is announced with its
``list_changed`` on every open session and on 2026-07-28 ``subscriptions/listen`` streams.

Capabilities follow the servers of each endpoint's toolset (:meth:`ServedFeatures.offered`, a
per-toolset view of the feature catalog; advertised and enforced by
:mod:`mcp_gateway_svc.capabilities`): a method of a capability no server of the toolset offers
answers -32601. Subscriptions are held by a session at the handshake revisions, by a
``subscriptions/listen`` stream at 2026-07-28.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from toolscout.client import InvalidArgumentError, NotFoundError, ToolscoutClientError, json_object_text
from toolscout.client import types as t
from toolscout.client.errors import authorization_required
from toolscout.client.sharded import AsyncShardedPoolClient

from mcp_gateway_svc.calls import rpc
from mcp_gateway_svc.endpoints import Endpoint, Endpoints
from mcp_gateway_svc.input_rounds import HostRound, InputRounds, Resumed, RoundOf
from mcp_gateway_svc.sessions import Session, SessionRegistry
from mcp_gateway_svc.tool_lists import CursorError, page
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger

__all__ = ["MODELS", "FeatureFollower", "ServedFeatures", "toolset_servers"]

_log = get_logger(__name__)

T = TypeVar("T")
R = TypeVar("R")
# The MCP definition of each kind.
MODELS: dict[t.FeatureKind, type[Any]] = {
    t.FeatureKind.RESOURCE: types.Resource,
    t.FeatureKind.RESOURCE_TEMPLATE: types.ResourceTemplate,
    t.FeatureKind.PROMPT: types.Prompt,
}
# JSON-RPC "resource not found" (the MCP specification's code).
RESOURCE_NOT_FOUND = -32002

_INITIAL_BACKOFF = 0.25
_MAX_BACKOFF = 5.0
# Seconds the first request waits for the pool's first feature snapshot.
_FIRST_WAIT = 3.0


def toolset_servers(config: ToolscoutConfig, toolset: str) -> frozenset[str] | None:
    """The servers a toolset names (None: every server, for ``/mcp`` without a default toolset)."""
    if not toolset:
        return None
    spec = config.tool_sets.get(toolset)
    if spec is None:
        return frozenset()
    return frozenset(name for name, tools in spec.servers.items() if tools is not False)


class FeatureFollower:
    """Follows the pool's ``WatchFeatures`` (reconnecting with backoff) and tells ``on_change``
    the kinds whose listing changed."""

    def __init__(
        self,
        pool: AsyncShardedPoolClient,
        on_change: Callable[[frozenset[t.FeatureKind]], Awaitable[None]] | None = None,
    ) -> None:
        self._pool = pool
        self._on_change = on_change
        self.snapshot: t.FeatureSnapshot | None = None
        self._arrived = asyncio.Event()
        self._waited = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="gateway-features")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def current(self) -> t.FeatureSnapshot:
        """The latest snapshot, waiting a little for the first.

        Raises:
            MCPError: the pool has not answered (INTERNAL_ERROR).
        """
        await self.wait_first()
        if self.snapshot is None:
            raise MCPError(
                types.INTERNAL_ERROR, "the MCP servers' resources and prompts are not available yet"
            )
        return self.snapshot

    async def wait_first(self) -> None:
        """Returns once the first snapshot arrived, or after a few seconds without it (waited
        once: while the pool stays unreachable, later requests do not wait again)."""
        if self.snapshot is None and not self._waited:
            self.start()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), _FIRST_WAIT)
            self._waited = True

    def offers(self) -> tuple[t.ServerOffers, ...]:
        return self.snapshot.offers if self.snapshot is not None else ()

    async def _run(self) -> None:
        backoff = _INITIAL_BACKOFF
        while True:
            known = self.snapshot.features_version if self.snapshot is not None else ""
            try:
                async for snapshot in self._pool.watch_features(known):
                    backoff = _INITIAL_BACKOFF
                    first = self.snapshot is None
                    self.snapshot = snapshot
                    self._arrived.set()
                    if not first and self._on_change is not None and snapshot.changed_kinds:
                        try:
                            await self._on_change(frozenset(snapshot.changed_kinds))
                        except Exception:
                            _log.exception("announcing a change of the servers' resources or prompts failed")
            except ToolscoutClientError as err:
                _log.warning("following the pool's resources and prompts failed", error=err.message)
            await asyncio.sleep(backoff * random.uniform(0.8, 1.2))  # noqa: S311 - jitter, not crypto
            backoff = min(backoff * 2, _MAX_BACKOFF)


async def _ask(awaitable: Awaitable[T], not_found: MCPError) -> T:
    """A pool request's answer; its errors as the JSON-RPC errors a host understands."""
    try:
        return await rpc(awaitable)
    except NotFoundError:
        raise not_found from None
    except InvalidArgumentError as err:
        raise MCPError(types.INVALID_PARAMS, err.message) from None
    except ToolscoutClientError as err:
        raise MCPError(types.INTERNAL_ERROR, err.message) from None


def _model(model: type[Any], feature: t.ServerFeature) -> Any | None:
    try:
        return model.model_validate(feature.definition, by_alias=True)
    except ValidationError:
        return None  # a definition this SDK cannot read is left out of the list


def _reply(reply: t.FeatureReply, model: type[Any]) -> Any:
    """The server's result, or its JSON-RPC error raised as that error."""
    if reply.jsonrpc_error_code:
        raise MCPError(reply.jsonrpc_error_code, reply.error_message)
    try:
        return model.model_validate_json(reply.result_json or "{}", by_alias=True)
    except ValidationError:
        raise MCPError(types.INTERNAL_ERROR, "the MCP server's reply is not a valid MCP result") from None


class ServedFeatures:
    """The gateway's handlers for resources (of the servers), templates, prompts, completion,
    logging and subscriptions (see the module's docstring)."""

    def __init__(
        self,
        pool: AsyncShardedPoolClient,
        config: ToolscoutConfig,
        endpoints: Endpoints,
        sessions: SessionRegistry,
        rounds: InputRounds | None = None,
    ) -> None:
        """``rounds``: how ``input_required`` states are sealed (:mod:`mcp_gateway_svc.input_rounds`;
        the tool caller's, so that one key serves every request)."""
        self._pool = pool
        self._rounds = rounds if rounds is not None else InputRounds()
        self._config = config
        self._endpoints = endpoints
        self._sessions = sessions
        self.follower = FeatureFollower(pool, self._announce)

    # --- capabilities -----------------------------------------------------------------------

    def offered(self, toolset: str) -> t.ServerOffers:
        """What the servers of ``toolset`` offer, together (``server`` empty; ``""``: every
        server, ``/mcp`` without a default toolset)."""
        allowed = toolset_servers(self._config, toolset)
        offers = [o for o in self.follower.offers() if allowed is None or o.server in allowed]
        return t.ServerOffers(
            "",
            resources=any(o.resources for o in offers),
            subscribe=any(o.subscribe for o in offers),
            prompts=any(o.prompts for o in offers),
            completions=any(o.completions for o in offers),
            logging=any(o.logging for o in offers),
        )

    # --- listings ---------------------------------------------------------------------------

    async def _listed(
        self, kind: t.FeatureKind, toolset: str, principal: str = ""
    ) -> tuple[str, tuple[t.ServerFeature, ...]]:
        snapshot = await self.follower.current()
        allowed = toolset_servers(self._config, toolset)
        features = tuple(
            f for f in snapshot.features if f.kind is kind and (allowed is None or f.server in allowed)
        )
        if not principal:
            return snapshot.features_version, features
        return await self._as_seen_by(principal, kind, snapshot, features)

    def _per_user(self, server: str) -> bool:
        return self._config.per_user(server)

    async def _as_seen_by(
        self,
        principal: str,
        kind: t.FeatureKind,
        snapshot: t.FeatureSnapshot,
        features: tuple[t.ServerFeature, ...],
    ) -> tuple[str, tuple[t.ServerFeature, ...]]:
        """``features`` with each ``per_user`` server's replaced by what it lists to ``principal``
        (asked of the pool, which lists on their own session); a server they have not signed in to
        lists nothing to them. The version covers their listing too (cursors stay theirs)."""
        per_user = sorted({f.server for f in features if self._per_user(f.server)})
        if not per_user:
            return snapshot.features_version, features
        mine: list[t.ServerFeature] = []
        for server in per_user:
            mine.extend(await self._user_features(kind, server, principal))
        merged = sorted(
            (*(f for f in features if f.server not in per_user), *mine), key=lambda f: (f.server, f.own_name)
        )
        digest = hashlib.sha256(snapshot.features_version.encode())
        for f in mine:
            digest.update(f.definition_json.encode())
        return digest.hexdigest()[:16], tuple(merged)

    async def _user_features(
        self, kind: t.FeatureKind, server: str, principal: str
    ) -> tuple[t.ServerFeature, ...]:
        found: list[t.ServerFeature] = []
        cursor = ""
        while True:
            try:
                listed = await rpc(
                    self._pool.list_features(kind, [server], cursor=cursor, principal=principal)
                )
            except ToolscoutClientError as err:
                if authorization_required(err) is None:
                    _log.warning(
                        "listing a per-user server for its caller failed", server=server, error=err.message
                    )
                return ()
            found.extend(listed.features)
            cursor = listed.next_cursor
            if not cursor:
                return tuple(found)

    async def listing(
        self,
        kind: t.FeatureKind,
        model: type[Any],
        toolset: str,
        where: str,
        cursor: str | None,
        own: Iterable[Any] = (),
        principal: str = "",
    ) -> tuple[list[Any], str | None]:
        """One page of ``kind`` (after the gateway's ``own`` items) as MCP definitions; a
        ``per_user`` server's as it lists them to ``principal``.

        Raises:
            MCPError: a stale or foreign cursor (INVALID_PARAMS).
        """
        version, features = await self._listed(kind, toolset, principal)
        items = [*own, *(m for f in features if (m := _model(model, f)) is not None)]
        try:
            shown, next_cursor = page(items, cursor, version=version, where=where)
        except CursorError as err:
            raise MCPError(types.INVALID_PARAMS, str(err)) from None
        return list(shown), next_cursor

    async def list_resources(
        self, toolset: str, where: str, cursor: str | None, own: Iterable[types.Resource], principal: str = ""
    ) -> types.ListResourcesResult:
        """``resources/list``: the gateway's ``own`` resources, then the servers' of ``toolset``
        (a ``per_user`` server's as it lists them to ``principal``)."""
        listed, next_cursor = await self.listing(
            t.FeatureKind.RESOURCE, types.Resource, toolset, where, cursor, own, principal
        )
        return types.ListResourcesResult(resources=listed, next_cursor=next_cursor)

    async def _allowed(self, kind: t.FeatureKind, served: str, toolset: str, principal: str = "") -> bool:
        allowed = toolset_servers(self._config, toolset)
        if allowed is None:
            return True
        _, features = await self._listed(kind, toolset, principal)
        return any(f.served_name == served for f in features)

    # --- requests ---------------------------------------------------------------------------

    async def read(
        self, uri: str, toolset: str, principal: str, host_round: HostRound | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """``resources/read``; ``host_round``: a 2026-07-28 host's round (see :meth:`_rounded`).

        Raises:
            MCPError: not found (-32002), a refused ``requestState`` (INVALID_PARAMS), or the
                server's own JSON-RPC error.
        """
        allowed = toolset_servers(self._config, toolset)
        not_found = MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}")
        resumed = self._resumed(RoundOf.RESOURCE, uri, host_round, principal)
        request = t.ResourceReadRequest(uri, principal=principal)
        reply = await _ask(
            self._pool.read_resource(resumed.applied_to(request) if resumed else request), not_found
        )
        if allowed is not None and reply.server not in allowed:
            raise not_found
        return self._rounded(RoundOf.RESOURCE, uri, reply, resumed, principal, types.ReadResourceResult)

    def _resumed(
        self, of: RoundOf, name: str, host_round: HostRound | None, principal: str
    ) -> Resumed | None:
        return self._rounds.resume(of, name, host_round, principal=principal) if host_round else None

    def _rounded(
        self,
        of: RoundOf,
        name: str,
        reply: t.FeatureReply,
        resumed: Resumed | None,
        principal: str,
        model: type[R],
    ) -> R | types.InputRequiredResult:
        """The server's answer to a 2026-07-28 host's read or prompt (``resumed``: its round, the
        pool relaying ``input_required``): a server asking for input comes back as an
        ``InputRequiredResult`` whose state is sealed with the routing
        (:mod:`mcp_gateway_svc.input_rounds`); a retry answered by another server than the one
        its state came from is refused. Any other host's: its result (or JSON-RPC error)."""
        if resumed is not None:
            resumed.answered_by(reply.server)
        if reply.input_required_json and not reply.jsonrpc_error_code:
            return self._rounds.wrap(of, name, reply.server, reply.input_required_json, principal=principal)
        result: R = _reply(reply, model)
        return result

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None,
        toolset: str,
        principal: str,
        host_round: HostRound | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """``prompts/get``; ``host_round``: a 2026-07-28 host's round (see :meth:`_rounded`).

        Raises:
            MCPError: an unknown prompt or a refused ``requestState`` (INVALID_PARAMS), or the
                server's own JSON-RPC error.
        """
        if not await self._allowed(t.FeatureKind.PROMPT, name, toolset, principal):
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt '{name}'")
        resumed = self._resumed(RoundOf.PROMPT, name, host_round, principal)
        request = t.PromptRequest(name, json_object_text(dict(arguments or {})), principal)
        reply = await _ask(
            self._pool.get_prompt(resumed.applied_to(request) if resumed else request),
            MCPError(types.INVALID_PARAMS, f"unknown prompt '{name}'"),
        )
        return self._rounded(RoundOf.PROMPT, name, reply, resumed, principal, types.GetPromptResult)

    async def complete(
        self, params: types.CompleteRequestParams, toolset: str, principal: str
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            kind, key = t.FeatureKind.PROMPT, ref.name
        else:
            kind, key = t.FeatureKind.RESOURCE_TEMPLATE, str(ref.uri)
        if kind is t.FeatureKind.PROMPT and not await self._allowed(kind, key, toolset, principal):
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt '{key}'")
        context = params.context.arguments if params.context is not None else None
        request = t.CompletionRequest(
            kind,
            key,
            params.argument.name,
            params.argument.value,
            json_object_text(dict(context)) if context else "",
            principal,
        )
        unknown = MCPError(types.INVALID_PARAMS, f"nothing to complete for '{key}'")
        reply = await _ask(self._pool.complete(request), unknown)
        result: types.CompleteResult = _reply(reply, types.CompleteResult)
        return result

    async def set_level(self, level: str, toolset: str, session: Session | None) -> types.EmptyResult:
        """``logging/setLevel``: sent to the servers of ``toolset`` that take it (handshake-era
        sessions of the pool); the session keeps it too (``Session.log_level``), for the requests
        it makes to servers whose session with the pool is at 2026-07-28, where the level travels
        with each request."""
        if session is not None:
            session.log_level = level
        allowed = toolset_servers(self._config, toolset)
        offering = {o.server for o in self.follower.offers() if o.logging}
        servers = sorted(offering if allowed is None else offering & allowed)
        if servers:
            await _ask(
                self._pool.set_logging_level(level, servers), MCPError(types.INVALID_PARAMS, "no such server")
            )
        return types.EmptyResult()

    # --- subscriptions ----------------------------------------------------------------------

    async def subscribe(
        self, uri: str, session: Session | None, outbound: Any, principal: str
    ) -> types.EmptyResult:
        if session is None:
            raise MCPError(
                types.INVALID_REQUEST, "resource subscriptions need a session: open one with initialize"
            )
        if uri in session.subscriptions:
            return types.EmptyResult()
        stream = self._pool.watch_resource(uri, principal=principal)
        try:
            # Subscribed, or refused: the host hears why.
            await _ask(anext(stream), MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}"))
        except BaseException:
            await stream.aclose()
            raise
        session.subscriptions[uri] = asyncio.create_task(
            self._relay(stream, outbound), name=f"subscription {uri}"
        )
        return types.EmptyResult()

    async def unsubscribe(self, uri: str, session: Session | None) -> types.EmptyResult:
        task = session.subscriptions.pop(uri, None) if session is not None else None
        if task is not None:
            task.cancel()
        return types.EmptyResult()

    async def listen(self, endpoint: Endpoint, principal: str, uris: Sequence[str], serve: Awaitable[T]) -> T:
        """Serves a 2026-07-28 ``subscriptions/listen`` stream (``serve``) while following each of
        the resources it asks for (``uris``) on the pool: their updates are published on the
        endpoint's bus, which delivers each to the streams that asked for that URI. Updates are
        not replayed (the revision's rule): one that comes before the pool has subscribed is not
        delivered."""
        toolset = endpoint.toolset.name
        followed = [u for u in uris if await self._allowed(t.FeatureKind.RESOURCE, u, toolset)]
        if not followed or not self.offered(toolset).subscribe:
            return await serve
        async with anyio.create_task_group() as group:
            for uri in followed:
                group.start_soon(self._follow, endpoint, uri, principal)
            try:
                result = await serve
            finally:
                group.cancel_scope.cancel()
        return result

    async def _follow(self, endpoint: Endpoint, uri: str, principal: str) -> None:
        stream = self._pool.watch_resource(uri, principal=principal)
        try:
            async for updated, subscribed in stream:
                if not subscribed:
                    await endpoint.publish(ResourceUpdated(uri=updated))
        except ToolscoutClientError as err:
            _log.info("a resource subscription ended", uri=uri, error=err.message)
        finally:
            await stream.aclose()

    async def _relay(self, stream: Any, outbound: Any) -> None:
        try:
            async for updated, _subscribed in stream:
                # The host may have closed its standalone stream: the notification is advisory.
                with contextlib.suppress(Exception):
                    await outbound.send_resource_updated(updated)
        except ToolscoutClientError as err:
            _log.info("a resource subscription ended", error=err.message)
        finally:
            await stream.aclose()

    # --- announcements ----------------------------------------------------------------------

    async def _announce(self, kinds: frozenset[t.FeatureKind]) -> None:
        resources = bool(kinds & {t.FeatureKind.RESOURCE, t.FeatureKind.RESOURCE_TEMPLATE})
        prompts = t.FeatureKind.PROMPT in kinds
        # Only where the kind is served now (an endpoint whose servers offer no prompts is not
        # told of prompt changes: it advertises no prompts).
        for endpoint in self._endpoints.opened():
            offered = self.offered(endpoint.toolset.name)
            if resources and offered.resources:
                await endpoint.publish(ResourcesListChanged())
            if prompts and offered.prompts:
                await endpoint.publish(PromptsListChanged())
        for session in self._sessions.all():
            toolset = self._endpoints.toolset_of(session.endpoint)
            if session.outbound is None or toolset is None:
                continue
            offered = self.offered(toolset)
            with contextlib.suppress(Exception):
                if resources and offered.resources:
                    await session.outbound.send_resource_list_changed()
                if prompts and offered.prompts:
                    await session.outbound.send_prompt_list_changed()
        _log.info("resource or prompt change announced", kinds=sorted(k.value for k in kinds))
