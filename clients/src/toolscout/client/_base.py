"""What the async and sync clients share: default deadlines, the channel arguments, the base class."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, Self, TypeVar, Unpack, cast

from toolscout.client.channel import ChannelFields, create_channel

__all__ = ["DEFAULT_DEADLINES", "ClientBase", "ConnectFields", "Deadlines"]

# Seconds per method. Every call has a deadline (a hung server must not hang its callers); chat
# runs a whole LLM tool loop, so it gets minutes. WatchCatalog and WatchPlan are long-lived streams: no default.
DEFAULT_DEADLINES: Mapping[str, float | None] = {
    "ListServers": 10.0,
    # A grep or projection of a kept result of tens of MB takes a few seconds.
    "ReadResult": 30.0,
    "ListTools": 30.0,
    "CallTool": 120.0,
    "WatchCatalog": None,
    "ListFeatures": 30.0,
    "WatchFeatures": None,
    "ReadResource": 120.0,
    "GetPrompt": 120.0,
    "Complete": 30.0,
    "SetLoggingLevel": 30.0,
    "WatchResource": None,
    "PlanTools": 30.0,
    "SearchTools": 30.0,
    "GetManifest": 30.0,
    "WatchPlan": None,
    "Chat": 600.0,
    "StreamChat": 600.0,
    "ListModels": 10.0,
    "ListToolsets": 10.0,
}
# A CallTool deadline leaves the pool this long after the tool's own timeout to answer.
CALL_TOOL_MARGIN = 5.0
# A CallTool on a channel that was connected before and is not now (the pool restarted, a shard
# came back) waits this long, within its deadline, for the channel to reconnect before the pool
# is reported unreachable (not sent): it is called once the channel's reconnect backoff lets it
# through, instead of failing meanwhile. A channel that never connected gets one attempt (at
# most FIRST_CONNECT_WAIT seconds in the blocking client, which cannot see it fail).
CONNECT_WAIT = 5.0
FIRST_CONNECT_WAIT = 1.0
NOT_REACHABLE_MESSAGE = "the pool is not reachable ({why}); the call was not sent"


def no_connection(wait: float) -> str:
    return f"no connection within {wait:g}s"


def connect_wait(deadline: float | None, limit: float = CONNECT_WAIT) -> float:
    """Seconds a CallTool with ``deadline`` may wait for its channel to connect (at most ``limit``)."""
    return limit if deadline is None else max(min(limit, deadline), 0.0)


class Deadlines:
    """Default deadline per method name, with per-client overrides."""

    def __init__(self, overrides: Mapping[str, float | None] | None = None) -> None:
        unknown = set(overrides or {}) - set(DEFAULT_DEADLINES)
        if unknown:
            raise ValueError(f"unknown methods in deadlines: {', '.join(sorted(unknown))}")
        self._values = {**DEFAULT_DEADLINES, **(overrides or {})}

    def resolve(self, method: str, explicit: float | None) -> float | None:
        """``explicit`` when given, else the default for ``method``."""
        return explicit if explicit is not None else self._values[method]

    def call_tool(self, explicit: float | None, tool_timeout: float) -> float | None:
        if explicit is not None:
            return explicit
        default = self._values["CallTool"]
        if tool_timeout > 0 and default is not None:
            return max(default, tool_timeout + CALL_TOOL_MARGIN)
        return default


class ConnectFields(ChannelFields, total=False):
    """The keyword arguments of every ``connect``: the channel's (see :func:`create_channel`) and
    the clients' ``deadlines`` (seconds per method, overriding ``DEFAULT_DEADLINES``)."""

    deadlines: Mapping[str, float | None] | None


def channel_fields(fields: ConnectFields) -> ChannelFields:
    """The channel's arguments among a ``connect``'s (all but ``deadlines``)."""
    return cast(ChannelFields, {k: v for k, v in fields.items() if k != "deadlines"})


ChannelT = TypeVar("ChannelT")


class ClientBase(Generic[ChannelT]):
    """One service's client over a channel: the async clients (``grpc.aio``) and the blocking ones."""

    _service = ""
    # Whether the client's channels are grpc.aio ones.
    _aio: ClassVar[bool]
    # The generated stub class of the service; each client names its own.
    _stub_type: Callable[[Any], Any]
    _stub: Any

    def __init__(
        self,
        channel: ChannelT,
        *,
        deadlines: Mapping[str, float | None] | None = None,
        owns_channel: bool = False,
    ) -> None:
        """Wrap an open channel (not closed by ``close()`` unless ``owns_channel``)."""
        self._channel = channel
        self._deadlines = Deadlines(deadlines)
        self._owns_channel = owns_channel
        self._stub = self._stub_type(channel)

    @classmethod
    def connect(cls, target: str, **fields: Unpack[ConnectFields]) -> Self:
        """A client on a new channel to ``target`` (see :func:`create_channel` for the arguments)."""
        channel = create_channel(target, aio=cls._aio, **channel_fields(fields))  # type: ignore[call-overload]
        return cls(cast(ChannelT, channel), deadlines=fields.get("deadlines"), owns_channel=True)

    @property
    def channel(self) -> ChannelT:
        return self._channel
