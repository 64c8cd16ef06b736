"""The pool's feature catalog: names, URI routing, clashes, versions and change watching."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from toolscout.client import FeatureKind, ServerOffers

from mcp_pool_svc.features import SERVER_URI_PREFIX, FeatureCatalog, FeatureListing, ResourceRoute


def _listing(
    server: str, *, uris: tuple[str, ...] = (), templates: tuple[str, ...] = (), prompts: tuple[str, ...] = ()
) -> FeatureListing:
    return FeatureListing(
        ServerOffers(server, resources=bool(uris or templates), prompts=bool(prompts), subscribe=True),
        resources=tuple({"uri": u, "name": u.rsplit("/", 1)[-1], "mimeType": "text/plain"} for u in uris),
        templates=tuple({"uriTemplate": t, "name": "t"} for t in templates),
        prompts=tuple({"name": p, "arguments": [{"name": "x", "required": True}]} for p in prompts),
    )


def _catalog(**namespaced: bool) -> FeatureCatalog:
    return FeatureCatalog(namespaced=lambda server: namespaced.get(server, True))


def test_prompts_are_named_like_tools_and_keep_their_definitions() -> None:
    catalog = _catalog(b=False)
    catalog.set_listing("a", _listing("a", prompts=("greet",)))
    catalog.set_listing("b", _listing("b", prompts=("plain",)))
    served = {f.served_name: f for f in catalog.features(FeatureKind.PROMPT)}
    assert set(served) == {"a__greet", "plain"}
    assert served["a__greet"].definition == {
        "name": "a__greet",
        "arguments": [{"name": "x", "required": True}],
    }
    assert catalog.lookup(FeatureKind.PROMPT, "plain") is served["plain"]
    # Each knows the name it would be served under if another server claimed its name too
    # (what a sharded pool's client serves then), and is found by it.
    assert {f.served_name: f.qualified_name for f in served.values()} == {
        "a__greet": "a__greet",
        "plain": "b__plain",
    }
    assert catalog.lookup(FeatureKind.PROMPT, "b__plain") is served["plain"]


def test_a_bare_prompt_name_two_servers_claim_is_namespaced_for_both() -> None:
    catalog = _catalog(a=False, b=False)
    catalog.set_listing("a", _listing("a", prompts=("greet",)))
    catalog.set_listing("b", _listing("b", prompts=("greet",)))
    assert {f.served_name for f in catalog.features(FeatureKind.PROMPT)} == {"a__greet", "b__greet"}


def test_a_uri_is_served_as_is_unless_two_servers_list_it() -> None:
    catalog = _catalog()
    catalog.set_listing("a", _listing("a", uris=("x://a/1", "x://shared")))
    catalog.set_listing("b", _listing("b", uris=("x://shared",)))
    served = {f.served_name for f in catalog.features(FeatureKind.RESOURCE)}
    assert served == {"x://a/1", f"{SERVER_URI_PREFIX}a/x://shared", f"{SERVER_URI_PREFIX}b/x://shared"}
    qualified = {f.qualified_name for f in catalog.features(FeatureKind.RESOURCE)}
    assert qualified == {f"{SERVER_URI_PREFIX}a/x://a/1", *(served - {"x://a/1"})}
    assert catalog.route_uri("x://a/1") == ResourceRoute("a", "x://a/1")
    assert catalog.route_uri(f"{SERVER_URI_PREFIX}b/x://shared") == ResourceRoute("b", "x://shared")
    # The plain URI both list names no one server: it is not guessed.
    assert catalog.route_uri("x://shared") is None
    # Once one server forgets it, the other's is served under the URI itself again.
    catalog.drop("b")
    assert catalog.route_uri("x://shared") == ResourceRoute("a", "x://shared")


def test_an_unlisted_uri_is_routed_by_the_templates_that_match_it() -> None:
    catalog = _catalog()
    catalog.set_listing("a", _listing("a", templates=("x://a/items/{id}", "x://a/search{?q,limit}")))
    catalog.set_listing("b", _listing("b", templates=("x://b/{+path}",)))
    assert catalog.route_uri("x://a/items/7") == ResourceRoute("a", "x://a/items/7")
    assert catalog.route_uri("x://a/search?q=1&limit=2") == ResourceRoute("a", "x://a/search?q=1&limit=2")
    assert catalog.route_uri("x://b/deep/er/file.txt") == ResourceRoute("b", "x://b/deep/er/file.txt")
    assert catalog.route_uri("x://a/items/7/more") is None
    catalog.set_listing("c", _listing("c", templates=("x://a/items/{n}",)))
    with pytest.raises(ValueError, match="several servers"):
        catalog.route_uri("x://a/items/7")


def test_with_one_server_offering_resources_any_uri_goes_to_it() -> None:
    catalog = _catalog()
    catalog.set_listing("a", _listing("a", uris=("x://a/1",)))
    catalog.set_listing("p", _listing("p", prompts=("only",)))
    assert catalog.route_uri("file:///somewhere/else") == ResourceRoute("a", "file:///somewhere/else")


def test_the_version_follows_the_contents_and_offers() -> None:
    catalog = _catalog()
    empty = catalog.version
    assert catalog.set_listing("a", _listing("a", uris=("x://1",)))
    changed = catalog.version
    assert changed != empty
    assert not catalog.set_listing("a", _listing("a", uris=("x://1",)))
    assert catalog.version == changed
    assert catalog.drop("a")
    assert catalog.version == empty


def test_a_server_listing_no_feature_changes_only_the_version() -> None:
    """A fleet of tool-only servers coming up one by one: each adds its offers to the version
    (computed per server once), leaves the features as they were, and the version is the same
    whatever order the servers came in."""
    catalog = _catalog()
    catalog.set_listing("a", _listing("a", uris=("x://1",), prompts=("p",)))
    features = catalog.features()
    versions = {catalog.version}
    for server in ("c", "b"):
        assert catalog.set_listing(server, _listing(server))
        assert catalog.features() == features
        versions.add(catalog.version)
    assert len(versions) == 3
    # A changed offer of one server moves the version (its cached share is not reused) ...
    bare = catalog.version
    assert catalog.set_listing("b", FeatureListing(ServerOffers("b", resources=False, prompts=True)))
    assert catalog.version != bare
    assert catalog.features() == features
    # ... and the same contents reached in another order give the same version.
    other = _catalog()
    other.set_listing("b", FeatureListing(ServerOffers("b", resources=False, prompts=True)))
    other.set_listing("c", _listing("c"))
    other.set_listing("a", _listing("a", uris=("x://1",), prompts=("p",)))
    assert other.version == catalog.version
    assert catalog.drop("c")
    assert catalog.drop("b")
    assert catalog.version == _only_a_version()


def _only_a_version() -> str:
    catalog = _catalog()
    catalog.set_listing("a", _listing("a", uris=("x://1",), prompts=("p",)))
    return catalog.version


async def test_watchers_hear_which_kinds_changed() -> None:
    catalog = _catalog()
    catalog.set_listing("a", _listing("a", uris=("x://1",), prompts=("p",)))
    stream = catalog.watch()
    async with contextlib.aclosing(stream):
        first = await anext(stream)
        assert first.changed_kinds == ()
        assert len(first.features) == 2
        catalog.set_listing("a", _listing("a", uris=("x://1",), prompts=("p", "q")))
        second = await asyncio.wait_for(anext(stream), 5)
    assert second.changed_kinds == (FeatureKind.PROMPT,)
    assert {f.served_name for f in second.features} == {"x://1", "a__p", "a__q"}


def test_resource_updates_reach_the_subscribers_of_that_uri_and_below() -> None:
    catalog = _catalog()
    catalog.set_listing("a", _listing("a", uris=("x://a/dir", "x://a/other")))
    heard: list[str] = []
    end = catalog.subscribe("a", "x://a/dir", heard.append)
    catalog.resource_updated("a", "x://a/dir")
    catalog.resource_updated("a", "x://a/dir/file")
    catalog.resource_updated("a", "x://a/other")
    catalog.resource_updated("b", "x://a/dir")
    assert heard == ["x://a/dir", "x://a/dir/file"]
    assert end() is True
    catalog.resource_updated("a", "x://a/dir")
    assert heard == ["x://a/dir", "x://a/dir/file"]
