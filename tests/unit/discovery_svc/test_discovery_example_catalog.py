"""Search on the example config's own catalog, as a new user meets it: BM25 and hybrid search with the
bundled model, through the engine's search_tools (the time and notes servers are loaded, the others
deferred, exactly as in examples/casual_mcp_config.json).

The catalog is bench/data/example.tools.jsonl (what the example servers list; an end-to-end test
checks it against the running servers) and the queries are the documented ones in
bench/data/example.queries.jsonl, each with the tool it must find first, or none for an off-topic
question.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from toolscout.client import SearchRequest, SearchResult

from discovery_svc.engine import DiscoveryEngine
from tests.support.discovery_catalogs import example_catalog, example_engine, example_queries
from tests.support.mcp_servers import REPO_ROOT

WAIT = 60.0

DOCUMENTED = example_queries()
ON_TOPIC = [q for q in DOCUMENTED if q["gold"]]
OFF_TOPIC = [q for q in DOCUMENTED if not q["gold"]]
CATALOG = example_catalog()
LLM_NAME = {(t.server, t.name): t.llm_name for t in CATALOG.tools}


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["bm25", "hybrid"])
async def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[DiscoveryEngine]:
    service = await example_engine(request.param, tmp_path_factory.mktemp("embeddings"))
    yield service
    await service.close()


async def search(engine: DiscoveryEngine, query: str) -> SearchResult:
    return await engine.search_tools(SearchRequest(query=query))


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("query", ON_TOPIC, ids=[q["id"] for q in ON_TOPIC])
async def test_every_documented_example_query_finds_its_tool_first(
    engine: DiscoveryEngine, query: dict[str, Any]
) -> None:
    result = await search(engine, query["query"])
    expected = LLM_NAME[(query["gold"][0]["server"], query["gold"][0]["name"])]
    assert [m.tool.llm_name for m in result.matches][:1] == [expected], result.result_text


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("query", OFF_TOPIC, ids=[q["id"] for q in OFF_TOPIC])
async def test_an_off_topic_question_finds_nothing_and_loads_nothing(
    engine: DiscoveryEngine, query: dict[str, Any]
) -> None:
    result = await search(engine, query["query"])
    assert [m.tool.llm_name for m in result.matches] == []
    assert result.newly_loaded == ()
    assert result.result_text.startswith(f"No tools found matching '{query['query']}'")


@pytest.mark.asyncio(loop_scope="module")
async def test_a_clear_word_match_is_first_and_no_two_different_tools_show_the_same_score(
    engine: DiscoveryEngine,
) -> None:
    # "current time": the time tool matches both words, the weather tool one; the time tool is
    # loaded already (the time server is not deferred), the weather tool is not.
    result = await search(engine, "current time")
    scores = [m.score for m in result.matches]
    assert result.matches[0].tool.llm_name == "time__get_current_time"
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == len(scores), scores


def test_the_readme_documents_exactly_these_queries_and_first_tools() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = readme.index("  | query | first tool |")
    rows = []
    for line in readme[start + 2 :]:
        if not line.strip().startswith("|"):
            break
        query, first = (cell.strip() for cell in line.strip().strip("|").split("|"))
        rows.append((query, first.strip("`")))
    expected = [
        (
            q["query"],
            LLM_NAME[(q["gold"][0]["server"], q["gold"][0]["name"])]
            if q["gold"]
            else "none (No tools found)",
        )
        for q in DOCUMENTED
    ]
    assert rows == expected


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def both(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, DiscoveryEngine]]:
    engines = {
        mode: await example_engine(mode, tmp_path_factory.mktemp("embeddings")) for mode in ("bm25", "hybrid")
    }
    yield engines
    for service in engines.values():
        await service.close()


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("query", DOCUMENTED, ids=[q["id"] for q in DOCUMENTED])
async def test_hybrid_search_loads_no_more_tools_than_bm25_for_a_documented_query(
    both: dict[str, DiscoveryEngine], query: dict[str, Any]
) -> None:
    # A chat searching "current time in a timezone" loaded 5 unrelated tools (weather, text__wait,
    # media__tone, ...) with hybrid search, 1 with BM25: every loaded tool stays for the whole chat.
    bm25, hybrid = [await search(both[mode], query["query"]) for mode in ("bm25", "hybrid")]
    assert len(hybrid.newly_loaded) <= len(bm25.newly_loaded)
