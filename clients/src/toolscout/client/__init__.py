"""Typed async and sync clients for toolscout's McpPool, Discovery and Orchestrator services.

    from toolscout.client import AsyncToolscoutClient

    async with AsyncToolscoutClient.connect(
        pool="localhost:50051", discovery="localhost:50052", orchestrator="localhost:50053"
    ) as ts:
        hits = await ts.discovery.search_tools("current time in a timezone")
        result = await ts.pool.call_tool(hits.matches[0].tool.llm_name, {"timezone": "UTC"})

The values they take and return (:mod:`toolscout.client.types`) are the one vocabulary every
toolscout service uses too; :mod:`toolscout.client.wire` converts them to and from protobuf.
Depends only on grpcio and protobuf. See clients/README.md.
"""

from toolscout.client import types
from toolscout.client._base import DEFAULT_DEADLINES
from toolscout.client._version import __version__
from toolscout.client.aio import (
    AsyncDiscoveryClient,
    AsyncOrchestratorClient,
    AsyncPoolClient,
    AsyncToolscoutClient,
)
from toolscout.client.channel import (
    DEFAULT_MAX_ATTEMPTS,
    RETRIED_METHODS,
    create_channel,
    default_channel_options,
    service_config,
)
from toolscout.client.errors import (
    AUTHORIZATION_REQUIRED_KEY,
    NOT_SENT_KEY,
    NOT_SENT_METADATA,
    SERVICE_STATUS_KEY,
    SERVICE_STATUS_METADATA,
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    ToolscoutClientError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    authorization_required,
    call_outcome_error,
    error_for_code,
    not_sent_error,
    translate_rpc_error,
)
from toolscout.client.principal import PRINCIPAL_KEY, check_principal, principal_metadata
from toolscout.client.relay import CallRelay, SyncCallRelay
from toolscout.client.sharded import (
    SHARD_COUNT_KEY,
    SHARD_OWNERS_KEY,
    AsyncShardedPoolClient,
    ShardedPoolClient,
    ShardRouter,
    parse_owners,
)
from toolscout.client.sharding import (
    CatalogMerger,
    Placement,
    ServerPlacement,
    catalog_version,
    moved_servers,
    owners_of,
    rendezvous_owner,
    rendezvous_weight,
    row_of,
    server_digest,
    tool_row,
)
from toolscout.client.sync import DiscoveryClient, OrchestratorClient, PoolClient, ToolscoutClient

# The value types are the package's vocabulary; types.__all__ lists them once.
from toolscout.client.types import *  # noqa: F403

__all__ = [
    "AUTHORIZATION_REQUIRED_KEY",
    "DEFAULT_DEADLINES",
    "DEFAULT_MAX_ATTEMPTS",
    "NOT_SENT_KEY",
    "NOT_SENT_METADATA",
    "PRINCIPAL_KEY",
    "RETRIED_METHODS",
    "SERVICE_STATUS_KEY",
    "SERVICE_STATUS_METADATA",
    "SHARD_COUNT_KEY",
    "SHARD_OWNERS_KEY",
    "AbortedError",
    "AlreadyExistsError",
    "AsyncDiscoveryClient",
    "AsyncOrchestratorClient",
    "AsyncPoolClient",
    "AsyncShardedPoolClient",
    "AsyncToolscoutClient",
    "CallRelay",
    "CancelledError",
    "CatalogMerger",
    "DataLossError",
    "DeadlineExceededError",
    "DiscoveryClient",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OrchestratorClient",
    "OutOfRangeError",
    "OutcomeUnknownError",
    "PermissionDeniedError",
    "Placement",
    "PoolClient",
    "ResourceExhaustedError",
    "ServerPlacement",
    "ShardRouter",
    "ShardedPoolClient",
    "SyncCallRelay",
    "ToolscoutClient",
    "ToolscoutClientError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "__version__",
    "authorization_required",
    "call_outcome_error",
    "catalog_version",
    "check_principal",
    "create_channel",
    "default_channel_options",
    "error_for_code",
    "moved_servers",
    "not_sent_error",
    "owners_of",
    "parse_owners",
    "principal_metadata",
    "rendezvous_owner",
    "rendezvous_weight",
    "row_of",
    "server_digest",
    "service_config",
    "tool_row",
    "translate_rpc_error",
]
__all__ += types.__all__
