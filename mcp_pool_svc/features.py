"""What the servers offer besides tools: resources, resource templates and prompts, and which of
them offer completion, logging and resource subscriptions; versioned like the tool catalog.

The supervisors list each server's resources, templates and prompts when it connects (only the
kinds its capabilities offer) and again on its ``notifications/{resources,prompts}/list_changed``;
:class:`FeatureCatalog` keeps them, names them for the host and wakes watchers.

Names (one rule with tools, :mod:`mcp_pool_svc.naming`): a prompt is served as
``<server>__<prompt>``, or under its own name when its server is not namespaced
(``namespace_tools: false``), a bare name two servers claim being namespaced for both. A URI (and
a URI template) is served as its server gave it, so that resource links in tool results and
prompts stay readable; a URI that several servers list is served once per server as
``toolscout://server/<server>/<uri>`` (logged, never a silent shadow), and a read of that form
goes to that server with the URI after the prefix. A URI no server lists is routed by the
templates that match it (one server's, else the read is refused as ambiguous, naming the prefix
form), else, in an unsharded pool, to the one server offering resources when there is only one.

Resource subscriptions across the eras: a remote server the pool speaks 2026-07-28 with may offer
``resources/subscribe`` only at the handshake revisions (2026-07-28 removed it; its
``subscriptions/listen`` carries resource updates only where the server honours them, which its
``resources.subscribe`` capability says). Such a server's handshake-era capabilities are probed
once (``handshake``, see :meth:`~mcp_pool_svc.supervisor.Supervisor.handshake_capabilities`); when
they offer subscriptions, the server counts as offering them, and each subscription is held on a
handshake-era session of its own (:attr:`FeatureListing.subscribe_bridged`, the era bridge).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, unquote

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError
from toolscout.client import FeatureKind, FeatureSnapshot, ServerFeature, ServerOffers

from mcp_pool_svc.naming import NameTable, bare_name, llm_name
from mcp_pool_svc.session import Connection
from toolscout_kit.logging import get_logger

__all__ = [
    "SERVER_URI_PREFIX",
    "FeatureCatalog",
    "FeatureListing",
    "HandshakeProbe",
    "ResourceRoute",
    "list_features",
    "offers_of",
    "refresh_features",
]

log = get_logger(__name__)

# A URI (or template) several servers list is served per server under this prefix.
SERVER_URI_PREFIX = "toolscout://server/"
_KIND_ORDER = {FeatureKind.RESOURCE: 0, FeatureKind.RESOURCE_TEMPLATE: 1, FeatureKind.PROMPT: 2}


@dataclass(frozen=True)
class FeatureListing:
    """One server's listing: what it offers and each kind's definitions (MCP JSON objects)."""

    offers: ServerOffers
    resources: tuple[dict[str, Any], ...] = ()
    templates: tuple[dict[str, Any], ...] = ()
    prompts: tuple[dict[str, Any], ...] = ()
    # Subscriptions are offered at the handshake revisions only: each is held on a session of
    # that era opened for it (the pool's own session is at 2026-07-28).
    subscribe_bridged: bool = False

    def of(self, kind: FeatureKind) -> tuple[dict[str, Any], ...]:
        if kind is FeatureKind.RESOURCE:
            return self.resources
        return self.templates if kind is FeatureKind.RESOURCE_TEMPLATE else self.prompts


def offers_of(
    server: str, caps: mcp_types.ServerCapabilities | None, *, modern: bool = False
) -> ServerOffers:
    """What a server's capabilities offer besides tools.

    With a 2026-07-28 session (``modern``) the revision's own ways count: resource updates are
    subscribed on a ``subscriptions/listen`` stream (offered when ``resources.subscribe`` says
    the server honours resource subscriptions there), the log level travels with each request (no ``logging`` capability: every server takes it), and
    completion is asked of a server with prompts or resources even when its ``server/discover``
    does not name ``completions`` (the reference TypeScript server answers it without naming it;
    a server without completion answers -32601 itself, which is relayed).
    """
    if caps is None:
        return ServerOffers(server)
    resources = caps.resources is not None
    prompts = caps.prompts is not None
    return ServerOffers(
        server,
        resources=resources,
        subscribe=bool(caps.resources is not None and caps.resources.subscribe),
        prompts=prompts,
        completions=caps.completions is not None or (modern and (prompts or resources)),
        logging=caps.logging is not None or modern,
    )


def _dump(item: Any) -> dict[str, Any]:
    value: dict[str, Any] = item.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


async def _pages(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    while True:
        page = await fetch(params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor:
            return items


# What a server offers a handshake-era session (None: unknown, or not a remote server).
HandshakeProbe = Callable[[], Awaitable[mcp_types.ServerCapabilities | None]]


async def list_features(
    server: str, conn: Connection, handshake: HandshakeProbe | None = None
) -> FeatureListing:
    """Every resource, template and prompt of the server, as far as its capabilities offer them.

    A kind the server offers but refuses to list is logged and left empty (its tools still serve).
    ``handshake``: asked when the session is at 2026-07-28 and offers resources without
    subscriptions (see the module's docstring).

    Raises:
        MCPError: the connection closed meanwhile.
    """
    session = conn.session
    # A connection without a session of the SDK (a test's fake) offers nothing beside tools.
    offers = offers_of(server, getattr(session, "server_capabilities", None), modern=conn.modern)
    bridged = False
    if handshake is not None and conn.modern and offers.resources and not offers.subscribe:
        caps = await handshake()
        if caps is not None and caps.resources is not None and caps.resources.subscribe:
            offers, bridged = replace(offers, subscribe=True), True
    if not (offers.resources or offers.prompts):
        return FeatureListing(offers)
    found: dict[str, tuple[dict[str, Any], ...]] = {}
    wanted = (
        ("resources", offers.resources, session.list_resources, "resources"),
        ("templates", offers.resources, session.list_resource_templates, "resource_templates"),
        ("prompts", offers.prompts, session.list_prompts, "prompts"),
    )
    for name, offered, fetch, attr in wanted:
        if not offered:
            continue
        try:
            found[name] = tuple(_dump(item) for item in await _pages(fetch, attr))
        except MCPError as err:
            if err.code == mcp_types.CONNECTION_CLOSED:
                raise
            log.warning("mcp_server_feature_list_failed", server=server, kind=name, error=err.message[:300])
    return FeatureListing(offers, subscribe_bridged=bridged, **found)


async def refresh_features(
    catalog: FeatureCatalog | None,
    server: str,
    conn: Connection,
    within: float,
    handshake: HandshakeProbe | None = None,
) -> bool:
    """Lists the server's features into ``catalog`` (within ``within`` seconds); whether they
    changed. No catalog: nothing is listed. A listing that takes longer is logged and the last
    one kept: the server's tools serve all the same.

    Raises:
        MCPError: the connection closed meanwhile.
    """
    if catalog is None:
        return False
    with anyio.move_on_after(within) as scope:
        listing = await list_features(server, conn, handshake)
    if scope.cancelled_caught:
        log.warning("mcp_server_feature_list_failed", server=server, error=f"no answer within {within:g}s")
        return False
    return catalog.set_listing(server, listing)


# RFC 6570 expressions: {var}, {+var}, {#var}, {/var}, {.var}, {;var}, {?a,b}, {&a}.
_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")


def _template_pattern(template: str) -> re.Pattern[str] | None:
    parts: list[str] = []
    last = 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        operator = match.group(1)
        if operator in ("+", "#"):
            parts.append(r"#?.*" if operator == "#" else r".*")
        elif operator in ("?", "&"):
            parts.append(r"(?:[?&][^#]*)?")
        else:
            parts.append(rf"(?:{re.escape(operator)}[^/?#]*)?" if operator else r"[^/?#]*")
        last = match.end()
    parts.append(re.escape(template[last:]))
    try:
        return re.compile("".join(parts))
    except re.error:
        return None


def _prefixed(server: str, key: str) -> str:
    return f"{SERVER_URI_PREFIX}{quote(server, safe='')}/{key}"


def _qualified(kind: FeatureKind, server: str, key: str, served: str) -> str:
    """The name ``key`` of ``server`` is served under when another server claims its served name
    too: the prefix form of a URI, the namespaced name of a prompt (``served`` when it is one)."""
    if kind is not FeatureKind.PROMPT:
        return served if served.startswith(SERVER_URI_PREFIX) else _prefixed(server, key)
    return llm_name(server, key) if served == bare_name(key) else served


def _unprefixed(uri: str) -> tuple[str, str] | None:
    if not uri.startswith(SERVER_URI_PREFIX):
        return None
    server, slash, rest = uri[len(SERVER_URI_PREFIX) :].partition("/")
    return (unquote(server), rest) if slash and server else None


@dataclass(frozen=True, slots=True)
class ResourceRoute:
    """Where a read goes: the server, and the URI on it."""

    server: str
    uri: str


@dataclass
class _Watcher:
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    changed: set[FeatureKind] = field(default_factory=set)


def _served_uris(listings: dict[str, FeatureListing], kind: FeatureKind) -> dict[tuple[str, str], str]:
    claims: dict[str, set[str]] = {}
    for server, listing in listings.items():
        for item in listing.of(kind):
            claims.setdefault(str(item.get(kind.key_field, "")), set()).add(server)
    served: dict[tuple[str, str], str] = {}
    for key, servers in claims.items():
        for server in servers:
            served[(server, key)] = key if len(servers) == 1 else _prefixed(server, key)
    return served


def _lookup_in(served: dict[tuple[str, str], str]) -> Callable[[str, str], str]:
    def name(server: str, key: str) -> str:
        return served[(server, key)]

    return name


class FeatureCatalog:
    """Per-server listings of resources, templates and prompts, merged, named and versioned."""

    def __init__(self, namespaced: Callable[[str], bool] | None = None) -> None:
        """``namespaced(server)``: whether its prompts are named ``<server>__<prompt>`` (the tools' rule)."""
        self._namespaced = namespaced or (lambda server: True)
        self._listings: dict[str, FeatureListing] = {}
        # Each server's share of the version, kept with the listing it was computed from: a fleet
        # coming up changes one server at a time, and hashing every listing again per change
        # made its start quadratic in the number of servers.
        self._digests: dict[str, tuple[FeatureListing, bytes]] = {}
        self._features: tuple[ServerFeature, ...] = ()
        self._by_served: dict[tuple[FeatureKind, str], ServerFeature] = {}
        self._by_qualified: dict[tuple[FeatureKind, str], ServerFeature] = {}
        self._templates: list[tuple[re.Pattern[str], ServerFeature]] = []
        self._version = self._hash()
        self._watchers: list[_Watcher] = []
        self._subscribers: dict[tuple[str, str], list[Callable[[str], None]]] = {}
        # (server, URI) pairs already logged as served under the server's prefix.
        self._clashed: set[tuple[str, str]] = set()

    # --- updates ----------------------------------------------------------------------------

    def set_listing(self, server: str, listing: FeatureListing) -> bool:
        """Records a fresh listing of ``server``; whether anything changed."""
        old = self._listings.get(server)
        if old == listing:
            return False
        self._listings[server] = listing
        self._rebuild(old, listing)
        return True

    def drop(self, server: str) -> bool:
        """Forgets ``server``'s listing."""
        old = self._listings.pop(server, None)
        self._digests.pop(server, None)
        if old is None:
            return False
        self._rebuild(old, None)
        return True

    # --- reads ------------------------------------------------------------------------------

    @property
    def version(self) -> str:
        return self._version

    def features(
        self, kind: FeatureKind | None = None, servers: Iterable[str] | None = None
    ) -> tuple[ServerFeature, ...]:
        wanted = set(servers) if servers is not None else None
        return tuple(
            f
            for f in self._features
            if (kind is None or f.kind is kind) and (wanted is None or f.server in wanted)
        )

    def seen_with(self, server: str, listing: FeatureListing) -> tuple[ServerFeature, ...]:
        """``server``'s features had it listed ``listing`` (a user's own listing of a ``per_user``
        server), named by the catalog's rules among the other servers' listings."""
        other = FeatureCatalog(self._namespaced)
        other._listings = {**self._listings, server: listing}
        other._digests = dict(self._digests)
        other._clashed = set(self._clashed)
        other._rebuild(None, listing)
        return other.features(servers=(server,))

    def offers(self, servers: Iterable[str] | None = None) -> tuple[ServerOffers, ...]:
        wanted = set(servers) if servers is not None else None
        return tuple(
            self._listings[s].offers for s in sorted(self._listings) if wanted is None or s in wanted
        )

    def offer_of(self, server: str) -> ServerOffers:
        listing = self._listings.get(server)
        return listing.offers if listing is not None else ServerOffers(server)

    def subscribe_bridged(self, server: str) -> bool:
        """Whether ``server``'s subscriptions are held on handshake-era sessions of their own
        (see :attr:`FeatureListing.subscribe_bridged`)."""
        listing = self._listings.get(server)
        return listing is not None and listing.subscribe_bridged

    def snapshot(self, changed: Sequence[FeatureKind] = ()) -> FeatureSnapshot:
        return FeatureSnapshot(self._version, self._features, self.offers(), tuple(changed))

    def lookup(self, kind: FeatureKind, served: str) -> ServerFeature | None:
        """The feature served as ``served``, or known by its qualified name (what a sharded pool's
        client serves when two shards claim one name; see :class:`ServerFeature`)."""
        return self._by_served.get((kind, served)) or self._by_qualified.get((kind, served))

    def route_uri(self, uri: str, *, only_server_fallback: bool = True) -> ResourceRoute | None:
        """The server a read of ``uri`` goes to (see the module's docstring), or None.
        ``only_server_fallback``: a URI nothing else routes goes to the one server offering
        resources, when there is one (not in a sharded pool: another shard may list it).

        Raises:
            ValueError: templates of several servers match it (the message names them).
        """
        listed = self._by_served.get((FeatureKind.RESOURCE, uri))
        if listed is not None:
            return ResourceRoute(listed.server, listed.own_name)
        prefixed = _unprefixed(uri)
        if prefixed is not None and prefixed[0] in self._listings:
            return ResourceRoute(*prefixed)
        matching = sorted({f.server for pattern, f in self._templates if pattern.fullmatch(uri)})
        if len(matching) == 1:
            return ResourceRoute(matching[0], uri)
        if len(matching) > 1:
            raise ValueError(
                f"resource templates of several servers match '{uri}' ({', '.join(matching)}); "
                f"read it as {SERVER_URI_PREFIX}<server>/{uri}"
            )
        offering = [s for s, listing in self._listings.items() if listing.offers.resources]
        return ResourceRoute(offering[0], uri) if len(offering) == 1 and only_server_fallback else None

    def served_uri(self, server: str, uri: str) -> str:
        """The URI a host knows ``uri`` of ``server`` by (for relayed update notifications)."""
        for f in self._features:
            if f.kind is FeatureKind.RESOURCE and f.server == server and f.own_name == uri:
                return f.served_name
        return uri

    async def watch(self, known_version: str = "") -> AsyncGenerator[FeatureSnapshot, None]:
        """The current snapshot (unless still ``known_version``), then one per change (a slow
        consumer gets the latest, with the union of the kinds that changed)."""
        watcher = _Watcher()
        self._watchers.append(watcher)
        try:
            seen = self._version
            if seen != known_version:
                yield self.snapshot()
            while True:
                await watcher.wake.wait()
                watcher.wake.clear()
                changed = sorted(watcher.changed, key=_KIND_ORDER.__getitem__)
                watcher.changed.clear()
                if self._version == seen:
                    continue
                seen = self._version
                yield self.snapshot(changed)
        finally:
            self._watchers.remove(watcher)

    # --- resource updates -------------------------------------------------------------------

    def subscribe(self, server: str, uri: str, on_update: Callable[[str], None]) -> Callable[[], bool]:
        """Calls ``on_update(uri)`` on each update of ``uri`` (or below it) from ``server``; returns
        the function that ends it, which says whether it was the last subscriber of that URI."""
        key = (server, uri)
        self._subscribers.setdefault(key, []).append(on_update)

        def end() -> bool:
            subscribers = self._subscribers.get(key, [])
            if on_update in subscribers:
                subscribers.remove(on_update)
            if not subscribers:
                self._subscribers.pop(key, None)
                return True
            return False

        return end

    def resource_updated(self, server: str, uri: str) -> None:
        """A server's ``notifications/resources/updated``: tells the subscribers of that URI (and
        of the URIs it is below, as the spec allows a server to notify for sub-resources)."""
        for (owner, subscribed), subscribers in list(self._subscribers.items()):
            if owner == server and (uri == subscribed or uri.startswith(subscribed.rstrip("/") + "/")):
                for notify in list(subscribers):
                    notify(self.served_uri(server, uri) if uri != subscribed else uri)

    # --- internals --------------------------------------------------------------------------

    def _hash(self) -> str:
        digest = hashlib.sha256()
        for server in sorted(self._listings):
            digest.update(self._digest(server, self._listings[server]))
        return digest.hexdigest()[:16]

    def _digest(self, server: str, listing: FeatureListing) -> bytes:
        cached = self._digests.get(server)
        if cached is not None and cached[0] is listing:
            return cached[1]
        body = [listing.offers.__repr__(), listing.resources, listing.templates, listing.prompts]
        value = hashlib.sha256(json.dumps([server, body], sort_keys=True, default=str).encode()).digest()
        self._digests[server] = (listing, value)
        return value

    def _rebuild(self, old: FeatureListing | None, new: FeatureListing | None) -> None:
        changed = {
            kind for kind in FeatureKind if (old.of(kind) if old else ()) != (new.of(kind) if new else ())
        }
        if changed:  # a server listing no feature, or the same ones, leaves the features as they are
            self._build_features()
        self._version = self._hash()
        if old is None or new is None or old.offers != new.offers:
            changed.update(FeatureKind)
        for watcher in self._watchers:
            watcher.changed.update(changed)
            watcher.wake.set()

    def _build_features(self) -> None:
        listings = self._listings
        names = NameTable(
            (
                (server, str(p.get("name", "")))
                for server, listing in listings.items()
                for p in listing.prompts
            ),
            self._namespaced,
        )
        features: list[ServerFeature] = []
        for kind in (FeatureKind.RESOURCE, FeatureKind.RESOURCE_TEMPLATE):
            served = _served_uris(listings, kind)
            for (server, key), name in served.items():
                if name != key and (server, key) not in self._clashed:
                    self._clashed.add((server, key))
                    log.warning(
                        "resource_uri_clash",
                        uri=key,
                        server=server,
                        served_as=name,
                        detail="several servers list this URI: each is served under its server's prefix",
                    )
            features.extend(self._built(kind, _lookup_in(served)))
        features.extend(self._built(FeatureKind.PROMPT, names.name_for))
        features.sort(key=lambda f: (_KIND_ORDER[f.kind], f.server, f.own_name))
        self._features = tuple(features)
        self._by_served = {(f.kind, f.served_name): f for f in features}
        self._by_qualified = {(f.kind, f.qualified_name): f for f in features}
        self._templates = [
            (pattern, f)
            for f in features
            if f.kind is FeatureKind.RESOURCE_TEMPLATE
            and (pattern := _template_pattern(f.own_name)) is not None
        ]

    def _built(self, kind: FeatureKind, served_name: Callable[[str, str], str]) -> list[ServerFeature]:
        built: list[ServerFeature] = []
        key_field = kind.key_field
        for server, listing in self._listings.items():
            seen: set[str] = set()
            for item in listing.of(kind):
                key = str(item.get(key_field, ""))
                if not key or key in seen:
                    continue  # a server listing a key twice: the first definition wins
                seen.add(key)
                name = served_name(server, key)
                definition = {**item, key_field: name}
                text = json.dumps(definition, ensure_ascii=False, separators=(",", ":"))
                built.append(
                    ServerFeature(kind, server, key, name, text, _qualified(kind, server, key, name))
                )
        return built
