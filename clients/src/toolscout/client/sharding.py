"""A sharded MCP pool seen from outside: which shard runs a server, and one catalog from all of them.

A sharded pool is ``N`` pool processes ("shards"). Each server has a placement: ``owner`` (the
default: exactly one shard, chosen by rendezvous hashing of the server name, or the shard it is
pinned to) or ``all`` (every shard runs it). The weight is defined exactly, so that every service,
this library and code in other languages agree on the owners without talking to each other::

    weight(name, k) = int.from_bytes(blake2b(utf8(name) + b"\\x00" + ascii(str(k)), digest_size=8), "big")
    owner(name, N)  = the k in 0..N-1 with the largest weight (the smallest k on a tie)

Going from ``N`` to ``N + 1`` shards moves a server only when the new shard outweighs its old owner
(about ``1 / (N + 1)`` of them, all to the new shard). Python's ``hash()`` is salted per process
and could not be used.

:class:`CatalogMerger` merges the shards' catalogs into one with the same names and the same
``catalog_version`` as an unsharded pool with the same tools: the version is a hash of the
contents (:func:`catalog_version`), computed the same way by the pool itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from toolscout.client.types import Tool, ToolCatalog

__all__ = [
    "CatalogMerger",
    "Placement",
    "ServerPlacement",
    "catalog_version",
    "handle_shard",
    "moved_servers",
    "owners_of",
    "rendezvous_owner",
    "rendezvous_weight",
    "result_handle",
    "row_of",
    "server_digest",
    "tool_row",
]


def result_handle(shard: int, token: str) -> str:
    """The handle of a result kept by pool shard ``shard`` (``token``: random, URL-safe)."""
    return f"r{shard}-{token}"


def handle_shard(handle: str) -> int | None:
    """The pool shard that keeps the result named by ``handle``, or None when it is not one."""
    head, sep, token = handle.partition("-")
    if not sep or not token or not head.startswith("r") or not head[1:].isdigit():
        return None
    return int(head[1:])


def rendezvous_weight(name: str, shard: int) -> int:
    """The stable 64-bit weight of ``shard`` for the server ``name`` (see the module docstring)."""
    digest = hashlib.blake2b(name.encode() + b"\x00" + str(shard).encode("ascii"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous_owner(name: str, count: int) -> int:
    """The shard in ``0..count-1`` that owns ``name`` by rendezvous hashing.

    Raises:
        ValueError: ``count`` is below 1.
    """
    if count < 1:
        raise ValueError(f"the shard count must be at least 1, got {count}")
    if count == 1:
        return 0  # the one shard (no hash: this is on every call's path)
    # max() keeps the first of equal keys, so a tie goes to the smaller index.
    return max(range(count), key=lambda shard: rendezvous_weight(name, shard))


@dataclass(frozen=True, slots=True)
class ServerPlacement:
    """One server's placement: ``owner`` (optionally pinned to ``shard``) or ``all``."""

    placement: Literal["owner", "all"] = "owner"
    shard: int | None = None


def owners_of(server: str, count: int, rule: ServerPlacement | None = None) -> tuple[int, ...]:
    """The shards that run ``server`` among ``count``, ascending: one, or every shard for
    ``placement: all``. This is the one placement rule: the pool runs, and every caller routes, by it.

    A pin to a shard that does not exist (the count shrank below it) falls back to the hash owner.

    Raises:
        ValueError: ``count`` is below 1.
    """
    if count < 1:
        raise ValueError(f"the shard count must be at least 1, got {count}")
    if rule is not None and rule.placement == "all":
        return tuple(range(count))
    if rule is not None and rule.shard is not None and 0 <= rule.shard < count:
        return (rule.shard,)
    return (rendezvous_owner(server, count),)


_DEFAULT = ServerPlacement()
# Unconfigured servers whose owners a Placement keeps (a fleet is far smaller).
_HASHED_MAX = 65536


class Placement:
    """The owners of every configured server for one shard count (by :func:`owners_of`).

    Servers not in ``rules`` get the default placement (their rendezvous owner), so a caller that
    only knows a server's name finds the same shard as the pool.
    """

    def __init__(
        self, count: int, rules: Mapping[str, ServerPlacement] | None = None, *, strict: bool = True
    ) -> None:
        """Computes every configured server's owners once.

        With ``strict`` a pin that cannot apply is an error; without it, a pin beyond ``count``
        (the count shrank below it) falls back to the hash owner, as :func:`owners_of` does.

        Raises:
            ValueError: ``count`` is below 1; with ``strict``, a pinned shard is not below it or a
                rule pins ``all``.
        """
        if count < 1:
            raise ValueError(f"the shard count must be at least 1, got {count}")
        self.count = count
        self._rules = dict(rules or {})
        for name, rule in self._rules.items():
            if strict and rule.shard is not None and (rule.placement == "all" or not 0 <= rule.shard < count):
                raise ValueError(f"server {name!r}: cannot pin to shard {rule.shard} of {count}")
        self._owners = {name: owners_of(name, count, rule) for name, rule in self._rules.items()}
        # Servers not configured, their hash owner computed once (a call routes by it every time);
        # bounded, past which owners are computed again each time.
        self._hashed: dict[str, tuple[int, ...]] = {}

    @property
    def servers(self) -> list[str]:
        """The configured server names, sorted."""
        return sorted(self._rules)

    def rule(self, server: str) -> ServerPlacement:
        """The configured placement of ``server`` (the default for one not configured)."""
        return self._rules.get(server, _DEFAULT)

    def owners(self, server: str) -> tuple[int, ...]:
        """The shards that run ``server``, ascending: one, or all of them for ``placement: all``."""
        owners = self._owners.get(server) or self._hashed.get(server)
        if owners is None:
            owners = owners_of(server, self.count)
            if len(self._hashed) < _HASHED_MAX:
                self._hashed[server] = owners
        return owners

    def owns(self, shard: int, server: str) -> bool:
        """Whether ``shard`` runs ``server`` (a call for it may be served there)."""
        return shard in self.owners(server)

    def servers_for(self, shard: int) -> list[str]:
        """The configured servers that ``shard`` runs, sorted.

        Raises:
            ValueError: ``shard`` is not below the shard count.
        """
        if not 0 <= shard < self.count:
            raise ValueError(f"shard {shard} does not exist (count is {self.count})")
        return [name for name in sorted(self._owners) if shard in self._owners[name]]


def moved_servers(before: Placement, after: Placement, servers: Iterable[str] | None = None) -> list[str]:
    """The servers whose owners differ between two placements (those a reshard restarts), sorted.

    ``servers`` defaults to the union of both placements' configured servers.
    """
    names = set(servers) if servers is not None else set(before.servers) | set(after.servers)
    return sorted(name for name in names if before.owners(name) != after.owners(name))


# --- the catalog version -------------------------------------------------------------------------


def tool_row(
    *,
    server: str,
    name: str,
    llm_name: str,
    available: bool,
    title: str,
    description: str,
    input_schema_json: str,
    output_schema_json: str,
    annotations_json: str,
    extra_json: str = "",
) -> tuple[str, ...]:
    """The fields of a tool that its catalog version covers, in hashing order (the rest of the
    definition only when there is any, so that tools without it hash as they always did)."""
    row = (
        server,
        name,
        llm_name,
        str(available),
        title,
        description,
        input_schema_json,
        output_schema_json,
        annotations_json,
    )
    return (*row, extra_json) if extra_json else row


def server_digest(rows: Iterable[Sequence[str]]) -> bytes:
    """The digest of one server's tools (rows from :func:`tool_row`, sorted by tool name)."""
    digest = hashlib.sha256()
    for row in rows:
        for part in row:
            digest.update(part.encode())
            digest.update(b"\x00")
        digest.update(b"\x1e")
    return digest.digest()


def catalog_version(servers: Iterable[tuple[str, bytes]]) -> str:
    """The catalog version from ``(server, server_digest)`` pairs sorted by server name.

    Only servers with at least one tool take part, so a catalog merged from shards (which cannot
    see a server that lists nothing) has the version of the unsharded one.
    """
    digest = hashlib.sha256()
    for name, server in servers:
        digest.update(name.encode())
        digest.update(b"\x00")
        digest.update(server)
    return digest.hexdigest()[:16]


def row_of(tool: Tool) -> tuple[str, ...]:
    """:func:`tool_row` of a :class:`~toolscout.client.Tool`."""
    return tool_row(
        server=tool.server,
        name=tool.name,
        llm_name=tool.llm_name,
        available=tool.available,
        title=tool.title,
        description=tool.description,
        input_schema_json=tool.input_schema_json,
        output_schema_json=tool.output_schema_json,
        annotations_json=tool.annotations_json,
        extra_json=tool.extra_json,
    )


# --- merging the shards' catalogs ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Listing:
    """One server's tools as one shard listed them, with their digest."""

    tools: tuple[Tool, ...]
    digest: bytes
    available: bool


def _listing(tools: Sequence[Tool]) -> _Listing:
    ordered = tuple(sorted(tools, key=lambda t: t.name))
    return _Listing(ordered, server_digest(row_of(t) for t in ordered), any(t.available for t in ordered))


def _unavailable(listing: _Listing) -> _Listing:
    if not any(t.available for t in listing.tools):
        return listing
    tools = tuple(replace(t, available=False) for t in listing.tools)
    return _Listing(tools, server_digest(row_of(t) for t in tools), False)


@dataclass
class _Shard:
    version: str = ""
    servers: dict[str, _Listing] | None = None
    down: bool = False
    # The same listings, every tool unavailable (built when the shard goes down).
    down_servers: dict[str, _Listing] | None = None


class CatalogMerger:
    """The catalogs of every shard, merged into one catalog with one version.

    Feed it each shard's snapshot (:meth:`update`), tell it when a shard is unreachable
    (:meth:`shard_down`: its tools stay, unavailable) or gone (:meth:`remove_shard`), and read the
    merged :meth:`catalog`. A server listed by several shards (``placement: all``, or two owners
    for a moment during a resharding) appears once, from a shard where it is available if there
    is one (the lowest index among equals). A server that vanishes from every shard while
    ``keep(server)`` holds (it is still configured: its new owner has not listed it yet) stays,
    unavailable, until a shard lists it again.

    Work is proportional to what changed: an update re-hashes only that shard's servers. The
    catalog of a single shard that is up is passed on with its own version (a pool's version is
    this same hash of its contents).
    """

    def __init__(self, *, keep: Mapping[str, object] | None = None) -> None:
        """``keep``: the configured server names (tools of vanished servers stay while configured)."""
        self._shards: dict[int, _Shard] = {}
        self._keep = set(keep) if keep is not None else set()
        self._retained: dict[str, _Listing] = {}
        self._merged: dict[str, _Listing] = {}
        self._names: list[str] = []
        self._catalog = ToolCatalog(tools=(), catalog_version=catalog_version(()))
        self._dirty = False

    @property
    def shards(self) -> list[int]:
        return sorted(self._shards)

    def set_keep(self, servers: Iterable[str]) -> None:
        """Replaces the configured server names (a config reload)."""
        self._keep = set(servers)
        self._retained = {k: v for k, v in self._retained.items() if k in self._keep}
        self._dirty = True

    def update(self, shard: int, version: str, tools: Iterable[Tool]) -> bool:
        """The full catalog of ``shard`` at ``version``; returns whether the merged catalog changed."""
        state = self._shards.setdefault(shard, _Shard())
        if state.servers is not None and state.version == version and not state.down:
            return False
        previous = state.servers or {}
        grouped: dict[str, list[Tool]] = {}
        for tool in tools:
            grouped.setdefault(tool.server, []).append(tool)
        servers: dict[str, _Listing] = {}
        for name, listed in grouped.items():
            old = previous.get(name)
            # Reuse an unchanged listing (and its digest): only changed servers are hashed again.
            if (
                old is not None
                and len(old.tools) == len(listed)
                and all(a == b for a, b in zip(old.tools, sorted(listed, key=lambda t: t.name), strict=True))
            ):
                servers[name] = old
            else:
                servers[name] = _listing(listed)
        state.version, state.servers, state.down, state.down_servers = version, servers, False, None
        return self._changed()

    def shard_down(self, shard: int) -> bool:
        """``shard`` cannot be reached: its last tools stay, unavailable. Returns whether anything changed."""
        state = self._shards.setdefault(shard, _Shard())
        if state.down:
            return False
        state.down = True
        state.down_servers = {k: _unavailable(v) for k, v in (state.servers or {}).items()}
        return self._changed()

    def remove_shard(self, shard: int) -> bool:
        """``shard`` no longer exists (the shard count shrank). Returns whether anything changed."""
        if self._shards.pop(shard, None) is None:
            return False
        return self._changed()

    def catalog(self) -> ToolCatalog:
        """The merged catalog: tools sorted by (server, name), with the merged version."""
        if self._dirty:
            self._rebuild()
        return self._catalog

    def has_catalog(self, shard: int) -> bool:
        """Whether ``shard`` has sent its catalog at least once."""
        state = self._shards.get(shard)
        return state is not None and state.servers is not None

    def is_down(self, shard: int) -> bool:
        state = self._shards.get(shard)
        return state is not None and state.down

    def listings(self) -> list[tuple[str, bytes, tuple[Tool, ...]]]:
        """The merged catalog per server: ``(server, digest, tools)``, sorted by server.

        The digest changes whenever the server's tools (or their availability) do, so a consumer
        can keep whatever it derives from a server's tools until its digest changes.
        """
        if self._dirty:
            self._rebuild()
        return [(name, self._merged[name].digest, self._merged[name].tools) for name in self._names]

    # --- internals ----------------------------------------------------------------------------

    def _changed(self) -> bool:
        before = self._catalog.catalog_version
        self._dirty = True
        return self.catalog().catalog_version != before

    def _pick(self) -> dict[str, _Listing]:
        best: dict[str, tuple[tuple[int, int], _Listing]] = {}
        for index in sorted(self._shards):
            state = self._shards[index]
            servers = state.down_servers if state.down else state.servers
            for name, listing in (servers or {}).items():
                # Lower ranks win: available first, then a reachable shard, then the lower index.
                rank = (0 if listing.available else 1, 1 if state.down else 0)
                current = best.get(name)
                if current is None or rank < current[0]:
                    best[name] = (rank, listing)
        return {name: listing for name, (_, listing) in best.items()}

    def _rebuild(self) -> None:
        picked = self._pick()
        for name, listing in self._merged.items():
            # Vanished from every shard but still configured: keep its tools, unavailable.
            if name not in picked and name in self._keep:
                self._retained[name] = _unavailable(listing)
        for name in list(self._retained):
            if name in picked or name not in self._keep:
                del self._retained[name]
        merged = {**self._retained, **picked}
        self._merged = merged
        names = sorted(name for name, listing in merged.items() if listing.tools)
        self._names = names
        tools = tuple(t for name in names for t in merged[name].tools)
        version = catalog_version((name, merged[name].digest) for name in names)
        only = next(iter(self._shards.values())) if len(self._shards) == 1 else None
        if only is not None and only.servers is not None and not only.down and not self._retained:
            # One shard's catalog as it is: the same contents, so (from a pool) the same version.
            version = only.version
        self._catalog = ToolCatalog(tools=tools, catalog_version=version)
        self._dirty = False
