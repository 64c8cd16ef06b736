"""Tokenizer for tool search: identifiers, prose in any script, plural/stem folding.

Tool catalogs mix identifiers (``getUserProfile``, ``list_issues``, ``GET_movie-movie_id``) with prose
in English, German, Chinese, Japanese... One tokenizer serves documents and queries alike so that
both sides fold the same way:

* NFKC-normalise, then split into runs of letters/digits (punctuation, ``_`` and ``-`` separate).
* Split runs at camelCase humps, acronym ends (``HTMLParser`` -> ``html parser``) and letter/digit
  boundaries; a split identifier also keeps its joined form (``base64`` stays findable as one word).
* CJK runs (no spaces between words) become character unigrams plus bigrams, the usual
  dictionary-free way to make Chinese and Japanese searchable.
* Lower-case (``casefold``), drop English stopwords, fold plurals and suffixes with Snowball's
  English stemmer (PyStemmer; chosen over hand-written suffix rules on every evaluation set,
  bench/stemmer_compare.py). Non-ASCII words (``größe``, ``café``) are kept as they are.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache
from itertools import chain
from typing import Any

import Stemmer  # PyStemmer ships no type information (mypy override in pyproject.toml)

__all__ = ["STOPWORDS", "stem", "tokenize"]

# Letters and digits; everything else (including "_" and "-") separates words.
_RUN_RE = re.compile(r"[^\W_]+")
# Scripts written without spaces between words: Han, Hiragana, Katakana, Hangul, CJK compatibility.
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")

# Function words plus the filler of requests ("can you please help me..."). Capability words such
# as "get", "find", "search", "list" are deliberately NOT here: they name what tools do.
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves ive youre dont doesnt cant wont isnt
    please could would kindly help want wanted need needs like let lets know tell give provide also
    maybe some any something anything thing things way ways e g eg ie etc via using use used
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())

# Words Snowball would fold onto a different word's stem, or leave apart from their own plural
# ("alias" -> "alia" but "aliases" -> "alias"). They pass unchanged; Snowball still folds their plurals.
_KEEP_TEXT = """
    news business always perhaps series species alias atlas bias canvas chaos gas bus plus yes kudos
    sms dns aws gps ios macos analysis basis axis thesis
"""
_KEEP: frozenset[str] = frozenset(_KEEP_TEXT.split())
_local = threading.local()


def _stemmer() -> Any:
    # PyStemmer objects keep internal state: one per thread (the index builds in a worker thread
    # while queries are tokenized on the event loop).
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Snowball English (Porter2) stem of an ASCII word: ``tools`` -> ``tool``, ``filtering`` -> ``filter``.

    It only has to map a document word and a query word to the same key, not produce a real word.
    Only ASCII words of 4+ letters are stemmed; other scripts pass unchanged (an English stemmer
    would mangle German or French words).
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha() or word in _KEEP:
        return word
    return str(_stemmer().stemWord(word))


def _split_identifier(run: str) -> list[str]:
    """Split a letter/digit run at camelCase humps, acronym ends and letter/digit boundaries."""
    if run.isdigit() or (run.isalpha() and (run.islower() or run.isupper() or run[1:].islower())):
        return [run]
    parts: list[str] = []
    start = 0
    n = len(run)
    for i in range(1, n):
        prev, cur = run[i - 1], run[i]
        boundary = (
            (prev.islower() and cur.isupper())
            or (prev.isdigit() != cur.isdigit())
            or (prev.isupper() and cur.isupper() and i + 1 < n and run[i + 1].islower())
        )
        if boundary:
            parts.append(run[start:i])
            start = i
    parts.append(run[start:])
    return parts


def _cjk_tokens(run: str) -> list[str]:
    grams = list(run)
    grams.extend(run[i : i + 2] for i in range(len(run) - 1))
    return grams


@lru_cache(maxsize=65536)  # bounded: queries are arbitrary text
def _word_tokens(run: str) -> tuple[str, ...]:
    """Terms of one letter/digit run; cached because catalogs repeat the same words endlessly."""
    parts = _split_identifier(run)
    words = [part.casefold() for part in parts]
    if len(parts) > 1:
        # Keep the joined form too: "base64", "oauth2", "getuser" still match a query written so.
        words.append(run.casefold())
    # Stray ASCII letters/digits ("s" of "s3") only add noise; stopwords carry no meaning.
    return tuple(stem(w) for w in words if w not in STOPWORDS and (len(w) > 1 or not w.isascii()))


def tokenize(text: str) -> list[str]:
    """Turn text (an identifier, a description, a query) into search terms, in order."""
    if text.isascii():  # the common case: NFKC changes nothing, no CJK; loop in C
        return list(chain.from_iterable(map(_word_tokens, _RUN_RE.findall(text))))
    out: list[str] = []
    for run in _RUN_RE.findall(unicodedata.normalize("NFKC", text)):
        if run.isascii():
            out.extend(_word_tokens(run))
            continue
        pos = 0
        for match in _CJK_RE.finditer(run):
            if match.start() > pos:
                out.extend(_word_tokens(run[pos : match.start()]))
            out.extend(_cjk_tokens(match.group()))
            pos = match.end()
        if pos < len(run):
            out.extend(_word_tokens(run[pos:]))
    return out
