"""What the async and the blocking clients of a service offer alike, written once.

Every method here builds its request and hands it to the client's ``_call`` (one unary RPC, its
answer converted) or ``_stream`` (a server stream, each message converted), which the async clients
implement with ``await`` and the blocking ones without; the keyword methods (``call_tool``,
``plan_tools``, ``search_tools``) build a request value and hand it to the request method (``call``,
``plan``, ``search``). A type parameter is what a method returns: a coroutine (or an async
iterator) of the value for the async clients, the value itself (or an iterator) for the blocking
ones; Python's types cannot say "the same, awaited", hence the casts. ``with`` and ``async with``
close a client alike too (:class:`Closes`, :class:`AsyncCloses`).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, Self, TypeVar, Unpack, cast

from toolscout.client import types as t
from toolscout.client import wire
from toolscout.client._requests import plan_request, search_request, toolset_ref
from toolscout.mcp_pool.v1 import mcp_pool_pb2
from toolscout.orchestrator.v1 import orchestrator_pb2

__all__ = [
    "AsyncCloses",
    "Closes",
    "DiscoveryCalls",
    "FeatureListings",
    "FeatureRequests",
    "Metadata",
    "OrchestratorCalls",
    "PoolCalls",
    "ToolCalls",
]

Metadata = Sequence[tuple[str, str]] | None

CallR = TypeVar("CallR")
ServersR = TypeVar("ServersR")
SnapshotsR = TypeVar("SnapshotsR")
ReadR = TypeVar("ReadR")
PlanR = TypeVar("PlanR")
SearchR = TypeVar("SearchR")
ManifestR = TypeVar("ManifestR")
ChatR = TypeVar("ChatR")
EventsR = TypeVar("EventsR")
ModelsR = TypeVar("ModelsR")
ToolsetsR = TypeVar("ToolsetsR")


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


class _Rpcs:
    """A client's two ways to run an RPC: ``_call(method, request, deadline, metadata, convert)``
    and ``_stream(...)`` with the same arguments."""

    _call: Callable[..., Any]
    _stream: Callable[..., Any]


class ToolCalls(Generic[CallR]):
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


def _server_list(resp: mcp_pool_pb2.ListServersResponse) -> tuple[t.ServerStatus, ...]:
    return tuple(wire.server_status(s) for s in resp.servers)


class ResultReads(_Rpcs, Generic[ReadR]):
    """Reads of results a pool kept behind a handle."""

    def read_result(
        self, request: t.ReadRequest, *, deadline: float | None = None, metadata: Metadata = None
    ) -> ReadR:
        """``ReadResult``: a page, a grep or a JMESPath projection of a kept result.

        Raises:
            NotFoundError: no such handle for this principal and conversation (unknown, another
                caller's, or expired: the message then says which tool to run again).
            InvalidArgumentError: a bad offset, pattern, context_lines, path, budget or encoding.
        """
        return cast(
            ReadR,
            self._call("ReadResult", wire.read_request_pb(request), deadline, metadata, wire.result_read),
        )


class PoolCalls(_Rpcs, Generic[ServersR, SnapshotsR]):
    """What a client of one pool asks besides tool calls."""

    def list_servers(self, *, deadline: float | None = None, metadata: Metadata = None) -> ServersR:
        """State of every configured MCP server, sorted by name."""
        request = mcp_pool_pb2.ListServersRequest()
        return cast(ServersR, self._call("ListServers", request, deadline, metadata, _server_list))

    def watch_catalog(
        self, known_version: str = "", *, deadline: float | None = None, metadata: Metadata = None
    ) -> SnapshotsR:
        """The catalog now, then again on every change, until the caller stops iterating."""
        request = mcp_pool_pb2.WatchCatalogRequest(known_version=known_version)
        return cast(
            SnapshotsR, self._stream("WatchCatalog", request, deadline, metadata, wire.catalog_snapshot)
        )


def _accepted(resp: mcp_pool_pb2.SetLoggingLevelResponse) -> tuple[str, ...]:
    return tuple(resp.servers)


def _resource_update(resp: mcp_pool_pb2.WatchResourceResponse) -> tuple[str, bool]:
    return resp.uri, resp.subscribed


ListR = TypeVar("ListR")
FeatureSnapshotsR = TypeVar("FeatureSnapshotsR")
ReplyR = TypeVar("ReplyR")
LevelR = TypeVar("LevelR")
UpdatesR = TypeVar("UpdatesR")


class FeatureListings(Generic[ListR]):
    """One listing method per kind over a client's ``list_features`` (sharded or not)."""

    # ``list_features(kind, servers, *, cursor, page_size, deadline, metadata)``.
    list_features: Callable[..., ListR]

    def list_resources(
        self, servers: Sequence[str] = (), *, cursor: str = "", deadline: float | None = None
    ) -> ListR:
        """:meth:`list_features` of the resources."""
        return self.list_features(t.FeatureKind.RESOURCE, servers, cursor=cursor, deadline=deadline)

    def list_resource_templates(
        self, servers: Sequence[str] = (), *, cursor: str = "", deadline: float | None = None
    ) -> ListR:
        """:meth:`list_features` of the resource templates."""
        return self.list_features(t.FeatureKind.RESOURCE_TEMPLATE, servers, cursor=cursor, deadline=deadline)

    def list_prompts(
        self, servers: Sequence[str] = (), *, cursor: str = "", deadline: float | None = None
    ) -> ListR:
        """:meth:`list_features` of the prompts."""
        return self.list_features(t.FeatureKind.PROMPT, servers, cursor=cursor, deadline=deadline)


class FeatureRequests(
    FeatureListings[ListR], _Rpcs, Generic[ListR, FeatureSnapshotsR, ReplyR, LevelR, UpdatesR]
):
    """What a client of one pool asks of the servers' resources, templates, prompts, completion
    and logging (each request goes to the server that offers it)."""

    def list_features(
        self,
        kind: t.FeatureKind,
        servers: Sequence[str] = (),
        *,
        cursor: str = "",
        page_size: int = 0,
        deadline: float | None = None,
        metadata: Metadata = None,
        principal: str = "",
    ) -> ListR:
        """One page of the servers' resources, resource templates or prompts (``kind``), and what
        each server offers; a ``per_user`` server's as it lists them to ``principal``, when given.
        Raises NotFoundError (unknown server), InvalidArgumentError (a stale or damaged cursor:
        list again from the start), FailedPreconditionError (the principal has no token of their
        own for a ``per_user`` server: :func:`~toolscout.client.errors.authorization_required`)."""
        request = mcp_pool_pb2.ListFeaturesRequest(
            kind=wire.feature_kind_pb(kind),
            servers=list(servers),
            cursor=cursor,
            page_size=page_size,
            principal=principal,
        )
        return cast(ListR, self._call("ListFeatures", request, deadline, metadata, wire.feature_list))

    def watch_features(
        self, known_version: str = "", *, deadline: float | None = None, metadata: Metadata = None
    ) -> FeatureSnapshotsR:
        """Every resource, template and prompt now, then again on every change."""
        request = mcp_pool_pb2.WatchFeaturesRequest(known_version=known_version)
        return cast(
            FeatureSnapshotsR,
            self._stream("WatchFeatures", request, deadline, metadata, wire.feature_snapshot),
        )

    def read_resource(
        self, request: t.ResourceReadRequest, *, deadline: float | None = None, metadata: Metadata = None
    ) -> ReplyR:
        """``resources/read`` on the server that lists (or whose template matches) the URI.

        Raises:
            NotFoundError: no server lists or matches it. UnavailableError: not sent.
            OutcomeUnknownError, DeadlineExceededError, FailedPreconditionError (per_user, no token).
        """
        message = wire.resource_read_request_pb(request)
        return cast(ReplyR, self._call("ReadResource", message, deadline, metadata, wire.feature_reply))

    def get_prompt(
        self, request: t.PromptRequest, *, deadline: float | None = None, metadata: Metadata = None
    ) -> ReplyR:
        """``prompts/get`` by the prompt's served name; errors as :meth:`read_resource`."""
        message = wire.prompt_request_pb(request)
        return cast(ReplyR, self._call("GetPrompt", message, deadline, metadata, wire.feature_reply))

    def complete(
        self, request: t.CompletionRequest, *, deadline: float | None = None, metadata: Metadata = None
    ) -> ReplyR:
        """``completion/complete`` for a prompt's or template's argument; errors as :meth:`read_resource`."""
        message = wire.completion_request_pb(request)
        return cast(ReplyR, self._call("Complete", message, deadline, metadata, wire.feature_reply))

    def set_logging_level(
        self,
        level: str,
        servers: Sequence[str] = (),
        *,
        deadline: float | None = None,
        metadata: Metadata = None,
    ) -> LevelR:
        """``logging/setLevel`` on every server offering logging (of ``servers``); the servers
        that accepted it. Raises InvalidArgumentError (not an MCP level)."""
        request = mcp_pool_pb2.SetLoggingLevelRequest(level=level, servers=list(servers))
        return cast(LevelR, self._call("SetLoggingLevel", request, deadline, metadata, _accepted))

    def watch_resource(
        self, uri: str, *, principal: str = "", deadline: float | None = None, metadata: Metadata = None
    ) -> UpdatesR:
        """Subscribes to a resource while iterating: ``(uri, True)`` once subscribed, then
        ``(updated uri, False)`` per update. Raises FailedPreconditionError (no subscriptions)."""
        request = mcp_pool_pb2.WatchResourceRequest(uri=uri, principal=principal)
        return cast(UpdatesR, self._stream("WatchResource", request, deadline, metadata, _resource_update))


class DiscoveryCalls(_Rpcs, Generic[PlanR, SearchR, ManifestR]):
    """Plans, searches and manifests of a discovery client."""

    def plan(
        self, request: t.PlanRequest, *, deadline: float | None = None, metadata: Metadata = None
    ) -> PlanR:
        """``PlanTools`` for ``request`` (see :meth:`plan_tools`)."""
        return cast(
            PlanR, self._call("PlanTools", wire.plan_request_pb(request), deadline, metadata, wire.tool_plan)
        )

    def search(
        self, request: t.SearchRequest, *, deadline: float | None = None, metadata: Metadata = None
    ) -> SearchR:
        """``SearchTools`` for ``request`` (see :meth:`search_tools`)."""
        message = wire.search_request_pb(request)
        return cast(SearchR, self._call("SearchTools", message, deadline, metadata, wire.search_result))

    def get_manifest(
        self,
        toolset: t.ToolsetLike = "",
        *,
        provider: str = "",
        deadline: float | None = None,
        metadata: Metadata = None,
        **deprecated: Unpack[t.DeprecatedToolset],
    ) -> ManifestR:
        """The manifest of deferred tools for ``toolset``. Raises NotFoundError (unknown toolset)."""
        request = wire.manifest_request_pb(toolset_ref(toolset, deprecated, stacklevel=3), provider)
        return cast(ManifestR, self._call("GetManifest", request, deadline, metadata, wire.manifest))

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


def _model_list(resp: orchestrator_pb2.ListModelsResponse) -> tuple[t.ModelInfo, ...]:
    return tuple(wire.model_info(m) for m in resp.models)


def _toolset_list(resp: orchestrator_pb2.ListToolsetsResponse) -> tuple[t.ToolsetInfo, ...]:
    return tuple(wire.toolset_info(x) for x in resp.toolsets)


class OrchestratorCalls(_Rpcs, Generic[ChatR, EventsR, ModelsR, ToolsetsR]):
    """Chats, models and toolsets of an orchestrator client."""

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
        request = wire.chat_request(messages, model, fields)
        return cast(ChatR, self._call("Chat", request, deadline, metadata, wire.chat_result))

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
        request = wire.chat_request(messages, model, fields)
        return cast(EventsR, self._stream("StreamChat", request, deadline, metadata, wire.chat_event))

    def list_models(self, *, deadline: float | None = None, metadata: Metadata = None) -> ModelsR:
        request = orchestrator_pb2.ListModelsRequest()
        return cast(ModelsR, self._call("ListModels", request, deadline, metadata, _model_list))

    def list_toolsets(self, *, deadline: float | None = None, metadata: Metadata = None) -> ToolsetsR:
        request = orchestrator_pb2.ListToolsetsRequest()
        return cast(ToolsetsR, self._call("ListToolsets", request, deadline, metadata, _toolset_list))
