"""`toolscout search` against a real discovery service over gRPC, on the example config's catalog:
scores a person can read (what the ranking used, never two different tools at the same printed
score), `--explain` with the BM25 and dense parts, and "No tools found" for an off-topic question,
in BM25 and in hybrid mode (the bundled model)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from toolscout.discovery.v1 import discovery_pb2_grpc

from discovery_svc.server import SERVICE_NAME
from discovery_svc.servicer import DiscoveryServicer
from tests.support.cli_stack import run_cli
from tests.support.discovery_catalogs import config as default_config
from tests.support.discovery_catalogs import example_engine
from toolscout_kit.server import RunningServer, ServiceBinding, start_server

WAIT = 60.0

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["bm25", "hybrid"])
async def discovery(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[str, str]]:
    mode: str = request.param
    engine = await example_engine(mode, tmp_path_factory.mktemp("embeddings"), WAIT)
    settings = default_config().toolscout  # the service's own settings: defaults, its own port
    binding = ServiceBinding(
        SERVICE_NAME, discovery_pb2_grpc.add_DiscoveryServicer_to_server, DiscoveryServicer(engine)
    )
    running: RunningServer = await start_server(
        [binding],
        settings.discovery,
        settings.security,
        listen="127.0.0.1:0",
        metrics_port=-1,
    )
    try:
        yield mode, running.address
    finally:
        await running.stop()
        await engine.close()


async def cli(address: str, *argv: str) -> tuple[int, str, str]:
    """``toolscout ARGV`` as its own process (the service answers on this test's event loop)."""
    done = await asyncio.to_thread(run_cli, *argv, "--discovery-target", address)
    return done.returncode, done.stdout, done.stderr


def table(out: str) -> list[list[str]]:
    """The rows of the printed table, split on runs of two or more spaces."""
    lines = out.splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines[2:] if line.strip()]


async def test_search_shows_distinct_readable_scores_with_the_clear_word_match_first(
    discovery: tuple[str, str],
) -> None:
    mode, address = discovery
    code, out, err = await cli(address, "search", "current time")
    assert code == 0, err
    rows = table(out)
    assert rows[0][1] == "time__get_current_time"
    scores = [row[3] for row in rows]
    assert len(set(scores)) == len(scores), out
    assert f"ranked by {mode}" in err


async def test_search_explain_prints_the_bm25_and_dense_parts_of_each_match(
    discovery: tuple[str, str],
) -> None:
    mode, address = discovery
    code, out, _ = await cli(address, "search", "current time", "--explain")
    assert code == 0
    assert out.splitlines()[0].split()[:6] == ["#", "Tool", "Server", "Score", "BM25", "Cosine"]
    first = table(out)[0]
    assert first[1] == "time__get_current_time"
    assert float(first[4]) > 0  # it shares both words with the query
    if mode == "hybrid":
        assert 0.8 < float(first[5]) < 1.0
    else:
        assert first[5] == "-"  # BM25 mode computes no similarity
        assert first[3] == first[4]  # and its score is the BM25 score
    code, out, _ = await cli(address, "--json", "search", "current time")
    match = json.loads(out)["matches"][0]
    assert match["bm25_score"] > 0
    assert (match["similarity"] is None) == (mode == "bm25")
    assert json.loads(out)["ranking"] == mode


async def test_an_off_topic_search_finds_nothing(discovery: tuple[str, str]) -> None:
    _, address = discovery
    code, out, _ = await cli(address, "search", "book a flight to Paris")
    assert code == 0
    assert out.strip() == "No tools found."
