"""The one configuration loader used by every toolscout service.

It reads casual-mcp's ``casual_mcp_config.json`` unchanged (``clients``, ``models``, ``servers``,
``tool_sets``, ``tool_discovery``) in JSON or YAML, expands ``${VAR}`` / ``${VAR:-default}`` from
the environment, and validates with pydantic. toolscout's own settings live in an optional
``toolscout`` section and in a few optional per-server keys; both are documented in the README's
configuration reference. Every error names the file, the key path and the problem.

One module per section (:mod:`.clients`, :mod:`.servers`, :mod:`.toolsets`, :mod:`.pool`,
:mod:`.discovery`, :mod:`.search`, :mod:`.orchestrator`, :mod:`.gateway`, :mod:`.results`,
:mod:`.security`, :mod:`.tracing`), the whole document and its cross-section checks
(:mod:`.document`), the unknown-key rules (:mod:`.unknown_keys`) and the one loader
(:mod:`.loader`). Import from here: every public name is re-exported.
"""

from __future__ import annotations

from toolscout_kit.config.clients import ClientConfig, ModelConfig
from toolscout_kit.config.discovery import DiscoverySettings
from toolscout_kit.config.document import ToolscoutConfig, ToolscoutSettings
from toolscout_kit.config.gateway import (
    DEFAULT_MODES_BY_CLIENT,
    GatewayMode,
    GatewayOAuthSettings,
    GatewaySettings,
    IntrospectionAuth,
)
from toolscout_kit.config.loader import CONFIG_ENV, load_config, parse_config, resolve_config_path
from toolscout_kit.config.orchestrator import RESULT_FORMATS, OrchestratorSettings, ResultFormat
from toolscout_kit.config.pool import PoolSettings, ShardSettings
from toolscout_kit.config.results import ResultsSettings
from toolscout_kit.config.search import SEARCH_MODE_ENV, EmbedderSettings, SearchSettings
from toolscout_kit.config.security import SecuritySettings
from toolscout_kit.config.servers import OAuthConfig, RemoteServerConfig, ServerConfig, StdioServerConfig
from toolscout_kit.config.toolsets import ExcludeSpec, ToolDiscoveryConfig, ToolSetConfig, ToolSpec
from toolscout_kit.config.tracing import TracingSettings

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_MODES_BY_CLIENT",
    "RESULT_FORMATS",
    "SEARCH_MODE_ENV",
    "ClientConfig",
    "DiscoverySettings",
    "EmbedderSettings",
    "ExcludeSpec",
    "GatewayMode",
    "GatewayOAuthSettings",
    "GatewaySettings",
    "IntrospectionAuth",
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
