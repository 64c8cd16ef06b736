"""``toolscout.pool``: the MCP pool service, and how it is split into shards."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolscout_kit.config._base import AtLeastOne, Seconds, ServiceSettings, Strict

__all__ = ["DEFAULT_TOOL_CACHE_TTL", "PoolSettings", "ShardSettings"]

# Seconds between tool re-listings when neither the file nor MCP_TOOL_CACHE_TTL says.
DEFAULT_TOOL_CACHE_TTL = 30.0


class ShardSettings(Strict):
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


class PoolSettings(ServiceSettings):
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
    tool_cache_ttl_cap: Seconds = 3600.0
    # A server back within this many seconds leaves the catalog untouched (no churn on a blip);
    # after it, the server's tools stay listed but marked unavailable.
    blip_grace: float = Field(default=2.0, ge=0)
    # Tools of a server down this long are dropped from the catalog. Unset (the default): never,
    # while the server is configured; calls then get UNAVAILABLE naming the server and its state.
    unavailable_grace: float | None = Field(default=None, ge=0)
    # Health pings: a server that does not answer one within ping_timeout is restarted, so a hung
    # server is found within 1.2 x ping_interval + ping_timeout seconds (10 by default; the
    # interval stretches past health_checks_per_second x ping_interval servers).
    ping_interval: Seconds = 5.0
    ping_timeout: Seconds = 4.0
    # The pool-wide probe budget (mcp_pool_svc/probes.py): past health_checks_per_second x
    # ping_interval servers, each server's interval stretches so the pool sends at most this many
    # probes a second; at most health_check_concurrency probes and connect_concurrency connection
    # attempts run at once.
    health_checks_per_second: float = Field(default=20.0, gt=0)
    health_check_concurrency: AtLeastOne = 16
    connect_concurrency: AtLeastOne = 32
    # Reconnect backoff (exponential, with jitter) from initial_backoff up to max_backoff.
    initial_backoff: Seconds = 0.5
    max_backoff: Seconds = 5.0
    # More than crash_loop_restarts failed starts of a stdio server within crash_loop_window
    # seconds → FAILED. A server that was READY in between starts counting again; remote servers
    # that cannot be reached are RECONNECTING, never FAILED.
    crash_loop_restarts: AtLeastOne = 5
    crash_loop_window: Seconds = 60.0
    # A FAILED server is probed again with the backoff growing up to this many seconds.
    failed_retry_interval: Seconds = 60.0
    # Servers with auth.per_user: at most this many (server, principal) sessions stay open (the
    # least recently used is closed first), and one unused for per_user_idle seconds is closed.
    per_user_sessions: AtLeastOne = 256
    per_user_idle: Seconds = 300.0
    shards: ShardSettings = Field(default_factory=ShardSettings)

    @property
    def effective_tool_cache_ttl(self) -> float:
        """The TTL in seconds (``MCP_TOOL_CACHE_TTL`` was applied when the config loaded)."""
        return self.tool_cache_ttl if self.tool_cache_ttl is not None else DEFAULT_TOOL_CACHE_TTL
