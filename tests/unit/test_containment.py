"""Sentence sketches and their containment (``core.cluster.containment``), and clustering step 7 on real rule objects."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_scrapy.core.cluster import containment as c
from simhash_scrapy.core.analysis import AnalysisOptions, analyse_text
from simhash_scrapy.core.cluster.clustering import Clusterer, Outcome, Rule, rule_of

# ----------------------------------------------------------------------------- sketches


def sketch_of_set(values: set[int], size: int = c.SKETCH) -> c.Sketch:
    ordered = sorted(values)
    return c.Sketch(tuple(ordered[:size]), len(ordered))


def exact_containment(a: set[int], b: set[int]) -> float:
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    return len(small & large) / len(small)


hashes = st.integers(min_value=0, max_value=2**64 - 1)


@settings(deadline=None)  # (the 200 ms default deadline failed a run at load 19: no timed assertions)
@given(st.sets(hashes, min_size=1, max_size=c.SKETCH // 2), st.sets(hashes, min_size=1, max_size=c.SKETCH // 2))
def test_sets_that_fit_in_a_sketch_are_measured_exactly(a: set[int], b: set[int]) -> None:
    if len(a) == len(b):  # which one is "the smaller" is then the first: make it so
        b = b | {max(b | a) + 1} if max(b | a) < 2**64 - 1 else b
    contained, shared = c.estimate(sketch_of_set(a), sketch_of_set(b))
    assert shared == len(a & b)
    assert contained == pytest.approx(exact_containment(a, b))


@settings(deadline=None)  # (the 200 ms default deadline failed a run at load 19: no timed assertions)
@given(st.sets(hashes, min_size=1, max_size=200), st.sets(hashes, max_size=200))
def test_a_page_inside_another_is_always_fully_contained(small: set[int], extra: set[int]) -> None:
    # membership in the sample is exact, so a subset never looks less than contained
    large = small | extra
    if len(large) == len(small):
        large = large | {-1 % 2**64} if (-1 % 2**64) not in small else large
    contained, shared = c.estimate(sketch_of_set(small), sketch_of_set(large))
    assert contained == 1.0
    assert shared >= 1


@settings(max_examples=30, derandomize=True, deadline=None)  # (a 200 ms deadline failed at load 15)
@given(st.integers(min_value=0, max_value=2**32))
def test_the_estimate_follows_the_exact_containment(seed: int) -> None:
    """Random pairs of 60-400 sentences (the larger at most twice the smaller, as ``verify`` asks) sharing
    part of the smaller one: over 40 pairs the estimate's mean error is small (at most 0.133 over 1,500
    seeds; a sample of about 16-32 of the smaller page's sentences)."""
    rng = random.Random(seed)
    errors = []
    for _ in range(40):
        n_small = rng.randrange(60, 200)
        n_large = rng.randrange(n_small, 2 * n_small + 1)
        share = rng.random()
        universe = rng.sample(range(2**62), n_small + n_large)
        small = set(universe[:n_small])
        keep = set(rng.sample(sorted(small), int(share * n_small)))
        large = keep | set(universe[n_small : n_small + n_large - len(keep)])
        contained, _ = c.estimate(sketch_of_set(small), sketch_of_set(large))
        errors.append(abs(contained - exact_containment(small, large)))
    assert sum(errors) / len(errors) < 0.16


def test_verify_needs_containment_comparable_size_and_enough_shared() -> None:
    article = set(range(1000, 1020))
    assert c.verify(sketch_of_set(article), sketch_of_set(article | set(range(5000, 5008))))
    # a listing page: the article among three others is four times as large
    listing = article | set(range(5000, 5060))
    assert c.estimate(sketch_of_set(article), sketch_of_set(listing))[0] == 1.0
    assert not c.verify(sketch_of_set(article), sketch_of_set(listing))
    # half the article elsewhere
    assert not c.verify(sketch_of_set(article), sketch_of_set(set(range(1000, 1010)) | set(range(7000, 7010))))
    # contained, but too few sentences shared
    assert not c.verify(sketch_of_set({1, 2, 3}), sketch_of_set({1, 2, 3, 4}))
    # sentences the counts call common do not vote
    assert not c.verify(sketch_of_set(article), sketch_of_set(article), common=lambda h: h < 1018)


def test_a_page_sharing_all_but_one_sampled_sentence_is_not_a_copy() -> None:
    # Two pages of one site whose text is mostly one long common section: every sampled sentence of the
    # smaller but one is in the larger (an estimated containment of 0.97).  A copy has all of them.
    section = set(range(1000, 1040))
    a, b = section | {1, 70_000}, section | {2, 3}  # 1 is sampled (the smallest); 70,000 is not
    contained, shared = c.estimate(sketch_of_set(a), sketch_of_set(b))
    assert len(set(sketch_of_set(a).hashes) | set(sketch_of_set(b).hashes)) > c.SKETCH  # a sample, not the sets
    assert shared == 29 and 0.95 < contained < 1.0  # 29 of the 30 sampled
    assert not c.verify(sketch_of_set(a), sketch_of_set(b))
    assert c.verify(sketch_of_set(a), sketch_of_set(b), min_containment=0.95)  # the previous threshold took it
    assert c.verify(sketch_of_set(section | {70_000}), sketch_of_set(b))  # the one different sentence unsampled


def test_sentences_are_normalised_and_short_ones_left_out() -> None:
    text = (
        "Home | News | Sport\n"
        "The council approved the new harbour plan on Tuesday evening. It will cost four million over ten years!\n"
        "Posted by Anna\n"
    )
    same = "THE council approved the new harbour plan on Tuesday evening.\n\nIt will cost four million over ten years"
    got = c.sentence_hashes(text)
    assert len(got) == 2  # the menu and the byline are too short
    assert got == c.sentence_hashes(same) == c.sentence_hashes(same.encode())
    # a character of a script written without spaces counts as a word
    assert len(c.sentence_hashes("今日は天気がとても良いです。明日も晴れ")) == 1
    assert c.sketch_of(text) is None  # under MIN_SENTENCES


def test_a_print_views_link_markers_are_left_out_of_its_sentences() -> None:
    page = "Stir the broccoli with a wooden spoon until every floret is coated in oil. Serve it hot.\n"
    printed = "Stir the broccoli [3] with a wooden spoon until every floret[4] is coated in oil.[5] Serve it hot.\n"
    assert c.sentence_hashes(printed) == c.sentence_hashes(page) == c.sentence_hashes(printed.encode())
    assert list(c.sentence_texts(printed).values()) == ["stir the broccoli with a wooden spoon until every floret is coated in oil"]
    # only a number of 1-4 digits in brackets is a marker: a word, five digits, a code stay
    for kept in ("[note]", "[12345]", "[1a]"):
        assert c.sentence_hashes(page.replace("wooden", f"wooden {kept}")) != c.sentence_hashes(page)


def test_sentence_hashes_are_the_same_in_every_process() -> None:
    text = " ".join(f"Sentence {i} of a page that has quite a few words." for i in range(30))
    code = "import sys;from simhash_scrapy.core.cluster.containment import sketch_of; print(sketch_of(sys.argv[1]))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code, text], env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {f"{c.sketch_of(text)}\n"}


def test_sentence_counts_never_undercount_and_saturate() -> None:
    counts = c.SentenceCounts(bits=4)  # 16 counters a table: collisions on purpose
    values = random.Random(3).sample(range(2**40), 50)
    for times, value in enumerate(values[:10], start=1):
        for _ in range(times):
            counts.add([value])
    for other in values[10:]:
        counts.add([other])
    for times, value in enumerate(values[:10], start=1):
        assert counts.count(value) >= times
    big = c.SentenceCounts(bits=8)
    for _ in range(300):
        big.add([7])
    assert big.count(7) == 255
    assert big.nbytes() == 512


def test_the_index_finds_by_anchors_removes_and_is_bounded() -> None:
    index = c.ContainmentIndex(max_pages=2)
    article = sketch_of_set(set(range(100, 140)))
    assert index.add(1, article)
    assert index.candidates(sketch_of_set(set(range(100, 130)))) == [1]
    assert index.match(sketch_of_set(set(range(100, 130)))) == (1, 1.0)
    assert index.add(2, sketch_of_set(set(range(100, 110)) | set(range(900, 930))))
    assert index.candidates(article) == [1, 2]
    assert not index.add(3, sketch_of_set(set(range(5000, 5040))))  # full
    assert len(index) == 2
    index.remove(1)
    assert index.candidates(article) == [2]
    assert index.sketch(1) is None
    assert index.match(article) is None  # the other one shares only a quarter


# ----------------------------------------------------------------------------- the rule's step 7

_WORDS = [f"w{i}" for i in range(3000)]


def sentences(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=rng.randrange(10, 20))).capitalize() + "." for _ in range(count)]


ARTICLE = sentences(1, 30)
OPTIONS = AnalysisOptions(sketch=True)


def page(*parts: list[str]) -> tuple[int, c.Sketch]:
    answer = analyse_text("\n".join(line for part in parts for line in part), OPTIONS)
    assert answer.fingerprint is not None and answer.sketch is not None and not answer.exact
    return answer.fingerprint, answer.sketch


def test_step_7_finds_a_print_view_and_a_template_copy_but_not_a_listing() -> None:
    original = page(["Home News Sport Weather", "Tuesday 4 June"], ARTICLE, ["Share this story", "Tags: harbour"])
    print_view = page(ARTICLE[:27])  # the print view lacks the menus, the date line and the last lines
    copy = page(sentences(2, 10), ARTICLE)  # the other site's own captions beside the article
    listing = page(ARTICLE, sentences(3, 30), sentences(4, 30))  # the article among two others
    clusters = Clusterer()
    assert clusters.check("s", "original", original[0], sketch=original[1]).outcome is Outcome.UNIQUE
    for name, (fingerprint, sketch) in (("print", print_view), ("copy", copy)):
        assert (fingerprint ^ original[0]).bit_count() > clusters.max_distance  # steps 1-6 cannot
        decision = clusters.check("s", name, fingerprint, sketch=sketch)
        assert decision.outcome is Outcome.NEAR_DUPLICATE
        assert decision.canonical == 0 and decision.via == "containment"
        assert decision.distance == (fingerprint ^ original[0]).bit_count()
        assert rule_of(False, decision.distance, clusters.max_distance, decision.via) is Rule.CONTAINMENT
    assert clusters.check("s", "listing", listing[0], sketch=listing[1]).outcome is Outcome.UNIQUE
    # without sketches (step 7 off, or a backend without it) the same pages stay apart
    plain = Clusterer()
    plain.check("s", "original", original[0])
    assert plain.check("s", "print", print_view[0]).outcome is Outcome.UNIQUE


def test_step_7_leaves_sentences_out_once_many_pages_had_them() -> None:
    widget = sentences(9, 12)  # a host's box of teasers, on every page
    clusters = Clusterer()
    outcomes = []
    for seed in range(5):
        fingerprint, sketch = page(sentences(100 + seed, 4), widget)  # a short page: mostly the box
        outcomes.append(clusters.check("s", f"p{seed}", fingerprint, sketch=sketch).outcome)
    # the first two pages are alike by the box only; after them the box's sentences are common
    assert outcomes[2:] == [Outcome.UNIQUE] * 3


def test_a_canonical_page_that_changed_leaves_the_sentence_index() -> None:
    original = page(ARTICLE)
    clusters = Clusterer()
    clusters.check("s", "a", original[0], sketch=original[1])
    other = page(sentences(5, 30))
    assert clusters.check("s", "a", other[0], sketch=other[1]).outcome is Outcome.CHANGED
    again = page(ARTICLE[:28])
    assert clusters.check("s", "b", again[0], sketch=again[1]).outcome is Outcome.UNIQUE


def test_match_is_the_verified_candidate_with_the_highest_containment() -> None:
    """``ContainmentIndex.match`` (one estimate a candidate) gives what ``verify`` and ``estimate`` say of each
    candidate: the highest containment, ties the entry recorded first; across hosts the stricter ratio."""
    import numpy as np

    from simhash_scrapy.core.cluster.containment import (
        CROSS_HOST_MIN_RATIO, COMMON, MIN_RATIO, ContainmentIndex, SentenceCounts, Sketch, estimate, verify,
    )

    rng = random.Random(11)
    hits = 0
    for _ in range(300):
        index, counts = ContainmentIndex(), SentenceCounts(bits=8)
        pool, pages = list(range(1, 120)), []
        for entry in range(rng.randint(1, 12)):
            pages.append(sorted(rng.sample(pool, rng.randint(3, 40))))
            index.add(entry, Sketch(tuple(pages[-1][:32]), len(pages[-1]) + rng.randint(0, 8)))
        counts.add_many(np.array(rng.choices(pool, k=rng.randint(0, 200)), dtype=np.uint64))
        hashes = sorted(rng.sample(pool, rng.randint(3, 40)))
        if rng.random() < 0.7:  # most of a page's sentences, a few of its own
            source = rng.choice(pages)
            hashes = sorted(set(rng.sample(source, max(3, len(source) - rng.randint(0, 4))))
                            | set(rng.sample(pool, rng.randint(0, 2))))  # fmt: skip
        sketch = Sketch(tuple(hashes[:32]), len(hashes) + rng.randint(0, 8))
        other_host = (lambda entry: entry % 2 == 1) if rng.random() < 0.5 else None
        common = lambda h, counts=counts: counts.count(h) >= COMMON  # noqa: E731
        best = None
        for entry in index.candidates(sketch):
            other = index.sketch(entry)
            assert other is not None
            ratio = CROSS_HOST_MIN_RATIO if other_host is not None and other_host(entry) else MIN_RATIO
            if verify(sketch, other, min_ratio=ratio, common=common):
                contained = estimate(sketch, other, common=common)[0]
                if best is None or contained > best[1]:
                    best = (entry, contained)
        assert index.match(sketch, counts, other_host) == best
        hits += best is not None
    assert 40 < hits < 260, hits
