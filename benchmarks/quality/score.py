"""Score near-duplicate detection on the evaluation set built by ``build_set.py``.

    python benchmarks/quality/score.py                     # naive vs defaults, markdown table
    python benchmarks/quality/score.py --sweep             # every setting's effect
    python benchmarks/quality/score.py --mode e2e          # crawl the set with Scrapy + the plugin
    python benchmarks/quality/score.py --mode e2e --backend resumed   # ... stopped halfway, resumed (or redis)
    python benchmarks/quality/score.py --data benchmarks/quality/data/wide --half test --families
                                                           # the wide set's test half, per template family

Library mode fingerprints every page (in the set's crawl order) and takes the
pairs within distance k from ``BlockPermutedIndex.find_all``.  End-to-end mode
serves the set on 127.0.0.1, crawls it with Scrapy and the plugin, and scores
the cluster report (two pages are flagged when they are in one cluster).

Short pages (at least one token, fewer than ``min_tokens``) are compared exactly, as the
plugin does: two short pages are flagged when their exact digests
(``simhash_scrapy.core.features.exact.exact_digest``) are equal, never by Hamming distance.  Pages of
``min_tokens`` (at least 30) up to ``one_edit_below`` tokens are also flagged when they share a one-edit key
(``simhash_scrapy.core.features.edits``: at most one token apart), as the plugin does.

Scores: precision, recall, F1 over duplicate pairs, overall, per kind of duplicate and (wide
set) per template family;
the share of hard-negative pairs flagged; how many (nearly) empty pages were
fingerprinted instead of skipped.  Pairs whose truth Jaccard is in the gray
zone [0.5, 0.9) are neither rewarded nor penalised.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from simhash_scrapy import MIN_TOKENS, BlockPermutedIndex  # noqa: E402
from simhash_scrapy.core import defaults  # noqa: E402
from simhash_scrapy.core.features.exact import exact_digest  # noqa: E402
from simhash_scrapy.core.features.features import DEFAULT_FEATURES, WEIGHTINGS, FeatureConfig, feature_hashes  # noqa: E402
from simhash_scrapy.core.features.fingerprint import simhash_from_features  # noqa: E402
from simhash_scrapy.core.cluster import containment as contain  # noqa: E402
from simhash_scrapy.core.features.second import MIN_TOKENS as SECOND_MIN_TOKENS  # noqa: E402
from simhash_scrapy.core.features.second import VERIFY_FACTOR, second_simhash  # noqa: E402
from simhash_scrapy.core.cluster.sitetemplate import HostTemplates, host_of  # noqa: E402
from simhash_scrapy.core.extract.text import extract_text, extract_text_bytes  # noqa: E402


@dataclass(frozen=True)
class Setup:
    """One way of fingerprinting pages."""

    name: str
    text_mode: str = "main"  # "main" | "visible"
    features: FeatureConfig = DEFAULT_FEATURES
    k: int = 3
    min_tokens: int = MIN_TOKENS
    exact: bool = True  # short pages (1 <= tokens < min_tokens) compared by exact digest, as the plugin does
    # Pages of min_tokens (at least 30) up to this many tokens are also flagged when their token sequences are one
    # token apart (a shared one-edit key, core.features.edits), as the plugin does; 0: off.
    one_edit_below: int = 0
    # Cross-page template learning (SIMHASH_TEMPLATES, core.cluster.sitetemplate): pages are also matched by their
    # template-free fingerprints, learned per host in the set's crawl order, as the plugin does.
    templates: bool = False
    # The second simhash (SIMHASH_SECOND_SIMHASH, core.features.second): pages whose second simhashes are within k
    # and first within VERIFY_FACTOR * k are also flagged, as the plugin does.
    second: bool = False
    # Sentence containment (SIMHASH_CONTAINMENT, core.cluster.containment, clustering step 7): a page that steps 1-6
    # left unmatched is verified against the canonical pages' sentence sketches, in the set's crawl order.
    containment: bool = False

    def describe(self) -> str:
        f = self.features
        feat = f"char {f.char_ngram}-grams" if f.char_ngram else f"word {f.word_ngram}-grams"
        extra = ", short pages exact" if self.exact else ", short pages skipped"
        if self.one_edit_below:
            extra += f", one-edit rule below {self.one_edit_below} tokens"
        if self.templates:
            extra += ", host templates learned"
        if self.second:
            extra += ", second simhash verified within 2k"
        if self.containment:
            extra += ", sentence containment"
        return f"{self.text_mode} text, {feat}, {f.weighting}, k={self.k}, min_tokens={self.min_tokens}{extra}"


def default_setup() -> Setup:
    """The package defaults (``simhash_scrapy.core.defaults``: the library's and the plugin's)."""
    return Setup(
        "defaults", defaults.TEXT_MODE, DEFAULT_FEATURES, defaults.MAX_DISTANCE, defaults.MIN_TOKENS,
        one_edit_below=defaults.ONE_EDIT_BELOW, templates=defaults.TEMPLATES,
        second=defaults.SECOND_SIMHASH, containment=defaults.CONTAINMENT,
    )  # fmt: skip


# Whole-page simhash as commonly done: visible text, word 3-shingles, tf, k = 3, the old 10-token floor.
NAIVE = Setup("naive", "visible", FeatureConfig(word_ngram=3, weighting="tf"), 3, 10, exact=False)

#: A fingerprint: ("simhash", 64-bit simhash) or ("exact", digest) for short pages; None: skipped.
Fingerprint = "tuple[str, int] | None"


# --------------------------------------------------------------------------- fingerprinting


class Texts:
    """Extracted text of every page, per text mode, computed once."""

    def __init__(self, evalset: common.EvalSet) -> None:
        self.evalset = evalset
        self._cache: dict[str, dict[int, bytes]] = {}
        self.seconds: dict[str, float] = {}

    def lines(self, mode: str) -> list[str]:
        key = mode + ":lines"
        if key not in self._cache:
            self._cache[key] = {  # type: ignore[assignment]
                p.id: extract_text(self.evalset.html(p), main_content=(mode == "main")) for p in self.evalset.pages
            }
        return self._cache[key]  # type: ignore[return-value]

    def get(self, mode: str) -> dict[int, bytes]:
        if mode not in self._cache:
            pages = self.evalset.pages
            html = {p.id: self.evalset.html(p) for p in pages}
            t0 = time.perf_counter()
            self._cache[mode] = {i: extract_text_bytes(h, main_content=(mode == "main")) for i, h in html.items()}
            self.seconds[mode] = time.perf_counter() - t0
        return self._cache[mode]


def fingerprint_pages(evalset: common.EvalSet, setup: Setup, texts: Texts) -> dict:
    """page id -> fingerprint (None when skipped), without template learning."""
    out: dict = {}
    data = texts.get(setup.text_mode)
    for page in evalset.pages:
        out[page.id] = _fingerprint(data[page.id], setup)
    return out


def _fingerprint(text: str | bytes, setup: Setup):  # -> Fingerprint
    hashes, weights, tokens = feature_hashes(text, setup.features, with_token_count=True)
    if tokens >= setup.min_tokens:
        return ("simhash", simhash_from_features(hashes, weights))
    if tokens and setup.exact:
        return ("exact", exact_digest(text, setup.features.cjk_ngram))
    return None


def exact_pairs(fps: dict) -> set[tuple[int, int]]:
    """Pairs of short pages with equal exact digests."""
    groups: dict[int, list[int]] = {}
    for pid, fp in fps.items():
        if fp is not None and fp[0] == "exact":
            groups.setdefault(fp[1], []).append(pid)
    out = set()
    for ids in groups.values():
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                out.add(common.pair(a, b))
    return out


def flagged_pairs(fps: dict, k: int, also: dict | None = None) -> set[tuple[int, int]]:
    """Pairs within k; with ``also`` (page id -> template-free fingerprint), a page is also found by it."""
    ids = [pid for pid, fp in fps.items() if fp is not None and fp[0] == "simhash"]
    values = [fps[i][1] for i in ids]
    if also:
        extra = sorted(also)
        ids, values = ids + extra, values + [also[i] for i in extra]
    index = BlockPermutedIndex(max_distance=k)
    index.add_many(list(range(len(ids))), np.array(values, dtype=np.uint64))
    rows_a, rows_b, _ = index.find_all_arrays()
    keys = np.array(ids, dtype=np.int64)
    a, b = keys[rows_a], keys[rows_b]
    return {common.pair(x, y) for x, y in zip(a.tolist(), b.tolist()) if x != y} | exact_pairs(fps)


def second_pairs(fps: dict, setup: Setup, texts: Texts) -> set[tuple[int, int]]:
    """Pairs whose second simhashes (``core.features.second``) are within k and first within ``VERIFY_FACTOR * k``."""
    data = texts.get(setup.text_mode)
    ids, second = [], []
    for pid, fp in fps.items():
        if fp is not None and fp[0] == "simhash":
            hashes, weights, tokens = feature_hashes(data[pid], setup.features, with_token_count=True)
            if tokens >= SECOND_MIN_TOKENS:
                ids.append(pid)
                second.append(second_simhash(hashes, weights))
    index = BlockPermutedIndex(max_distance=setup.k)
    index.add_many(list(range(len(ids))), np.array(second, dtype=np.uint64))
    rows_a, rows_b, _ = index.find_all_arrays()
    wide = VERIFY_FACTOR * setup.k
    return {
        common.pair(ids[a], ids[b]) for a, b in zip(rows_a.tolist(), rows_b.tolist())
        if (fps[ids[a]][1] ^ fps[ids[b]][1]).bit_count() <= wide
    }  # fmt: skip


def template_free(evalset: common.EvalSet, setup: Setup, fps: dict, texts: Texts) -> dict[int, int]:
    """page id -> template-free fingerprint (``core.cluster.sitetemplate``), learned in the set's crawl order.

    Matching by either fingerprint is what the crawl's rule does (``core.cluster.clustering`` step 5: a page
    is found by its template-free fingerprint, and a canonical page is indexed under both)."""
    learner = HostTemplates(setup.features, setup.min_tokens)
    data = texts.get(setup.text_mode)
    out = {}
    for page in sorted(evalset.pages, key=lambda p: p.order):
        fp = fps[page.id]
        if fp is None or fp[0] != "simhash":
            continue
        free = learner.check(host_of(page.url), fp[1], data[page.id])
        if free is not None:
            out[page.id] = free
    return out


#: The parameters of clustering step 7 (``core.cluster.containment``'s constants; ``containment.py`` tries others).
CONTAINMENT = dict(
    words=contain.MIN_WORDS, t=contain.SKETCH, theta=contain.MIN_CONTAINMENT, rho=contain.MIN_RATIO,
    m=contain.MIN_SHARED, min_sentences=contain.MIN_SENTENCES, common=contain.COMMON,
)


def containment_pairs(
    evalset: common.EvalSet, fps: dict, flagged: set[tuple[int, int]], texts: Texts, setup: Setup,
    params: dict | None = None,
) -> set[tuple[int, int]]:
    """The pairs clustering step 7 adds, in the set's crawl order, as the crawl's rule does.

    A page none of whose flagged partners (steps 1-6, ``flagged``) is canonical yet is verified against
    the canonical pages' sentence sketches found by their anchors (``ContainmentIndex``), sentences
    counted on ``common`` such pages left out (``SentenceCounts``); it joins the verified one with the
    highest containment (and is paired with that page's cluster), else becomes canonical.  (The crawl
    compares steps 1-6 with canonical pages only; this takes every flagged pair: ``--mode e2e`` is exact.)
    """
    p = dict(CONTAINMENT, **(params or {}))
    data = texts.get(setup.text_mode)
    partners: dict[int, set[int]] = {}
    for a, b in flagged:
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    index = contain.ContainmentIndex()
    counts = contain.SentenceCounts() if p["common"] else None
    is_common = None if counts is None else (lambda h: counts.count(h) >= p["common"])
    cluster: dict[int, set[int]] = {}  # canonical page -> its members
    added = set()
    for page in sorted(evalset.pages, key=lambda q: q.order):
        pid = page.id
        fp = fps.get(pid)
        if fp is None:
            continue
        near = [q for q in partners.get(pid, ()) if q in cluster]
        if near:
            cluster[min(near)].add(pid)
            continue
        sketch = None
        if fp[0] == "simhash":
            sketch = contain.sketch_of(data[pid], p["t"], p["words"], p["min_sentences"])
        best = None
        for entry in index.candidates(sketch) if sketch is not None else ():
            other = index.sketch(entry)
            assert other is not None
            if contain.verify(sketch, other, p["theta"], p["rho"], p["m"], p["t"], is_common):
                contained = contain.estimate(sketch, other, p["t"], is_common)[0]
                if best is None or contained > best[1]:
                    best = (entry, contained)
        if counts is not None and sketch is not None:
            counts.add(sketch.hashes)
        if best is None:
            cluster[pid] = {pid}
            if sketch is not None:
                index.add(pid, sketch)
            continue
        added.update(common.pair(pid, x) for x in cluster[best[0]])
        cluster[best[0]].add(pid)
    return added


# --------------------------------------------------------------------------- scoring


@dataclass
class Counts:
    pairs: int = 0  # truth positive pairs
    tp: int = 0
    fp: int = 0

    def as_dict(self) -> dict:
        return dict(pairs=self.pairs, tp=self.tp, fp=self.fp, precision=self.precision, recall=self.recall, f1=self.f1)

    @property
    def fn(self) -> int:
        return self.pairs - self.tp

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / self.pairs if self.pairs else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class Result:
    setup: Setup
    overall: Counts
    categories: dict[str, Counts]
    hard: dict[str, tuple[int, int]]  # name -> (flagged, pairs)
    empty_fingerprinted: int
    empty_pages: int
    skipped: int
    gray_flagged: int
    fp_other: int
    fp_by_kind: dict = field(default_factory=dict)  # negative-pair category -> false positives
    extra: dict = field(default_factory=dict)
    families: dict[str, Counts] = field(default_factory=dict)  # template family -> counts (wide set)
    genres: dict[str, Counts] = field(default_factory=dict)  # genre -> counts (real-web set)
    # the natural duplicates split by whether their main texts are word-for-word the same
    natural_split: dict[str, Counts] = field(default_factory=dict)
    found: set[tuple[int, int]] = field(default_factory=set, repr=False)  # the duplicate pairs flagged
    fps: dict = field(default_factory=dict, repr=False)  # page id -> fingerprint (library mode; for --misses)

    def hard_share(self, name: str) -> float:
        flagged, pairs = self.hard[name]
        return flagged / pairs if pairs else 0.0

    def hard_total(self) -> tuple[int, int]:
        """(flagged, pairs) over every kind of hard negative (the variant row left out: ``common.APART_ROWS``)."""
        rows = [v for k, v in self.hard.items() if k not in common.APART_ROWS]
        return sum(f for f, _ in rows), sum(n for _, n in rows)

    def as_dict(self) -> dict:
        o = self.overall
        return dict(
            setup=self.setup.describe(), precision=o.precision, recall=o.recall, f1=o.f1, tp=o.tp, fp=o.fp,
            pairs=o.pairs, categories={c: v.as_dict() for c, v in self.categories.items()}, hard={k: dict(flagged=f, pairs=n) for k, (f, n) in self.hard.items()},
            empty_fingerprinted=self.empty_fingerprinted, empty_pages=self.empty_pages, skipped=self.skipped,
            gray_flagged=self.gray_flagged, false_pairs_by_kind=self.fp_by_kind,
            families={f: v.as_dict() for f, v in self.families.items()},
            genres={g: v.as_dict() for g, v in self.genres.items()},
            natural_split={k: v.as_dict() for k, v in self.natural_split.items()},
            **self.extra,
        )  # fmt: skip


def _negative_category(evalset: common.EvalSet, pages: dict[int, common.Page], hn_title: set, a: int, b: int,
                       hard_pairs: dict | None = None) -> str:  # fmt: skip
    pa, pb = pages[a], pages[b]
    if (a, b) in hn_title:
        return "hn_title"
    if hard_pairs and (a, b) in hard_pairs:
        return hard_pairs[(a, b)]
    if pa.role == "empty" or pb.role == "empty":
        return "empty"
    if pa.category == "hn_template" and pb.category == "hn_template":
        return "hn_template"
    if pa.category == "hn_shared" and pb.category == "hn_shared":
        return "hn_shared"
    for p in (pa, pb):
        if p.role == "variant":
            return p.category
    if pa.role == "original" and pb.role == "original" and pa.host == pb.host:
        return "release" if pa.url.split("/")[3] != pb.url.split("/")[3] else "natural"
    return "other"


def evaluate(evalset: common.EvalSet, setup: Setup, fps: dict, flagged: set[tuple[int, int]]) -> Result:
    pages = evalset.by_id()
    flagged = {key for key in flagged if key[0] in pages and key[1] in pages}
    hn_title = set(evalset.hn_title)
    categories = {c: Counts() for c in evalset.categories()}
    families = {f: Counts() for f in evalset.families()}
    genres = {g: Counts() for g in evalset.genres()}
    hard_pairs = {key: name for name, rows in evalset.hard_pairs.items() for key in rows}
    overall = Counts()
    natural_split = {"identical": Counts(), "near": Counts()}
    for key, cat in evalset.positive.items():
        counts = categories.setdefault(cat, Counts())
        fam = families.get(pages[key[0]].family)
        genre = genres.get(pages[key[0]].genre)
        counts.pairs += 1
        overall.pairs += 1
        if fam is not None:
            fam.pairs += 1
        if genre is not None:
            genre.pairs += 1
        split = None
        if cat == "natural":
            split = natural_split["identical" if key in evalset.identical else "near"]
            split.pairs += 1
        if key in flagged:
            counts.tp += 1
            overall.tp += 1
            if fam is not None:
                fam.tp += 1
            if genre is not None:
                genre.tp += 1
            if split is not None:
                split.tp += 1
    gray_flagged = fp_other = 0
    hn_template_flagged = hn_title_flagged = 0
    hn_shared = set(evalset.hn_shared)
    hn_set = set(evalset.hn_template)
    fp_by_kind: dict[str, int] = {}
    for key in flagged:
        if key in evalset.positive:
            continue
        if key in evalset.gray:
            gray_flagged += 1
            continue
        overall.fp += 1
        for family in {pages[key[0]].family, pages[key[1]].family}:
            if family in families:
                families[family].fp += 1
        for genre in {pages[key[0]].genre, pages[key[1]].genre}:
            if genre in genres:
                genres[genre].fp += 1
        cat = _negative_category(evalset, pages, hn_title, *key, hard_pairs=hard_pairs)
        fp_by_kind[cat] = fp_by_kind.get(cat, 0) + 1
        if cat == "hn_title":
            hn_title_flagged += 1
        elif cat == "hn_template" and key[0] in hn_set and key[1] in hn_set:
            hn_template_flagged += 1
        if cat in categories:
            categories[cat].fp += 1
            if cat == "natural":  # a false pair is never word-for-word the same
                natural_split["near"].fp += 1
        else:
            fp_other += 1
    n = len(evalset.hn_template)
    hard = {
        "hn_template": (hn_template_flagged, n * (n - 1) // 2),
        "hn_title": (hn_title_flagged, len(hn_title)),
        "hn_shared": (len(flagged & hn_shared), len(hn_shared)),
    }
    for name, rows in evalset.hard_pairs.items():
        hard[name] = (len(flagged & set(rows)), len(rows))
    for name in common.HARD_NEGATIVES:
        hard.setdefault(name, (0, 0))  # a kind the set does not have
    empty_fp = sum(1 for pid in evalset.empty if fps.get(pid) is not None)
    skipped = sum(1 for fp in fps.values() if fp is None)
    return Result(
        setup, overall, categories, hard, empty_fp, len(evalset.empty), skipped, gray_flagged, fp_other, fp_by_kind,
        families=families, natural_split=natural_split, found=flagged & set(evalset.positive), genres=genres,
    )


def one_edit_pairs(evalset: common.EvalSet, texts: Texts, setup: Setup) -> set[tuple[int, int]]:
    """Pairs of fingerprinted pages (``min_tokens``, at least 30, up to ``setup.one_edit_below`` tokens) that share a
    one-edit key (``simhash_scrapy.core.features.edits``, the plugin's keys): their token sequences are the same
    after leaving out at most one token of each."""
    from simhash_scrapy.core.features.edits import edit_keys_of_tokens  # noqa: PLC0415
    from simhash_scrapy.core.features.features import token_hashes  # noqa: PLC0415

    owners: dict[int, set[int]] = {}
    data = texts.get(setup.text_mode)
    for page in evalset.pages:
        tokens = token_hashes(data[page.id], setup.features.cjk_ngram)
        if not max(setup.min_tokens, defaults.ONE_EDIT_MIN_TOKENS) <= len(tokens) < setup.one_edit_below:
            continue  # as the plugin (core.analysis): no keys under 30 tokens, a word is too much of them
        for key in edit_keys_of_tokens(tokens):
            owners.setdefault(key, set()).add(page.id)
    out = set()
    for ids in owners.values():
        ordered = sorted(ids)
        out.update((a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :])
    return out


def run_library(evalset: common.EvalSet, setup: Setup, texts: Texts) -> Result:
    t0 = time.perf_counter()
    fps = fingerprint_pages(evalset, setup, texts)
    flagged = flagged_pairs(fps, setup.k, template_free(evalset, setup, fps, texts) if setup.templates else None)
    if setup.second:
        flagged |= second_pairs(fps, setup, texts)
    if setup.one_edit_below:
        flagged |= one_edit_pairs(evalset, texts, setup)
    if setup.containment:
        flagged |= containment_pairs(evalset, fps, flagged, texts, setup)
    result = evaluate(evalset, setup, fps, flagged)
    result.extra["seconds"] = round(time.perf_counter() - t0, 2)
    result.fps = fps
    return result


def misses_listing(evalset: common.EvalSet, result: Result, kinds: set[str] | None = None) -> str:
    """The duplicate pairs the setup missed: kind, distance (library mode) and both URLs, one pair a line."""
    pages = evalset.by_id()
    fps = result.fps
    rows = []
    for key, cat in sorted(evalset.positive.items(), key=lambda kv: (kv[1], kv[0])):
        if key in result.found or (kinds and cat not in kinds):
            continue
        fa, fb = fps.get(key[0]), fps.get(key[1])
        if fa and fb and fa[0] == fb[0] == "simhash":
            dist = str(bin(fa[1] ^ fb[1]).count("1"))
        else:
            dist = f"{fa[0] if fa else 'none'}/{fb[0] if fb else 'none'}"
        rows.append(f"{cat}\t{dist}\t{key[0]} {pages[key[0]].url}\t{key[1]} {pages[key[1]].url}")
    return "\n".join(rows)


# --------------------------------------------------------------------------- output


def fmt(x: float) -> str:
    return f"{x:.2f}"


def _cells(counts: list[Counts]) -> str:
    """P / R / F1 cells of one table row, one per setup."""
    return " | ".join(f"{fmt(c.precision)} / {fmt(c.recall)} / {fmt(c.f1)}" for c in counts)


def markdown_table(results: list[Result]) -> str:
    head = "| category | pairs | " + " | ".join(f"{r.setup.name} P / R / F1" for r in results) + " |"
    sep = "|---|---:|" + "---|" * len(results)
    rows = [head, sep]
    for cat in results[0].categories:
        counts = [r.categories[cat] for r in results]
        rows.append(f"| {common.CATEGORY_TITLES[cat]} | {counts[0].pairs} | {_cells(counts)} |")
        if cat == "natural" and results[0].natural_split.get("identical", Counts()).pairs:
            for part, title in (("identical", "word-for-word the same main text"), ("near", "near-identical (not the same)")):
                counts = [r.natural_split[part] for r in results]
                rows.append(f"| ... of which {title} | {counts[0].pairs} | {_cells(counts)} |")
    cells = " | ".join(
        f"**{fmt(r.overall.precision)} / {fmt(r.overall.recall)} / {fmt(r.overall.f1)}**" for r in results
    )
    rows.append(f"| **all duplicate pairs** | {results[0].overall.pairs} | {cells} |")
    for name in common.HARD_NEGATIVES:
        if not results[0].hard.get(name, (0, 0))[1]:
            continue  # a set without this kind
        cells = " | ".join(
            f"{r.hard[name][0]} flagged ({100 * r.hard_share(name):.2f}%)" for r in results
        )
        rows.append(f"| hard negative: {common.CATEGORY_TITLES[name]} | {results[0].hard[name][1]} | {cells} |")
    if any(results[0].hard.get(name, (0, 0))[1] for name in ("hn_swap", "hn_site", "hn_product")):  # real-web, shops
        cells = " | ".join(
            f"{r.hard_total()[0]} flagged ({100 * r.hard_total()[0] / max(1, r.hard_total()[1]):.2f}%)" for r in results
        )
        rows.append(f"| **all hard negatives** | {results[0].hard_total()[1]} | {cells} |")
    for name in common.APART_ROWS:
        if results[0].hard.get(name, (0, 0))[1]:
            cells = " | ".join(f"{r.hard[name][0]} ({100 * r.hard_share(name):.1f}%)" for r in results)
            rows.append(f"| {common.CATEGORY_TITLES[name]} | {results[0].hard[name][1]} | {cells} |")
    cells = " | ".join(
        f"{r.empty_fingerprinted} fingerprinted, {r.fp_by_kind.get('empty', 0)} false pairs" for r in results
    )
    rows.append(f"| {common.CATEGORY_TITLES['empty']} (pages) | {results[0].empty_pages} | {cells} |")
    return "\n".join(rows)


def one_line(r: Result) -> str:
    o = r.overall
    cats = " ".join(f"{c}={r.categories[c].recall:.2f}" for c in r.categories)
    return (
        f"P={o.precision:.3f} R={o.recall:.3f} F1={o.f1:.3f} fp={o.fp} gray={r.gray_flagged} "
        f"hnT={100 * r.hard_share('hn_template'):.2f}% hnTi={r.hard['hn_title'][0]} "
        f"hnS={100 * r.hard_share('hn_shared'):.2f}% empty_fp={r.empty_fingerprinted} "
        f"skip={r.skipped} | recall {cats}"
    )


def family_table(results: list[Result], attr: str = "families", title: str = "template family",
                 skip_empty: bool = False) -> str:  # fmt: skip
    """One row per template family (wide set; real-web set: per site, or ``attr="genres"``): pairs and P / R / F1."""
    head = f"| {title} | pairs | " + " | ".join(f"{r.setup.name} P / R / F1" for r in results) + " |"
    rows = [head, "|---|---:|" + "---|" * len(results)]
    for fam in getattr(results[0], attr):
        counts = [getattr(r, attr)[fam] for r in results]
        if skip_empty and not counts[0].pairs and not any(c.fp for c in counts):
            continue  # a site with no duplicate pair and no false one (real-web set)
        cells = " | ".join(f"{fmt(c.precision)} / {fmt(c.recall)} / {fmt(c.f1)}" for c in counts)
        rows.append(f"| {fam} | {counts[0].pairs} | {cells} |")
    return "\n".join(rows)


#: Jaccard bands of duplicate pairs: below truth's 0.9 line (pairs that are duplicates because one
#: page was made from the other, e.g. edits), three bands above it, and 1.0 (as stored: to 3 places).
JACCARD_BANDS = ((0.0, 0.9), (0.9, 0.93), (0.93, 0.96), (0.96, 0.9995), (0.9995, 1.01))


def jaccard_table(evalset: common.EvalSet, result: Result) -> str:
    """Pairs found / pairs per kind and Jaccard band (one setup): are the misses at truth's line?"""
    found = result.found
    kinds = [c for c in evalset.categories() if c != "short"]
    bands = ["< 0.90", "[0.90, 0.93)", "[0.93, 0.96)", "[0.96, 1.00)", "1.000"]
    rows = [f"| kind ({result.setup.name}) | " + " | ".join(f"Jaccard {b}" for b in bands) + " |",
            "|---|" + "---:|" * len(bands)]  # fmt: skip
    for kind in kinds:
        cells = []
        for lo, hi in JACCARD_BANDS:
            keys = [key for key, c in evalset.positive.items()
                    if c == kind and lo <= evalset.positive_jaccard.get(key, -1.0) < hi]  # fmt: skip
            cells.append(f"{sum(key in found for key in keys)}/{len(keys)}" if keys else "-")
        rows.append(f"| {common.CATEGORY_TITLES[kind]} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def settings_table(evalset: common.EvalSet, texts: Texts, base: Setup) -> str:
    """One row per setting changed from the defaults (markdown)."""
    f = base.features
    rows: list[tuple[str, Setup]] = [
        ("defaults", base),
        ("SIMHASH_TEXT_MODE = \"visible\"", replace(base, text_mode="visible")),
        ("SIMHASH_WORD_NGRAM = 2", replace(base, features=replace(f, word_ngram=2))),
        ("SIMHASH_WORD_NGRAM = 3", replace(base, features=replace(f, word_ngram=3))),
        *(
            (f"SIMHASH_WEIGHTING = \"{weighting}\"", replace(base, features=replace(f, weighting=weighting)))
            for weighting in WEIGHTINGS
            if weighting != f.weighting
        ),
        (f"SIMHASH_MAX_DISTANCE = {base.k - 2}", replace(base, k=base.k - 2)),
        (f"SIMHASH_MAX_DISTANCE = {base.k - 1}", replace(base, k=base.k - 1)),
        (f"SIMHASH_MAX_DISTANCE = {base.k + 1}", replace(base, k=base.k + 1)),
        ("SIMHASH_MIN_TOKENS = 10", replace(base, min_tokens=10)),
        ("SIMHASH_MIN_TOKENS = 50", replace(base, min_tokens=50)),
        ("short pages skipped (no exact rule)", replace(base, exact=False)),
        *(
            (f"SIMHASH_ONE_EDIT_BELOW = {n}", replace(base, one_edit_below=n))
            for n in (0, 48, 64, 80, 96, 128)
            if n != base.one_edit_below
        ),
    ]
    out = [
        "| setting (others at defaults) | P | R | F1 | heavy-template pairs flagged | same-title pairs flagged "
        "| shared-section pairs flagged | empty pages fingerprinted | false pairs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, setup in rows:
        r = run_library(evalset, setup, texts)
        o = r.overall
        out.append(
            f"| {label} | {o.precision:.3f} | {o.recall:.3f} | {o.f1:.3f} | {r.hard['hn_template'][0]} "
            f"({100 * r.hard_share('hn_template'):.2f}%) | {r.hard['hn_title'][0]} | {r.hard['hn_shared'][0]} "
            f"({100 * r.hard_share('hn_shared'):.2f}%) | {r.empty_fingerprinted} | {o.fp} |"
        )
        print(f"{label:<52} {one_line(r)}", file=sys.stderr, flush=True)
    return "\n".join(out)


def grid(evalset: common.EvalSet, texts: Texts, base: Setup) -> None:
    for mode in ("visible", "main"):
        for n in (1, 2, 3):
            for weighting in WEIGHTINGS:
                for k in (3, 4):
                    features = replace(base.features, word_ngram=n, char_ngram=0, weighting=weighting)
                    r = run_library(evalset, replace(base, text_mode=mode, features=features, k=k), texts)
                    print(f"{mode:<7} w{n} {weighting:<9} k={k}  {one_line(r)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--mode", choices=("library", "e2e", "detector"), default="library",
                        help="detector: simhash_scrapy.decide_html (the crawl's rule, steps 1-7) on the pages in "
                             "crawl order, scored as e2e scores the crawl")
    parser.add_argument("--no-naive", action="store_true", help="score the chosen setup only (not the naive one)")
    parser.add_argument("--backend", choices=("memory", "resumed", "redis"), default="memory",
                        help="e2e: the crawl's backend (resumed: a SIMHASH_DIR store, stopped after half the pages "
                             "and run again for the rest; redis: a redis-server of its own, one worker)")
    parser.add_argument("--sweep", action="store_true", help="each setting's effect: one setting changed at a time")
    parser.add_argument("--grid", action="store_true", help="every combination of text mode, n-gram, weighting, k")
    parser.add_argument("--text", choices=("main", "visible"), help="override the defaults' text mode")
    parser.add_argument("--word-ngram", type=int)
    parser.add_argument("--weighting", choices=WEIGHTINGS)
    parser.add_argument("-k", type=int)
    parser.add_argument("--min-tokens", type=int)
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    parser.add_argument("--half", choices=("tune", "test"), help="wide set: score only this half")
    parser.add_argument("--families", action="store_true", help="also a table per template family (real-web: site)")
    parser.add_argument("--genres", action="store_true", help="real-web set: also a table per genre of site")
    parser.add_argument("--by-jaccard", action="store_true",
                        help="also recall per kind and Jaccard band of the pairs (wide set)")
    parser.add_argument("--one-edit-below", type=int, metavar="N",
                        help="the one-edit rule for pages under N tokens (0: off; default: the plugin's)")
    parser.add_argument("--misses", nargs="?", const="", metavar="KINDS",
                        help="also list the missed duplicate pairs (optionally only these comma-separated kinds)")
    parser.add_argument("--no-exact", action="store_true", help="skip short pages instead of comparing them exactly")
    parser.add_argument("--no-templates", action="store_true",
                        help="no cross-page template learning (SIMHASH_TEMPLATES = False)")
    parser.add_argument("--no-second", action="store_true",
                        help="no second simhash (SIMHASH_SECOND_SIMHASH = False)")
    parser.add_argument("--no-containment", action="store_true",
                        help="no sentence containment step (SIMHASH_CONTAINMENT = False)")
    args = parser.parse_args(argv)

    evalset = common.load_set(args.data, args.half)
    base = default_setup()
    overrides = {}
    if args.text:
        overrides["text_mode"] = args.text
    if args.k is not None:
        overrides["k"] = args.k
    if args.min_tokens is not None:
        overrides["min_tokens"] = args.min_tokens
    if args.no_exact:
        overrides["exact"] = False
    if args.one_edit_below is not None:
        overrides["one_edit_below"] = args.one_edit_below
    if args.no_templates:
        overrides["templates"] = False
    if args.no_second:
        overrides["second"] = False
    if args.no_containment:
        overrides["containment"] = False
    feats = {}
    if args.word_ngram:
        feats["word_ngram"] = args.word_ngram
    if args.weighting:
        feats["weighting"] = args.weighting
    if feats:
        overrides["features"] = replace(base.features, **feats)
    if overrides:
        base = replace(base, name="chosen", **overrides)
    texts = Texts(evalset)
    print(f"set: {len(evalset.pages)} pages, {len(evalset.positive)} duplicate pairs, {args.data}", file=sys.stderr)

    if args.sweep:
        print(settings_table(evalset, texts, base))
        return 0
    if args.grid:
        grid(evalset, texts, base)
        return 0
    if args.mode == "detector":
        from e2e import run_detector

        results = ([] if args.no_naive else [run_detector(evalset, NAIVE)]) + [run_detector(evalset, base)]
    elif args.mode == "e2e":
        from e2e import run_e2e

        results = ([] if args.no_naive else [run_e2e(evalset, NAIVE, args.backend)]) + [run_e2e(evalset, base, args.backend)]
    else:
        results = [run_library(evalset, NAIVE, texts), run_library(evalset, base, texts)]
    for r in results:
        print(f"{r.setup.name}: {r.setup.describe()}")
        print(f"  {one_line(r)}")
        if "library_pairs" in r.extra:  # e2e: decide_html on the pages the crawl checked, in its order
            print(f"  library (decide_html) on the crawl's pages and order: {r.extra['library_pairs']} pairs, "
                  f"{r.extra['library_only']} not flagged by the crawl, {r.extra['crawl_only']} flagged by the crawl only")
        if "dedup_pairs" in r.extra:  # e2e: scrapy simhash dedup's code on the same pages, order and URLs
            print(f"  dedup on the crawl's pages, order and URLs: {r.extra['dedup_pairs']} pairs, "
                  f"{r.extra['dedup_only']} not flagged by the crawl, {r.extra['crawl_only_dedup']} flagged by the crawl only "
                  f"(before, without URLs: {r.extra['dedup_before_only']} and {r.extra['crawl_only_before']})")
    print()
    print(markdown_table(results))
    if args.genres:
        print()
        print(family_table(results, "genres", "genre", skip_empty=True))
    if args.families:
        print()
        realweb = bool(evalset.genres())
        print(family_table(results, "families", "site" if realweb else "template family", skip_empty=realweb))
    if args.by_jaccard:
        print()
        print(jaccard_table(evalset, results[-1]))
    if args.misses is not None:
        print()
        print(misses_listing(evalset, results[-1], set(filter(None, args.misses.split(",")))))
    if args.json:
        args.json.write_text(json.dumps([r.as_dict() for r in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
