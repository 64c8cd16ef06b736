"""Placement of MCP servers on pool shards: identities, rendezvous owners, pins and ``all``."""

from __future__ import annotations

from collections import Counter

import pytest
from toolscout.client import Placement, moved_servers, rendezvous_owner, rendezvous_weight
from toolscout.client import ServerPlacement as ServerRule

from mcp_pool_svc.placement import ShardIdentity, resolve_identity
from toolscout_kit.config import ShardSettings, parse_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.shards import placement_for

NAMES = [f"server-{i:04d}" for i in range(1000)]


def test_a_shard_spec_k_of_n_parses_and_prints_back() -> None:
    identity = ShardIdentity.parse("2/3")
    assert (identity.index, identity.count) == (2, 3)
    assert str(identity) == "2/3"


@pytest.mark.parametrize("spec", ["3/3", "1", "a/b", "-1/3", "0/0", "1/2/3", ""])
def test_a_malformed_or_out_of_range_shard_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="--shard"):
        ShardIdentity.parse(spec)


def test_a_statefulset_pod_name_gives_the_shard_index() -> None:
    assert ShardIdentity.from_pod_name("toolscout-pool-2", "toolscout-pool", 3) == ShardIdentity(2, 3)


@pytest.mark.parametrize("pod", ["toolscout-pool-3", "toolscout-pool-x", "other-1", "toolscout-pool-5c7b-9"])
def test_a_pod_name_outside_the_statefulset_or_its_count_is_a_config_error(pod: str) -> None:
    with pytest.raises(ConfigError, match=pod):
        ShardIdentity.from_pod_name(pod, "toolscout-pool", 3)


def test_the_shard_flag_wins_over_the_pod_name() -> None:
    shards = ShardSettings(count=3)
    assert resolve_identity(shards, spec="1/3", pod_name="toolscout-pool-2") == ShardIdentity(1, 3)
    assert resolve_identity(shards, pod_name="toolscout-pool-2") == ShardIdentity(2, 3)


def test_a_shard_flag_disagreeing_with_the_configured_count_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"toolscout\.pool\.shards\.count is 3"):
        resolve_identity(ShardSettings(count=3), spec="0/4")


def test_an_unsharded_pool_needs_no_identity_but_a_sharded_one_does() -> None:
    assert resolve_identity(ShardSettings()) == ShardIdentity(0, 1)
    with pytest.raises(ConfigError, match="--shard K/3"):
        resolve_identity(ShardSettings(count=3))


def test_rendezvous_weights_and_owners_are_fixed_values_not_per_process_ones() -> None:
    # Literal expectations: a salted hash() would give each pool process (and each client) other owners.
    assert rendezvous_weight("media", 1) == 14468744878601843684
    assert [rendezvous_owner("time", n) for n in (1, 2, 3, 4, 5)] == [0, 0, 2, 2, 4]
    assert [rendezvous_owner("media", n) for n in (1, 2, 3, 4, 5)] == [0, 1, 1, 1, 1]


def test_every_server_has_exactly_one_owner_by_default() -> None:
    placement = Placement(4, {name: ServerRule() for name in NAMES})
    assert all(len(placement.owners(name)) == 1 for name in NAMES)
    per_shard = [placement.servers_for(shard) for shard in range(4)]
    assert sorted(name for names in per_shard for name in names) == NAMES


def test_owners_spread_evenly_over_the_shards() -> None:
    counts = Counter(rendezvous_owner(name, 4) for name in NAMES)
    assert set(counts) == {0, 1, 2, 3}
    assert all(180 <= n <= 320 for n in counts.values())


def test_going_from_four_to_five_shards_moves_about_a_fifth_of_the_servers_all_to_the_new_shard() -> None:
    rules = {name: ServerRule() for name in NAMES}
    before, after = Placement(4, rules), Placement(5, rules)
    moved = moved_servers(before, after)
    assert 0.1 <= len(moved) / len(NAMES) <= 0.3
    assert {after.owners(name) for name in moved} == {(4,)}


def test_going_from_five_to_four_shards_moves_only_the_removed_shards_servers() -> None:
    rules = {name: ServerRule() for name in NAMES}
    before, after = Placement(5, rules), Placement(4, rules)
    assert moved_servers(before, after) == before.servers_for(4)


def test_a_pinned_server_stays_on_its_shard_whatever_the_count() -> None:
    rules = {"memory": ServerRule(shard=1), **{name: ServerRule() for name in NAMES[:50]}}
    for count in (2, 3, 7):
        placement = Placement(count, rules)
        assert placement.owners("memory") == (1,)
        assert "memory" in placement.servers_for(1)
        assert not any("memory" in placement.servers_for(k) for k in range(count) if k != 1)
    assert "memory" not in moved_servers(Placement(2, rules), Placement(7, rules))


def test_a_server_placed_on_all_runs_on_every_shard() -> None:
    placement = Placement(3, {"time": ServerRule(placement="all"), "notes": ServerRule()})
    assert placement.owners("time") == (0, 1, 2)
    assert all("time" in placement.servers_for(k) for k in range(3))
    assert all(placement.owns(k, "time") for k in range(3))


def test_an_unconfigured_server_name_gets_its_rendezvous_owner() -> None:
    assert Placement(3).owners("elsewhere") == (rendezvous_owner("elsewhere", 3),)


def test_pinning_outside_the_shard_count_is_refused() -> None:
    with pytest.raises(ValueError, match="shard 3 of 3"):
        Placement(3, {"memory": ServerRule(shard=3)})


def test_placement_follows_the_configuration() -> None:
    config = parse_config(
        {
            "servers": {
                "memory": {"command": "x", "shard": 2},
                "time": {"url": "http://127.0.0.1:1/mcp", "placement": "all"},
                "notes": {"command": "x"},
            },
            "toolscout": {"pool": {"shards": {"count": 3}}},
        }
    )
    placement = placement_for(config)
    assert placement.count == 3
    assert placement.owners("memory") == (2,)
    assert placement.owners("time") == (0, 1, 2)
    assert placement.owners("notes") == (rendezvous_owner("notes", 3),)
    assert placement_for(config, count=4).count == 4
