"""Applying a changed config file to a running service, and what callers read about shards."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from toolscout.client import ServerPlacement

from toolscout_kit.config import ToolscoutConfig, parse_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.reload import ConfigReloader
from toolscout_kit.shards import server_placements, shard_targets


def _write(path: Path, count: int) -> None:
    path.write_text(
        json.dumps({"toolscout": {"pool": {"shards": {"count": count, "address_pattern": "p-{ordinal}:1"}}}})
    )


async def test_a_reload_hands_the_files_new_contents_to_the_callbacks(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    _write(path, 3)
    seen: list[int] = []

    async def apply(config: ToolscoutConfig) -> None:
        seen.append(config.toolscout.pool.shards.count)

    reloader = ConfigReloader(path, [apply], interval=0)
    _write(path, 4)
    assert await reloader.reload()
    assert seen == [4]


async def test_a_file_that_no_longer_loads_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    _write(path, 3)
    seen: list[ToolscoutConfig] = []

    async def apply(config: ToolscoutConfig) -> None:
        seen.append(config)

    reloader = ConfigReloader(path, [apply], interval=0)
    path.write_text("{not json")
    assert not await reloader.reload()
    assert seen == []


async def test_a_request_reloads_at_once_and_an_unchanged_file_is_not_applied_again(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    _write(path, 2)
    applied = asyncio.Queue[int]()

    async def apply(config: ToolscoutConfig) -> None:
        applied.put_nowait(config.toolscout.pool.shards.count)

    reloader = ConfigReloader(path, [apply], interval=0)
    task = asyncio.create_task(reloader.run())
    try:
        _write(path, 5)
        reloader.request()  # what SIGHUP does
        assert await asyncio.wait_for(applied.get(), 10) == 5
    finally:
        task.cancel()
    assert applied.empty()


def _config(shards: dict[str, Any], servers: dict[str, Any] | None = None) -> ToolscoutConfig:
    return parse_config({"servers": servers or {}, "toolscout": {"pool": {"shards": shards}}})


def test_shard_targets_come_from_the_list_or_the_pattern() -> None:
    assert shard_targets(_config({}).toolscout.pool.shards) is None
    listed = _config({"count": 2, "addresses": ["a:1", "b:1"]})
    assert shard_targets(listed.toolscout.pool.shards) == ["a:1", "b:1"]
    pattern = _config({"count": 3, "address_pattern": "dns:///pool-{ordinal}.pool:50051"})
    assert shard_targets(pattern.toolscout.pool.shards) == [
        "dns:///pool-0.pool:50051",
        "dns:///pool-1.pool:50051",
        "dns:///pool-2.pool:50051",
    ]


def test_a_sharded_pool_without_addresses_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="addresses"):
        shard_targets(_config({"count": 2}).toolscout.pool.shards)


def test_callers_learn_the_placement_of_pinned_and_everywhere_servers_only() -> None:
    config = _config(
        {"count": 2, "address_pattern": "p-{ordinal}:1"},
        {"a": {"command": "x"}, "b": {"command": "x", "shard": 1}, "c": {"command": "x", "placement": "all"}},
    )
    assert server_placements(config) == {"b": ServerPlacement(shard=1), "c": ServerPlacement(placement="all")}
