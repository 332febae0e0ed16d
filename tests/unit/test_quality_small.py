"""The quality scorer on a small committed sample of the evaluation set (benchmarks/quality/sample).

23 real documentation pages: one group of each constructed category (mirror and
reader view, tracking variants, print view, 1-3% edits), a pair of releases,
pages sharing one heavy template, a same-title pair and (nearly) empty pages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_quality_kinds import QUALITY, _load  # loads benchmarks/quality/<name>.py once

SAMPLE = QUALITY / "sample"


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


def _same_short_text(texts, a: int, b: int) -> bool:
    from simhash_scrapy import tokenize

    ta, tb = tokenize(texts.get("main")[a]), tokenize(texts.get("main")[b])
    return ta == tb and 0 < len(ta) < score.default_setup().min_tokens


def test_defaults_find_the_copies_and_flag_no_negative(evalset, texts, defaults) -> None:
    # This sample's truth predates exact matching of short pages: its "empty" pages are never
    # duplicates.  The only pairs flagged outside the truth must be short pages with the same
    # words (two Sphinx search pages: "Search. Searching for multiple words only shows ...").
    fps = score.fingerprint_pages(evalset, score.default_setup(), texts)
    extra = {key for key in score.flagged_pairs(fps, score.default_setup().k) if key not in evalset.positive}
    assert len(extra) == defaults.overall.fp
    assert all(_same_short_text(texts, a, b) for a, b in extra)
    assert defaults.fp_by_kind.keys() <= {"empty"}
    for cat in ("tracking", "print", "release"):
        c = defaults.categories[cat]
        assert c.pairs and c.tp == c.pairs, cat
    # the reader view matches its original; the mirror adds a notice that moves a short page by > k bits
    assert defaults.categories["template"].tp >= 1
    assert defaults.categories["edit"].tp >= 1
    assert defaults.hard["hn_template"] == (0, 6)
    assert defaults.hard["hn_title"] == (0, 1)
    # (nearly) empty pages: skipped (no token) or compared exactly (short)
    assert defaults.empty_fingerprinted <= len(evalset.empty)


def test_naive_whole_page_simhash_misses_what_defaults_find(naive, defaults) -> None:
    assert naive.overall.recall < defaults.overall.recall
    assert naive.categories["tracking"].tp == 0  # rotating ads, timestamps and tokens move 3-shingles
    assert naive.categories["print"].tp == 0
    # whole-page text of an empty page is its template: fingerprinted, not skipped
    assert naive.empty_fingerprinted >= 2


def test_markdown_table_lists_every_category(evalset, naive, defaults) -> None:
    table = score.markdown_table([naive, defaults])
    for cat in evalset.categories():
        assert common.CATEGORY_TITLES[cat] in table
    # a hard-negative kind is listed when the set has pairs of it (this set has no shared-section pages)
    present = [name for name in common.HARD_NEGATIVES if defaults.hard[name][1]]
    assert "hn_shared" not in present
    for name in common.HARD_NEGATIVES:
        assert (common.CATEGORY_TITLES[name] in table) == (name in present)
    assert table.count("\n") == 2 + len(evalset.categories()) + 1 + len(present) + 1 - 1


def test_flagged_pairs_uses_every_pair_within_k() -> None:
    fps = {i: ("simhash", v) for i, v in {1: 0, 2: 0b111, 3: 0b1111, 5: 0b11111 << 40}.items()}
    fps[4] = None
    assert score.flagged_pairs(fps, 3) == {(1, 2), (2, 3)}
    assert score.flagged_pairs(fps, 4) == {(1, 2), (1, 3), (2, 3)}


def test_short_pages_match_only_by_equal_digest() -> None:
    fps = {1: ("exact", 7), 2: ("exact", 7), 3: ("exact", 8), 4: ("simhash", 7), 5: ("simhash", 6)}
    assert score.flagged_pairs(fps, 3) == {(1, 2), (4, 5)}


def _page(pid: int, url: str, category: str = "original", role: str = "original") -> common.Page:
    return common.Page(id=pid, url=url, file="", host=url.split("/")[2], category=category, role=role, group=None,
                       source="", words=100, family="f")  # fmt: skip


def test_natural_split_shared_section_and_jaccard_bands_are_counted_from_the_flags() -> None:
    # Four originals of one site (natural pairs: 0-1 word-for-word the same, 2-3 near-identical)
    # and three shared-section pages (4, 5, 6: pairs 4-5, 4-6, 5-6 are hard negatives).
    pages = [_page(i, f"http://s.test/v/{i}.html") for i in range(4)]
    pages += [_page(i, f"http://s.test/v/{i}.html", "hn_shared", "hn_shared") for i in (4, 5, 6)]
    evalset = common.EvalSet(
        root=Path("."), pages=pages, positive={(0, 1): "natural", (2, 3): "natural"}, gray=set(), hn_template=[],
        hn_title=[], empty=[], identical={(0, 1)}, positive_jaccard={(0, 1): 1.0, (2, 3): 0.97},
        hn_shared=[(4, 5), (4, 6), (5, 6)],
    )  # fmt: skip
    fps = {p.id: ("simhash", p.id) for p in pages}
    # found: the identical pair; missed: the near pair; false: 0-2 (natural kind) and 4-5 (shared section)
    result = score.evaluate(evalset, score.default_setup(), fps, {(0, 1), (0, 2), (4, 5)})
    assert (result.natural_split["identical"].tp, result.natural_split["identical"].pairs) == (1, 1)
    near = result.natural_split["near"]
    assert (near.tp, near.pairs, near.fp) == (0, 1, 1)
    assert result.categories["natural"].fp == 1
    assert result.hard["hn_shared"] == (1, 3)
    assert result.found == {(0, 1)}
    table = score.jaccard_table(evalset, result)
    natural_row = next(line for line in table.splitlines() if line.startswith("| natural"))
    assert natural_row.split(" | ")[1:] == ["-", "-", "-", "0/1", "1/1 |"]
    markdown = score.markdown_table([result])
    assert "| ... of which near-identical (not the same) | 1 | 0.00 / 0.00 / 0.00 |" in markdown
    assert "| hard negative: different pages sharing a long section | 3 | 1 flagged (33.33%) |" in markdown
