"""Candidate masks: one SearchIndex per catalog, a toolset applied as a filter at query time."""

from __future__ import annotations

import random

import pytest

from discovery_svc.index import CandidateMask, SearchDoc, SearchHit, SearchIndex


def doc(server: str, name: str, description: str = "") -> SearchDoc:
    return SearchDoc(f"{server}__{name}", server, name, description, {})


def keys(hits: list[SearchHit]) -> list[str]:
    return [hit.key for hit in hits]


CATALOG = [
    doc("github", "create_issue", "Create a new issue in a repository"),
    doc("github", "list_issues", "List issues of a repository"),
    doc("gitlab", "create_issue", "Create an issue in a GitLab project"),
    doc("gitlab", "list_issues", "List issues of a GitLab project"),
    doc("weather", "get_forecast", "Weather forecast for a city"),
    doc("files", "read_file", "Read a file from disk"),
]


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    return SearchIndex(CATALOG)


def test_a_mask_returns_only_its_tools(index: SearchIndex) -> None:
    gitlab = index.mask(["gitlab__create_issue", "gitlab__list_issues", "files__read_file"])
    assert keys(index.search("create issue", 10, candidates=gitlab)) == [
        "gitlab__create_issue",
        "gitlab__list_issues",
    ]


def test_a_mask_ignores_unknown_keys_and_counts_its_members(index: SearchIndex) -> None:
    mask = index.mask(["github__list_issues", "nope__missing"])
    assert len(mask) == 1
    assert index.doc_id("github__list_issues") in mask
    assert "github__list_issues" not in mask  # membership is by doc id, never by key


def test_exact_name_outside_the_mask_is_not_returned(index: SearchIndex) -> None:
    weather_only = index.mask(["weather__get_forecast"])
    assert index.search("read_file", 5, candidates=weather_only) == []
    files_only = index.mask(["files__read_file"])
    hits = index.search("read_file", 5, candidates=files_only)
    assert keys(hits) == ["files__read_file"]
    assert hits[0].exact


def test_mask_combines_with_server_only_and_skip(index: SearchIndex) -> None:
    mask = index.mask(["github__create_issue", "github__list_issues", "gitlab__list_issues"])
    assert keys(index.search("issues", 10, server="gitlab", candidates=mask)) == ["gitlab__list_issues"]
    assert keys(index.search("issues", 10, only={"github__list_issues"}, candidates=mask)) == [
        "github__list_issues"
    ]
    assert "github__list_issues" not in keys(
        index.search("issues", 10, skip={"github__list_issues"}, candidates=mask)
    )
    assert index.search("issues", 10, server="weather", candidates=mask) == []


def test_an_empty_mask_matches_nothing(index: SearchIndex) -> None:
    assert index.search("issue", 10, candidates=index.mask([])) == []


def test_restricted_view_has_the_search_api_of_the_index(index: SearchIndex) -> None:
    view = index.restricted(index.mask(["weather__get_forecast", "files__read_file"]))
    assert len(view) == 2
    assert keys(view.search("forecast", 5)) == ["weather__get_forecast"]
    assert view.search("issue", 5) == []
    assert keys(view.search("file", 5, skip={"files__read_file"})) == []


def test_a_mask_from_another_index_is_refused(index: SearchIndex) -> None:
    other = SearchIndex(CATALOG).mask(["files__read_file"])
    with pytest.raises(ValueError, match="not built for"):
        index.search("file", 5, candidates=other)
    with pytest.raises(ValueError, match="not built for"):
        index.restricted(other)


def test_mask_array_is_a_boolean_view_of_the_members(index: SearchIndex) -> None:
    mask = index.mask(["files__read_file", "weather__get_forecast"])
    assert isinstance(mask, CandidateMask)
    assert mask.array().sum() == 2
    assert sorted(mask.ids()) == sorted(
        index.doc_id(k) for k in ["files__read_file", "weather__get_forecast"]
    )


def test_masked_search_equals_search_restricted_by_only_on_random_catalogs() -> None:
    rng = random.Random(11)  # noqa: S311 - test data, not cryptography
    vocab = [f"w{i}" for i in range(40)] + ["get", "list", "data", "file"] * 15
    catalog = [
        doc(f"srv{i % 9}", f"tool{i}", " ".join(rng.choice(vocab) for _ in range(rng.randint(3, 25))))
        for i in range(700)  # common terms past the size where a term keeps its ranked best list
    ]
    index = SearchIndex(catalog)
    all_keys = [d.key for d in catalog]
    for _ in range(80):
        members = set(rng.sample(all_keys, rng.choice([3, 40, 350, 650])))
        mask = index.mask(members)
        query = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 6)))
        limit = rng.choice([1, 5, 10])
        skip = set(rng.sample(all_keys, rng.choice([0, 0, 20])))
        masked = index.search(query, limit, skip=skip, candidates=mask)
        assert masked == index.search(query, limit, skip=skip, only=members), query
