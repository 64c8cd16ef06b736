"""Results kept behind a handle: shaping a call's result to its budget, and reading it later.

:class:`ResultKeeper` is the pool's end of :mod:`toolscout_kit.shaping`: a call made with a result
budget is shaped there (lossless steps, then a preview), and when a preview replaced the result,
the whole text is kept here under a handle that :meth:`ResultKeeper.read` serves (a page, a grep,
a JMESPath projection: :mod:`toolscout_kit.result_reading`).

A kept result lives ``toolscout.results.handle_ttl`` seconds; all of them together take at most
``handle_store_bytes`` (the oldest go first). A handle is bound to the principal and conversation
of the call that made it: anyone else is told it does not exist. A handle that expired (or was
dropped for room) says so to its owner, and which tool to run again; the pool remembers a bounded
number of such handles.

Handles name the shard that keeps them (:func:`toolscout.client.sharding.result_handle`), so that
a sharded client reads from the right one.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

import anyio
from toolscout.client import CallRequest, CallToolResult, ReadRequest, ResultRead
from toolscout.client.sharding import result_handle

from mcp_pool_svc.errors import InvalidToolArgumentsError, ResultHandleExpiredError, ResultHandleNotFoundError
from toolscout_kit.config import ResultsSettings
from toolscout_kit.result_reading import ReadOut, grep, project, read_page
from toolscout_kit.shaping import (
    MIN_BUDGET_TOKENS,
    Shaped,
    ShapingPolicy,
    StructuredCopy,
    count_result,
    fits_unchanged,
    shape_result,
)
from toolscout_kit.tokens import check_encoding

__all__ = ["Counted", "ResultKeeper"]

# Told a shaped result's tokens (returned, delivered) and whether it was kept behind a handle.
Counted = Callable[[int, int, bool], None]

# Expired or dropped handles remembered (to tell their owner so), at most.
_TOMBSTONES = 10_000
# Results shorter than this are shaped on the event loop; longer ones in a worker thread.
_INLINE_CHARS = 256_000


def _size(result: CallToolResult) -> int:
    """The characters (and binary bytes) of a result."""
    return sum(len(b.text) + len(b.data) for b in result.content) + len(result.structured_content_json)


@dataclass(frozen=True, slots=True)
class _Kept:
    document: str
    server: str
    tool: str
    principal: str
    conversation: str
    expires: float
    budget: int
    encoding: str
    is_json: bool


@dataclass(frozen=True, slots=True)
class _Gone:
    server: str
    tool: str
    principal: str
    conversation: str
    why: str


class ResultKeeper:
    """Shapes results to their call's budget and keeps those over it for reading."""

    def __init__(
        self,
        settings: ResultsSettings,
        shard: Callable[[], int],
        server_budget: Callable[[str], int | None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``shard()`` is this pool's shard index (handles name it); ``server_budget(name)`` the
        server's configured ``result_budget`` (None: none)."""
        self._settings = settings
        self._shard = shard
        self._server_budget = server_budget
        self._clock = clock
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._gone: OrderedDict[str, _Gone] = OrderedDict()
        self._bytes = 0

    def check(self, request: CallRequest) -> None:
        """Refuses a bad budget, preview size or encoding before the call is sent.

        Raises:
            InvalidToolArgumentsError: a bad budget, preview size or encoding.
            InvalidArgumentError: an unknown encoding.
        """
        budget = request.result_budget_tokens
        if budget < 0 or 0 < budget < MIN_BUDGET_TOKENS:
            raise InvalidToolArgumentsError(
                f"result_budget_tokens must be 0 (no shaping) or at least {MIN_BUDGET_TOKENS}, not {budget}"
            )
        if request.preview_tokens < 0:
            raise InvalidToolArgumentsError("preview_tokens must not be negative")
        check_encoding(request.token_encoding)

    def _policy(self, request: CallRequest, server: str, has_output_schema: bool) -> ShapingPolicy:
        """How a result of ``server`` is shaped for ``request`` (which has a budget): its budget, or
        the server's ``result_budget`` when that is smaller."""
        budget = request.result_budget_tokens
        server_budget = self._server_budget(server)
        if server_budget is not None:
            budget = min(budget, server_budget)
        return ShapingPolicy(
            budget_tokens=budget,
            preview_tokens=min(request.preview_tokens or self._settings.preview_tokens, budget),
            encoding=check_encoding(request.token_encoding),
            structured_copy=request.structured_copy or StructuredCopy.TEXT,
            keep_structured=has_output_schema,
            handle_ttl_seconds=self._settings.handle_ttl,
        )

    async def shape(
        self, request: CallRequest, result: CallToolResult, has_output_schema: bool, counted: Counted
    ) -> CallToolResult:
        """``result`` shaped to the request's budget, the whole kept when a preview replaced it;
        ``counted`` gets its tokens (returned, delivered) and whether it was kept.

        With ``defer_token_counts``, a result that surely fits unchanged (:func:`fits_unchanged`)
        comes back at once, without its counts: it is counted once the answer that carries it has
        gone out (the event loop's next turn; a thread for a large result, as a large one is shaped).
        """
        policy = self._policy(request, result.server, has_output_schema)
        if request.defer_token_counts and fits_unchanged(
            result.content, result.structured_content_json, policy
        ):
            self._count_later(result, policy.encoding, counted)
            return result
        shaped = await self._shaped(request, result, policy)
        counted(shaped.tokens_returned, shaped.tokens_delivered, shaped.result_handle != "")
        return shaped

    def _count_later(self, result: CallToolResult, encoding: str, counted: Counted) -> None:
        def count() -> int:
            return count_result(result.content, result.structured_content_json, encoding).tokens

        def record(tokens: int) -> None:
            counted(tokens, tokens, False)

        loop = asyncio.get_running_loop()
        if _size(result) <= _INLINE_CHARS:
            loop.call_soon(lambda: record(count()))
        else:
            loop.run_in_executor(None, count).add_done_callback(lambda done: record(done.result()))

    async def _shaped(
        self, request: CallRequest, result: CallToolResult, policy: ShapingPolicy
    ) -> CallToolResult:
        """``result`` shaped to ``policy``, the whole kept when a preview replaced it."""
        budget, encoding = policy.budget_tokens, policy.encoding
        handle = result_handle(self._shard(), secrets.token_urlsafe(12))
        what = f"{result.server}/{result.tool}"

        def run() -> Shaped:
            return shape_result(
                result.content, result.structured_content_json, policy, handle=handle, what=what
            )

        # A large result takes tens of milliseconds per MB to shape: off the event loop.
        shaped = run() if _size(result) <= _INLINE_CHARS else await anyio.to_thread.run_sync(run)
        expires = 0.0
        if shaped.document is not None:
            expires = self._keep(
                handle, shaped.document, result, request, budget, encoding, shaped.document_is_json
            )
        return replace(
            result,
            content=shaped.content,
            structured_content_json=shaped.structured_content_json,
            tokens_returned=shaped.tokens_returned,
            tokens_delivered=shaped.tokens_delivered,
            tokens_estimated=shaped.estimated,
            result_handle=handle if shaped.document is not None else "",
            handle_expires_unix=expires,
        )

    def _keep(
        self,
        handle: str,
        document: str,
        result: CallToolResult,
        request: CallRequest,
        budget: int,
        encoding: str,
        is_json: bool,
    ) -> float:
        now = self._clock()
        self._expire(now)
        expires = now + self._settings.handle_ttl
        cap = self._settings.handle_store_bytes
        if len(document) > cap:
            self._bury(
                handle,
                _Gone(
                    result.server,
                    result.tool,
                    request.principal,
                    request.conversation,
                    f"it was larger than the pool keeps ({cap} bytes, toolscout.results.handle_store_bytes)",
                ),
            )
            return expires
        while self._kept and self._bytes + len(document) > cap:
            old, kept = self._kept.popitem(last=False)
            self._bytes -= len(kept.document)
            self._bury(
                old,
                _Gone(
                    kept.server,
                    kept.tool,
                    kept.principal,
                    kept.conversation,
                    "it was dropped to make room for newer results",
                ),
            )
        self._kept[handle] = _Kept(
            document,
            result.server,
            result.tool,
            request.principal,
            request.conversation,
            expires,
            budget,
            encoding,
            is_json,
        )
        self._bytes += len(document)
        return expires

    def _bury(self, handle: str, gone: _Gone) -> None:
        self._gone[handle] = gone
        while len(self._gone) > _TOMBSTONES:
            self._gone.popitem(last=False)

    def _expire(self, now: float) -> None:
        while self._kept:
            handle, kept = next(iter(self._kept.items()))
            if kept.expires > now:
                break
            self._kept.popitem(last=False)
            self._bytes -= len(kept.document)
            self._bury(
                handle,
                _Gone(
                    kept.server,
                    kept.tool,
                    kept.principal,
                    kept.conversation,
                    f"it expired after {self._settings.handle_ttl:g} seconds",
                ),
            )

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    async def read(self, request: ReadRequest) -> ResultRead:
        """A page, grep or projection of a kept result, within the budget.

        Raises:
            ResultHandleNotFoundError: no such handle for this principal and conversation.
            ResultHandleExpiredError: it expired or was dropped (says which tool to run again).
            InvalidArgumentError: bad offset, pattern, context_lines, path, budget or encoding.
        """
        self._expire(self._clock())
        kept = self._kept.get(request.handle)
        owner = (request.principal, request.conversation)
        if kept is None or (kept.principal, kept.conversation) != owner:
            gone = self._gone.get(request.handle)
            if gone is not None and (gone.principal, gone.conversation) == owner:
                raise ResultHandleExpiredError(
                    f"result handle {request.handle!r} is no longer available: {gone.why}. Call "
                    f"{gone.tool!r} (server {gone.server!r}) again to get the result and a new handle."
                )
            raise ResultHandleNotFoundError(f"no result handle {request.handle!r}")
        budget = request.budget_tokens or kept.budget
        if budget < MIN_BUDGET_TOKENS:
            raise InvalidToolArgumentsError(
                f"budget_tokens must be at least {MIN_BUDGET_TOKENS}, not {budget}"
            )
        encoding = check_encoding(request.token_encoding or kept.encoding)
        document = kept.document

        def run() -> ReadOut:
            if request.path:
                return project(document, request.path, budget, encoding)
            if request.pattern:
                return grep(document, request.pattern, request.context_lines, budget, encoding)
            return read_page(document, request.offset, budget, encoding)

        # A grep or projection of a large result takes a while: off the event loop.
        out = run() if len(document) <= _INLINE_CHARS else await anyio.to_thread.run_sync(run)
        return ResultRead(out.text, out.tokens, out.next_offset, out.total_chars, kept.server, kept.tool)
