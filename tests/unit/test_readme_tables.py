"""The README's reference tables say what the code does: the metrics each service registers, the
config keys toolscout reads (its own section and its additions to casual-mcp's), the exit codes."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from discovery_svc.metrics import DiscoveryMetrics
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_pool_svc.metrics import PoolMetrics
from orchestrator_svc.metrics import DEPRECATED_NAMES, OrchestratorMetrics
from tests.support.mcp_servers import REPO_ROOT
from toolscout_cli.connection import (
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)
from toolscout_kit.config import (
    ClientConfig,
    EmbedderSettings,
    GatewayOAuthSettings,
    ModelConfig,
    OAuthConfig,
    RemoteServerConfig,
    StdioServerConfig,
    ToolscoutSettings,
)

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end]


def _documented_metrics() -> set[str]:
    names: set[str] = set()
    for row in _section("Metrics").splitlines():
        if not row.startswith("| `toolscout_"):
            continue
        cell = row.split("|")[1]
        found = re.findall(r"`([a-z_]+)`", cell)
        # "`toolscout_x_sent_total` / `_all_total`": the second is a suffix of the first's stem.
        first = found[0]
        names.add(first)
        for suffix in found[1:]:
            names.add(suffix if suffix.startswith("toolscout_") else first.rsplit("_", 2)[0] + suffix)
    return names


def _registered_metrics() -> set[str]:
    registry = CollectorRegistry()
    PoolMetrics(registry)
    DiscoveryMetrics(registry)
    OrchestratorMetrics(registry)
    GatewayMetrics(registry)
    deprecated = {*DEPRECATED_NAMES, "toolscout_search_mode_active"}
    names = set()
    for family in registry.collect():
        if family.name in deprecated:
            continue
        names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names


def test_the_metrics_table_lists_exactly_the_metrics_the_services_register() -> None:
    assert _documented_metrics() == _registered_metrics()


def test_every_renamed_metric_is_named_in_the_readme_and_the_changelog() -> None:
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for old in [*DEPRECATED_NAMES, "toolscout_search_mode_active", "toolscout_pool_shard_count"]:
        assert old in changelog, old
    metrics = _section("Metrics")
    for old in ("toolscout_search_mode_active", "toolscout_pool_shard_count", "toolscout_llm_tokens_total"):
        assert old in metrics, old


def _leaf_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        path = f"{prefix}{name}"
        nested = field.annotation if isinstance(field.annotation, type) else None
        if nested is not None and issubclass(nested, BaseModel):
            keys |= _leaf_keys(nested, f"{path}.")
            if nested is EmbedderSettings:
                keys.add(path)  # also written as a string: "local"
        else:
            keys.add(path)
    return keys


def _documented_toolscout_keys() -> set[str]:
    section = _section("Configuration")
    table = section[section.index("The optional top-level `toolscout` section:") :]
    keys: set[str] = set()
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        names = re.findall(r"`([^`]+)`", row.split("|")[1])
        first = names[0]
        parent = first.rsplit(".", 1)[0] + "." if "." in first else ""
        for name in names:
            full = name if name == first or name.count(".") >= first.count(".") else parent + name
            if full.startswith("<service>."):
                keys |= {
                    full.replace("<service>", s) for s in ("pool", "discovery", "orchestrator", "gateway")
                }
            else:
                keys.add(full)
    return keys


def test_the_toolscout_section_table_lists_exactly_the_keys_the_config_reads() -> None:
    assert _documented_toolscout_keys() == _leaf_keys(ToolscoutSettings)


def _documented_per_entry_keys() -> dict[str, set[str]]:
    section = _section("Configuration")
    table = section[section.index("Per server (all optional):") : section.index("The optional top-level")]
    found: dict[str, set[str]] = {"servers": set(), "models": set(), "clients": set()}
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        cell = row.split("|")[1]
        name = re.findall(r"`([^`]+)`", cell)[0]
        owner = re.search(r"\((models|clients)", cell)
        found[owner.group(1) if owner else "servers"].add(name)
    return found


def test_the_additions_table_lists_every_key_toolscout_adds_to_casual_mcps_sections() -> None:
    casual = {
        "servers": {"command", "args", "env", "cwd", "transport", "url", "headers", "defer_loading"},
        "models": {"client", "model", "template", "temperature"},
        "clients": {"provider", "base_url", "api_key", "timeout"},
    }
    ours = {
        "servers": (set(StdioServerConfig.model_fields) | set(RemoteServerConfig.model_fields))
        - casual["servers"],
        "models": set(ModelConfig.model_fields) - casual["models"],
        "clients": set(ClientConfig.model_fields) - casual["clients"],
    }
    assert _documented_per_entry_keys() == ours


def test_the_oauth_table_lists_every_key_of_servers_auth() -> None:
    section = _section("Remote servers with OAuth")
    table = section[section.index("The keys of `servers.<name>.auth`") : section.index("A running pool")]
    documented = {
        name
        for row in table.splitlines()
        if row.startswith("| `")
        for name in re.findall(r"`([^`]+)`", row.split("|")[1])
    }
    assert documented == set(OAuthConfig.model_fields)


def test_the_gateway_oauth_table_lists_every_key_of_gateway_oauth() -> None:
    section = _section("The gateway behind your identity provider")
    table = section[section.index("The keys of `toolscout.gateway.oauth`") :]
    documented = {
        re.findall(r"`([^`]+)`", row.split("|")[1])[0] for row in table.splitlines() if row.startswith("| `")
    }
    assert documented == set(GatewayOAuthSettings.model_fields)


def test_the_exit_code_list_is_the_clis() -> None:
    section = _section("The `toolscout` CLI")
    listed = dict(re.findall(r"`(\d)` ([^·]+?)(?: ·|\. Errors)", section))
    assert {int(code) for code in listed} == {
        EXIT_OK,
        EXIT_ERROR,
        EXIT_USAGE,
        EXIT_NOT_FOUND,
        EXIT_UNREACHABLE,
        EXIT_PROVIDER,
    }
    assert "no API key" in listed[str(EXIT_USAGE)]
    assert "provider failed" in listed[str(EXIT_PROVIDER)]


def test_every_place_that_names_the_version_names_the_one_in_the_version_file() -> None:
    from toolscout.client import __version__
    from toolscout.client.channel import default_channel_options

    kustomization = (REPO_ROOT / "deploy/base/kustomization.yaml").read_text(encoding="utf-8")
    assert f"newTag: {__version__}\n" in kustomization
    assert (
        f"dist/toolscout_client-{__version__}-py3-none-any.whl"
        in (REPO_ROOT / "clients/README.md").read_text()
    )
    assert f"## {__version__} " in (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    options = dict(default_channel_options())
    assert options["grpc.primary_user_agent"] == f"toolscout-client/{__version__}"
