"""Embeddings computed once per text: an in-memory map backed by an on-disk cache directory.

A vector is keyed by a hash of the model id, the side (document or query) and the exact text
embedded, so a restart, a new catalog version or a changed toolset embeds only texts never seen
before, and a changed tool description or a different model never reuses a stale vector.

On disk (``toolscout.search.cache_dir``), each model gets its own sub-directory holding shard files
(``.npz``: 16-byte keys and float32 rows). Every batch of new vectors is written as one new shard,
atomically (temporary file, then rename), so a crash leaves either the whole shard or none. Many
shards are merged into one on load. A shard that cannot be read (truncated, corrupt, wrong shape)
is skipped with a warning and deleted; its texts are simply embedded again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from discovery_svc.embeddings import Embedder, EmbedderError, Vectors
from toolscout_kit.logging import get_logger

__all__ = ["EmbeddingCache", "Side", "embed_with_cache"]

Side = Literal["document", "query"]
_KEY_BYTES = 16
_MERGE_AT = 16  # shards on disk before they are merged into one at load time
_log = get_logger(__name__)


def _key(model_id: str, side: Side, text: str) -> bytes:
    digest = hashlib.blake2b(digest_size=_KEY_BYTES)
    digest.update(model_id.encode())
    digest.update(b"\x00" + side.encode() + b"\x00")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.digest()


class EmbeddingCache:
    """Vectors of one model by text. Thread-safe for concurrent reads; writes are serialised by the
    caller (one index build at a time), which is how discovery uses it.

    ``directory=None`` keeps vectors in memory only.
    """

    def __init__(self, model_id: str, directory: Path | None = None) -> None:
        self.model_id = model_id
        self._vectors: dict[bytes, Vectors] = {}
        self._dim: int | None = None
        self._dir: Path | None = None
        if directory is not None:
            slug = hashlib.blake2b(model_id.encode(), digest_size=8).hexdigest()
            self._dir = Path(directory) / slug
            self._dir.mkdir(parents=True, exist_ok=True)
            (self._dir / "MODEL").write_text(model_id + "\n", encoding="utf-8")
            self._load()

    def __len__(self) -> int:
        return len(self._vectors)

    @property
    def dim(self) -> int | None:
        return self._dim

    def key(self, side: Side, text: str) -> bytes:
        return _key(self.model_id, side, text)

    def get(self, side: Side, text: str) -> Vectors | None:
        return self._vectors.get(_key(self.model_id, side, text))

    def lookup(self, side: Side, texts: Sequence[str]) -> tuple[list[Vectors | None], list[int]]:
        """The cached vector of each text (or None) and the positions of the missing ones."""
        found = [self._vectors.get(_key(self.model_id, side, t)) for t in texts]
        return found, [i for i, v in enumerate(found) if v is None]

    def put(self, side: Side, texts: Sequence[str], vectors: Vectors, *, persist: bool = True) -> None:
        """Remembers ``vectors[i]`` for ``texts[i]``; with a directory, also writes them as a shard."""
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        if not texts:
            return
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        self._check_dim(matrix.shape[1])
        keys = [_key(self.model_id, side, t) for t in texts]
        self._vectors.update(zip(keys, matrix, strict=True))
        if persist and self._dir is not None:
            self._write_shard(np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, _KEY_BYTES), matrix)

    def _check_dim(self, dim: int) -> None:
        if self._dim is None:
            self._dim = dim
        elif dim != self._dim:
            raise EmbedderError(
                f"model {self.model_id!r} returned {dim}-d vectors, the cache holds {self._dim}-d"
            )

    # -- disk ------------------------------------------------------------------------------------

    def _write_shard(self, keys: np.ndarray, vectors: Vectors, name: str | None = None) -> Path:
        assert self._dir is not None
        final = self._dir / (name or f"shard-{uuid.uuid4().hex}.npz")
        tmp = self._dir / f".{final.name}.{uuid.uuid4().hex}.tmp"
        try:
            with tmp.open("wb") as fh:
                np.savez(fh, keys=keys, vectors=vectors)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except OSError as err:
            # A read-only or full disk costs a re-embedding on the next start, nothing else.
            _log.warning("embedding cache write failed", path=str(final), error=str(err))
            with contextlib.suppress(OSError):
                tmp.unlink()
        return final

    def _read_shard(self, path: Path) -> tuple[np.ndarray, Vectors]:
        # Our own handle: numpy leaks the one it opens when the archive turns out to be corrupt.
        with path.open("rb") as fh, np.load(fh, allow_pickle=False) as data:
            keys, vectors = data["keys"], data["vectors"]
        if (
            keys.dtype != np.uint8
            or keys.ndim != 2
            or keys.shape[1] != _KEY_BYTES
            or vectors.dtype != np.float32
            or vectors.ndim != 2
            or len(vectors) != len(keys)
            or (self._dim is not None and vectors.shape[1] != self._dim)
            or not np.isfinite(vectors).all()
        ):
            raise ValueError("unexpected shapes or values")
        return keys, vectors

    def _load(self) -> None:
        assert self._dir is not None
        for stale in self._dir.glob(".*.tmp"):  # a write interrupted by a crash
            with contextlib.suppress(OSError):
                stale.unlink()
        shards = sorted(self._dir.glob("shard-*.npz"))
        good: list[Path] = []
        all_keys: list[np.ndarray] = []
        all_vectors: list[Vectors] = []
        for path in shards:
            try:
                keys, vectors = self._read_shard(path)
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
                _log.warning(
                    "embedding cache shard unreadable; ignoring it (its tools are embedded again)",
                    path=str(path),
                    error=f"{type(err).__name__}: {err}",
                )
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if len(keys):
                self._check_dim(vectors.shape[1])
                all_keys.append(keys)
                all_vectors.append(vectors)
            good.append(path)
        if not all_keys:
            return
        keys = np.concatenate(all_keys)
        vectors = np.concatenate(all_vectors) if len(all_vectors) > 1 else all_vectors[0]
        raw = keys.tobytes()
        self._vectors.update(
            zip((raw[i : i + _KEY_BYTES] for i in range(0, len(raw), _KEY_BYTES)), vectors, strict=True)
        )
        if len(good) >= _MERGE_AT:
            merged = self._write_shard(keys, vectors)
            for path in good:
                if path != merged:
                    with contextlib.suppress(OSError):
                        path.unlink()


def embed_with_cache(
    embedder: Embedder,
    cache: EmbeddingCache,
    texts: Sequence[str],
    *,
    batch_size: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> Vectors:
    """Document vectors for ``texts`` (row i for text i), embedding only those not in ``cache``.

    New vectors are cached (and persisted) batch by batch, so an interrupted build keeps what it
    did. ``progress(done, total)`` is called after each batch with counts of texts to embed.
    Raises :class:`~discovery_svc.embeddings.EmbedderError` if the embedder fails.
    """
    if embedder.model_id != cache.model_id:
        raise ValueError(f"cache of {cache.model_id!r} used with embedder {embedder.model_id!r}")
    found, missing = cache.lookup("document", texts)
    # Identical texts (copies of a tool on several servers) are embedded once.
    todo = list(dict.fromkeys(texts[i] for i in missing))
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        vectors = embedder.embed_documents(batch)
        cache.put("document", batch, vectors)
        if progress is not None:
            progress(min(start + batch_size, len(todo)), len(todo))
    if missing:
        found = [cache.get("document", t) if v is None else v for t, v in zip(texts, found, strict=True)]
    if not texts:
        return np.empty((0, cache.dim or 0), dtype=np.float32)
    return np.stack(found)  # type: ignore[arg-type]  # every entry was filled above
