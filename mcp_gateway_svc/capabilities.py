"""The capabilities one gateway endpoint advertises, and the methods they allow.

An endpoint (``/mcp``, ``/mcp/<toolset>``) advertises what the servers of its toolset offer (a
per-toolset view of the pool's feature catalog, :meth:`ServedFeatures.offered
<mcp_gateway_svc.server_features.ServedFeatures.offered>`): ``prompts``, ``completions`` and
``logging`` when one of them offers it, ``resources`` when one offers resources or the gateway
serves resources of its own there (the manifest on meta and progressive endpoints, tool results
kept behind a handle where results are shaped for the host), ``resources.subscribe`` when one of
them offers subscriptions. The same view answers ``initialize`` (2025-11-25) and
``server/discover`` (2026-07-28), and gates the requests: a method of a capability the endpoint
does not advertise answers -32601 (Method not found), as the specification says.

One SDK ``Server`` serves every endpoint of a mode, and the SDK builds capabilities without the
request (``Server.get_capabilities`` has no context): the gateway's middleware puts the
endpoint's :class:`EndpointFeatures` in a context variable for the request it handles
(:func:`serving`), which the server's ``get_capabilities`` reads (:func:`trimmed`).

The view is taken when it is asked for: a session opened after a server joined or left sees the
new set. MCP has no notice of changed capabilities, so an open session is not told; its requests
are checked against the current view (a server's features stay in the catalog through restarts
and blips, until ``pool.unavailable_grace`` drops them).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from toolscout.client import types as t

__all__ = [
    "ADVERTISING_METHODS",
    "GATED_METHODS",
    "Capability",
    "EndpointFeatures",
    "require",
    "serving",
    "trimmed",
]


class Capability(enum.StrEnum):
    """A capability beside tools that an endpoint advertises or not (the value: its field of
    ``ServerCapabilities``; ``subscribe`` is a flag of ``resources``)."""

    RESOURCES = "resources"
    SUBSCRIBE = "subscribe"
    PROMPTS = "prompts"
    COMPLETIONS = "completions"
    LOGGING = "logging"

    @property
    def described(self) -> str:
        """How a refusal names it."""
        return "resource subscriptions" if self is Capability.SUBSCRIBE else self.value


# The requests whose answer names the capabilities.
ADVERTISING_METHODS = frozenset({"initialize", "server/discover"})
# Each request of a capability beside tools -> what the endpoint must advertise for it.
GATED_METHODS: dict[str, Capability] = {
    "resources/list": Capability.RESOURCES,
    "resources/read": Capability.RESOURCES,
    "resources/templates/list": Capability.RESOURCES,
    "resources/subscribe": Capability.SUBSCRIBE,
    "resources/unsubscribe": Capability.SUBSCRIBE,
    "prompts/list": Capability.PROMPTS,
    "prompts/get": Capability.PROMPTS,
    "completion/complete": Capability.COMPLETIONS,
    "logging/setLevel": Capability.LOGGING,
}
# The capabilities that are a field of ServerCapabilities of their own, dropped when not advertised.
_OWN_FIELDS = (Capability.PROMPTS, Capability.COMPLETIONS, Capability.LOGGING)


@dataclass(frozen=True, slots=True)
class EndpointFeatures:
    """What one endpoint serves besides tools: what its toolset's servers offer (``offered``),
    and whether the gateway serves resources of its own there (``own_resources``)."""

    offered: t.ServerOffers
    own_resources: bool

    def advertises(self, capability: Capability) -> bool:
        """Whether the endpoint advertises ``capability``."""
        offered = self.offered
        return {
            Capability.RESOURCES: offered.resources or self.own_resources,
            Capability.SUBSCRIBE: offered.subscribe,
            Capability.PROMPTS: offered.prompts,
            Capability.COMPLETIONS: offered.completions,
            Capability.LOGGING: offered.logging,
        }[capability]


_SERVING: ContextVar[EndpointFeatures | None] = ContextVar(
    "toolscout_gateway_endpoint_features", default=None
)


@contextlib.contextmanager
def serving(features: EndpointFeatures) -> Iterator[None]:
    """Within: the request being handled is one of an endpoint serving ``features``."""
    token = _SERVING.set(features)
    try:
        yield
    finally:
        _SERVING.reset(token)


def trimmed(caps: types.ServerCapabilities, fallback: EndpointFeatures) -> types.ServerCapabilities:
    """The SDK's capabilities (derived from the handlers) as the endpoint being served advertises
    them (``fallback`` outside a request of an endpoint)."""
    served = _SERVING.get() or fallback
    update: dict[str, Any] = {}
    for capability in _OWN_FIELDS:
        if not served.advertises(capability):
            update[capability.value] = None
    if caps.resources is not None:
        update["resources"] = (
            caps.resources.model_copy(update={"subscribe": served.advertises(Capability.SUBSCRIBE)})
            if served.advertises(Capability.RESOURCES)
            else None
        )
    return caps.model_copy(update=update)


def require(method: str, features: EndpointFeatures) -> None:
    """Raises MCPError (METHOD_NOT_FOUND) when ``method`` needs a capability the endpoint does not
    advertise; anything else passes."""
    capability = GATED_METHODS.get(method)
    if capability is not None and not features.advertises(capability):
        raise MCPError(
            types.METHOD_NOT_FOUND,
            f"Method not found: no MCP server behind this endpoint offers {capability.described}",
        )
