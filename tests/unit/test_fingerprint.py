"""Tokenisation, feature hashing and the simhash bit vote."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_scrapy import FeatureConfig, fingerprint, fingerprint_html, hamming_distance, similarity, tokenize
from simhash_scrapy.core._native import switched
from simhash_scrapy.core.features.features import feature_hashes, stable_hash64, token_hashes
from simhash_scrapy.core.features.fingerprint import simhash_from_features


# Every test runs on the compiled helpers and on the pure-Python path (conftest.implementation).
pytestmark = pytest.mark.usefixtures("implementation")

ARTICLE = (
    "The block-permuted index splits each 64-bit fingerprint into blocks. Two fingerprints "
    "within Hamming distance k differ in at most k blocks, so at least B minus k blocks match "
    "exactly, and one of the tables is keyed on exactly those blocks. A query therefore reads one "
    "bucket per table and verifies each candidate with a population count, which is exact. "
) * 3


def test_tokenize_unicode() -> None:
    assert tokenize("Hello, WORLD! x_y 3.14 don’t") == ["hello", "world", "x", "y", "3", "14", "don", "t"]
    assert tokenize("Straße ＦＵＬＬ café CAFÉ ﬁne") == ["strasse", "full", "café", "café", "fine"]
    assert tokenize("日本語のテキスト") == ["日本", "本語", "語の", "のテ", "テキ", "キス", "スト"]
    assert tokenize("中") == ["中"]
    assert tokenize("Привет мир") == ["привет", "мир"]
    assert tokenize("") == [] and tokenize("!!! ...") == []


@pytest.mark.slow  # 200 examples on both paths
@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300), st.booleans())
def test_vectorised_token_hashes_equal_per_token_hashes(text: str, compiled: bool) -> None:
    expected = [stable_hash64(tok.encode("utf-8", "replace")) for tok in tokenize(text)]
    with switched(compiled):
        assert token_hashes(text).tolist() == expected


@pytest.mark.slow  # megabytes of text, or fresh processes
def test_long_text_is_hashed_in_chunks_identically() -> None:
    words = ["alpha", "beta", "gamma", "délta", "ε", "日本語"]
    text = " ".join(words[i % len(words)] for i in range(400_000))  # > 1 MiB of UTF-8
    assert token_hashes(text).tolist() == [stable_hash64(t.encode()) for t in tokenize(text)]


def test_bit_vote_by_hand() -> None:
    # Three features: bit j is set iff the weighted vote for bit j is positive.
    features = np.array([0b1011, 0b0110, 0b1100], dtype=np.uint64)
    weights = np.array([1.0, 1.0, 3.0])
    expected = 0
    for bit in range(64):
        vote = sum(w if (int(f) >> bit) & 1 else -w for f, w in zip(features, weights))
        expected |= (vote > 0) << bit
    assert simhash_from_features(features, weights) == expected == 0b1100


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=50), st.data())
def test_bit_vote_matches_reference(hashes: list[int], data) -> None:
    weights = data.draw(st.lists(st.floats(0.5, 10), min_size=len(hashes), max_size=len(hashes)))
    expected = 0
    for bit in range(64):
        vote = sum(w if (h >> bit) & 1 else -w for h, w in zip(hashes, weights))
        expected |= (vote > 1e-9) << bit
    got = simhash_from_features(np.array(hashes, dtype=np.uint64), np.array(weights))
    # Float rounding can only matter for exact ties; allow those bits.
    ties = [b for b in range(64) if abs(sum(w if (h >> b) & 1 else -w for h, w in zip(hashes, weights))) < 1e-9]
    mask = sum(1 << b for b in ties)
    assert got & ~mask == expected & ~mask


def test_similar_texts_are_close_and_different_texts_far() -> None:
    edited = ARTICLE.replace("exactly, and", "exactly; and").replace("which is exact", "which is precise")
    other = "Completely unrelated text about cooking pasta with tomatoes, garlic and olive oil. " * 5
    assert fingerprint(ARTICLE) == fingerprint(ARTICLE.upper())
    assert hamming_distance(fingerprint(ARTICLE), fingerprint(edited)) <= 6
    assert hamming_distance(fingerprint(ARTICLE), fingerprint(other)) >= 15


@pytest.mark.parametrize(
    "config",
    [
        FeatureConfig(),
        FeatureConfig(word_ngram=3),
        FeatureConfig(weighting="sublinear"),
        FeatureConfig(weighting="binary"),
        FeatureConfig(char_ngram=4),
    ],
)
def test_feature_configs(config: FeatureConfig) -> None:
    fp = fingerprint(ARTICLE, config)
    assert 0 < fp < 2**64
    hashes, weights = feature_hashes(ARTICLE, config)
    assert len(hashes) == len(set(hashes.tolist())) == len(weights)
    if config.weighting == "binary":
        assert set(weights.tolist()) == {1.0}


def test_word_ngrams_are_order_sensitive_and_words_are_not() -> None:
    a, b = "one two three four five six", "six five four three two one"
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a, FeatureConfig(word_ngram=2)) != fingerprint(b, FeatureConfig(word_ngram=2))


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"word_ngram": 0}, "word_ngram"),
        ({"char_ngram": -1}, "char_ngram"),
        ({"weighting": "idf"}, "weighting"),
        ({"cjk_ngram": 0}, "cjk_ngram"),
    ],
)
def test_feature_config_errors_name_the_argument(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        FeatureConfig(**kwargs)


def test_similarity_and_distance() -> None:
    assert hamming_distance(0, 2**64 - 1) == 64
    assert similarity(0b1011, 0b0011) == 1 - 1 / 64
    with pytest.raises(ValueError, match="a must"):
        hamming_distance(-1, 0)
    with pytest.raises(ValueError, match="b must"):
        hamming_distance(0, 2**64)


@pytest.mark.parametrize(
    "text",
    ["", "   \n\t", "!!! ... ???", "\x00\x00", "\ud800 lone surrogate", "Mixed русский 中文 English العربية"],
)
def test_odd_text_never_raises(text: str) -> None:
    assert 0 <= fingerprint(text) < 2**64
    assert fingerprint(text.encode("utf-8", "replace")) == fingerprint(text.encode("utf-8", "replace").decode())


def test_no_words_gives_zero() -> None:
    assert fingerprint("") == 0 and fingerprint("--- !!!") == 0


@pytest.mark.slow  # megabytes of text, or fresh processes
def test_huge_document() -> None:
    paragraph = "<p>" + ARTICLE + "</p>\n"
    html = "<html><body>" + paragraph * (50_000_000 // len(paragraph)) + "</body></html>"
    assert len(html) >= 49_000_000
    tf = FeatureConfig(weighting="tf")  # tf weights are scale-free: same word frequencies, scaled
    assert fingerprint_html(html, features=tf) == fingerprint(ARTICLE, tf)


@pytest.mark.slow  # megabytes of text, or fresh processes
def test_fingerprints_are_stable_across_processes_and_hash_seeds() -> None:
    script = textwrap.dedent(
        """
        import simhash_scrapy as s
        print(s.fingerprint("Stable across processes: naïve café 日本語 text"),
              s.fingerprint_html("<p>hello world this is a page with enough words to print</p>", min_tokens=1),
              s.fingerprint("three word shingles too", s.FeatureConfig(word_ngram=3)))
        """
    )
    outputs = set()
    for seed in ("0", "1", "12345", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        outputs.add(result.stdout)
    assert len(outputs) == 1
    # Golden values, the same on every machine.  If this fails, every stored
    # fingerprint changed: bump the index/store format versions.
    assert outputs.pop().split() == ["1170480777782700512", "9912484110882880885", "2326233081977541248"]


def test_default_log_weights_golden_value_and_signature() -> None:
    # Repeated words, so the weighting matters: the default "log" weights (1 + 6 ln tf) and
    # "sublinear" (1 + ln tf) give different fingerprints, and the default's is pinned.
    text = "the cat and the dog and the bird saw the cat again and again"
    assert fingerprint(text) == 3939471543819031462
    assert fingerprint(text, FeatureConfig(weighting="sublinear")) == 480709229021746086
    _, weights = feature_hashes(text)
    assert sorted(set(round(w, 6) for w in weights.tolist())) == sorted(
        {round(1 + 6 * math.log(n), 6) for n in (1, 2, 3, 4)}
    )
    # The slope is part of the signature stores and Redis keys are checked against.
    assert FeatureConfig().signature() == "w1-c0-log6-j2"
    assert FeatureConfig(weighting="sublinear").signature() == "w1-c0-sublinear-j2"


def test_fingerprint_html_skips_only_the_content_digest_it_does_not_return() -> None:
    from simhash_scrapy.core.analysis import AnalysisOptions, analyse_html
    from simhash_scrapy.core.features.exact import exact_digest

    words = " ".join(f"word{i}" for i in range(120))
    page = f"<html><body><main><p>{words}</p></main></body></html>".encode()
    full = analyse_html(page)
    lean = analyse_html(page, options=AnalysisOptions(content_digest=False))
    assert full.digest == exact_digest(words) and lean.digest is None
    assert (lean.fingerprint, lean.exact, lean.edit_keys) == (full.fingerprint, full.exact, full.edit_keys)
    assert fingerprint_html(page) == full.fingerprint
    # A short page's digest is its fingerprint: always given.
    short = b"<html><body><p>only a few words here</p></body></html>"
    assert analyse_html(short, options=AnalysisOptions(content_digest=False)).digest == analyse_html(short).digest
    assert analyse_html(short).digest is not None
