"""``toolscout.gateway``: the MCP front door, its modes, tokens and OAuth resource server."""

from __future__ import annotations

import fnmatch
import re
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator
from toolscout.client.types import GatewayMode

from toolscout_kit.config._base import ServiceSettings, Strict, check_result_budget

__all__ = [
    "DEFAULT_MODES_BY_CLIENT",
    "GatewayMode",
    "GatewayOAuthSettings",
    "GatewaySettings",
    "IntrospectionAuth",
]


# The mode each host gets unless ``gateway.modes_by_client`` says otherwise (clientInfo.name glob
# patterns; the evidence per host is in the README's "Which mode for which host"). Hosts that
# defer and search MCP tools themselves get every tool (the search-ready list); hosts that never
# refresh their tool list on list_changed, or open a session per call, get the stable meta surface.
DEFAULT_MODES_BY_CLIENT: dict[str, GatewayMode] = {
    "claude-code": GatewayMode.ALL,
    "codex*": GatewayMode.META,
    "*langchain*": GatewayMode.META,
    "cursor*": GatewayMode.META,
}
# Origins a browser may call the gateway from by default (DNS-rebinding protection): the local host.
_LOCAL_ORIGINS = ("http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*")


class IntrospectionAuth(StrEnum):
    """How the gateway authenticates to the introspection endpoint (RFC 7662 section 2.1), named
    as RFC 8414's ``token_endpoint_auth_methods_supported`` names them."""

    # HTTP Basic with the client id and secret (RFC 6749 section 2.3.1; every provider takes it).
    CLIENT_SECRET_BASIC = "client_secret_basic"  # noqa: S105 - a method name
    # The client id and secret as form fields of the request body.
    CLIENT_SECRET_POST = "client_secret_post"  # noqa: S105 - a method name
    # The client id alone: a public client, for providers that let one introspect.
    NONE = "none"


class GatewayOAuthSettings(Strict):
    """The gateway as an OAuth 2.1 resource server (``toolscout.gateway.oauth``), besides tokens.

    A bearer token that is not one of ``tokens`` must be a JWT from ``issuer`` (its signature
    checked against the issuer's JWKS; or, with ``introspection_endpoint``, any token the issuer's
    introspection endpoint says is active, RFC 7662), for the gateway (``aud``: ``audience`` or the endpoint's
    URL under it), not expired, with every scope of ``required_scopes``. Its ``sub`` is the
    principal; the values of its ``claim`` (a string or a list: groups, roles) pick toolsets through
    ``toolsets``, and every valid token gets ``default_toolsets``.
    """

    issuer: str = Field(pattern=r"^https?://")
    # The gateway's public URL (scheme://host[:port]); an endpoint's resource is this + its path.
    audience: str = Field(pattern=r"^https?://[^/]+/?$")
    required_scopes: list[str] = Field(default_factory=list)
    claim: str = Field(default="groups", min_length=1)
    # A value of the claim → the toolsets it opens ("*": all, /mcp included).
    toolsets: dict[str, list[str]] = Field(default_factory=dict)
    default_toolsets: list[str] = Field(default_factory=lambda: ["*"])
    # Seconds the issuer's keys are kept; an unknown key id fetches them again (key rotation).
    jwks_cache_seconds: float = Field(default=300.0, gt=0)
    # Seconds of clock difference tolerated on exp / nbf / iat.
    leeway: float = Field(default=30.0, ge=0)
    # RFC 7662 introspection instead of JWT checks (opaque tokens): the identity provider's
    # endpoint, and the gateway's client there (its secret in the named variable, never here),
    # authenticating as ``introspection_auth`` says (``none``: a public client, no secret).
    introspection_endpoint: str | None = Field(default=None, pattern=r"^https?://")
    introspection_client_id: str | None = Field(default=None, min_length=1)
    introspection_client_secret_env: str | None = Field(default=None, min_length=1)
    introspection_auth: IntrospectionAuth = IntrospectionAuth.CLIENT_SECRET_BASIC
    # Most seconds an introspection answer is kept (never past the token's expiry).
    introspection_cache_seconds: float = Field(default=300.0, ge=0)

    @model_validator(mode="after")
    def _introspection_client(self) -> GatewayOAuthSettings:
        client = (self.introspection_client_id, self.introspection_client_secret_env)
        if self.introspection_endpoint is None:
            if client != (None, None) or "introspection_auth" in self.model_fields_set:
                raise ValueError(
                    "introspection_client_id / _secret_env / _auth without introspection_endpoint"
                )
            return self
        public = self.introspection_auth is IntrospectionAuth.NONE
        if self.introspection_client_id is None:
            raise ValueError("introspection_endpoint needs introspection_client_id")
        if public and self.introspection_client_secret_env is not None:
            raise ValueError("introspection_auth none sends no secret: drop introspection_client_secret_env")
        if not public and self.introspection_client_secret_env is None:
            raise ValueError(
                f"introspection_auth {self.introspection_auth} needs introspection_client_secret_env"
            )
        return self


class GatewaySettings(ServiceSettings):
    """The MCP front door (``toolscout.gateway``): MCP over streamable HTTP at ``/mcp`` and
    ``/mcp/<toolset>``.

    ``mode`` is what ``tools/list`` offers: ``meta`` (eager tools + search_tools + call_tool, the
    same bytes for a catalog version), ``progressive`` (eager tools + search_tools + what the
    session's searches loaded) or ``all`` (every tool of the toolset). ``modes`` sets it per
    toolset endpoint. ``tokens`` maps the name of an environment variable holding a bearer token to
    the toolsets that token may use (``"*"``: all, ``/mcp`` included); with none, no token is asked.
    """

    listen: str = "127.0.0.1:50054"
    metrics_port: int = Field(default=9104, ge=-1, le=65535)
    pool_target: str = "127.0.0.1:50051"
    discovery_target: str = "127.0.0.1:50052"
    mode: GatewayMode = GatewayMode.META
    modes: dict[str, GatewayMode] = Field(default_factory=dict)
    # The toolset /mcp serves ("" = every tool).
    default_toolset: str = ""
    # Request bodies over this many bytes are refused with 413 before they are parsed.
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    # Seconds a client has to send a request's headers, and then its body, before it is dropped
    # (408 for a body); a slow or stalled client cannot hold a connection longer.
    request_read_timeout: float = Field(default=10.0, gt=0, le=300)
    # Most tokens of one tool result sent to an MCP host (0: no shaping): past it a preview, a
    # resource_link to the whole and read_result. 20000 stays under Claude Code's 25,000-token cap
    # with room for its tokenizer counting more than o200k_base does.
    result_budget: int = Field(default=20_000, ge=0)
    # Per host, by the glob of its clientInfo.name ("claude-code", "cursor*"): the first match wins.
    result_budgets: dict[str, int] = Field(default_factory=dict)
    # Origin header values allowed (``scheme://host:port``, ``:*`` = any port); a request from any
    # other origin gets 403. Requests without an Origin (non-browser clients) are allowed.
    allowed_origins: list[str] = Field(default_factory=lambda: list(_LOCAL_ORIGINS))
    # Host header values allowed; unset: the local names when listening on a loopback address,
    # any host otherwise (behind a Kubernetes Service the Host is the Service's name).
    allowed_hosts: list[str] | None = None
    tokens: dict[str, list[str]] = Field(default_factory=dict)
    # Without ``tokens`` the gateway asks for the services' own token (``security.auth_token_env``)
    # when that is set. With neither it answers anyone who reaches it: it then starts only on a
    # loopback address (with a warning) unless this is true.
    allow_anonymous: bool = False
    # Progressive sessions across replicas: every replica's address (host:port), or one DNS name
    # resolving to all of them (a headless Service). A request for a session another replica holds
    # is forwarded there. Empty: one replica.
    peers: list[str] = Field(default_factory=list)
    # Seconds a session without requests stays open (progressive and all modes).
    session_idle_timeout: float = Field(default=1800.0, gt=0)
    max_sessions: int = Field(default=10_000, ge=1)
    # OAuth 2.1 resource server: JWTs of an identity provider (besides ``tokens``); unset: off.
    oauth: GatewayOAuthSettings | None = None
    # The web console at /console (mcp_gateway_svc.console): "auto" serves it when the gateway
    # listens on a loopback address only; "on" also elsewhere (behind tokens, see README).
    console: Literal["on", "off", "auto"] = "auto"
    # Who may chat from the console (it spends the provider's tokens): names of token variables
    # (``tokens``), "*" for everyone who may open the console; empty: nobody.
    console_chat: list[str] = Field(default_factory=lambda: ["*"])
    # The orchestrator the console's chat page calls (``toolscout up`` passes its own).
    orchestrator_target: str = "127.0.0.1:50053"
    # A link to a chat's trace in a trace viewer, "{trace_id}" replaced (only when tracing is on),
    # e.g. "http://localhost:16686/trace/{trace_id}" (Jaeger). Empty: the trace id is shown alone.
    console_trace_url: str = ""
    # Sessions one tenant (one token) may hold on a replica; without tokens max_sessions alone
    # holds. At either limit, opening one more ends the least recently used idle session.
    max_sessions_per_tenant: int = Field(default=1000, ge=1)
    # The mode a session gets by the name its client announces (``clientInfo.name``, glob patterns
    # matched case-insensitively, first match wins); a client matching none gets its endpoint's
    # mode. Unset: DEFAULT_MODES_BY_CLIENT (README: "Which mode for which host"); {} turns it off.
    modes_by_client: dict[str, GatewayMode] | None = None
    # A client whose name picks ``all`` gets its endpoint's mode instead when the toolset has more
    # tools than this: past it, hosts' own search over the list finds less than search_tools
    # (bench/host_search.py) and the list costs the host more than it saves.
    client_all_max_tools: int = Field(default=1000, ge=0)

    @field_validator("tokens")
    @classmethod
    def _tokens_name_variables(cls, tokens: dict[str, list[str]]) -> dict[str, list[str]]:
        for name, toolsets in tokens.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r}: the name of an environment variable holding the token")
            if not toolsets:
                raise ValueError(f"{name}: list the toolsets the token may use ('*' for all)")
        return tokens

    def console_enabled(self, listen: str | None = None) -> bool:
        """Whether /console is served when the gateway listens on ``listen`` (default: its own)."""
        if self.console != "auto":
            return self.console == "on"
        host = (listen or self.listen).rsplit(":", 1)[0].strip("[]")
        return host in ("localhost", "::1") or host.startswith("127.")

    def mode_for(self, toolset: str) -> GatewayMode:
        """The mode of the endpoint serving ``toolset`` ("" = /mcp without a default toolset)."""
        return self.modes.get(toolset, self.mode)

    @field_validator("result_budget")
    @classmethod
    def _budget_is_budget(cls, tokens: int) -> int:
        return check_result_budget(tokens)

    @field_validator("result_budgets")
    @classmethod
    def _budgets_are_budgets(cls, budgets: dict[str, int]) -> dict[str, int]:
        for glob, tokens in budgets.items():
            try:
                check_result_budget(tokens)
            except ValueError as err:
                raise ValueError(f"{glob}: {err}") from None
        return budgets

    def result_budget_for(self, client_name: str) -> int:
        """The result budget of a host by its clientInfo.name (``result_budgets``, else
        ``result_budget``)."""
        for glob, tokens in self.result_budgets.items():
            if fnmatch.fnmatchcase(client_name, glob):
                return tokens
        return self.result_budget

    @property
    def client_modes(self) -> dict[str, GatewayMode]:
        """``modes_by_client``, or the documented defaults when it is not set."""
        return dict(DEFAULT_MODES_BY_CLIENT if self.modes_by_client is None else self.modes_by_client)
