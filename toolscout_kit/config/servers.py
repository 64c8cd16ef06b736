"""casual-mcp's ``servers``: MCP servers started as subprocesses or reached over HTTP, with
toolscout's per-server keys (timeouts, placement, OAuth)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, field_validator, model_validator

from toolscout_kit.config._base import Flag, Strict

__all__ = ["OAuthConfig", "RemoteServerConfig", "ServerConfig", "StdioServerConfig", "TaggedServerConfig"]


class _ServerCommon(Strict):
    defer_loading: Flag = False
    # toolscout: this server's tools are named ``<server>__<tool>`` (true) or by their own names
    # (false); unset: the top-level ``namespace_tools``.
    namespace_tools: Flag | None = None
    # toolscout additions (seconds).
    connect_timeout: float = Field(default=30.0, gt=0)
    call_timeout: float = Field(default=60.0, gt=0)
    # Concurrent calls allowed on this server's session.
    max_concurrency: int = Field(default=16, ge=1, le=1024)
    # Calls to tools not annotated readOnlyHint run one at a time on this server (reads stay
    # concurrent): many servers are not safe for concurrent writes. False lets writes overlap.
    serialize_writes: Flag = True
    # Tools of this (deferred) server that are always loaded (their MCP names).
    always_load: list[str] = Field(default_factory=list)
    # Which pool shards run this server: "owner" = exactly one (the rendezvous-hash owner of the
    # name, or ``shard`` when set); "all" = every shard (stateless servers, for throughput).
    placement: Literal["owner", "all"] = "owner"
    # Pin the server to this shard (0-based, below toolscout.pool.shards.count), e.g. so a stateful
    # server never moves when the shard count changes.
    shard: int | None = Field(default=None, ge=0)
    # Most tokens one result of this server may cost the model once shaped (a preview and a handle
    # past it); bounds a caller's budget (toolscout.results.budget_tokens) when smaller.
    result_budget: int | None = Field(default=None, ge=100)
    # The gateway advertises this in each of the server's tools' _meta as
    # "anthropic/maxResultSizeChars": Claude Code keeps results up to this size in the conversation
    # instead of spilling those over 50,000 characters to a file with a 2 KB preview. 500,000 is
    # Claude Code's own maximum; 0 advertises nothing.
    max_result_size_chars: int = Field(default=500_000, ge=0)


class StdioServerConfig(_ServerCommon):
    """An MCP server started as a subprocess speaking MCP over stdio."""

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # Relative paths resolve against the config file's folder; unset = that folder.
    cwd: str | None = None
    transport: Literal["stdio"] = "stdio"
    # toolscout: stop the process after this many idle seconds; restart on the next call.
    idle_timeout: float | None = Field(default=None, gt=0)

    @field_validator("env", mode="before")
    @classmethod
    def _env_values_as_strings(cls, value: Any) -> Any:
        # casual-mcp accepts any JSON value; a process environment only holds strings.
        if isinstance(value, Mapping):
            return {k: v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
        return value


class OAuthConfig(Strict):
    """How the pool authorizes itself to a remote server with OAuth 2.1 (``servers.<name>.auth``).

    ``auth: oauth`` alone: discovery from the server's 401 (RFC 9728, RFC 8414), dynamic client
    registration (or a Client ID Metadata Document with ``client_metadata_url``), and tokens from
    ``toolscout auth login NAME`` (the authorization code flow with PKCE). ``client_id`` (with
    ``client_secret_env``, the variable holding its secret) is a client registered beforehand;
    ``grant: client_credentials`` is a machine identity that needs no person at all.
    """

    type: Literal["oauth"] = "oauth"
    client_id: str | None = Field(default=None, min_length=1)
    # The environment variable with the pre-registered client's secret (never the secret itself).
    client_secret_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # Scopes to ask for; unset: the server's challenge or metadata decides (the MCP spec's order).
    scopes: list[str] | None = None
    # Each caller's own authorization for calls instead of the stack's (the stack's still lists).
    per_user: Flag = False
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    # The authorization server that issued client_id (client_credentials: tokens are only
    # requested from it, whatever the MCP server points at).
    issuer: str | None = Field(default=None, pattern=r"^https?://")
    # An https URL of this client's metadata document (CIMD), used where the server supports it.
    client_metadata_url: str | None = Field(default=None, pattern=r"^https://[^/]+/.+")
    # The pool fetches the authorization URL itself when it has no token (only for authorization
    # servers that approve without a person, as test servers do); otherwise run `toolscout auth login`.
    headless: Flag = False
    # Where the browser's redirect comes back to `toolscout auth login` (a loopback http URL with
    # its port); unset: http://127.0.0.1:33418/callback.
    redirect_uri: str | None = Field(
        default=None, pattern=r"^http://(127\.0\.0\.1|localhost|\[::1\]):[0-9]{1,5}/[^?#\s]*$"
    )

    @model_validator(mode="after")
    def _consistent(self) -> OAuthConfig:
        if self.grant == "client_credentials" and (
            self.client_id is None or self.client_secret_env is None or self.issuer is None
        ):
            raise ValueError("grant client_credentials needs client_id, client_secret_env and issuer")
        if self.client_secret_env is not None and self.client_id is None:
            raise ValueError("client_secret_env without client_id: set the pre-registered client's id")
        if self.per_user and self.grant == "client_credentials":
            raise ValueError("per_user needs grant authorization_code (each user authorizes for themself)")
        return self


def _auth_shorthand(value: Any) -> Any:
    # `auth: oauth` is `auth: {type: oauth}`.
    return {"type": value} if isinstance(value, str) else value


class RemoteServerConfig(_ServerCommon):
    """An MCP server reached over SSE or streamable HTTP (casual-mcp's ``http``)."""

    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    transport: Literal["streamable-http", "sse", "http"] | None = None
    # toolscout: OAuth 2.1 authorization of the pool to this server (``oauth`` or an object).
    auth: Annotated[OAuthConfig, BeforeValidator(_auth_shorthand)] | None = None

    @property
    def resolved_transport(self) -> Literal["streamable-http", "sse"]:
        """``sse`` when configured or when the URL ends in ``/sse``; otherwise streamable HTTP."""
        if self.transport == "sse" or (self.transport is None and self.url.rstrip("/").endswith("/sse")):
            return "sse"
        return "streamable-http"


ServerConfig = StdioServerConfig | RemoteServerConfig


def _server_kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "remote" if "url" in value else "stdio"
    return "stdio" if getattr(value, "command", None) else "remote"


# A ``servers`` entry: stdio when it has a ``command``, remote when it has a ``url``.
TaggedServerConfig = Annotated[
    Annotated[StdioServerConfig, Tag("stdio")] | Annotated[RemoteServerConfig, Tag("remote")],
    Discriminator(_server_kind),
]
