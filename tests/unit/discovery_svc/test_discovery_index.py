"""SearchIndex behaviour: ranking, exact names, IDF edge cases, scoping, filters, determinism."""

from __future__ import annotations

import copy
import math
import random
from collections import Counter
from typing import Any

import pytest

from discovery_svc.index import (
    K1,
    B,
    SearchDoc,
    SearchHit,
    SearchIndex,
    _LuceneBM25,
    document_tokens,
    normalize_name,
)
from discovery_svc.text import tokenize
from tests.support.discovery_catalogs import SHARED_DATA, load_jsonl_tools


def doc(
    server: str,
    name: str,
    description: str = "",
    schema: dict[str, Any] | None = None,
    key: str | None = None,
) -> SearchDoc:
    return SearchDoc(key or f"{server}__{name}", server, name, description, schema or {})


def keys(hits: list[SearchHit]) -> list[str]:
    return [hit.key for hit in hits]


CATALOG = [
    doc("github", "create_issue", "Create a new issue in a repository"),
    doc("github", "list_issues", "List issues of a repository, filtered by state"),
    doc("github", "search_code", "Search code across repositories"),
    doc("weather", "get_forecast", "Weather forecast for a city for the next days"),
    doc("weather", "get_alerts", "Active weather alerts for a US state"),
    doc("files", "read_file", "Read the contents of a file from disk"),
    doc("files", "write_file", "Write text to a file, creating it when missing"),
    doc("time", "get_current_time", "Current time in a given timezone"),
]


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    return SearchIndex(CATALOG)


def test_best_match_comes_first(index: SearchIndex) -> None:
    assert keys(index.search("weather forecast for Paris", 3))[0] == "weather__get_forecast"


def test_plural_query_finds_singular_tool(index: SearchIndex) -> None:
    assert keys(index.search("forecasts", 1)) == ["weather__get_forecast"]


def test_camel_case_query_matches_snake_case_tool(index: SearchIndex) -> None:
    assert keys(index.search("readFile", 1)) == ["files__read_file"]


def test_only_documents_sharing_a_term_are_returned(index: SearchIndex) -> None:
    hits = index.search("timezone", 10)
    assert keys(hits) == ["time__get_current_time"]
    assert all(hit.score > 0 for hit in hits)


def test_limit_caps_the_number_of_hits(index: SearchIndex) -> None:
    assert len(index.search("get", 2)) == 2
    assert index.search("get", 0) == []


@pytest.mark.parametrize("query", ["", "   ", "the of and", "?!", "zzzunknownzzz"])
def test_queries_without_usable_terms_return_nothing(index: SearchIndex, query: str) -> None:
    assert index.search(query, 5) == []


def test_exact_tool_name_ranks_first_even_when_another_tool_scores_higher() -> None:
    catalog = [
        doc("a", "read", "tiny"),
        doc("b", "read_file", "read read read a file; read it, read everything, read read"),
        doc("c", "reader", "read read files read"),
    ]
    index = SearchIndex(catalog)
    hits = index.search("read", 3)
    assert keys(hits)[0] == "a__read"
    assert hits[0].score > hits[1].score


@pytest.mark.parametrize("query", ["read_file", "READ_FILE", "read file", "Read-File", "files__read_file"])
def test_exact_name_match_is_case_and_separator_insensitive(index: SearchIndex, query: str) -> None:
    assert keys(index.search(query, 3))[0] == "files__read_file"


def test_exact_name_match_without_any_term_overlap_is_found() -> None:
    index = SearchIndex([doc("s", "the", "a stopword named tool"), doc("s", "other", "unrelated")])
    assert keys(index.search("The", 5)) == ["s__the"]


def test_two_document_corpus_matches_a_term_in_both_documents() -> None:
    # rank-bm25's Okapi IDF is log((2-2+.5)/(2+.5)) < 0 here: every match would vanish.
    index = SearchIndex([doc("s", "alpha", "send an email"), doc("s", "beta", "email inbox listing")])
    assert sorted(keys(index.search("email", 5))) == ["s__alpha", "s__beta"]


def test_term_in_exactly_half_the_documents_still_scores() -> None:
    # Okapi IDF is exactly 0 for n = N/2.
    catalog = [doc("s", f"t{i}", "upload file" if i < 2 else "other thing") for i in range(4)]
    hits = SearchIndex(catalog).search("upload", 5)
    assert sorted(keys(hits)) == ["s__t0", "s__t1"]
    assert all(hit.score > 0 for hit in hits)


def test_single_document_corpus_matches() -> None:
    assert keys(SearchIndex([doc("s", "only", "convert currency")]).search("currency", 5)) == ["s__only"]


def test_term_in_every_document_still_ranks_by_tf_and_length() -> None:
    catalog = [
        doc("s", "a", "data export"),
        doc("s", "b", "data data export"),
        doc("s", "c", "data and a lot of other words"),
    ]
    hits = SearchIndex(catalog).search("data", 5)
    assert len(hits) == 3
    assert keys(hits)[0] == "s__b"


def test_empty_index_returns_nothing() -> None:
    index = SearchIndex([])
    assert len(index) == 0
    assert index.search("anything", 5) == []


def test_len_counts_documents(index: SearchIndex) -> None:
    assert len(index) == len(CATALOG)


def test_duplicate_keys_are_rejected() -> None:
    with pytest.raises(ValueError, match="unique"):
        SearchIndex([doc("s", "a", key="k"), doc("t", "b", key="k")])


def test_server_scopes_results(index: SearchIndex) -> None:
    assert set(keys(index.search("get", 10, server="weather"))) == {
        "weather__get_forecast",
        "weather__get_alerts",
    }
    assert keys(index.search("issue", 10, server="weather")) == []


def test_unknown_server_returns_nothing(index: SearchIndex) -> None:
    assert index.search("weather", 5, server="nope") == []


def test_exact_name_on_another_server_is_not_returned_when_scoped(index: SearchIndex) -> None:
    assert keys(index.search("read_file", 5, server="github")) == []


def test_skip_excludes_keys_and_frees_their_slots(index: SearchIndex) -> None:
    hits = index.search("weather", 1, skip={"weather__get_forecast", "not_a_key"})
    assert keys(hits) == ["weather__get_alerts"]


def test_skip_also_excludes_exact_name_matches(index: SearchIndex) -> None:
    assert "files__read_file" not in keys(index.search("read_file", 5, skip=["files__read_file"]))


def test_only_restricts_to_given_keys(index: SearchIndex) -> None:
    hits = index.search("issues repository code", 10, only={"github__search_code", "weather__get_alerts"})
    assert keys(hits) == ["github__search_code"]


def test_only_empty_returns_nothing(index: SearchIndex) -> None:
    assert index.search("issue", 5, only=[]) == []


def test_only_combined_with_server_and_skip(index: SearchIndex) -> None:
    only = {"github__create_issue", "github__list_issues", "weather__get_alerts"}
    hits = index.search("issue", 5, server="github", only=only, skip={"github__create_issue"})
    assert keys(hits) == ["github__list_issues"]


def test_ties_break_by_server_then_key_whatever_the_input_order() -> None:
    catalog = [doc(s, n, "identical description") for s in ("zeta", "alpha", "mid") for n in ("b", "a")]
    expected = ["alpha__a", "alpha__b", "mid__a", "mid__b", "zeta__a", "zeta__b"]
    for seed in range(3):
        shuffled = catalog[:]
        random.Random(seed).shuffle(shuffled)  # noqa: S311 - test data, not cryptography
        assert keys(SearchIndex(shuffled).search("identical", 10)) == expected


def test_same_query_gives_same_hits(index: SearchIndex) -> None:
    assert index.search("file issue weather", 5) == index.search("file issue weather", 5)


def test_parameter_names_descriptions_enums_and_nested_properties_are_indexed() -> None:
    schema = {
        "type": "object",
        "properties": {
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "location": {
                "type": "object",
                "properties": {"postcode": {"type": "string", "description": "Postal code of the place"}},
            },
            "tags": {
                "type": "array",
                "items": {"type": "object", "properties": {"label": {"type": "string"}}},
            },
        },
    }
    index = SearchIndex([doc("w", "now", "Conditions", schema), doc("w", "other", "Something else")])
    for query in ("fahrenheit", "postcode", "postal", "label", "location"):
        assert keys(index.search(query, 5)) == ["w__now"], query


def test_name_terms_outweigh_a_passing_mention() -> None:
    catalog = [
        doc("s", "translate_text", "Convert text between languages"),
        doc("s", "summarize", "Summarize text; the summary can later be passed to translate"),
    ]
    assert keys(SearchIndex(catalog).search("translate", 2))[0] == "s__translate_text"


def test_server_name_is_searchable() -> None:
    index = SearchIndex([doc("spotify", "play", "Start playback"), doc("tmdb", "details", "Details")])
    assert keys(index.search("spotify", 5)) == ["spotify__play"]


def test_cjk_description_is_searchable() -> None:
    catalog = [
        doc("bing", "bing_search", "使用必应搜索指定的关键词，并返回搜索结果列表"),
        doc("bing", "fetch_webpage", "根据提供的ID获取对应网页的内容"),
    ]
    assert keys(SearchIndex(catalog).search("网页内容", 5))[0] == "bing__fetch_webpage"


def test_german_description_is_searchable() -> None:
    catalog = [doc("de", "groesse", "Ändert die Größe eines Bildes"), doc("de", "drehen", "Dreht ein Bild")]
    assert keys(SearchIndex(catalog).search("größe", 5)) == ["de__groesse"]


def test_document_tokens_repeat_the_name() -> None:
    tokens = document_tokens(doc("srv", "get_weather", "Forecast"))
    assert tokens.count("weather") == 3
    assert "srv" in tokens
    assert "forecast" in tokens


def test_normalize_name_folds_case_and_separators() -> None:
    assert (
        normalize_name("  Read File ")
        == normalize_name("read__file")
        == normalize_name("READ-FILE")
        == "read_file"
    )


class _FullScan:
    """Reference: textbook BM25 with Lucene IDF computed over every document."""

    def __init__(self, catalog: list[SearchDoc], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs = {d.key: Counter(document_tokens(d)) for d in catalog}
        self.lengths = {key: sum(c.values()) for key, c in self.docs.items()}
        self.order = {d.key: (d.server, d.key) for d in catalog}
        self.k1, self.b = k1, b

    def top(self, query: str, limit: int, skip: set[str]) -> list[str]:
        n = len(self.docs)
        avgdl = sum(self.lengths.values()) / n
        scores: dict[str, float] = {}
        for term in dict.fromkeys(tokenize(query)):
            df = sum(1 for c in self.docs.values() if term in c)
            if not df:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for key, counts in self.docs.items():
                tf = counts[term]
                if tf and key not in skip:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[key] / avgdl)
                    scores[key] = scores.get(key, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        return sorted(scores, key=lambda key: (-round(scores[key], 9), self.order[key]))[:limit]


def random_catalog(
    rng: random.Random, size: int, servers: int, vocab: list[str], words: int
) -> list[SearchDoc]:
    """``size`` tools over ``servers`` servers, each described by 3 to ``words`` words of ``vocab``."""
    return [
        doc(
            f"srv{i % servers}", f"tool{i}", " ".join(rng.choice(vocab) for _ in range(rng.randint(3, words)))
        )
        for i in range(size)
    ]


def test_pruned_scoring_returns_the_same_top_hits_as_a_full_scan() -> None:
    rng = random.Random(5)  # noqa: S311 - test data, not cryptography
    vocab = [f"w{i}" for i in range(60)] + ["get", "list", "data", "file"] * 10
    catalog = random_catalog(rng, 300, 7, vocab, 25)
    index, reference = SearchIndex(catalog), _FullScan(catalog)
    for _ in range(120):
        query = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 8)))
        skip = {f"srv{i % 7}__tool{i}" for i in rng.sample(range(300), rng.choice([0, 0, 5, 50]))}
        limit = rng.choice([1, 5, 10])
        assert keys(index.search(query, limit, skip=skip)) == reference.top(query, limit, skip), query


def test_queries_of_common_terms_in_a_big_catalog_match_a_full_scan_in_and_out_of_toolsets() -> None:
    # 2,400 documents where "get", "list", "data" and "file" each appear in about half: a query of
    # them adds up thousands of postings, which the index sums in numpy (not merge by merge).
    rng = random.Random(21)  # noqa: S311 - test data, not cryptography
    vocab = [f"w{i}" for i in range(80)] + ["get", "list", "data", "file"] * 12
    catalog = random_catalog(rng, 2400, 11, vocab, 30)
    index, reference = SearchIndex(catalog), _FullScan(catalog)
    all_keys = [d.key for d in catalog]
    for _ in range(30):
        query = " ".join(rng.sample(["get", "list", "data", "file", "w3", "w7"], rng.randint(2, 4)))
        limit = rng.choice([1, 5, 50])
        skip = set(rng.sample(all_keys, rng.choice([0, 30])))
        assert keys(index.search(query, limit, skip=skip)) == reference.top(query, limit, skip), query
        members = set(rng.sample(all_keys, rng.choice([300, 1200, 2300])))
        outside = skip | (set(all_keys) - members)
        masked = index.search(query, limit, skip=skip, candidates=index.mask(members))
        assert keys(masked) == reference.top(query, limit, outside), query


def test_a_query_of_stopwords_or_unknown_words_finds_nothing_in_a_toolset() -> None:
    index = SearchIndex(CATALOG)
    mask = index.mask(d.key for d in CATALOG[:5])
    assert index.search("the and of", 5, candidates=mask) == []
    assert index.search("zxqv blorf", 5, candidates=mask) == []


def test_one_common_term_query_uses_the_precomputed_ranking_and_matches_a_full_scan() -> None:
    # 600 documents all holding "common": past the size where a term keeps its ranked best list.
    rng = random.Random(9)  # noqa: S311 - test data, not cryptography
    catalog = [
        doc("srv", f"tool{i:03}", "common " * rng.randint(1, 3) + " ".join(["pad"] * rng.randint(0, 12)))
        for i in range(600)
    ]
    index, reference = SearchIndex(catalog), _FullScan(catalog)
    for limit, skip in [(5, set()), (10, set()), (5, set(reference.top("common", 3, set()))), (50, set())]:
        assert keys(index.search("common", limit, skip=skip)) == reference.top("common", limit, skip)


def test_docs_sharing_a_description_and_schema_index_as_copies_would() -> None:
    """A fleet's servers share one parsed schema per distinct schema: the build finds their words
    once, and the index is the one that separate copies of every schema give."""
    schema = {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}}
    description = "Weather forecast for a city."
    shared = [doc(f"team{i}", "forecast", description, schema) for i in range(5)]
    copied = [doc(f"team{i}", "forecast", description, copy.deepcopy(schema)) for i in range(5)]
    built, expected = SearchIndex(shared).postings, SearchIndex(copied).postings
    assert built._term == expected._term
    for column in ("_start", "ids", "_weights"):
        assert getattr(built, column).tolist() == getattr(expected, column).tolist(), column
    assert [hit.key for hit in SearchIndex(shared).search("city forecast", 5)] == [d.key for d in copied]


def test_docs_with_one_description_and_different_schemas_keep_their_own_words() -> None:
    def schema(param: str) -> dict[str, Any]:
        return {"type": "object", "properties": {param: {"type": "string"}}}

    index = SearchIndex(
        [
            doc("a", "lookup", "Looks it up.", schema("zipcode")),
            doc("b", "lookup", "Looks it up.", schema("isbn")),
        ]
    )
    assert [hit.key for hit in index.search("isbn", 5)] == ["b__lookup"]
    assert [hit.key for hit in index.search("zipcode", 5)] == ["a__lookup"]


def test_postings_are_the_per_posting_formula_on_a_real_catalog() -> None:
    """The columns made in bulk hold what one loop over every posting gives, bit for bit: terms
    numbered as first met, documents in order, weight = idf * tf * (k1 + 1) / (tf + k1 * (1 - b +
    b * length / avgdl)) (livemcpbench's 527 tools and a copy under other names: shared bodies)."""
    tools = load_jsonl_tools(SHARED_DATA / "livemcpbench.tools.jsonl")
    docs = [
        SearchDoc(f"{copy}{t.llm_name}", f"{copy}{t.server}", t.name, t.description, t.input_schema)
        for copy in ("", "z")
        for t in tools
    ]
    index = SearchIndex(docs)
    ordered = sorted(docs, key=lambda d: (d.server, d.key))
    bm25 = _LuceneBM25([document_tokens(d) or ["\x00"] for d in ordered])
    vocab: dict[str, int] = {}
    expected: list[tuple[int, int, float]] = []
    for doc_id, (freqs, length) in enumerate(zip(bm25.doc_freqs, bm25.doc_len, strict=True)):
        norm = K1 * (1.0 - B + B * length / bm25.avgdl)
        for term, tf in freqs.items():
            term_id = vocab.setdefault(term, len(vocab))
            expected.append((term_id, doc_id, bm25.idf[term] * tf * (K1 + 1.0) / (tf + norm)))
    expected.sort(key=lambda posting: posting[0])  # stable: by term, documents in order within
    postings = index.postings
    assert postings._term == vocab
    assert postings.ids.tolist() == [doc_id for _, doc_id, _ in expected]
    assert postings._weights.tolist() == [weight for _, _, weight in expected]
