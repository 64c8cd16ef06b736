"""``toolscout.discovery``: the discovery service (manifest, plans, server browse)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolscout_kit.config._base import ServiceSettings

__all__ = ["DiscoverySettings"]


class DiscoverySettings(ServiceSettings):
    listen: str = "127.0.0.1:50052"
    metrics_port: int = Field(default=9102, ge=-1, le=65535)
    pool_target: str = "127.0.0.1:50051"
    # The manifest never exceeds this many tokens, however many tools.
    manifest_budget_tokens: int = Field(default=2000, ge=50)
    manifest_placement: Literal["tool_description", "system_message"] = "tool_description"
    # A server browse (server_name alone) returns at most this many tools per page.
    server_browse_limit: int = Field(default=20, ge=1)
