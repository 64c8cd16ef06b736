"""The tokenizer's hand-written suffix stemmer, as it was before the switch to Snowball.

Kept only so bench/stemmer_compare.py can reproduce the comparison that chose Snowball.
"""

from __future__ import annotations

from functools import lru_cache

# Suffix rules for :func:`stem`. A suffix is stripped only when a stem of 3+ letters with a vowel
# remains, so short words ("ring", "user", "string") stay intact.
_INFLECTIONAL: tuple[str, ...] = ("ing", "ed")
_DERIVATIONAL: tuple[tuple[str, str], ...] = (
    ("ational", "ate"),
    ("ization", "ize"),
    ("isation", "ize"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("iveness", "ive"),
    ("ation", "ate"),
    ("ment", ""),
    ("ness", ""),
    ("ity", ""),
    ("er", ""),
    ("ly", ""),
)
# Words a suffix rule would mangle into another word's stem.
_KEEP_TEXT = """
    news business always perhaps series species alias atlas bias canvas chaos gas bus plus yes kudos
    sms dns aws gps ios macos analysis basis axis thesis
"""
_KEEP: frozenset[str] = frozenset(_KEEP_TEXT.split())
_VOWELS = frozenset("aeiouy")


def _has_vowel(word: str) -> bool:
    return any(ch in _VOWELS for ch in word)


def _plural(word: str) -> str:
    if not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zes")):
        return word[:-2]
    return word[:-1]


def _tidy(word: str, stripped: bool) -> str:
    """Normalise a stem so 'creat'/'create', 'runn'/'run' and 'copi'/'copy' conflate."""
    if word.endswith("ie") and len(word) > 4:
        return word[:-2] + "y"  # movie -> movy, like movies -> movy
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz" and word[-1] not in _VOWELS:
        word = word[:-1]  # running -> runn -> run
    elif word.endswith("e") and len(word) > 3:
        word = word[:-1]  # create -> creat, matches created -> creat
    if stripped and word.endswith("i") and len(word) > 3:
        word = word[:-1] + "y"  # copied -> copi -> copy (but German "datei" stays)
    return word


def _strip(word: str, suffix: str, replacement: str = "") -> str | None:
    if not word.endswith(suffix) or len(word) - len(suffix) < 3:
        return None
    base = word[: -len(suffix)]
    return base + replacement if _has_vowel(base) else None


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Fold plurals and common English suffixes: ``tools`` -> ``tool``, ``filtering`` -> ``filt``.

    Deliberately light (no dictionary, three steps: plural, -ing/-ed, one derivational suffix): it
    only has to map a document word and a query word to the same key, not produce a real word. Only
    ASCII words of 4+ letters are stemmed; other scripts pass unchanged.
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha() or word in _KEEP:
        return word
    word = _plural(word)
    changed = False
    for suffix in _INFLECTIONAL:
        stripped = _strip(word, suffix)
        if stripped is not None:
            word, changed = _tidy(stripped, stripped=True), True
            break
    for suffix, replacement in _DERIVATIONAL:
        stripped = _strip(word, suffix, replacement)
        if stripped is not None:
            word, changed = stripped, True
            break
    return _tidy(word, stripped=changed)
