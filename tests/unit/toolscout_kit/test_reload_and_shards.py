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


def test_a_count_file_replaces_the_count_and_a_bad_one_is_an_error_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "count").write_text("4\n")
    data = {
        "toolscout": {
            "pool": {"shards": {"count": 1, "count_file": "count", "address_pattern": "p{ordinal}:1"}}
        }
    }
    assert parse_config(data, base_dir=tmp_path).toolscout.pool.shards.count == 4
    (tmp_path / "count").write_text("four")
    with pytest.raises(ConfigError, match=r"toolscout\.pool\.shards\.count_file"):
        parse_config(data, base_dir=tmp_path)


async def test_a_change_of_the_count_file_alone_is_noticed(tmp_path: Path) -> None:
    (tmp_path / "count").write_text("2")
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps(
            {"toolscout": {"pool": {"shards": {"count_file": "count", "address_pattern": "p{ordinal}:1"}}}}
        )
    )
    applied = asyncio.Queue[int]()

    async def apply(config: ToolscoutConfig) -> None:
        applied.put_nowait(config.toolscout.pool.shards.count)

    reloader = ConfigReloader(path, [apply], interval=0.05)
    task = asyncio.create_task(reloader.run())
    try:
        (tmp_path / "count").write_text("3")
        assert await asyncio.wait_for(applied.get(), 10) == 3
    finally:
        task.cancel()
