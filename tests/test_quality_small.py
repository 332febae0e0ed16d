"""The quality scorer on a small committed sample of the evaluation set (benchmarks/quality/sample).

23 real documentation pages: one group of each constructed category (mirror and
reader view, tracking variants, print view, 1-3% edits), a pair of releases,
pages sharing one heavy template, a same-title pair and (nearly) empty pages.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

QUALITY = Path(__file__).resolve().parent.parent / "benchmarks" / "quality"
SAMPLE = QUALITY / "sample"


def _load(name: str):
    if str(QUALITY) not in sys.path:
        sys.path.insert(0, str(QUALITY))
    spec = importlib.util.spec_from_file_location(name, QUALITY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


common = _load("common")
score = _load("score")


@pytest.fixture(scope="module")
def evalset():
    return common.load_set(SAMPLE)


@pytest.fixture(scope="module")
def texts(evalset):
    return score.Texts(evalset)


@pytest.fixture(scope="module")
def defaults(evalset, texts):
    return score.run_library(evalset, score.default_setup(), texts)


@pytest.fixture(scope="module")
def naive(evalset, texts):
    return score.run_library(evalset, score.NAIVE, texts)


def test_sample_truth_is_what_the_builder_says(evalset) -> None:
    assert len(evalset.pages) == 23
    cats = {cat for cat in evalset.positive.values()}
    assert {"template", "tracking", "print", "edit", "release"} <= cats
    assert len(evalset.hn_template) == 4 and len(evalset.hn_title) == 1 and len(evalset.empty) == 3
    # every positive pair is either one group or two releases of one page
    pages = evalset.by_id()
    for (a, b), cat in evalset.positive.items():
        assert pages[a].group == pages[b].group or cat == "release"


def test_defaults_find_the_copies_and_flag_no_negative(defaults) -> None:
    assert defaults.overall.fp == 0
    for cat in ("tracking", "print", "release"):
        c = defaults.categories[cat]
        assert c.pairs and c.tp == c.pairs, cat
    # the reader view matches its original; the mirror adds a notice that moves a short page by > k bits
    assert defaults.categories["template"].tp >= 1
    assert defaults.categories["edit"].tp >= 1
    assert defaults.hard["hn_template"] == (0, 6)
    assert defaults.hard["hn_title"] == (0, 1)
    # (nearly) empty pages are skipped, never matched
    assert defaults.empty_fingerprinted == 0


def test_naive_whole_page_simhash_misses_what_defaults_find(naive, defaults) -> None:
    assert naive.overall.recall < defaults.overall.recall
    assert naive.categories["tracking"].tp == 0  # rotating ads, timestamps and tokens move 3-shingles
    assert naive.categories["print"].tp == 0
    # whole-page text of an empty page is its template: fingerprinted, not skipped
    assert naive.empty_fingerprinted >= 2


def test_markdown_table_lists_every_category(naive, defaults) -> None:
    table = score.markdown_table([naive, defaults])
    for title in common.CATEGORY_TITLES.values():
        assert title in table
    assert table.count("\n") == 2 + len(common.CATEGORIES) + 1 + len(common.HARD_NEGATIVES) + 1 - 1


def test_flagged_pairs_uses_every_pair_within_k() -> None:
    fps = {1: 0, 2: 0b111, 3: 0b1111, 4: None, 5: 0b11111 << 40}
    assert score.flagged_pairs(fps, 3) == {(1, 2), (2, 3)}
    assert score.flagged_pairs(fps, 4) == {(1, 2), (1, 3), (2, 3)}
