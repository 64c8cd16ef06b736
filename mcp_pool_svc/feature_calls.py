"""Requests for what servers offer besides tools: read a resource, get a prompt, complete an
argument, set the logging level, follow a resource's updates.

Each request is routed through the :class:`~mcp_pool_svc.features.FeatureCatalog` (by served URI,
prompt name or template) to one server and sent once on its supervised session, or on the
caller's own session of a ``per_user`` server, like a tool call. The server's answer travels as
its MCP result in JSON; a JSON-RPC error it answers with is data too (its code and message), so
that an MCP front door answers with the same error. Reads, prompts and completions have no side
effects, but a request lost with its connection is still reported as "outcome unknown" rather
than sent twice: one rule for every request the pool sends. A read or a prompt may be one round
of an MCP 2026-07-28 multi-round-trip request, as a tool call may (:class:`~mcp_pool_svc.relay.InputRound`):
the server's ``input_required`` answer comes back whole, for the caller to relay.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext
from typing import Any, cast

import anyio
import mcp_types
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, listen
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from toolscout.client import (
    CompletionRequest,
    FeatureKind,
    FeatureList,
    FeatureReply,
    PromptRequest,
    ResourceReadRequest,
    ServerFeature,
)

from mcp_pool_svc.errors import (
    FeatureNotOfferedError,
    InvalidToolArgumentsError,
    ServerUnavailableError,
    ToolCallTimeoutError,
    ToolOutcomeUnknownError,
    UnknownFeatureError,
    UserAuthorizationRequiredError,
)
from mcp_pool_svc.features import FeatureCatalog, ResourceRoute, list_features
from mcp_pool_svc.per_user import UserSessions, is_per_user
from mcp_pool_svc.relay import HostSession, InputRound
from mcp_pool_svc.session import Connection, ConnectionEvent, was_not_sent
from mcp_pool_svc.supervisor import Supervisor
from toolscout_kit.config import RemoteServerConfig
from toolscout_kit.json_text import JsonTextError, parse_json_object
from toolscout_kit.logging import get_logger, redact

__all__ = ["LOGGING_LEVELS", "FeatureCalls"]

log = get_logger(__name__)

LOGGING_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _json(result: Any) -> str:
    data = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _string_map(text: str, what: str) -> dict[str, str]:
    if not text:
        return {}
    try:
        value = parse_json_object(text, what)
    except JsonTextError as err:
        raise InvalidToolArgumentsError(err.message) from None
    if not all(isinstance(v, str) for v in value.values()):
        raise InvalidToolArgumentsError(f"{what}: every value must be a string")
    return {str(k): str(v) for k, v in value.items()}


_PAGE = 100
_MAX_PAGE = 1000


def _cursor_offset(cursor: str, version: str, where: str) -> int:
    try:
        fields = json.loads(base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode("ascii")))
    except (UnicodeError, binascii.Error, ValueError):
        fields = None
    if not isinstance(fields, dict) or not isinstance(offset := fields.get("o"), int) or offset < 0:
        raise InvalidToolArgumentsError("the cursor is not one of this listing; list again without it")
    if fields.get("w") != where or fields.get("v") != version:
        raise InvalidToolArgumentsError(
            "the listing changed since this cursor was issued; list again without it"
        )
    return offset


def _limit(seconds: float, sup: Supervisor, deadline: float | None) -> float:
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidToolArgumentsError(
            f"timeout_seconds must be a finite number, 0 or more; got {seconds!r}"
        )
    limit = seconds if seconds > 0 else sup.config.call_timeout
    return min(limit, deadline) if deadline is not None else limit


async def _send_request(conn: Connection, request: Any) -> None:
    # The session's own methods for these warn that they are deprecated at 2026-07-28 (they are
    # handshake-era requests, and the pool sends them only to servers that offer them).
    await conn.session.send_request(request, mcp_types.EmptyResult)


def _subscribe(uri: str) -> mcp_types.SubscribeRequest:
    return mcp_types.SubscribeRequest(params=mcp_types.SubscribeRequestParams(uri=uri))


async def _unsubscribe(sup: Supervisor, conn: Connection, uri: str) -> None:
    """``resources/unsubscribe`` on a handshake-era session still open (shielded and bounded: it
    runs as the subscriber leaves)."""
    if conn.modern or conn.closed.is_set():
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):
        try:
            await _send_request(
                conn, mcp_types.UnsubscribeRequest(params=mcp_types.UnsubscribeRequestParams(uri=uri))
            )
        except MCPError as err:
            log.info("mcp_server_unsubscribe_failed", server=sup.name, error=redact(err.message)[:300])


# Seconds between two tries to reach a server that failed, to subscribe again on its next session.
_RENEW_RETRY = 1.0


async def _next_session(sup: Supervisor, lost: Connection) -> Connection | None:
    """The server's first session after ``lost`` (once ``lost`` has closed), however long its
    supervisor takes to restart it; None once the server is no longer supervised here."""
    await lost.closed.wait()
    while True:
        try:
            return await sup.connection_for_call(wait_for_restart=True, not_this=lost)
        except ServerUnavailableError:
            if sup.stop_requested:
                return None
            await anyio.sleep(_RENEW_RETRY)  # failed for now: its supervisor keeps restarting it


# How a subscription's stream fails when its session goes (besides MCPError CONNECTION_CLOSED).
_LOST = (
    SubscriptionLost,
    ServerUnavailableError,
    TimeoutError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
)


def _session_lost(err: Exception) -> bool:
    """Whether a subscription failed because its session went (it is renewed on the next one)
    rather than because the server refused it."""
    if isinstance(err, MCPError):
        return was_not_sent(err) or err.code == mcp_types.CONNECTION_CLOSED
    return isinstance(err, _LOST)


async def _renewed(sup: Supervisor, held: list[Connection], uri: str, ended: Callable[[], None]) -> None:
    """Subscribes to ``uri`` again on each new session of the server: a lost session takes the
    server's subscriptions with it. ``held[0]`` is the session holding the subscription (kept
    current for the unsubscribe); ``ended()`` ends the subscription once the server is no longer
    supervised here. Runs until cancelled."""
    while True:
        conn = await _next_session(sup, held[0])
        if conn is None:
            ended()
            return
        held[0] = conn
        try:
            with anyio.fail_after(sup.config.call_timeout):
                await _send_request(conn, _subscribe(uri))
        except (MCPError, TimeoutError) as err:
            # A session lost again is waited out above; a refusal leaves it unsubscribed.
            log.warning("resource_subscription_not_renewed", server=sup.name, error=redact(str(err))[:300])
            continue
        log.info("resource_subscription_renewed", server=sup.name)


class FeatureCalls:
    """Sends the pool's feature requests (see the module's docstring)."""

    def __init__(
        self,
        catalog: FeatureCatalog,
        supervisor_of: Callable[[str], Supervisor],
        users: UserSessions | None = None,
        unsharded: Callable[[], bool] = lambda: True,
        ping_interval: float = 5.0,
    ) -> None:
        """``supervisor_of(server)`` raises UnknownServerError / NotOwnerError like the pool's calls;
        ``unsharded()``: whether this pool is the only shard (see :meth:`FeatureCatalog.route_uri`);
        ``ping_interval``: seconds between two pings on an era-bridge session (``pool.ping_interval``)."""
        self._ping_interval = ping_interval
        self._unsharded = unsharded
        self._catalog = catalog
        self._supervisor_of = supervisor_of
        self._users = users

    def _route(self, uri: str) -> ResourceRoute | None:
        return self._catalog.route_uri(uri, only_server_fallback=self._unsharded())

    # --- listings ---------------------------------------------------------------------------

    async def list_page(
        self,
        kind: FeatureKind,
        servers: tuple[str, ...] = (),
        cursor: str = "",
        page_size: int = 0,
        principal: str = "",
    ) -> FeatureList:
        """One page of ``kind``'s features (of ``servers``, when given), with the servers' offers.
        With a ``principal``, a ``per_user`` server's features are those it lists on that
        principal's own session (:meth:`user_features`).

        Raises:
            InvalidToolArgumentsError: a page size out of range, or a cursor that is not one of
                this listing (another kind or filter, an older version, damaged).
            UnknownServerError / NotOwnerError: a name in ``servers``.
            UserAuthorizationRequiredError: the principal has no usable token for a ``per_user``
                server of the listing.
        """
        for server in servers:
            self._supervisor_of(server)
        if page_size < 0 or page_size > _MAX_PAGE:
            raise InvalidToolArgumentsError(
                f"page_size must be 0 (= {_PAGE}) to {_MAX_PAGE}; got {page_size}"
            )
        size = page_size or _PAGE
        version = self._catalog.version
        features = self._catalog.features(kind, servers or None)
        if principal:
            features, version = await self._as_seen_by(principal, kind, servers, features, version)
        where = f"{kind.value}:{','.join(sorted(servers))}"
        start = _cursor_offset(cursor, version, where) if cursor else 0
        if start > len(features):
            raise InvalidToolArgumentsError(
                "the cursor points past the end of the list; list again without it"
            )
        end = start + size
        token = ""
        if end < len(features):
            text = json.dumps({"v": version, "w": where, "o": end}, separators=(",", ":"))
            token = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
        return FeatureList(features[start:end], token, version, offers=self._catalog.offers(servers or None))

    async def _as_seen_by(
        self,
        principal: str,
        kind: FeatureKind,
        servers: tuple[str, ...],
        features: tuple[ServerFeature, ...],
        version: str,
    ) -> tuple[tuple[ServerFeature, ...], str]:
        """``features`` with each ``per_user`` server's replaced by what it lists to ``principal``,
        and a version of that listing."""
        per_user = [
            o.server
            for o in self._catalog.offers(servers or None)
            if is_per_user(self._supervisor_of(o.server).config)
        ]
        if not per_user:
            return features, version
        own = {s: await self.user_features(s, principal) for s in per_user}
        mine = [f for s in per_user for f in own[s] if f.kind is kind]
        merged = sorted(
            (*(f for f in features if f.server not in own), *mine),
            key=lambda f: (f.server, f.own_name),
        )
        digest = hashlib.sha256(version.encode())
        for f in mine:
            digest.update(f.definition_json.encode())
        return tuple(merged), digest.hexdigest()[:16]

    async def _user_lookup(self, kind: FeatureKind, served: str, principal: str) -> ServerFeature | None:
        """The feature served as ``served`` that a ``per_user`` server lists to ``principal`` only
        (not on the stack's session); None when none does (or the principal cannot list it)."""
        if not principal or self._users is None:
            return None
        for offer in self._catalog.offers():
            if not is_per_user(self._supervisor_of(offer.server).config):
                continue
            try:
                mine = await self.user_features(offer.server, principal)
            except (UserAuthorizationRequiredError, ServerUnavailableError):
                continue
            found = next((f for f in mine if f.kind is kind and f.served_name == served), None)
            if found is not None:
                return found
        return None

    async def user_features(self, server: str, principal: str) -> tuple[ServerFeature, ...]:
        """The resources, templates and prompts ``server`` (``per_user``) lists on ``principal``'s
        own session, named as the catalog names them; listed on demand and kept with that session
        briefly (:meth:`~mcp_pool_svc.per_user.UserSessions.listed`).

        Raises:
            UserAuthorizationRequiredError: the principal has no usable token.
            ServerUnavailableError: their session could not be opened.
        """
        sup = self._supervisor_of(server)
        if self._users is None:
            raise ServerUnavailableError(f"MCP server {server!r} has no per-user sessions here")
        assert isinstance(sup.config, RemoteServerConfig)  # is_per_user

        async def fetch(conn: Connection) -> tuple[ServerFeature, ...]:
            with anyio.fail_after(sup.config.call_timeout):
                listing = await list_features(server, conn)
            return self._catalog.seen_with(server, listing)

        try:
            return await self._users.listed(server, sup.config, principal, fetch)
        except TimeoutError:
            raise ServerUnavailableError(
                f"MCP server {server!r} did not list its features for you in time"
            ) from None

    # --- requests ---------------------------------------------------------------------------

    async def read_resource(
        self, request: ResourceReadRequest, deadline: float | None = None
    ) -> FeatureReply:
        """``resources/read`` of ``request.uri`` on the server it routes to.

        Raises:
            UnknownFeatureError: no server lists or matches the URI (or several servers' templates do).
            ServerUnavailableError: not sent. ToolOutcomeUnknownError: sent, then the connection was lost.
            ToolCallTimeoutError: no answer in time. UserAuthorizationRequiredError: per_user, no token.
        """
        try:
            route = self._route(request.uri)
        except ValueError as err:
            raise UnknownFeatureError(str(err)) from None
        if route is None:
            mine = await self._user_lookup(FeatureKind.RESOURCE, request.uri, request.principal)
            route = ResourceRoute(mine.server, mine.own_name) if mine is not None else None
        if route is None:
            raise UnknownFeatureError(f"no MCP server lists the resource '{request.uri}'")
        sup = self._supervisor_of(route.server)
        limit = _limit(request.timeout_seconds, sup, deadline)
        asked = InputRound.of(request)

        async def read(conn: Connection) -> Any:
            return await conn.session.read_resource(route.uri, **asked.sdk_arguments())

        return await self._send(sup, request.principal, limit, f"resources/read {request.uri}", read, asked)

    async def get_prompt(self, request: PromptRequest, deadline: float | None = None) -> FeatureReply:
        """``prompts/get`` of the prompt served as ``request.name``.

        Raises:
            UnknownFeatureError: no such prompt. InvalidToolArgumentsError: arguments not an object
                of strings. Otherwise as :meth:`read_resource`.
        """
        prompt = self._catalog.lookup(FeatureKind.PROMPT, request.name) or await self._user_lookup(
            FeatureKind.PROMPT, request.name, request.principal
        )
        if prompt is None:
            raise UnknownFeatureError(f"no MCP server offers the prompt '{request.name}'")
        arguments = _string_map(request.arguments_json, "arguments")
        sup = self._supervisor_of(prompt.server)
        limit = _limit(request.timeout_seconds, sup, deadline)
        asked = InputRound.of(request)

        async def get(conn: Connection) -> Any:
            return await conn.session.get_prompt(prompt.own_name, arguments or None, **asked.sdk_arguments())

        return await self._send(sup, request.principal, limit, f"prompts/get {request.name}", get, asked)

    async def complete(self, request: CompletionRequest, deadline: float | None = None) -> FeatureReply:
        """``completion/complete`` for a prompt's or a template's argument.

        Raises:
            UnknownFeatureError: no such prompt or template. InvalidToolArgumentsError: a bad
                reference kind or context. Otherwise as :meth:`read_resource`.
        """
        ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference
        if request.ref_kind is FeatureKind.PROMPT:
            prompt = self._catalog.lookup(FeatureKind.PROMPT, request.ref)
            if prompt is None:
                raise UnknownFeatureError(f"no MCP server offers the prompt '{request.ref}'")
            server, ref = prompt.server, mcp_types.PromptReference(name=prompt.own_name)
        elif request.ref_kind is FeatureKind.RESOURCE_TEMPLATE:
            template = self._catalog.lookup(FeatureKind.RESOURCE_TEMPLATE, request.ref)
            if template is not None:
                server, uri = template.server, template.own_name
            else:
                try:
                    route = self._route(request.ref)
                except ValueError as err:
                    raise UnknownFeatureError(str(err)) from None
                if route is None:
                    raise UnknownFeatureError(f"no MCP server offers the resource template '{request.ref}'")
                server, uri = route.server, route.uri
            ref = mcp_types.ResourceTemplateReference(uri=uri)
        else:
            raise InvalidToolArgumentsError("a completion refers to a prompt or a resource template")
        context = _string_map(request.context_arguments_json, "context arguments")
        sup = self._supervisor_of(server)
        limit = _limit(request.timeout_seconds, sup, deadline)
        argument = {"name": request.argument_name, "value": request.argument_value}

        async def complete(conn: Connection) -> Any:
            return await conn.session.complete(ref, argument, context or None)

        return await self._send(sup, request.principal, limit, "completion/complete", complete)

    async def set_logging_level(self, level: str, servers: tuple[str, ...] = ()) -> tuple[str, ...]:
        """``logging/setLevel`` on every server offering logging (of ``servers`` when given), at
        once; returns those that accepted it (a server down or refusing is logged and skipped).

        Raises:
            InvalidToolArgumentsError: not an MCP logging level.
            UnknownServerError / NotOwnerError: a name in ``servers``.
        """
        if level not in LOGGING_LEVELS:
            raise InvalidToolArgumentsError(
                f"unknown logging level {level!r} (one of {', '.join(LOGGING_LEVELS)})"
            )
        for server in servers:
            self._supervisor_of(server)
        offering = [o.server for o in self._catalog.offers(servers or None) if o.logging]
        accepted: list[str] = []

        async def one(server: str) -> None:
            try:
                sup = self._supervisor_of(server)
                if is_per_user(sup.config):
                    return  # a per_user server's sessions are each user's own
                with anyio.fail_after(sup.config.call_timeout):
                    conn = await sup.connection_for_call()
                    if not conn.modern:
                        # 2026-07-28 has no logging/setLevel: there the level travels with each
                        # request (its caller's, ``_meta`` ``io.modelcontextprotocol/logLevel``).
                        params = mcp_types.SetLevelRequestParams(level=cast(mcp_types.LoggingLevel, level))
                        await _send_request(conn, mcp_types.SetLevelRequest(params=params))
            except (MCPError, ServerUnavailableError, TimeoutError) as err:
                log.warning("mcp_server_set_level_failed", server=server, error=redact(str(err))[:300])
                return
            accepted.append(server)

        async with anyio.create_task_group() as tg:
            for server in offering:
                tg.start_soon(one, server)
        return tuple(sorted(accepted))

    async def watch_resource(self, uri: str, principal: str = "") -> AsyncGenerator[tuple[str, bool], None]:
        """``(uri, True)`` once subscribed, then ``(updated uri, False)`` per update, until the
        caller stops iterating (then it unsubscribes, unless others still follow that URI). A
        subscription lives on its server's session, which forgets it when it is lost: the pool
        subscribes again on each new session of the server (handshake era: :func:`_renewed`;
        2026-07-28: :meth:`_modern`, a new ``subscriptions/listen`` stream or era-bridge session),
        so the updates keep coming after a restart; the stream ends when the server is no longer
        supervised here.

        Raises:
            UnknownFeatureError, FeatureNotOfferedError (no subscriptions), or as :meth:`read_resource`.
        """
        try:
            route = self._route(uri)
        except ValueError as err:
            raise UnknownFeatureError(str(err)) from None
        if route is None:
            raise UnknownFeatureError(f"no MCP server lists the resource '{uri}'")
        sup = self._supervisor_of(route.server)
        if not self._catalog.offer_of(route.server).subscribe or is_per_user(sup.config):
            raise FeatureNotOfferedError(f"MCP server {route.server!r} does not offer resource subscriptions")
        send, receive = anyio.create_memory_object_stream[str](64)

        def on_update(updated: str) -> None:
            # The URI itself as the caller named it (its qualified form, when it asked by that).
            # A consumer that far behind re-reads the resource anyway.
            with contextlib.suppress(anyio.WouldBlock):
                send.send_nowait(uri if updated == route.uri else updated)

        end = self._catalog.subscribe(route.server, route.uri, on_update)
        conn: Connection | None = None
        # Handshake era: the session holding the subscription, and the task renewing it.
        held: list[Connection] = []
        renewal: asyncio.Task[None] | None = None
        try:
            try:
                with anyio.fail_after(sup.config.call_timeout):
                    conn = await sup.connection_for_call()
            except TimeoutError:
                raise ServerUnavailableError(f"MCP server {sup.name!r} is not ready; not sent") from None
            if conn.modern:
                async with contextlib.aclosing(self._modern(sup, conn, uri, route)) as updates:
                    async for update in updates:
                        yield update
                return
            with anyio.fail_after(sup.config.call_timeout):
                await _send_request(conn, _subscribe(route.uri))
            held = [conn]
            renewal = asyncio.create_task(_renewed(sup, held, route.uri, send.close), name=f"renew {uri}")
            yield uri, True
            async with receive:
                async for updated in receive:
                    yield updated, False
        except MCPError as err:
            if was_not_sent(err):
                raise ServerUnavailableError(
                    f"MCP server {sup.name!r} could not be reached; not sent"
                ) from None
            raise FeatureNotOfferedError(
                f"MCP server {sup.name!r} refused the subscription: {redact(err.message)}"
            ) from None
        finally:
            send.close()
            receive.close()
            if renewal is not None:
                renewal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewal
                conn = held[0]
            if end() and conn is not None:
                await _unsubscribe(sup, conn, route.uri)

    async def _modern(
        self, sup: Supervisor, conn: Connection, served: str, route: ResourceRoute
    ) -> AsyncGenerator[tuple[str, bool], None]:
        """A subscription to a server the pool speaks 2026-07-28 with: a ``subscriptions/listen``
        stream on ``conn`` or, when the server offers subscriptions at the handshake era only, a
        session of that era of its own (the era bridge). Either ends with its session; it is then
        opened again on the server's next session (the server's own restart of a stream that it
        ends while its session lives is retried every :data:`_RENEW_RETRY` seconds), until the
        server is no longer supervised here or refuses the subscription.

        Raises:
            as :meth:`_bridged` and :meth:`_listen_for`, before the first subscription only.
        """
        subscribed = False
        while True:
            upstream = (
                self._bridged(sup, served, route, conn)
                if self._catalog.subscribe_bridged(route.server)
                else self._listen_for(conn, served, route.uri)
            )
            try:
                async with contextlib.aclosing(upstream) as updates:
                    async for update in updates:
                        if not update[1] or not subscribed:
                            subscribed = True
                            yield update
                        else:
                            log.info("resource_subscription_renewed", server=sup.name)
            except (*_LOST, FeatureNotOfferedError, MCPError) as err:
                if not subscribed and isinstance(err, SubscriptionLost):
                    raise FeatureNotOfferedError(
                        f"the subscription to '{served}' ended: {type(err).__name__}"
                    ) from None
                if not subscribed:
                    raise
                if not _session_lost(err):
                    log.warning(
                        "resource_subscription_not_renewed", server=sup.name, error=redact(str(err))[:300]
                    )
                    return
            # A stream lost with its session ends a moment before the session is seen closed.
            with anyio.move_on_after(_RENEW_RETRY):
                await conn.closed.wait()
            if conn.closed.is_set():
                renewed = await _next_session(sup, conn)
                if renewed is None:
                    return
                conn = renewed
            elif sup.stop_requested:
                return

    async def _bridged(
        self, sup: Supervisor, served: str, route: ResourceRoute, main: Connection
    ) -> AsyncGenerator[tuple[str, bool], None]:
        """A subscription held on a handshake-era session opened for it (the era bridge, see
        :mod:`mcp_pool_svc.features`): ``resources/subscribe`` there, its updates relayed until the
        caller stops (then ``resources/unsubscribe`` and the session closes) or the session ends:
        it closes, the server's ``main`` session does, or a ``ping`` on it every
        ``ping_interval`` seconds fails (an HTTP session whose server restarted is unknown to
        the new process, but its client hears of that only at its next request; the main session,
        at 2026-07-28, has no server-side state to lose).

        Raises:
            ServerUnavailableError: the session could not be opened. MCPError: the server refused.
        """
        send, receive = anyio.create_memory_object_stream[str](64)
        lost = anyio.Event()

        def on_event(kind: ConnectionEvent, detail: str) -> None:
            if kind == "resource_updated":
                updated = served if detail == route.uri else self._catalog.served_uri(route.server, detail)
                with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                    send.send_nowait(updated)

        async def end_with(conn: Connection) -> None:
            await conn.closed.wait()
            send.close()

        async def alive(conn: Connection) -> None:
            while True:
                await anyio.sleep(self._ping_interval)
                try:
                    with anyio.fail_after(sup.config.call_timeout):
                        await conn.ping()
                except (MCPError, TimeoutError) as err:
                    log.info("subscription_session_lost", server=sup.name, error=redact(str(err))[:300])
                    lost.set()
                    send.close()
                    return

        async with AsyncExitStack() as stack:
            stack.callback(send.close)
            stack.callback(receive.close)
            try:
                conn = await stack.enter_async_context(
                    sup.connector(sup.name, sup.config, on_event, HostSession(mcp_types.ClientCapabilities()))
                )
            except Exception as err:
                log.info("subscription_session_not_opened", server=sup.name, error=type(err).__name__)
                raise ServerUnavailableError(
                    f"MCP server {sup.name!r} could not open a session for the subscription; not sent"
                ) from None
            watcher = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(watcher.cancel_scope.cancel)
            watcher.start_soon(end_with, conn)
            watcher.start_soon(end_with, main)
            watcher.start_soon(alive, conn)
            with anyio.fail_after(sup.config.call_timeout):
                await _send_request(conn, _subscribe(route.uri))
            try:
                yield served, True
                async for updated in receive:
                    yield updated, False
            finally:
                if not (conn.closed.is_set() or main.closed.is_set() or lost.is_set()):
                    unsubscribe = mcp_types.UnsubscribeRequestParams(uri=route.uri)
                    with (
                        anyio.CancelScope(shield=True),
                        anyio.move_on_after(5.0),
                        contextlib.suppress(MCPError),
                    ):
                        await _send_request(conn, mcp_types.UnsubscribeRequest(params=unsubscribe))

    async def _listen_for(
        self, conn: Connection, served: str, uri: str
    ) -> AsyncGenerator[tuple[str, bool], None]:
        """A 2026-07-28 subscription: a ``subscriptions/listen`` stream for this one URI.

        Raises:
            FeatureNotOfferedError: the server did not honour the subscription. SubscriptionLost:
                the stream dropped (its session was lost).
        """
        try:
            async with listen(conn.session, resource_subscriptions=[uri]) as subscription:
                if uri not in (subscription.honored.resource_subscriptions or []):
                    raise FeatureNotOfferedError(
                        f"the MCP server did not accept a subscription to '{served}'"
                    )
                yield served, True
                async for event in subscription:
                    if isinstance(event, ResourceUpdated):
                        yield (served if event.uri == uri else event.uri), False
        except ListenNotSupportedError:
            raise FeatureNotOfferedError(
                f"the MCP server does not serve subscriptions/listen for '{served}'"
            ) from None

    # --- sending ----------------------------------------------------------------------------

    async def _send(
        self,
        sup: Supervisor,
        principal: str,
        limit: float,
        what: str,
        request: Callable[[Connection], Awaitable[Any]],
        asked: InputRound | None = None,
    ) -> FeatureReply:
        """``request`` sent once, as a round of ``asked`` (a read's or a prompt's: the host's
        capabilities declared when the caller relays ``input_required`` results; else a server
        asking for input is answered as a JSON-RPC error of the server's)."""
        sent = False
        relays = asked is not None and asked.accept
        try:
            with anyio.fail_after(limit):
                async with self._connection(sup, principal) as conn:
                    sent = True
                    with asked.declared() if asked is not None else nullcontext():
                        result = await request(conn)
        except TimeoutError:
            raise ToolCallTimeoutError(
                f"{what} on MCP server {sup.name!r} got no answer within {limit:g}s; it was cancelled"
            ) from None
        except MCPError as err:
            if was_not_sent(err):
                sup.connection_refused()
                raise ServerUnavailableError(
                    f"MCP server {sup.name!r} could not be reached; not sent"
                ) from None
            if err.code == mcp_types.CONNECTION_CLOSED:
                if not sent:
                    raise ServerUnavailableError(f"MCP server {sup.name!r} went away; not sent") from None
                raise ToolOutcomeUnknownError(
                    f"{what} was sent to MCP server {sup.name!r}, which went away before answering; "
                    "it was not sent again"
                ) from None
            return FeatureReply(sup.name, jsonrpc_error_code=err.code, error_message=redact(err.message))
        if isinstance(result, mcp_types.InputRequiredResult):
            if relays:
                return FeatureReply(sup.name, input_required_json=_json(result))
            return FeatureReply(
                sup.name,
                jsonrpc_error_code=mcp_types.INTERNAL_ERROR,
                error_message=f"{what}: MCP server {sup.name!r} asked for input (input_required), "
                "which this caller does not relay",
            )
        return FeatureReply(sup.name, result_json=_json(result))

    @asynccontextmanager
    async def _connection(self, sup: Supervisor, principal: str) -> AsyncIterator[Connection]:
        if is_per_user(sup.config):
            if self._users is None:
                raise ServerUnavailableError(
                    f"MCP server {sup.name!r} has no per-user sessions here; not sent"
                )
            assert isinstance(sup.config, RemoteServerConfig)  # is_per_user
            async with self._users.session(sup.name, sup.config, principal) as conn:
                yield conn
            return
        async with sup.semaphore:
            yield await sup.connection_for_call()
