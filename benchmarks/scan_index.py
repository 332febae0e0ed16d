"""A ``redis-global`` batch's rule (``Clusterer``) with its canonical pages in a ``ScanIndex`` or a ``BlockPermutedIndex``.

    python benchmarks/scan_index.py                 # 2,000 batches of 16 pages, k = 4, 5 blocks
    python benchmarks/scan_index.py --batches 500 --candidates 40 --pages 64   # a worker with 64 checks in flight

Each batch is what ``cluster_backend`` gives its rule: a new ``Clusterer``, the
candidates its read found restored (``--candidates``, default 8: a third of
the pages near a stored one, each bucket's false folds), ``restore_indexes``,
then ``--pages`` pages checked (default 16; 70% new, 30% near a candidate or an
earlier page of the batch).  The scan runs on the C helpers when built.  Each round decides the same batches with each index type, one after
the other, timed by ``time.process_time``; the best round of each is kept, and
the decisions are checked to be the same.  Prints the CPU a batch and a check,
and the ratio of ``ScanIndex`` to ``BlockPermutedIndex``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent.parent))

from simhash_scrapy.core.cluster.clustering import Clusterer  # noqa: E402
from simhash_scrapy.core.index.index import BlockPermutedIndex  # noqa: E402
from simhash_scrapy.core.index.scan import ScanIndex  # noqa: E402

K, BLOCKS = 4, 5


def flip(fp: int, bits: int, rng: random.Random) -> int:
    for bit in rng.sample(range(64), bits):
        fp ^= 1 << bit
    return fp


def batches(count: int, candidates: int, pages_a_batch: int, seed: int = 3) -> list[tuple[list[int], list[int]]]:
    """(candidates' fingerprints, pages' fingerprints) of ``count`` batches."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        stored = [rng.getrandbits(64) for _ in range(candidates)]
        pages: list[int] = []
        for _ in range(pages_a_batch):
            near = stored + pages
            pages.append(flip(rng.choice(near), rng.randint(0, K + 2), rng) if near and rng.random() < 0.3
                         else rng.getrandbits(64))
        out.append((stored, pages))
    return out


def decide(work: list[tuple[list[int], list[int]]], index_type: Any) -> tuple[float, list[Any]]:
    """CPU seconds to decide every batch with ``index_type``, and the decisions."""
    decisions = []
    start = time.process_time()
    for stored, pages in work:
        rule = Clusterer(K, BLOCKS, index_type)
        n = len(stored)
        rule.restore_many(["s"] * n, [f"\0{i}" for i in range(n)], stored, [False] * n, [-1] * n, [-1] * n,
                          list(stored))
        rule.restore_indexes()
        decisions += [rule.check("s", f"/p{i}", fp) for i, fp in enumerate(pages)]
    return time.process_time() - start, decisions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--pages", type=int, default=16, help="pages a batch (a worker's checks in flight, up to 64)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = batches(args.batches, args.candidates, args.pages)
    best = {"BlockPermutedIndex": float("inf"), "ScanIndex": float("inf")}
    for _ in range(args.rounds):
        tables, by_tables = decide(work, BlockPermutedIndex)
        scan, by_scan = decide(work, ScanIndex)
        if by_scan != by_tables:
            sys.exit("ScanIndex and BlockPermutedIndex decided differently")
        best["BlockPermutedIndex"] = min(best["BlockPermutedIndex"], tables)
        best["ScanIndex"] = min(best["ScanIndex"], scan)
    checks = args.batches * args.pages
    print(f"{args.batches} batches of {args.pages} pages, {args.candidates} candidates each, k = {K}, {BLOCKS} blocks; "
          f"best of {args.rounds} rounds")
    for name, seconds in best.items():
        print(f"  {name:<20} {seconds / args.batches * 1e6:8.1f} µs a batch  {seconds / checks * 1e6:6.2f} µs a check")
    print(f"  ScanIndex / BlockPermutedIndex: {best['ScanIndex'] / best['BlockPermutedIndex']:.2f}x")


if __name__ == "__main__":
    main()
