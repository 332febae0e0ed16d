"""The second, independent simhash (core.features.second) and the clustering rule's verified step 6."""

from __future__ import annotations

import numpy as np
from conftest import article_words

from simhash_scrapy.core.cluster.clustering import Clusterer, Outcome
from simhash_scrapy.core.features.features import feature_hashes
from simhash_scrapy.core.features.fingerprint import simhash_from_features
from simhash_scrapy.core.features.second import VERIFY_FACTOR, second_simhash


def both(words: list[str]) -> tuple[int, int]:
    hashes, weights = feature_hashes(" ".join(words))
    return simhash_from_features(hashes, weights), second_simhash(hashes, weights)


def test_the_second_simhash_is_independent_of_the_first() -> None:
    pairs = [both(article_words(seed, 200)) for seed in range(200)]
    firsts = np.array([[(a >> bit) & 1 for bit in range(64)] for a, _ in pairs])
    seconds = np.array([[(b >> bit) & 1 for bit in range(64)] for _, b in pairs])
    # bit j of the second agrees with bit j of the first about half the time (0.5 +- a few sigma)
    agreement = (firsts == seconds).mean()
    assert 0.45 < agreement < 0.55
    assert both(article_words(3, 200)) == both(article_words(3, 200))  # deterministic


def test_edits_move_the_two_simhashes_independently() -> None:
    """Over many 2.5%-edited copies, the second simhash is within k for many the first misses."""
    missed = rescued = 0
    for seed in range(60):
        words = article_words(seed, 320)
        copy = [f"edit{i}" if i % 40 == 0 else w for i, w in enumerate(words)]
        (a1, a2), (b1, b2) = both(words), both(copy)
        if (a1 ^ b1).bit_count() > 4:
            missed += 1
            rescued += (a2 ^ b2).bit_count() <= 4 and (a1 ^ b1).bit_count() <= VERIFY_FACTOR * 4
    assert missed >= 5 and rescued >= missed // 3


def test_step_6_verifies_the_first_simhash_within_twice_k() -> None:
    clusters = Clusterer(max_distance=4)
    first, second = 0x0F0F_0F0F_0F0F_0F0F, 0x1234_5678_9ABC_DEF0
    assert clusters.check("s", "a", first, second=second).outcome is Outcome.UNIQUE
    near = clusters.check("s", "b", first ^ 0b11111, second=second ^ 0b111)  # first 5 apart, second 3
    assert near.outcome is Outcome.NEAR_DUPLICATE and near.canonical == 0
    assert near.distance == 3 and near.via == "second"
    far = clusters.check("s", "c", first ^ 0x1FF, second=second)  # first 9 apart: not verified
    assert far.outcome is Outcome.UNIQUE
    assert clusters.check("t", "d", first ^ 0b11111, second=second).outcome is Outcome.UNIQUE  # other scope
    # a page that changes leaves the second index: its old second simhash finds nothing
    assert clusters.check("s", "a", ~first & (2**64 - 1), second=0).outcome is Outcome.CHANGED
    assert clusters.second[0] == 0 and len(clusters._seconds["s"]) == 2  # "a" (new) and "c"
    # without a second simhash nothing changes
    assert clusters.check("s", "f", first ^ 0b1111100000).outcome is Outcome.UNIQUE
