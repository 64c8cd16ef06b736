"""What the console's pages show, read through the client library only (as the gateway does).

Plain Python over ``toolscout.client`` values: rows for the servers table, the catalog of one
toolset, a search with its score parts, token figures per toolset and provider. The catalog
watch (:class:`CatalogFollower`) is one ``WatchCatalog`` stream per pool shard for the whole
console, however many pages follow it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolscout.client import (
    AsyncDiscoveryClient,
    AsyncPoolClient,
    InvalidArgumentError,
    Manifest,
    NotFoundError,
    ServerStatus,
    Tool,
    ToolPlan,
    ToolscoutClientError,
    UnavailableError,
)
from toolscout.client.sharded import AsyncShardedPoolClient

from toolscout_kit.logging import get_logger

__all__ = ["CatalogFollower", "ConsoleData", "ServerRow", "ToolRow", "problem_text"]

_log = get_logger(__name__)
_PROVIDERS = ("openai", "anthropic")
# Seconds between attempts to follow the catalog again after the stream broke.
_RETRY = (0.2, 0.5, 1.0, 2.0, 5.0)


@dataclass(frozen=True)
class ServerRow:
    status: ServerStatus
    since: str
    # When the last error was seen: the server's state changed to its failing one then.
    last_error_at: str
    writes: str
    next_retry: str = ""


@dataclass(frozen=True)
class ToolRow:
    tool: Tool
    loaded: bool


def _when(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix)) if unix > 0 else ""


def _writes(s: ServerStatus) -> str:
    """How the server's calls that may write are run, and why."""
    if not s.serialize_writes:
        return "concurrent (serialize_writes: false)"
    if not s.serialized_tools:
        return "concurrent: every tool is annotated read-only"
    why = f", {s.unannotated_tools} without annotations" if s.unannotated_tools else ""
    return f"one at a time: {s.serialized_tools} of {s.tool_count} tools may write{why}"


def problem_text(err: ToolscoutClientError) -> str:
    """What a page says when a service call failed (never the error's own text: it may hold an
    internal address)."""
    for kind, text in _PROBLEMS:
        if isinstance(err, kind):
            return text
    return f"The stack answered with an error ({type(err).__name__})."


_PROBLEMS: tuple[tuple[type[ToolscoutClientError], str], ...] = (
    (UnavailableError, "The stack is not reachable right now (a service is starting or down); try again."),
    (NotFoundError, "Not found: the toolset, server or tool is not (or no longer) in the catalog."),
    (InvalidArgumentError, "The stack refused the request as invalid."),
)


class ConsoleData:
    """Reads for the pages; every method raises ToolscoutClientError subclasses as the clients do."""

    def __init__(
        self, pool: AsyncShardedPoolClient | AsyncPoolClient, discovery: AsyncDiscoveryClient
    ) -> None:
        self.pool = pool
        self.discovery = discovery

    async def servers(self) -> list[ServerRow]:
        statuses = await self.pool.list_servers(deadline=5.0)
        return [
            ServerRow(
                s,
                _when(s.state_since_unix),
                _when(s.state_since_unix) if s.last_error else "",
                _writes(s),
                _when(s.next_retry_unix) if s.state != "ready" else "",
            )
            for s in statuses
        ]

    async def catalog(self, toolset: str) -> tuple[list[ToolRow], Any]:
        """The tools of ``toolset`` (loaded first, then deferred) and its manifest."""
        plan, manifest = await asyncio.gather(
            self.discovery.plan_tools(toolset, include_deferred_tools=True, deadline=10.0),
            self.discovery.get_manifest(toolset, deadline=10.0),
        )
        rows = [ToolRow(t, True) for t in plan.loaded_tools]
        rows += [ToolRow(t, False) for t in plan.deferred_tools]
        rows.sort(key=lambda r: (r.tool.server, r.tool.name))
        return rows, manifest

    async def schema(self, toolset: str, llm_name: str) -> str | None:
        """The input schema of one tool of ``toolset``, indented; None when it is not in it.

        Fetched when a catalog row is opened: the catalog page itself carries no schema, which
        keeps a 527-tool page a fifth of the size.
        """
        found = await self.discovery.search_tools(tool_names=[llm_name], toolset=toolset, deadline=10.0)
        for match in found.matches:
            if match.tool.llm_name == llm_name:
                return _pretty(match.tool.input_schema_json)
        return None

    async def search(self, query: str, toolset: str, server: str, limit: int) -> Any:
        return await self.discovery.search_tools(
            query, toolset=toolset, server_name=server, max_results=limit, deadline=10.0
        )

    async def _counted(self, toolset: str, provider: str) -> tuple[ToolPlan, Manifest]:
        plan, manifest = await asyncio.gather(
            self.discovery.plan_tools(toolset, provider=provider, deadline=10.0),
            self.discovery.get_manifest(toolset, provider=provider, deadline=10.0),
        )
        return plan, manifest

    async def tokens(self, toolset: str) -> list[dict[str, Any]]:
        """Definition tokens with and without discovery, per provider's encoding and server."""
        out = []
        answers = await asyncio.gather(*(self._counted(toolset, provider) for provider in _PROVIDERS))
        for provider, (plan, manifest) in zip(_PROVIDERS, answers, strict=True):
            loaded = sum(s.loaded_tokens for s in manifest.servers)
            out.append(
                {
                    "provider": provider,
                    "encoding": plan.tokens.encoding,
                    "estimate": plan.tokens.estimate,
                    "servers": manifest.servers,
                    "overhead": max(plan.tokens.sent_tokens - loaded, 0),
                    "all": plan.tokens.all_definitions_tokens,
                    "sent": plan.tokens.sent_tokens,
                    "saved": plan.tokens.all_definitions_tokens - plan.tokens.sent_tokens,
                    "manifest_tokens": manifest.tokens,
                    "budget": manifest.budget_tokens,
                }
            )
        return out


def _pretty(schema_json: str) -> str:
    try:
        return json.dumps(json.loads(schema_json or "{}"), indent=2, ensure_ascii=False)
    except ValueError:
        return schema_json


class CatalogFollower:
    """Counts catalog changes seen on every pool shard's ``WatchCatalog``; pages wait on it.

    The streams start with the first page that follows and stop with :meth:`close`. A broken
    stream counts as a change too (the page then shows what ``ListServers`` says, or that the pool
    is not reachable), and is followed again after a short backoff.
    """

    def __init__(self, pool: AsyncShardedPoolClient | AsyncPoolClient) -> None:
        shards: Sequence[AsyncPoolClient] = (
            pool.shards if isinstance(pool, AsyncShardedPoolClient) else (pool,)
        )
        self._shards = list(shards)
        self._changes = 0
        # Set (and replaced by a fresh one) on every change.
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = asyncio.Event()

    @property
    def changes(self) -> int:
        return self._changes

    def _start(self) -> None:
        if not self._tasks and not self.closed.is_set():
            self._tasks = [
                asyncio.create_task(self._follow(shard), name=f"console-catalog-{k}")
                for k, shard in enumerate(self._shards)
            ]

    def _bump(self) -> None:
        self._changes += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _follow(self, shard: AsyncPoolClient) -> None:
        failures = 0
        known = ""
        while not self.closed.is_set():
            try:
                async for snapshot in shard.watch_catalog(known, deadline=None):
                    known = snapshot.catalog_version
                    failures = 0
                    self._bump()
            except ToolscoutClientError as err:
                _log.info("console: the catalog watch broke; following again", error=type(err).__name__)
            except Exception:  # a bug must not stop the live page for good: log it, follow again
                _log.exception("console: following the catalog failed")
            self._bump()
            await asyncio.sleep(_RETRY[min(failures, len(_RETRY) - 1)])
            failures += 1

    async def wait(self, seen: int, within: float) -> int:
        """The change count once it differs from ``seen``, or after ``within`` seconds, or on close."""
        self._start()
        if self._changes == seen and not self.closed.is_set():
            waits = {asyncio.ensure_future(self._changed.wait()), asyncio.ensure_future(self.closed.wait())}
            try:
                await asyncio.wait(waits, timeout=within, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
        return self._changes

    async def close(self) -> None:
        self.closed.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
