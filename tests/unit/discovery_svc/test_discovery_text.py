"""Tokenizer behaviour: identifiers, prose, stemming, stopwords, non-ASCII and CJK text."""

from __future__ import annotations

import pytest

from discovery_svc.text import STOPWORDS, stem, tokenize


def test_camel_case_is_split_and_joined_form_kept() -> None:
    assert tokenize("getUserProfile") == ["get", "user", "profil", "getuserprofil"]


def test_acronym_followed_by_word_splits_at_the_acronym_end() -> None:
    assert tokenize("HTMLParser")[:2] == ["html", "parser"]
    assert tokenize("XMLHttpRequest")[:3] == ["xml", "http", "request"]


def test_snake_kebab_dots_and_slashes_separate_words() -> None:
    assert tokenize("list_open_issues") == ["list", "open", "issu"]
    assert tokenize("GET_movie-movie_id-keywords") == ["get", "movi", "movi", "id", "keyword"]
    assert tokenize("math.factorial") == ["math", "factori"]
    assert tokenize("Chemical Engineering/Forensic engineering") == ["chemic", "engin", "forens", "engin"]


def test_punctuation_never_sticks_to_words() -> None:
    assert tokenize("weather, (forecast)! for: 'Paris'?") == ["weather", "forecast", "pari"]


def test_letter_digit_boundaries_split_and_keep_the_whole() -> None:
    assert tokenize("base64") == ["base", "64", "base64"]
    assert tokenize("sha256 hash") == ["sha", "256", "sha256", "hash"]


def test_single_ascii_letters_are_dropped_but_numbers_kept() -> None:
    assert tokenize("s3 x 2024") == ["s3", "2024"]


@pytest.mark.parametrize(
    ("variants", "expected"),
    [
        (["tool", "tools"], "tool"),
        (["search", "searches", "searching", "searched"], "search"),
        # Snowball keeps "creation" apart from "create" (the old suffix rules folded them).
        (["create", "created", "creating", "creates"], "creat"),
        (["filter", "filters", "filtering", "filtered"], "filter"),
        (["query", "queries"], "queri"),
        (["address", "addresses"], "address"),
        (["box", "boxes"], "box"),
        (["copy", "copied", "copies"], "copi"),
        (["run", "running", "runs"], "run"),
        (["movie", "movies"], "movi"),
        (["alias", "aliases"], "alias"),
        (["translate", "translation", "translations"], "translat"),
    ],
)
def test_inflections_fold_to_one_stem(variants: list[str], expected: str) -> None:
    assert {stem(word) for word in variants} == {expected}


@pytest.mark.parametrize("word", ["news", "status", "analysis", "bus", "string", "user", "ring", "alias"])
def test_short_and_exceptional_words_are_not_mangled(word: str) -> None:
    assert stem(word) == word


def test_stopwords_and_request_filler_are_dropped() -> None:
    assert tokenize("Can you please help me find the weather in Paris?") == ["find", "weather", "pari"]
    assert "the" in STOPWORDS
    assert {"get", "find", "search", "list"}.isdisjoint(STOPWORDS)


def test_german_words_keep_umlauts_and_fold_case() -> None:
    assert tokenize("Größe der Datei ändern") == ["grösse", "der", "datei", "ändern"]
    assert tokenize("GRÖSSE") == tokenize("größe")


def test_accented_words_are_kept_whole() -> None:
    assert tokenize("Réserver un café") == ["réserver", "un", "café"]


def test_chinese_text_becomes_character_unigrams_and_bigrams() -> None:
    assert tokenize("搜索网页") == ["搜", "索", "网", "页", "搜索", "索网", "网页"]


def test_japanese_between_latin_words_is_tokenized_per_script() -> None:
    assert tokenize("readファイルtool") == ["read", "フ", "ァ", "イ", "ル", "ファ", "ァイ", "イル", "tool"]


def test_a_query_shares_terms_with_the_tool_it_describes_in_chinese() -> None:
    tool = set(tokenize("使用必应搜索指定的关键词"))
    assert {"搜索", "关键"} <= tool & set(tokenize("关键词搜索"))


def test_full_width_characters_are_normalised() -> None:
    assert tokenize("ＡＰＩ　ｋｅｙ") == tokenize("API key")


def test_empty_and_symbol_only_text_has_no_terms() -> None:
    assert tokenize("") == []
    assert tokenize("  -- __ ?? ") == []
    assert tokenize("the of and") == []


def test_tokenize_is_deterministic() -> None:
    text = "listRepositoryIssues for a GitHub repo; 列出仓库问题"
    assert tokenize(text) == tokenize(text)
