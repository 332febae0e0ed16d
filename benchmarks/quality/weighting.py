"""Choose the ``"log"`` weighting's slope on the tuning half: expected F1 of each slope, noise-free.

    python benchmarks/quality/weighting.py --data benchmarks/quality/data/wide            # tuning half
    python benchmarks/quality/weighting.py --data benchmarks/quality/data/wide --half test

A feature seen ``tf`` times weighs ``1 + s * ln(tf)``; ``s = 1`` is the classic sublinear tf
(``"sublinear"``), a large ``s`` comes close to plain ``ln(tf)``.  Which ``s`` is best cannot be
read off one run of simhash: whether a pair near the threshold lands at distance 4 or 5 is a
coin toss, and on ~900 pairs those tosses move F1 by more than the slopes differ.  So the slope
is chosen on what the tosses average to.  Simhash's bits are hyperplane bits (Charikar 2002):
two pages whose weighted feature vectors are at angle ``theta`` differ in each bit with
probability ``theta / pi`` (exactly for Gaussian hyperplanes; simhash's hash-bit signs come
close when many features share the weight), so they are found at ``k`` with probability about
``P[Binomial(64, theta / pi) <= k]``.  The table sums that probability over the duplicate
pairs (expected true pairs, per kind) and over every other pair (expected false pairs, gray
pairs left out as ``score.py`` does) and gives the expected F1 at ``k``.  Short pages are
compared exactly, as the plugin does (a pair of them is found or not, no chance involved).
The last column is one real run (``score.py``'s F1 with that slope), for comparison.

The rule, fixed before the test half was scored: the slope with the highest expected F1 on the
tuning half at the default k.  ``core/defaults.py`` holds the chosen slope (``LOG_WEIGHT_SLOPE``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import score  # noqa: E402

from simhash_scrapy.core import defaults  # noqa: E402
from simhash_scrapy.core.features.exact import exact_digest  # noqa: E402
from simhash_scrapy.core.features.features import token_hashes  # noqa: E402
from simhash_scrapy.core.features.fingerprint import simhash_from_features  # noqa: E402

SLOPES = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0)
KINDS = ("edit", "template", "tracking", "print_links", "print_plain", "release", "natural", "natural_near")
# natural_near: the natural pairs whose main texts are not word-for-word the same
# Columns of the dense blocks the Gram matrix is summed from (bounded memory).
_CHUNK = 4096


def found_probability(theta_over_pi: np.ndarray, k: int) -> np.ndarray:
    """P[Binomial(64, p) <= k], element-wise."""
    p = np.clip(theta_over_pi, 0.0, 1.0)
    return sum(math.comb(64, i) * p**i * (1.0 - p) ** (64 - i) for i in range(k + 1))


class Pages:
    """The half's pages as term counts (simhash pages) or exact digests (short pages)."""

    def __init__(self, evalset: common.EvalSet, short_scale: float = 0.0) -> None:
        texts = score.Texts(evalset).get("main")
        self.evalset = evalset
        self.exact: dict[int, int] = {}
        rows, cols, counts = [], [], []
        vocab: dict[int, int] = {}
        self.ids: list[int] = []
        for page in evalset.pages:
            tokens = token_hashes(texts[page.id])
            if len(tokens) >= defaults.MIN_TOKENS:
                features, tf = np.unique(tokens, return_counts=True)
                row = len(self.ids)
                self.ids.append(page.id)
                rows.append(np.full(len(features), row))
                cols.append(np.array([vocab.setdefault(h, len(vocab)) for h in features.tolist()]))
                counts.append(tf)
            elif len(tokens):
                self.exact[page.id] = exact_digest(texts[page.id], defaults.CJK_NGRAM)
        self.rows, self.cols = np.concatenate(rows), np.concatenate(cols)
        self.counts = np.concatenate(counts).astype(np.float64)
        self.features = [np.array(f) for f in self._features_by_row(vocab)]
        self.vocab_size = len(vocab)
        self.row_of = {pid: i for i, pid in enumerate(self.ids)}
        # ``short_scale`` N (an experiment, not the package's rule): a page of n < N tokens gets the
        # slope * n / N; per feature row, computed once.
        tokens = np.bincount(self.rows, weights=self.counts)
        self.slope_scale = np.minimum(1.0, tokens / short_scale)[self.rows] if short_scale else 1.0

    def _features_by_row(self, vocab: dict[int, int]) -> list[np.ndarray]:
        hashes = np.empty(len(vocab), dtype=np.uint64)
        hashes[list(vocab.values())] = np.array(list(vocab.keys()), dtype=np.uint64)
        bounds = np.flatnonzero(np.diff(self.rows)) + 1
        return np.split(hashes[self.cols], bounds)

    def weights(self, slope: float) -> np.ndarray:
        # The "log" weighting of core/features/features.py, with the slope as a parameter.
        return 1.0 + slope * self.slope_scale * np.log(self.counts)

    def angles(self, slope: float) -> np.ndarray:
        """theta / pi between every two simhash pages' weighted vectors."""
        n = len(self.ids)
        w = self.weights(slope)
        gram = np.zeros((n, n), dtype=np.float64)
        order = np.argsort(self.cols, kind="stable")
        cols, rows, ws = self.cols[order], self.rows[order], w[order]
        edges = np.searchsorted(cols, np.arange(0, self.vocab_size + _CHUNK, _CHUNK))
        for lo, hi, c0 in zip(edges[:-1], edges[1:], range(0, self.vocab_size + _CHUNK, _CHUNK)):
            if lo == hi:
                continue
            block = np.zeros((n, _CHUNK), dtype=np.float64)
            block[rows[lo:hi], cols[lo:hi] - c0] = ws[lo:hi]
            gram += block @ block.T
        norms = np.sqrt(np.diag(gram))
        cosine = np.clip(gram / np.outer(norms, norms), -1.0, 1.0)
        return np.arccos(cosine) / np.pi

    def realised_f1(self, slope: float, k: int) -> float:
        """F1 of one real simhash run with this slope (library mode, as score.py scores)."""
        w = self.weights(slope)
        bounds = np.flatnonzero(np.diff(self.rows)) + 1
        fps = np.array(
            [simhash_from_features(f, ww) for f, ww in zip(self.features, np.split(w, bounds))], dtype=np.uint64
        )
        xor = fps[:, None] ^ fps[None, :]
        distance = np.unpackbits(xor.view(np.uint8), axis=-1).reshape(len(fps), len(fps), 64).sum(axis=2)
        found = {common.pair(self.ids[a], self.ids[b]) for a, b in zip(*np.nonzero(np.triu(distance <= k, 1)))}
        found |= self._exact_pairs()
        tp = len(found & set(self.evalset.positive))
        fp = len(found - set(self.evalset.positive) - self.evalset.gray)
        return 2 * tp / (2 * tp + fp + len(self.evalset.positive) - tp)

    def _exact_pairs(self) -> set[tuple[int, int]]:
        by_digest: dict[int, list[int]] = {}
        for pid, digest in self.exact.items():
            by_digest.setdefault(digest, []).append(pid)
        return {common.pair(a, b) for ids in by_digest.values() for i, a in enumerate(ids) for b in ids[i + 1 :]}


def expected_row(pages: Pages, slope: float, k: int) -> dict:
    prob = found_probability(pages.angles(slope), k)
    exact_found = pages._exact_pairs()
    kinds: dict[str, list[float]] = {}
    tp = 0.0
    scored = np.triu(np.ones(prob.shape, dtype=bool), 1)
    for key, kind in pages.evalset.positive.items():
        a, b = (pages.row_of.get(x) for x in key)
        if a is not None and b is not None:
            p = float(prob[a, b])
            scored[min(a, b), max(a, b)] = False
        else:
            p = 1.0 if key in exact_found else 0.0
        kinds.setdefault(kind, []).append(p)
        if kind == "natural" and key not in pages.evalset.identical:
            kinds.setdefault("natural_near", []).append(p)
        tp += p
    for key in pages.evalset.gray:
        a, b = (pages.row_of.get(x) for x in key)
        if a is not None and b is not None:
            scored[min(a, b), max(a, b)] = False
    # Short pages with equal digests that are not duplicates count as found false pairs, as in score.py.
    exact_false = len(exact_found - set(pages.evalset.positive) - pages.evalset.gray)
    false_pairs = float(prob[scored].sum()) + exact_false
    n = len(pages.evalset.positive)
    return dict(
        slope=slope, f1=2 * tp / (2 * tp + false_pairs + n - tp), false_pairs=false_pairs,
        recall={kind: (sum(v), len(v)) for kind, v in kinds.items()}, realised=pages.realised_f1(slope, k),
    )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=common.DEFAULT_DATA / "wide")
    parser.add_argument("--half", choices=("tune", "test"), default="tune")
    parser.add_argument("-k", type=int, default=defaults.MAX_DISTANCE)
    parser.add_argument("--slopes", type=float, nargs="+", default=SLOPES)
    parser.add_argument("--short-scale", type=float, default=0.0, metavar="N",
                        help="experiment: scale the slope by min(1, tokens / N) (default: off)")
    args = parser.parse_args(argv)
    evalset = common.load_set(args.data, args.half)
    pages = Pages(evalset, args.short_scale)
    print(f"{args.half} half: {len(evalset.pages)} pages, {len(evalset.positive)} duplicate pairs, k = {args.k}")
    if args.short_scale:
        print(f"experiment: a page of n tokens gets the slope * min(1, n / {args.short_scale:g})")
    print()
    present = set(evalset.positive.values()) | ({"natural_near"} if evalset.identical else set())
    kinds = [k for k in KINDS if k in present]
    print("| slope s (1 + s ln tf) | expected F1 | expected false pairs | " + " | ".join(f"expected {k}" for k in kinds)
          + " | F1 of one real run |")  # fmt: skip
    print("|---:|---:|---:|" + "---:|" * len(kinds) + "---:|")
    rows = []
    for slope in args.slopes:
        row = expected_row(pages, slope, args.k)
        rows.append(row)
        cells = " | ".join(f"{row['recall'][k][0]:.1f}/{row['recall'][k][1]}" for k in kinds)
        print(f"| {slope:g} | {row['f1']:.4f} | {row['false_pairs']:.2f} | {cells} | {row['realised']:.3f} |", flush=True)
    best = max(rows, key=lambda r: r["f1"])
    print()
    print(f"highest expected F1: slope {best['slope']:g} ({best['f1']:.4f}); the default is {defaults.LOG_WEIGHT_SLOPE:g}")


if __name__ == "__main__":
    main()
