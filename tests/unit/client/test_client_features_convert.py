"""The feature values (resources, templates, prompts, offers, requests, replies) through the wire
and back, and the sharded clients' merge of several shards' snapshots."""

from __future__ import annotations

import pytest
from toolscout.client import (
    CompletionRequest,
    FeatureKind,
    FeatureList,
    FeatureReply,
    FeatureSnapshot,
    PromptRequest,
    ResourceReadRequest,
    ServerFeature,
    ServerOffers,
    ShardInfo,
    wire,
)
from toolscout.client.sharded_features import merge_feature_snapshots
from toolscout.mcp_pool.v1 import mcp_pool_pb2

_PROMPT = ServerFeature(FeatureKind.PROMPT, "a", "greet", "a__greet", '{"name":"a__greet"}', "a__greet")
_RESOURCE = ServerFeature(FeatureKind.RESOURCE, "b", "x://1", "x://1", '{"uri":"x://1","name":"one"}')


def test_every_feature_value_survives_the_wire() -> None:
    offers = (
        ServerOffers("a", prompts=True, completions=True),
        ServerOffers("b", resources=True, subscribe=True),
    )
    listing = FeatureList((_RESOURCE, _PROMPT), "cursor", "v1", ShardInfo(1, 2), offers)
    assert wire.feature_list(wire.feature_list_pb(listing)) == listing
    snapshot = FeatureSnapshot("v2", (_RESOURCE,), offers, (FeatureKind.RESOURCE,), ShardInfo(0, 2))
    assert wire.feature_snapshot(wire.feature_snapshot_pb(snapshot)) == snapshot
    completion = CompletionRequest(
        FeatureKind.RESOURCE_TEMPLATE, "x://{id}", "id", "1", '{"k":"v"}', "p", 3.0
    )
    assert wire.completion_request(wire.completion_request_pb(completion)) == completion
    read = ResourceReadRequest("x://1", "p", 2.0)
    assert wire.resource_read_request(wire.resource_read_request_pb(read)) == read
    prompt = PromptRequest("a__greet", '{"name":"Ada"}', "p")
    assert wire.prompt_request(wire.prompt_request_pb(prompt)) == prompt
    reply = FeatureReply("a", "", -32602, "missing argument")
    assert wire.feature_reply(wire.feature_reply_pb(reply)) == reply
    assert _PROMPT.definition == {"name": "a__greet"}


def test_a_kind_this_side_does_not_know_is_skipped_and_no_kind_is_refused() -> None:
    message = wire.feature_list_pb(FeatureList((_PROMPT,)))
    message.features.add(kind=99, server="new", own_name="n", served_name="n")
    assert wire.feature_list(message).features == (_PROMPT,)
    with pytest.raises(ValueError, match="not a valid FeatureKind"):
        wire.completion_request(mcp_pool_pb2.CompleteRequest(ref="x"))


def test_shards_snapshots_merge_with_a_server_on_every_shard_once() -> None:
    both = ServerOffers("b", resources=True)
    first = FeatureSnapshot(
        "v1", (_RESOURCE, _PROMPT), (ServerOffers("a", prompts=True), both), (FeatureKind.PROMPT,)
    )
    second = FeatureSnapshot("v2", (_RESOURCE,), (both,), (FeatureKind.RESOURCE,))
    merged = merge_feature_snapshots([first, second])
    assert merged.features == (_RESOURCE, _PROMPT)
    assert [o.server for o in merged.offers] == ["a", "b"]
    assert merged.changed_kinds == (FeatureKind.RESOURCE, FeatureKind.PROMPT)
    assert merged.features_version == "v1+v2"


def test_a_name_servers_on_two_shards_serve_is_served_under_each_ones_qualified_name() -> None:
    def uri(server: str) -> ServerFeature:
        qualified = f"toolscout://server/{server}/x://1"
        return ServerFeature(FeatureKind.RESOURCE, server, "x://1", "x://1", '{"uri":"x://1"}', qualified)

    def prompt(server: str) -> ServerFeature:
        return ServerFeature(FeatureKind.PROMPT, server, "p", "p", '{"name":"p"}', f"{server}__p")

    first = FeatureSnapshot("v1", (uri("a"), prompt("a")), (ServerOffers("a"),))
    second = FeatureSnapshot("v2", (uri("b"), prompt("b")), (ServerOffers("b"),))
    merged = merge_feature_snapshots([first, second])
    served = {
        (f.server, f.served_name, f.definition.get("uri") or f.definition.get("name"))
        for f in merged.features
    }
    assert served == {
        ("a", "toolscout://server/a/x://1", "toolscout://server/a/x://1"),
        ("b", "toolscout://server/b/x://1", "toolscout://server/b/x://1"),
        ("a", "a__p", "a__p"),
        ("b", "b__p", "b__p"),
    }
    # One server (on every shard) is no clash.
    assert merge_feature_snapshots([first, first]).features == first.features
