"""What the async and the blocking clients of a service offer alike, written once.

Each keyword method (``call_tool``, ``plan_tools``, ``search_tools``, ``chat``, ``stream_chat``)
builds its request value and hands it to the client's request method (``call``, ``plan``,
``search``, ``_chat``, ``_chat_events``), which the async clients implement with ``await`` and the
blocking ones without. A type parameter is what that method returns: a coroutine of the value for
the async clients, the value itself for the blocking ones. ``with`` and ``async with`` close a
client alike too (:class:`Closes`, :class:`AsyncCloses`).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, Self, TypeVar, Unpack

from toolscout.client import types as t
from toolscout.client import wire
from toolscout.client._requests import plan_request, search_request
from toolscout.orchestrator.v1 import orchestrator_pb2

__all__ = ["AsyncCloses", "Closes", "DiscoveryCalls", "Metadata", "OrchestratorCalls", "PoolCalls"]

Metadata = Sequence[tuple[str, str]] | None

CallR = TypeVar("CallR")
PlanR = TypeVar("PlanR")
SearchR = TypeVar("SearchR")
ChatR = TypeVar("ChatR")
EventsR = TypeVar("EventsR")


class Closes(metaclass=ABCMeta):
    """``with client:`` closes it."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncCloses(metaclass=ABCMeta):
    """``async with client:`` closes it."""

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class PoolCalls(Generic[CallR]):
    """Tool calls of a pool client, sharded or not."""

    # The client's request method: ``call(request, *, server_hint, deadline, metadata)``.
    call: Callable[..., CallR]

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        server: str = "",
        server_hint: str = "",
        meta: Mapping[str, Any] | str | None = None,
        timeout_seconds: float = 0.0,
        deadline: float | None = None,
        metadata: Metadata = None,
    ) -> CallR:
        """Call a tool by LLM name, or by its own ``name`` on ``server`` (see :meth:`call`).

        ``server_hint`` names the server of a tool called by LLM name, so that a sharded pool's
        client sends it to its shard at once (an unsharded pool needs no route).
        """
        request = t.CallRequest.to(name, arguments, server=server, meta=meta, timeout_seconds=timeout_seconds)
        return self.call(request, server_hint=server_hint, deadline=deadline, metadata=metadata)


class DiscoveryCalls(Generic[PlanR, SearchR]):
    """Plans and searches of a discovery client."""

    # The client's request methods, ``plan(request, *, deadline, metadata)`` for ``PlanTools`` and
    # ``search(...)`` for ``SearchTools``.
    plan: Callable[..., PlanR]
    search: Callable[..., SearchR]

    def plan_tools(
        self,
        toolset: t.ToolsetLike = "",
        *,
        deadline: float | None = None,
        metadata: Metadata = None,
        **fields: Unpack[t.PlanFields],
    ) -> PlanR:
        """What to send the LLM for ``toolset``. Raises NotFoundError, UnavailableError (no catalog yet).

        ``toolset`` is a configured toolset's name, or an inline filter in the shape of a config
        ``tool_sets`` entry (``{"servers": {"weather": True, "mail": ["send_email"]}}``, or a
        :class:`ToolsetRef`). An invalid inline filter raises InvalidArgumentError (malformed) or
        NotFoundError (unknown server or tool, naming what exists). ``fields`` are those of
        :class:`PlanRequest`: ``discovered_tools``, ``provider``, ``include_deferred_names``,
        ``include_deferred_tools``, and ``surface``: ``"append"`` (default) or ``"stable"`` (eager
        tools + search_tools + ``call_tool``, the same bytes for a whole catalog version; the plan's
        ``call_tool`` is then set).
        """
        return self.plan(plan_request(toolset, fields), deadline=deadline, metadata=metadata)

    def search_tools(
        self,
        query: str = "",
        *,
        deadline: float | None = None,
        metadata: Metadata = None,
        **fields: Unpack[t.SearchFields],
    ) -> SearchR:
        """Run search_tools. Raises InvalidArgumentError (bad arguments), NotFoundError (toolset/server).

        ``fields`` are those of :class:`SearchRequest` (``toolset``, ``server_name``,
        ``tool_names``, ``arguments_json``, ``loaded_tools``, ``max_results``, ``offset``, ...).
        With ``include_plan`` the result also carries the plan for the next LLM call (``plan``): the
        tools of ``discovered_tools`` plus the ones this search loaded, counted for ``provider``.
        With ``surface="stable"`` the text gives each found tool's input schema, to be called
        through call_tool, and ``structured_content_json`` the same as data.
        """
        return self.search(search_request(query, fields), deadline=deadline, metadata=metadata)


class OrchestratorCalls(Generic[ChatR, EventsR]):
    """Chats of an orchestrator client."""

    # The client's ``Chat`` and ``StreamChat`` calls: ``(request, deadline, metadata)``.
    _chat: Callable[[orchestrator_pb2.ChatRequest, float | None, Metadata], ChatR]
    _chat_events: Callable[[orchestrator_pb2.ChatRequest, float | None, Metadata], EventsR]

    def chat(
        self,
        messages: str | Sequence[t.ChatMessage],
        *,
        model: str,
        deadline: float | None = None,
        metadata: Metadata = None,
        **fields: Unpack[t.ChatFields],
    ) -> ChatR:
        """Run the tool loop to the answer. ``messages`` may be a single user message string.

        ``toolset`` is a configured name or an inline filter (as in ``plan_tools``), which the
        orchestrator passes to discovery with every call of the chat.
        Pass the result's ``loaded_tools`` as ``discovered_tools`` on the next turn. Raises
        NotFoundError (model/toolset), InvalidArgumentError, ResourceExhaustedError (rate limit),
        UnavailableError, DeadlineExceededError.
        """
        return self._chat(wire.chat_request(messages, model, fields), deadline, metadata)

    def stream_chat(
        self,
        messages: str | Sequence[t.ChatMessage],
        *,
        model: str,
        deadline: float | None = None,
        metadata: Metadata = None,
        **fields: Unpack[t.ChatFields],
    ) -> EventsR:
        """Like :meth:`chat`, yielding events as they happen; the last one is ``ChatFinished``.

        Stopping the iteration early (``break``) cancels the chat on the server (a blocking
        client's: call ``.close()`` on the iterator, or let it be collected).
        """
        return self._chat_events(wire.chat_request(messages, model, fields), deadline, metadata)
