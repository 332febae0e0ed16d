"""Score near-duplicate detection on the evaluation set built by ``build_set.py``.

    python benchmarks/quality/score.py                     # naive vs defaults, markdown table
    python benchmarks/quality/score.py --sweep             # every setting's effect
    python benchmarks/quality/score.py --mode e2e          # crawl the set with Scrapy + the plugin

Library mode fingerprints every page (in the set's crawl order) and takes the
pairs within distance k from ``BlockPermutedIndex.find_all``.  End-to-end mode
serves the set on 127.0.0.1, crawls it with Scrapy and the plugin, and scores
the cluster report (two pages are flagged when they are in one cluster).

Scores: precision, recall, F1 over duplicate pairs, overall and per category;
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
from typing import Callable, Iterable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from simhash_scrapy import MIN_TOKENS, BlockPermutedIndex  # noqa: E402
from simhash_scrapy.core.features import DEFAULT_FEATURES, FeatureConfig, feature_hashes  # noqa: E402
from simhash_scrapy.core.fingerprint import simhash_from_features  # noqa: E402
from simhash_scrapy.core.text import extract_text, extract_text_bytes  # noqa: E402


@dataclass(frozen=True)
class Setup:
    """One way of fingerprinting pages."""

    name: str
    text_mode: str = "main"  # "main" | "visible"
    features: FeatureConfig = DEFAULT_FEATURES
    k: int = 3
    min_tokens: int = MIN_TOKENS
    template: bool = False  # learn cross-page template lines per host (simhash_scrapy.template)
    template_min_pages: int = 4
    template_share: float = 0.1
    refit: bool = True  # re-fingerprint a host's first pages once its template is known

    def describe(self) -> str:
        f = self.features
        feat = f"char {f.char_ngram}-grams" if f.char_ngram else f"word {f.word_ngram}-grams"
        extra = ", template learning" if self.template else ""
        return f"{self.text_mode} text, {feat}, {f.weighting}, k={self.k}, min_tokens={self.min_tokens}{extra}"


def default_setup() -> Setup:
    """The package defaults (text mode and k as the plugin's settings default them)."""
    text_mode, k, template = "main", 3, False
    try:
        from simhash_scrapy.config import DEFAULT_TEXT_MODE, SimhashConfig

        text_mode = DEFAULT_TEXT_MODE
        k = SimhashConfig().max_distance
        template = bool(getattr(SimhashConfig(), "template", False))
    except Exception:  # the plugin (and Scrapy) are optional for library mode
        pass
    return Setup("defaults", text_mode, DEFAULT_FEATURES, k, MIN_TOKENS, template)


# Whole-page simhash as commonly done: visible text, word 3-shingles, tf, k = 3, the old 10-token floor.
NAIVE = Setup("naive", "visible", FeatureConfig(word_ngram=3, weighting="tf"), 3, 10)


# --------------------------------------------------------------------------- fingerprinting


class Texts:
    """Extracted text of every page, per text mode, computed once."""

    def __init__(self, evalset: common.EvalSet) -> None:
        self.evalset = evalset
        self._cache: dict[str, list[bytes]] = {}
        self.seconds: dict[str, float] = {}

    def lines(self, mode: str) -> list[str]:
        key = mode + ":lines"
        if key not in self._cache:
            html = [self.evalset.html(p) for p in self.evalset.pages]
            self._cache[key] = [extract_text(h, main_content=(mode == "main")) for h in html]  # type: ignore[misc]
        return self._cache[key]  # type: ignore[return-value]

    def get(self, mode: str) -> list[bytes]:
        if mode not in self._cache:
            pages = self.evalset.pages
            html = [self.evalset.html(p) for p in pages]
            t0 = time.perf_counter()
            self._cache[mode] = [extract_text_bytes(h, main_content=(mode == "main")) for h in html]
            self.seconds[mode] = time.perf_counter() - t0
        return self._cache[mode]


def fingerprint_pages(evalset: common.EvalSet, setup: Setup, texts: Texts) -> dict[int, int | None]:
    """page id -> fingerprint (None when skipped), without template learning."""
    out: dict[int, int | None] = {}
    data = texts.get(setup.text_mode)
    for page in evalset.pages:
        out[page.id] = _fingerprint(data[page.id], setup)
    return out


def _fingerprint(text: str | bytes, setup: Setup) -> int | None:
    hashes, weights, tokens = feature_hashes(text, setup.features, with_token_count=True)
    return simhash_from_features(hashes, weights) if tokens >= setup.min_tokens else None


def crawl_with_template(
    evalset: common.EvalSet, setup: Setup, texts: Texts
) -> tuple[dict[int, int | None], set[tuple[int, int]], dict]:
    """Online, in crawl order, as the plugin would: clean with what is learned so far, query, add, observe.

    Returns the final fingerprints, the pairs flagged when each page arrived, and counters.
    """
    from simhash_scrapy.template import TemplateLearner

    learner = TemplateLearner(min_pages=setup.template_min_pages, share=setup.template_share)
    index = BlockPermutedIndex(max_distance=setup.k)
    lines = texts.lines(setup.text_mode)
    fps: dict[int, int | None] = {}
    flagged: set[tuple[int, int]] = set()
    refits = 0
    next_refit: dict[str, int] = {}
    for page in sorted(evalset.pages, key=lambda p: p.order):
        host = page.host
        text = lines[page.id]
        fp = _fingerprint(learner.clean(host, text), setup)
        fps[page.id] = fp
        duplicate = False
        if fp is not None:
            matches = index.query(fp)
            duplicate = bool(matches)
            for match in matches:
                flagged.add(common.pair(page.id, match.key))
            index.add(page.id, fp)
        learner.observe(host, text, duplicate=duplicate, key=page.id)
        seen = learner.pages(host)
        if setup.refit and seen >= next_refit.get(host, setup.template_min_pages):
            # the host's first pages again, cleaned with what is known now (at 4, 8, 16, 32 pages)
            next_refit[host] = 2 * seen
            for key, cleaned in learner.refit(host):
                new = _fingerprint(cleaned, setup)
                if new == fps.get(key):
                    continue
                refits += 1
                if fps.get(key) is not None:
                    index.remove(key)
                fps[key] = new
                if new is not None:
                    index.add(key, new)
            if seen >= learner.early_pages:
                learner.forget_early(host)
    return fps, flagged, {"refits": refits}


def flagged_pairs(fps: dict[int, int | None], k: int) -> set[tuple[int, int]]:
    ids = [pid for pid, fp in fps.items() if fp is not None]
    index = BlockPermutedIndex(max_distance=k)
    index.add_many(ids, np.array([fps[i] for i in ids], dtype=np.uint64))
    rows_a, rows_b, _ = index.find_all_arrays()
    keys = np.array(ids, dtype=np.int64)
    a, b = keys[rows_a], keys[rows_b]
    return {common.pair(x, y) for x, y in zip(a.tolist(), b.tolist())}


# --------------------------------------------------------------------------- scoring


@dataclass
class Counts:
    pairs: int = 0  # truth positive pairs
    tp: int = 0
    fp: int = 0

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

    def hard_share(self, name: str) -> float:
        flagged, pairs = self.hard[name]
        return flagged / pairs if pairs else 0.0

    def as_dict(self) -> dict:
        cat = {
            c: dict(pairs=v.pairs, tp=v.tp, fp=v.fp, precision=v.precision, recall=v.recall, f1=v.f1)
            for c, v in self.categories.items()
        }
        o = self.overall
        return dict(
            setup=self.setup.describe(), precision=o.precision, recall=o.recall, f1=o.f1, tp=o.tp, fp=o.fp,
            pairs=o.pairs, categories=cat, hard={k: dict(flagged=f, pairs=n) for k, (f, n) in self.hard.items()},
            empty_fingerprinted=self.empty_fingerprinted, empty_pages=self.empty_pages, skipped=self.skipped,
            gray_flagged=self.gray_flagged, false_pairs_by_kind=self.fp_by_kind, **self.extra,
        )  # fmt: skip


def _negative_category(evalset: common.EvalSet, pages: dict[int, common.Page], hn_title: set, a: int, b: int) -> str:
    pa, pb = pages[a], pages[b]
    if (a, b) in hn_title:
        return "hn_title"
    if pa.role == "empty" or pb.role == "empty":
        return "empty"
    if pa.category == "hn_template" and pb.category == "hn_template":
        return "hn_template"
    for p in (pa, pb):
        if p.role == "variant":
            return p.category
    if pa.role == "original" and pb.role == "original" and pa.host == pb.host:
        return "release" if pa.url.split("/")[3] != pb.url.split("/")[3] else "natural"
    return "other"


def evaluate(evalset: common.EvalSet, setup: Setup, fps: dict[int, int | None], flagged: set[tuple[int, int]]) -> Result:
    pages = evalset.by_id()
    hn_title = set(evalset.hn_title)
    categories = {c: Counts() for c in common.CATEGORIES}
    overall = Counts()
    for key, cat in evalset.positive.items():
        counts = categories.setdefault(cat, Counts())
        counts.pairs += 1
        overall.pairs += 1
        if key in flagged:
            counts.tp += 1
            overall.tp += 1
    gray_flagged = fp_other = 0
    hn_template_flagged = hn_title_flagged = 0
    hn_set = set(evalset.hn_template)
    fp_by_kind: dict[str, int] = {}
    for key in flagged:
        if key in evalset.positive:
            continue
        if key in evalset.gray:
            gray_flagged += 1
            continue
        overall.fp += 1
        cat = _negative_category(evalset, pages, hn_title, *key)
        fp_by_kind[cat] = fp_by_kind.get(cat, 0) + 1
        if cat == "hn_title":
            hn_title_flagged += 1
        elif cat == "hn_template" and key[0] in hn_set and key[1] in hn_set:
            hn_template_flagged += 1
        if cat in categories:
            categories[cat].fp += 1
        else:
            fp_other += 1
    n = len(evalset.hn_template)
    hard = {"hn_template": (hn_template_flagged, n * (n - 1) // 2), "hn_title": (hn_title_flagged, len(hn_title))}
    empty_fp = sum(1 for pid in evalset.empty if fps.get(pid) is not None)
    skipped = sum(1 for fp in fps.values() if fp is None)
    return Result(
        setup, overall, categories, hard, empty_fp, len(evalset.empty), skipped, gray_flagged, fp_other, fp_by_kind
    )


def run_library(evalset: common.EvalSet, setup: Setup, texts: Texts) -> Result:
    t0 = time.perf_counter()
    if setup.template:
        fps, flagged, extra = crawl_with_template(evalset, setup, texts)
    else:
        fps = fingerprint_pages(evalset, setup, texts)
        flagged, extra = flagged_pairs(fps, setup.k), {}
    result = evaluate(evalset, setup, fps, flagged)
    result.extra.update(extra)
    result.extra["seconds"] = round(time.perf_counter() - t0, 2)
    return result


# --------------------------------------------------------------------------- output


def fmt(x: float) -> str:
    return f"{x:.2f}"


def markdown_table(results: list[Result]) -> str:
    head = "| category | pairs | " + " | ".join(f"{r.setup.name} P / R / F1" for r in results) + " |"
    sep = "|---|---:|" + "---|" * len(results)
    rows = [head, sep]
    for cat in common.CATEGORIES:
        counts = [r.categories[cat] for r in results]
        cells = " | ".join(f"{fmt(c.precision)} / {fmt(c.recall)} / {fmt(c.f1)}" for c in counts)
        rows.append(f"| {common.CATEGORY_TITLES[cat]} | {counts[0].pairs} | {cells} |")
    cells = " | ".join(
        f"**{fmt(r.overall.precision)} / {fmt(r.overall.recall)} / {fmt(r.overall.f1)}**" for r in results
    )
    rows.append(f"| **all duplicate pairs** | {results[0].overall.pairs} | {cells} |")
    for name in common.HARD_NEGATIVES:
        cells = " | ".join(
            f"{r.hard[name][0]} flagged ({100 * r.hard_share(name):.2f}%)" for r in results
        )
        rows.append(f"| hard negative: {common.CATEGORY_TITLES[name]} | {results[0].hard[name][1]} | {cells} |")
    cells = " | ".join(
        f"{r.empty_fingerprinted} fingerprinted, {r.fp_by_kind.get('empty', 0)} false pairs" for r in results
    )
    rows.append(f"| {common.CATEGORY_TITLES['empty']} (pages) | {results[0].empty_pages} | {cells} |")
    return "\n".join(rows)


def one_line(r: Result) -> str:
    o = r.overall
    cats = " ".join(f"{c[:4]}={r.categories[c].recall:.2f}" for c in common.CATEGORIES)
    return (
        f"P={o.precision:.3f} R={o.recall:.3f} F1={o.f1:.3f} fp={o.fp} gray={r.gray_flagged} "
        f"hnT={100 * r.hard_share('hn_template'):.2f}% hnTi={r.hard['hn_title'][0]} empty_fp={r.empty_fingerprinted} "
        f"skip={r.skipped} | recall {cats}"
    )


def settings_table(evalset: common.EvalSet, texts: Texts, base: Setup) -> str:
    """One row per setting changed from the defaults (markdown)."""
    f = base.features
    rows: list[tuple[str, Setup]] = [
        ("defaults", base),
        ("SIMHASH_TEXT_MODE = \"visible\"", replace(base, text_mode="visible")),
        ("SIMHASH_WORD_NGRAM = 2", replace(base, features=replace(f, word_ngram=2))),
        ("SIMHASH_WORD_NGRAM = 3", replace(base, features=replace(f, word_ngram=3))),
        ("SIMHASH_WEIGHTING = \"tf\"", replace(base, features=replace(f, weighting="tf"))),
        ("SIMHASH_WEIGHTING = \"binary\"", replace(base, features=replace(f, weighting="binary"))),
        ("SIMHASH_WEIGHTING = \"tf\", SIMHASH_MAX_DISTANCE = 3", replace(base, k=3, features=replace(f, weighting="tf"))),
        ("SIMHASH_MAX_DISTANCE = 3", replace(base, k=3)),
        ("SIMHASH_MAX_DISTANCE = 5", replace(base, k=5)),
        ("SIMHASH_MIN_TOKENS = 10", replace(base, min_tokens=10)),
        ("SIMHASH_MIN_TOKENS = 50", replace(base, min_tokens=50)),
        ("template learning", replace(base, template=True)),
        ("template learning, no refit of early pages", replace(base, template=True, refit=False)),
        ("SIMHASH_TEXT_MODE = \"visible\" + template learning", replace(base, text_mode="visible", template=True)),
    ]
    out = [
        "| setting (others at defaults) | P | R | F1 | heavy-template pairs flagged | same-title pairs flagged "
        "| empty pages fingerprinted | false pairs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, setup in rows:
        r = run_library(evalset, setup, texts)
        o = r.overall
        out.append(
            f"| {label} | {o.precision:.3f} | {o.recall:.3f} | {o.f1:.3f} | {r.hard['hn_template'][0]} "
            f"({100 * r.hard_share('hn_template'):.2f}%) | {r.hard['hn_title'][0]} | {r.empty_fingerprinted} | {o.fp} |"
        )
        print(f"{label:<52} {one_line(r)}", file=sys.stderr, flush=True)
    return "\n".join(out)


def grid(evalset: common.EvalSet, texts: Texts, base: Setup) -> None:
    for mode in ("visible", "main"):
        for n in (1, 2, 3):
            for weighting in ("tf", "sublinear", "binary"):
                for k in (3, 4):
                    features = replace(base.features, word_ngram=n, char_ngram=0, weighting=weighting)
                    r = run_library(evalset, replace(base, text_mode=mode, features=features, k=k), texts)
                    print(f"{mode:<7} w{n} {weighting:<9} k={k}  {one_line(r)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--mode", choices=("library", "e2e"), default="library")
    parser.add_argument("--sweep", action="store_true", help="each setting's effect: one setting changed at a time")
    parser.add_argument("--grid", action="store_true", help="every combination of text mode, n-gram, weighting, k")
    parser.add_argument("--text", choices=("main", "visible"), help="override the defaults' text mode")
    parser.add_argument("--word-ngram", type=int)
    parser.add_argument("--weighting", choices=("tf", "sublinear", "binary"))
    parser.add_argument("-k", type=int)
    parser.add_argument("--min-tokens", type=int)
    parser.add_argument("--template", choices=("on", "off"))
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)

    evalset = common.load_set(args.data)
    base = default_setup()
    overrides = {}
    if args.text:
        overrides["text_mode"] = args.text
    if args.k is not None:
        overrides["k"] = args.k
    if args.min_tokens is not None:
        overrides["min_tokens"] = args.min_tokens
    if args.template:
        overrides["template"] = args.template == "on"
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
    if args.mode == "e2e":
        from e2e import run_e2e

        results = [run_e2e(evalset, NAIVE), run_e2e(evalset, base)]
    else:
        results = [run_library(evalset, NAIVE, texts), run_library(evalset, base, texts)]
    for r in results:
        print(f"{r.setup.name}: {r.setup.describe()}")
        print(f"  {one_line(r)}")
    print()
    print(markdown_table(results))
    if args.json:
        args.json.write_text(json.dumps([r.as_dict() for r in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
