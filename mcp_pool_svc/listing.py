"""Following one server's lists into the catalog: at connect, on change notices, on the TTL, after
calls that may change them, and through a loss of the server (the grace).

:class:`ServerListing` is the catalog side of one :class:`~mcp_pool_svc.supervisor.Supervisor`;
the supervisor owns the connection (start, liveness, restarts, idling) and hands each new session
to it:

* :meth:`ServerListing.connected` takes a session's first listing into the catalog (the server
  becomes READY only after it);
* :meth:`ServerListing.run_due`, called from the supervisor's loop, lists again when a change
  notice arrived (:meth:`~ServerListing.notice`), when the TTL ran out (the server's own
  ``ttlMs`` hint, floored and capped, else ``tool_cache_ttl``), or when a call may have changed
  the tools (:meth:`~ServerListing.call_may_have_changed_tools`, coalesced), and says when the
  next listing is due;
* :meth:`ServerListing.went_down` starts the grace: a blip shorter than ``blip_grace`` changes
  nothing in the catalog, then the tools stay marked unavailable, and are dropped after
  ``unavailable_grace`` when that is set.

A new kind of catalog entry (resources, resource templates, prompts) is followed here, next to
the tools: listed in :meth:`~ServerListing.first_listing`/:meth:`~ServerListing.connected` and
in ``_relist`` (or a listing of its own that :meth:`~ServerListing.run_due` runs when due), kept
in the pool's catalog for its kind, dropped by the grace with the tools, its change notice (a
:data:`~mcp_pool_svc.session.ConnectionEvent`) passed on to :meth:`~ServerListing.notice`; the
supervisor's connection, liveness and restarts need no change for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError

from mcp_pool_svc.catalog import Catalog, ListedTool
from mcp_pool_svc.features import FeatureCatalog, HandshakeProbe, refresh_features
from mcp_pool_svc.liveness import describe_error
from mcp_pool_svc.metrics import ListingReason, PoolMetrics
from mcp_pool_svc.session import Connection
from toolscout_kit.config import PoolSettings, RemoteServerConfig, StdioServerConfig
from toolscout_kit.logging import get_logger

__all__ = ["ServerListing"]

log = get_logger(__name__)

# Re-listing after calls that may change a server's tools: the gap between two such listings
# while they find nothing new doubles from the first value up to the second (seconds).
_AFTER_CALL_GAP = 1.0
_AFTER_CALL_MAX_GAP = 60.0


class ServerListing:
    """What one server listed, kept current in the catalog."""

    def __init__(
        self,
        name: str,
        config: StdioServerConfig | RemoteServerConfig,
        settings: PoolSettings,
        *,
        catalog: Catalog,
        metrics: PoolMetrics,
        on_change: Callable[[str], None],
        features: FeatureCatalog | None = None,
        handshake: HandshakeProbe | None = None,
    ) -> None:
        """``on_change(name)`` runs on every change of the server's entries in the catalog;
        ``features``: the catalog of resources, templates and prompts (:mod:`mcp_pool_svc.features`);
        ``handshake``: what the server offers a handshake-era session (see there)."""
        self.name = name
        self._features = features
        self._handshake = handshake
        # The server announced a change of its resources or prompts: listed again when due.
        self._features_due = False
        self._config = config
        self._settings = settings
        self._catalog = catalog
        self._metrics = metrics
        self._on_change = on_change
        grace = settings.unavailable_grace
        self._blip_grace = settings.blip_grace if grace is None else min(settings.blip_grace, grace)
        self._default_ttl = settings.effective_tool_cache_ttl
        self._ttl = self._default_ttl
        # Why the next listing is due before its interval (None: it is not); when the TTL is due.
        self._refresh: ListingReason | None = None
        self._next_list = float("inf")
        # Re-listing after calls that may change the tools (see call_may_have_changed_tools): one
        # is pending; not before this time (monotonic); the gap after the next one.
        self._after_call = False
        self._after_call_at = 0.0
        self._after_call_gap = _AFTER_CALL_GAP
        # The server's change notices reach this connection (one arrived): no re-list after calls.
        self._notices_heard = False
        self._grace_task: asyncio.Task[None] | None = None
        self._serialization_explained = False

    @property
    def ttl(self) -> float:
        """Seconds between two listings of the session (0: only at connect and on notices)."""
        return self._ttl

    @property
    def after_call_pending(self) -> bool:
        """Whether a listing after calls is due (see :meth:`call_may_have_changed_tools`)."""
        return self._after_call

    async def first_listing(self, conn: Connection) -> list[ListedTool]:
        """The tools of a new session, within the server's ``connect_timeout``; its resources,
        templates and prompts go to their catalog (within its ``call_timeout``)."""
        with anyio.fail_after(self._config.connect_timeout):
            tools = await conn.list_tools()
        self._features_due = False
        if await refresh_features(
            self._features, self.name, conn, self._config.call_timeout, self._handshake
        ):
            self._on_change(self.name)
        return tools

    def connected(self, conn: Connection, tools: list[ListedTool]) -> None:
        """A new session listed ``tools``: the catalog takes them, available; the grace ends."""
        if self._grace_task is not None:
            self._grace_task.cancel()
            self._grace_task = None
        self._ttl = self._ttl_from(conn)
        self._refresh = None
        self._after_call = self._notices_heard = False
        self._after_call_at, self._after_call_gap = 0.0, _AFTER_CALL_GAP
        self._metrics.tools_listed(self.name, "connect")
        if self._catalog.set_tools(self.name, tools) | self._catalog.set_available(self.name, True):
            self._changed()

    def explain_serialized_writes(self, tools: list[ListedTool]) -> None:
        """Once per server: which of its tools run one at a time, why, and how to opt out."""
        if self._serialization_explained or not self._config.serialize_writes:
            return
        self._serialization_explained = True
        serialized = sorted(t.name for t in tools if not t.read_only)
        if not serialized:
            return
        log.info(
            "mcp_server_writes_serialized",
            server=self.name,
            serialized_tools=len(serialized),
            unannotated_tools=sum(not t.annotations_json for t in tools),
            tools=serialized[:20],
            reason="not annotated readOnlyHint: true",
            opt_out=f"servers.{self.name}.serialize_writes: false, if the server is safe under concurrent writes",
        )

    def notice(self) -> None:
        """The server announced a change: list again at once (and no longer after calls)."""
        self._refresh = "notification"
        self._notices_heard = True

    def features_notice(self) -> None:
        """The server announced a change of its resources or prompts: list them again when due."""
        self._features_due = True

    def handed_over(self) -> None:
        """Another shard runs the server now: its resources, templates and prompts leave this
        shard's catalog (its tools leave with the shard's ``Catalog.drop``)."""
        if self._features is not None:
            self._features.drop(self.name)

    def resource_updated(self, uri: str) -> None:
        """The server's ``notifications/resources/updated``, for the subscribers of ``uri``."""
        if self._features is not None:
            self._features.resource_updated(self.name, uri)

    def call_may_have_changed_tools(self) -> bool:
        """A call of a tool not annotated read-only was answered; whether a listing became due.

        A change is announced differently at each MCP revision, and SDK 2.3.0 drops an
        announcement made the other era's way (a server calling ``send_tool_list_changed()`` is
        never heard by a 2026-07-28 client; a bus publish reaches no handshake-era client):
        re-listing after such calls catches the changes they make however they are announced.
        It runs in the supervisor's task after the answer went back, never on a call's path, and
        is coalesced per server: the first call's listing runs at once, later ones wait out a gap
        that doubles (1 s up to 60 s) while listings find nothing new and starts again at 1 s
        when one does. Once a change notice has arrived on this connection, notices are known to
        reach it and calls trigger no listing at all.
        """
        if self._notices_heard or self._after_call:
            return False
        self._after_call = True
        return True

    def follow(self) -> None:
        """The session is in service: the TTL's first interval starts now."""
        self._next_list = self._next_due()

    async def run_due(self, conn: Connection, now: float) -> float:
        """Runs the listings due at ``now`` (monotonic); returns when the next one is due.

        Raises:
            MCPError: the connection closed during a listing (a refused listing keeps the last).
        """
        if self._features_due:
            self._features_due = False
            if await refresh_features(
                self._features, self.name, conn, self._config.call_timeout, self._handshake
            ):
                log.info("mcp_server_features_changed", server=self.name)
                self._on_change(self.name)
        if self._refresh is not None or now >= self._next_list:
            reason, self._refresh = self._refresh or "ttl", None
            await self._relist(conn, reason)
            # After the listing: its cache hint sets when the next one is due.
            self._next_list = self._next_due()
        after_call = self._after_call_at if self._after_call else float("inf")
        if now >= after_call:
            await self._relist_after_calls(conn)
            after_call = float("inf")
        return min(self._next_list, after_call)

    def went_down(self) -> None:
        """The session was lost: the grace starts (unless running, or nothing was listed yet)."""
        if self._grace_task is None and self._catalog.has_listing(self.name):
            self._grace_task = asyncio.create_task(self._grace(), name=f"grace-{self.name}")

    def stop(self) -> None:
        """The server is no longer supervised: no grace runs on."""
        if self._grace_task is not None:
            self._grace_task.cancel()

    def _next_due(self) -> float:
        return time.monotonic() + self._ttl if self._ttl > 0 else float("inf")

    def _ttl_from(self, conn: Connection) -> float:
        """The server's cache hint, floored and capped, else the configured TTL."""
        hint = conn.tools_ttl
        if hint is None or hint <= 0:
            return self._default_ttl
        s = self._settings
        return min(max(hint, s.tool_cache_ttl_floor), s.tool_cache_ttl_cap)

    def _changed(self) -> None:
        self._metrics.catalog_tools(self.name, self._catalog.tool_count(self.name))
        self._on_change(self.name)

    async def _grace(self) -> None:
        # A blip shorter than blip_grace changes nothing in the catalog; after it the tools stay,
        # marked unavailable, so callers learn the server is down rather than that they are gone.
        await anyio.sleep(self._blip_grace)
        if self._catalog.set_available(self.name, False):
            self._changed()
        drop_after = self._settings.unavailable_grace
        if drop_after is not None:
            await anyio.sleep(max(drop_after - self._blip_grace, 0.0))
            dropped = self._features is not None and self._features.drop(self.name)
            if self._catalog.drop(self.name) or dropped:
                self._changed()
        self._grace_task = None

    async def _relist(self, conn: Connection, reason: ListingReason) -> bool:
        """Lists the tools again; whether they changed."""
        self._metrics.tools_listed(self.name, reason)
        try:
            with anyio.fail_after(self._config.call_timeout):
                tools = await conn.list_tools()
        except MCPError as err:
            if err.code == mcp_types.CONNECTION_CLOSED:
                raise
            # The server refused this listing but is otherwise alive: keep the last one.
            log.warning("mcp_server_list_failed", server=self.name, error=describe_error(err))
            return False
        self._ttl = self._ttl_from(conn)
        if not self._catalog.set_tools(self.name, tools):
            return False
        log.info("mcp_server_tools_changed", server=self.name, tools=len(tools))
        self._changed()
        return True

    async def _relist_after_calls(self, conn: Connection) -> None:
        """The coalesced listing after calls (see :meth:`call_may_have_changed_tools`)."""
        self._after_call = False
        changed = await self._relist(conn, "after_call")
        self._after_call_gap = (
            _AFTER_CALL_GAP if changed else min(2 * self._after_call_gap, _AFTER_CALL_MAX_GAP)
        )
        self._after_call_at = time.monotonic() + self._after_call_gap
