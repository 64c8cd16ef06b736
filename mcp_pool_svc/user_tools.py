"""What a ``per_user`` server lists as tools to one principal, and the catalog as they see it.

The catalog (:class:`~mcp_pool_svc.catalog.Catalog`) holds what each server listed to the stack's
own session; a ``per_user`` server may list other tools to each user (its tools follow the user's
own authorization). :class:`UserToolLists` lists a server's tools on the principal's own session
(:meth:`~mcp_pool_svc.per_user.UserSessions.listed`: kept with that session for 10 s, the one
cache of per-user listings), names them as the catalog would
(:meth:`~mcp_pool_svc.catalog.Catalog.named`), and answers:

- ``ListTools`` with a principal (:meth:`catalog_as_seen_by`): each ``per_user`` server's tools
  replaced by what it lists to that principal, under a version of that listing;
- a call of a tool the server lists to the caller only (:meth:`resolve`): found by its name in
  the caller's own list when the catalog does not hold it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

import anyio
from toolscout.client import ToolCatalog

from mcp_pool_svc.catalog import Catalog, PoolTool
from mcp_pool_svc.errors import ServerUnavailableError, UserAuthorizationRequiredError
from mcp_pool_svc.naming import server_named_by
from mcp_pool_svc.per_user import Listing, UserSessions, is_per_user
from mcp_pool_svc.session import Connection
from mcp_pool_svc.supervisor import Supervisor
from toolscout_kit.config import RemoteServerConfig

__all__ = ["UserToolLists"]


class UserToolLists:
    """Tool lists of ``per_user`` servers as each principal's own session lists them."""

    def __init__(
        self,
        catalog: Catalog,
        supervisor_of: Callable[[str], Supervisor],
        running: Callable[[], Iterable[Supervisor]],
        users: UserSessions,
    ) -> None:
        """``supervisor_of(server)`` raises UnknownServerError / NotOwnerError like the pool's
        calls; ``running()``: the supervisors of this shard's servers."""
        self._catalog = catalog
        self._supervisor_of = supervisor_of
        self._running = running
        self._users = users

    def per_user_servers(self, servers: Iterable[str] = ()) -> list[str]:
        """This shard's ``per_user`` servers (of ``servers``, when given), sorted."""
        wanted = set(servers)
        return sorted(
            sup.name
            for sup in self._running()
            if is_per_user(sup.config) and (not wanted or sup.name in wanted)
        )

    async def tools(self, server: str, principal: str) -> tuple[PoolTool, ...]:
        """The tools ``server`` (``per_user``) lists on ``principal``'s own session.

        Raises:
            UserAuthorizationRequiredError: no principal, or no usable token of theirs.
            ServerUnavailableError: their session could not be opened, or the server did not
                list its tools in time.
        """
        sup = self._supervisor_of(server)
        config = sup.config
        assert isinstance(config, RemoteServerConfig)  # is_per_user

        async def fetch(conn: Connection) -> tuple[PoolTool, ...]:
            with anyio.fail_after(config.call_timeout):
                listed = await conn.list_tools()
            return self._catalog.named(server, listed)

        try:
            return await self._users.listed(server, config, principal, fetch, what=Listing.TOOLS)
        except TimeoutError:
            raise ServerUnavailableError(
                f"MCP server {server!r} did not list its tools for you in time"
            ) from None

    async def catalog_as_seen_by(
        self, catalog: ToolCatalog, principal: str, servers: Iterable[str] = ()
    ) -> ToolCatalog:
        """``catalog`` (of ``servers``, when given) with each ``per_user`` server's tools replaced
        by what it lists to ``principal``, and a version of that listing.

        Raises:
            UserAuthorizationRequiredError: the principal has no usable token for a ``per_user``
                server of the listing.
            ServerUnavailableError: a session of theirs could not be opened.
        """
        per_user = self.per_user_servers(servers)
        if not per_user:
            return catalog
        own = {server: await self.tools(server, principal) for server in per_user}
        mine = [t for server in per_user for t in own[server]]
        merged = sorted(
            (*(t for t in catalog.tools if t.server not in own), *mine), key=lambda t: (t.server, t.name)
        )
        digest = hashlib.sha256(catalog.catalog_version.encode())
        for tool in mine:
            digest.update(f"{tool.server}\x00{tool.llm_name}\x00{tool.description}\x00".encode())
            digest.update(tool.input_schema_json.encode())
        return ToolCatalog(tuple(merged), digest.hexdigest()[:16], catalog.shard)

    async def resolve(
        self, *, server: str, tool: str, llm_name: str, principal: str
    ) -> tuple[str, str] | None:
        """The ``(server, tool)`` of a tool that a ``per_user`` server lists to ``principal`` (by
        ``llm_name``, or by ``server`` and ``tool``); None when none does.

        Raises:
            UserAuthorizationRequiredError: the name is one of a ``per_user`` server's tools (by
                the naming rule) and the principal cannot list that server's tools: their own
                sign-in is what is missing, not the tool.
        """
        if not principal:
            return None
        candidates = self.per_user_servers([server] if server and not llm_name else ())
        if llm_name:
            owner = server_named_by(llm_name, candidates)
            candidates = [owner] if owner is not None else candidates
        for name in candidates:
            try:
                listed = await self.tools(name, principal)
            except UserAuthorizationRequiredError:
                if len(candidates) == 1:
                    raise
                continue
            except ServerUnavailableError:
                continue
            for found in listed:
                if (llm_name and found.llm_name == llm_name) or (not llm_name and found.name == tool):
                    return found.server, found.name
        return None
