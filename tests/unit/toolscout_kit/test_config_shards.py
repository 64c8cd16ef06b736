"""Shard settings and per-server placement keys in the config, and their errors."""

from __future__ import annotations

from typing import Any

import pytest

from toolscout_kit.config import parse_config
from toolscout_kit.errors import ConfigError


def _config(servers: dict[str, Any], shards: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"servers": servers}
    if shards is not None:
        data["toolscout"] = {"pool": {"shards": shards}}
    return data


def test_placement_defaults_to_one_owner_on_an_unsharded_pool() -> None:
    config = parse_config(_config({"notes": {"command": "x"}}))
    assert config.servers["notes"].placement == "owner"
    assert config.servers["notes"].shard is None
    assert config.toolscout.pool.shards.count == 1
    assert config.toolscout.pool.shards.address(0) is None


def test_a_shard_outside_the_count_is_an_error_naming_the_file_and_key() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_config({"memory": {"command": "x", "shard": 3}}, {"count": 3}), source="pool.yaml")
    assert "pool.yaml: servers.memory.shard: shard 3 does not exist" in err.value.message
    assert "count is 3" in err.value.message


def test_a_negative_shard_is_an_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"servers\.memory\.shard"):
        parse_config(_config({"memory": {"url": "http://127.0.0.1:1/mcp", "shard": -1}}))


def test_a_server_on_all_shards_cannot_also_be_pinned() -> None:
    with pytest.raises(ConfigError, match=r"servers\.time\.shard: a server with placement 'all'"):
        parse_config(_config({"time": {"command": "x", "placement": "all", "shard": 0}}, {"count": 2}))


def test_an_unknown_placement_is_an_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"servers\.time\.placement"):
        parse_config(_config({"time": {"command": "x", "placement": "some"}}))


def test_shard_addresses_come_from_a_list_or_a_pattern_per_ordinal() -> None:
    listed = parse_config(_config({}, {"count": 2, "addresses": ["a:1", "b:2"]})).toolscout.pool.shards
    assert [listed.address(k) for k in range(2)] == ["a:1", "b:2"]
    pattern = "dns:///toolscout-pool-{ordinal}.toolscout-pool.toolscout.svc:50051"
    patterned = parse_config(_config({}, {"count": 3, "address_pattern": pattern})).toolscout.pool.shards
    assert patterned.address(2) == "dns:///toolscout-pool-2.toolscout-pool.toolscout.svc:50051"


@pytest.mark.parametrize(
    ("shards", "problem"),
    [
        ({"count": 3, "addresses": ["a:1"]}, "addresses lists 1 shards but count is 3"),
        ({"count": 1, "addresses": ["a:1"], "address_pattern": "x-{ordinal}"}, "either addresses or"),
        ({"count": 2, "address_pattern": "dns:///pool:50051"}, "must contain {ordinal}"),
        ({"count": 0}, "toolscout.pool.shards.count"),
    ],
)
def test_inconsistent_shard_settings_are_errors_naming_the_section(
    shards: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_config({}, shards), source="c.json")
    assert "c.json: toolscout.pool.shards" in err.value.message
    assert problem in err.value.message
