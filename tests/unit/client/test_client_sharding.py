"""Owners of servers and the merge of shard catalogs, as the client library computes them."""

from __future__ import annotations

import hashlib
import random

import grpc
import pytest
from toolscout.client import (
    CatalogMerger,
    Placement,
    ServerPlacement,
    ServerStatus,
    ShardRouter,
    Tool,
    UnavailableError,
    moved_servers,
    owners_of,
    parse_owners,
    rendezvous_owner,
    rendezvous_weight,
)
from toolscout.client import ServerPlacement as ServerRule
from toolscout.client.sharded import SHARD_COUNT_KEY, SHARD_OWNERS_KEY, merge_server_lists

from toolscout_kit.config import parse_config
from toolscout_kit.shards import placement_for, server_placements


def test_the_weight_is_exactly_the_documented_blake2b_formula() -> None:
    expected = int.from_bytes(hashlib.blake2b(b"weather\x000", digest_size=8).digest(), "big")
    assert rendezvous_weight("weather", 0) == expected == 14987864178936411205
    assert rendezvous_weight("weather", 1) == 1118167464372842360


def test_the_client_and_the_pool_agree_on_every_owner() -> None:
    names = [f"server-{i}" for i in range(300)]
    for count in (1, 2, 3, 4, 5, 7):
        pin = count - 1
        rules = {"pinned": ServerRule(shard=pin), "all": ServerRule(placement="all")}
        pool = Placement(count, {**{n: ServerRule() for n in names}, **rules})
        client = {"pinned": ServerPlacement(shard=pin), "all": ServerPlacement(placement="all")}
        for name in [*names, "pinned", "all"]:
            assert owners_of(name, count, client.get(name)) == pool.owners(name)


def _expected_owners(name: str, count: int, rule: ServerPlacement | None) -> tuple[int, ...]:
    """The placement rule written out from its definition (the module docstring), for comparison."""
    if rule is not None and rule.placement == "all":
        return tuple(range(count))
    if rule is not None and rule.shard is not None and rule.shard < count:
        return (rule.shard,)
    weights = [rendezvous_weight(name, k) for k in range(count)]
    return (weights.index(max(weights)),)


def _random_config(rng: random.Random) -> dict[str, object]:
    servers: dict[str, object] = {}
    for i in range(rng.randint(1, 40)):
        server: dict[str, object] = {"command": "x"}
        kind = rng.random()
        if kind < 0.15:
            server["placement"] = "all"
        elif kind < 0.35:
            server["shard"] = rng.randint(0, 11)
        servers[f"{rng.choice(['srv', 'mcp-', 'x_'])}{i}{rng.choice(['', 'é', '.io'])}"] = server
    # Pins are checked against the configured count; a smaller count below lets some fall back.
    return {"servers": servers, "toolscout": {"pool": {"shards": {"count": 12}}}}


def test_the_pool_and_its_callers_place_servers_by_the_one_rule_over_random_configs_and_counts() -> None:
    # A seeded property test: random configs (pins, some beyond the count; placement: all) and counts.
    rng = random.Random(2104)  # noqa: S311 - test data, not cryptography
    for _ in range(300):
        config = parse_config(_random_config(rng))
        count = rng.randint(1, 12)
        pool = placement_for(config, count)  # what a pool shard runs
        router = ShardRouter(count, server_placements(config))  # where a sharded client sends a call
        shards: list[set[str]] = [set(pool.servers_for(k)) for k in range(count)]
        for name, server in config.servers.items():
            rule = ServerPlacement(placement=server.placement, shard=server.shard)
            owners = pool.owners(name)
            assert (
                owners
                == router.owners(name)
                == owners_of(name, count, rule)
                == _expected_owners(name, count, rule)
            )
            assert owners
            assert list(owners) == sorted(set(owners))
            assert all(0 <= k < count for k in owners)
            assert {k for k in range(count) if name in shards[k]} == set(owners)
        # One more shard moves only servers placed by the hash, and only onto the new shard.
        grown = placement_for(config, count + 1)
        for name in moved_servers(pool, grown):
            server = config.servers[name]
            if server.placement == "all":
                assert grown.owners(name) == tuple(range(count + 1))
            elif server.shard is None or server.shard >= count:
                assert grown.owners(name) == (count,)


def test_a_strict_placement_refuses_a_pin_that_cannot_apply_and_a_lenient_one_falls_back() -> None:
    rules = {"memory": ServerPlacement(shard=3), "both": ServerPlacement(placement="all", shard=0)}
    for name, rule in rules.items():
        with pytest.raises(ValueError, match=f"server {name!r}"):
            Placement(3, {name: rule})
    lenient = Placement(3, rules, strict=False)
    assert lenient.owners("memory") == (rendezvous_owner("memory", 3),)
    assert lenient.owners("both") == (0, 1, 2)


def test_growing_the_count_moves_about_one_in_n_and_only_to_the_new_shard() -> None:
    names = [f"sim-{i:04d}" for i in range(1000)]
    moved = [n for n in names if rendezvous_owner(n, 4) != rendezvous_owner(n, 5)]
    assert 150 <= len(moved) <= 250
    assert {rendezvous_owner(n, 5) for n in moved} == {4}


def test_a_pin_beyond_a_shrunk_count_falls_back_to_the_hash_owner() -> None:
    assert owners_of("x", 2, ServerPlacement(shard=3)) == (rendezvous_owner("x", 2),)
    assert owners_of("x", 3, ServerPlacement(placement="all")) == (0, 1, 2)


def _tools(server: str, *names: str, available: bool = True) -> list[Tool]:
    return [Tool(server=server, name=n, llm_name=f"{server}__{n}", available=available) for n in names]


def test_the_merge_of_shards_is_sorted_and_versioned_by_content_alone() -> None:
    a, b = CatalogMerger(), CatalogMerger()
    a.update(0, "x", [*_tools("beta", "t"), *_tools("alpha", "u", "t")])
    a.update(1, "y", _tools("gamma", "t"))
    b.update(0, "other", _tools("gamma", "t"))
    b.update(1, "versions", [*_tools("alpha", "t", "u"), *_tools("beta", "t")])
    assert [t.llm_name for t in a.catalog().tools] == ["alpha__t", "alpha__u", "beta__t", "gamma__t"]
    assert a.catalog().catalog_version == b.catalog().catalog_version


def test_a_shard_that_is_down_keeps_its_tools_unavailable_and_nothing_else_changes() -> None:
    merger = CatalogMerger()
    merger.update(0, "v", [*_tools("a", "t"), *_tools("everywhere", "t")])
    merger.update(1, "v", [*_tools("b", "t"), *_tools("everywhere", "t")])
    before = merger.catalog()
    assert merger.shard_down(1)
    after = {t.server: t.available for t in merger.catalog().tools}
    assert after == {"a": True, "b": False, "everywhere": True}
    assert merger.catalog().catalog_version != before.catalog_version
    assert not merger.shard_down(1)
    merger.update(1, "v", [*_tools("b", "t"), *_tools("everywhere", "t")])
    assert merger.catalog() == before


def test_a_server_moving_between_shards_stays_listed_unavailable_while_configured() -> None:
    merger = CatalogMerger(keep={"a": None, "moving": None})
    merger.update(0, "1", [*_tools("a", "t"), *_tools("moving", "t")])
    merger.update(1, "1", _tools("gone", "t"))
    merger.update(0, "2", _tools("a", "t"))  # its old owner let it go
    merger.update(1, "2", [])  # "gone" is not configured: it leaves
    listed = {t.server: t.available for t in merger.catalog().tools}
    assert listed == {"a": True, "moving": False}
    merger.update(1, "3", _tools("moving", "t"))  # its new owner lists it
    assert {t.server: t.available for t in merger.catalog().tools} == {"a": True, "moving": True}
    assert merger.remove_shard(1)
    assert {t.server: t.available for t in merger.catalog().tools} == {"a": True, "moving": False}


def test_a_refusal_names_its_owners_only_on_unavailable_with_both_keys() -> None:
    def refusal(owners: str, count: str, cls: type = UnavailableError) -> object:
        return cls(
            "x",
            code=grpc.StatusCode.UNAVAILABLE,
            trailing_metadata=((SHARD_OWNERS_KEY, owners), (SHARD_COUNT_KEY, count)),
        )

    assert parse_owners(refusal("3", "4")) == ((3,), 4)  # type: ignore[arg-type]
    assert parse_owners(refusal("0,1", "2")) == ((0, 1), 2)  # type: ignore[arg-type]
    assert parse_owners(refusal("5", "4")) is None  # type: ignore[arg-type]
    assert parse_owners(refusal("x", "4")) is None  # type: ignore[arg-type]
    assert parse_owners(UnavailableError("plain")) is None


def test_a_server_on_several_shards_is_listed_once_with_its_result_tokens_summed() -> None:
    def status(state: str, returned: int, delivered: int, kept: int) -> ServerStatus:
        return ServerStatus(
            "time",
            "stdio",
            state,
            result_tokens_returned=returned,
            result_tokens_delivered=delivered,
            results_kept=kept,
        )

    shard0 = (status("reconnecting", 1000, 100, 1),)
    shard1 = (status("ready", 5000, 400, 2), ServerStatus("notes", "stdio", "ready"))
    merged = merge_server_lists([shard0, grpc.RpcError(), shard1])
    assert [(s.name, s.state) for s in merged] == [("notes", "ready"), ("time", "ready")]
    time_server = merged[1]
    assert (time_server.result_tokens_returned, time_server.result_tokens_delivered) == (6000, 500)
    assert time_server.results_kept == 3
