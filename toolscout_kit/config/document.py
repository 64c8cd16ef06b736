"""The whole configuration document: casual-mcp's sections, toolscout's own section, and the
checks that span sections (references between them, deferral against its client, shard placement)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from toolscout.client.types import Deferral

from toolscout_kit.config._base import Flag, Strict
from toolscout_kit.config.clients import ClientConfig, ModelConfig
from toolscout_kit.config.discovery import DiscoverySettings
from toolscout_kit.config.gateway import GatewaySettings
from toolscout_kit.config.orchestrator import OrchestratorSettings
from toolscout_kit.config.pool import PoolSettings
from toolscout_kit.config.results import ResultsSettings
from toolscout_kit.config.search import SearchSettings
from toolscout_kit.config.security import SecuritySettings
from toolscout_kit.config.servers import RemoteServerConfig, TaggedServerConfig
from toolscout_kit.config.toolsets import ToolDiscoveryConfig, ToolSetConfig
from toolscout_kit.config.tracing import TracingSettings

__all__ = ["ToolscoutConfig", "ToolscoutSettings"]


class ToolscoutSettings(Strict):
    pool: PoolSettings = Field(default_factory=PoolSettings)
    results: ResultsSettings = Field(default_factory=ResultsSettings)
    discovery: DiscoverySettings = Field(default_factory=DiscoverySettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    orchestrator: OrchestratorSettings = Field(default_factory=OrchestratorSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


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


class ToolscoutConfig(BaseModel):
    """The whole configuration: casual-mcp's file plus the optional ``toolscout`` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # casual-mcp's flag: tools are named ``<server>__<tool>`` (true, the default) or by their own
    # names (false); a server's own ``namespace_tools`` overrides it.
    namespace_tools: Flag | None = None
    clients: dict[str, ClientConfig] = Field(default_factory=dict)
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    servers: dict[str, TaggedServerConfig] = Field(default_factory=dict)
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

    def deferred(self, server: str, tool: str) -> bool:
        """Whether ``tool`` of ``server`` is deferred (found by search) rather than loaded: with
        ``tool_discovery.enabled``, when its server has ``defer_loading`` (or ``defer_all`` is on)
        and the tool is not in the server's ``always_load``. Tools of servers missing from the
        config load eagerly unless ``defer_all`` (as in casual-mcp: nothing silently hidden)."""
        discovery = self.tool_discovery
        if not discovery.enabled:
            return False
        config = self.servers.get(server)
        defer = discovery.defer_all or (config is not None and config.defer_loading)
        return defer and (config is None or tool not in config.always_load)

    def in_toolset(self, toolset: str, server: str, tool: str) -> bool:
        """Whether ``tool`` of ``server`` is in the named ``toolset`` ("" = every tool)."""
        if not toolset:
            return True
        spec = self.tool_sets.get(toolset)
        return spec is not None and spec.allows(server, tool)

    def toolset_has_server(self, toolset: str, server: str) -> bool:
        """Whether the named ``toolset`` ("" = every tool) takes any tool of ``server``."""
        if not toolset:
            return True
        spec = self.tool_sets.get(toolset)
        return spec is not None and spec.servers.get(server, False) is not False

    def per_user(self, server: str) -> bool:
        """Whether ``server`` is called with each caller's own token (``auth.per_user``): its
        calls, and its listings where they depend on the user, run on the caller's own session."""
        config = self.servers.get(server)
        return isinstance(config, RemoteServerConfig) and config.auth is not None and config.auth.per_user

    @property
    def per_user_servers(self) -> frozenset[str]:
        """The servers :meth:`per_user` holds for."""
        return frozenset(name for name in self.servers if self.per_user(name))

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
