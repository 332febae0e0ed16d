"""The classic comparison: block-permuted index against pairwise comparison (Manku, Jain, Das Sarma 2007).

    python benchmarks/pairwise_vs_index.py               # 1,000 documents, k = 3, 4 and 6, then 10k and 100k
    python benchmarks/pairwise_vs_index.py --no-scale    # only the 1,000 documents

All near-duplicate pairs (Hamming distance <= k) among the fingerprints of
the same 1,000 real documents, found four ways, in one run:

* pairwise, pure Python: ``(a ^ b).bit_count()`` for every pair (the textbook baseline);
* pairwise, numpy: one vectorised popcount row per document (a strong baseline);
* ``BlockPermutedIndex.find_all_arrays`` (batch all-pairs, what ``scrapy simhash dedup`` runs);
* ``BlockPermutedIndex.query`` then ``add`` per document (what a crawl does, page by page).

The index is exact, so every method must find the same pairs; the script
checks it.  Documents: the sections (``<section>``, at least 60 words) of
Debian's Python documentation (/usr/share/doc/python3-dev/html, package
python3-doc), else 200-word windows of the ``pydoc_data`` topics that ship
with CPython.  A second table repeats the batch search on 10,000 and 100,000
fingerprints (the 1,000 real ones plus random ones and near-duplicate
copies) to show how the gap grows.  Times are the best of ``--repeats`` runs;
results go to benchmarks/results/pairwise_vs_index.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from simhash_scrapy import BlockPermutedIndex, fingerprint

RESULTS = Path(__file__).resolve().parent / "results"
DOCS = Path("/usr/share/doc/python3-dev/html")


def documents(count: int) -> tuple[str, list[str]]:
    """Up to ``count`` real documents: sections of the Python docs, else windows of pydoc_data topics."""
    if DOCS.is_dir():
        from lxml import html

        docs: list[str] = []
        files = sorted({os.path.realpath(p) for p in DOCS.rglob("*.html")})
        for name in files:
            root = html.fromstring(Path(name).read_bytes())
            for section in root.xpath("//section | //div[contains(concat(' ', @class, ' '), ' section ')]"):
                text = " ".join(section.text_content().split())
                if len(text.split()) >= 60:
                    docs.append(text)
            if len(docs) >= count:
                break
        if docs:
            return f"sections of Debian python3-doc HTML ({DOCS})", docs[:count]
    import pydoc_data.topics as topics

    words = " ".join(topics.topics[name] for name in sorted(topics.topics)).split()
    docs = [" ".join(words[i : i + 200]) for i in range(0, len(words) - 200, 150)]
    return "200-word windows (step 150) of pydoc_data.topics", docs[:count]


def best_of(repeats: int, func: Callable[[], object]) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def pairwise_python(fps: list[int], k: int) -> set[tuple[int, int]]:
    pairs = set()
    for i, a in enumerate(fps):
        for j in range(i + 1, len(fps)):
            if (a ^ fps[j]).bit_count() <= k:
                pairs.add((i, j))
    return pairs


def pairwise_numpy(fps: np.ndarray, k: int) -> set[tuple[int, int]]:
    pairs = set()
    for i in range(len(fps) - 1):
        hits = np.flatnonzero(np.bitwise_count(fps[i + 1 :] ^ fps[i]) <= k)
        pairs.update((i, i + 1 + int(j)) for j in hits)
    return pairs


def pairwise_numpy_count(fps: np.ndarray, k: int, block: int = 256) -> int:
    """Pairs within k, counted block by block (for sizes where a set would be too big to be the point)."""
    total = 0
    for start in range(0, len(fps), block):
        rows = fps[start : start + block]
        distances = np.bitwise_count(rows[:, None] ^ fps[None, start:])
        within = distances <= k
        # Keep j > i only.
        within &= np.arange(start, len(fps))[None, :] > np.arange(start, start + len(rows))[:, None]
        total += int(within.sum())
    return total


def index_batch(fps: np.ndarray, k: int) -> set[tuple[int, int]]:
    index = BlockPermutedIndex(k)
    index.add_many(range(len(fps)), fps)
    a, b, _ = index.find_all_arrays()
    return set(zip(a.tolist(), b.tolist()))


def index_incremental(fps: list[int], k: int) -> set[tuple[int, int]]:
    index = BlockPermutedIndex(k)
    pairs = set()
    for i, fp in enumerate(fps):
        for match in index.query(fp):
            pairs.add((match.key, i))
        index.add(i, fp)
    return pairs


def grown(base: np.ndarray, n: int, k: int, seed: int) -> np.ndarray:
    """``base`` plus random fingerprints, 10% of them near-duplicate copies (<= k bits flipped)."""
    rng = np.random.default_rng(seed)
    extra = rng.integers(0, 2**63, size=n - len(base), dtype=np.uint64) * np.uint64(2) + rng.integers(
        0, 2, size=n - len(base), dtype=np.uint64
    )
    fps = np.concatenate([base, extra])
    copies = rng.choice(n, size=n // 10, replace=False)
    for i in copies.tolist():
        source = int(fps[rng.integers(0, n)])
        for bit in rng.choice(64, size=int(rng.integers(0, k + 1)), replace=False).tolist():
            source ^= 1 << bit
        fps[i] = np.uint64(source)
    return fps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("-k", type=int, nargs="+", default=[3, 4, 6])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--no-scale", dest="scale", action="store_false", help="only the 1,000 documents")
    args = parser.parse_args()

    source, docs = documents(args.docs)
    start = time.perf_counter()
    fps_list = [fingerprint(d) for d in docs]
    fingerprint_seconds = time.perf_counter() - start
    fps = np.array(fps_list, dtype=np.uint64)
    print(f"{len(docs):,} documents: {source}; fingerprinted in {fingerprint_seconds:.2f} s")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}\n")

    rows = []
    for k in args.k:
        t_py, p_py = best_of(max(1, args.repeats // 2), lambda: pairwise_python(fps_list, k))
        t_np, p_np = best_of(args.repeats, lambda: pairwise_numpy(fps, k))
        t_batch, p_batch = best_of(args.repeats, lambda: index_batch(fps, k))
        t_inc, p_inc = best_of(args.repeats, lambda: index_incremental(fps_list, k))
        assert p_py == p_np == p_batch == p_inc, "the index must find exactly the pairs pairwise comparison finds"
        rows.append(
            {"k": k, "documents": len(docs), "pairs": len(p_py), "pairwise_python_s": t_py, "pairwise_numpy_s": t_np,
             "index_batch_s": t_batch, "index_incremental_s": t_inc}
        )  # fmt: skip

    print("| k | documents | pairs found (all four methods) | pairwise, Python | pairwise, numpy | "
          "index, batch `find_all_arrays` | index, page by page `query`+`add` | batch vs Python | batch vs numpy |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['k']} | {r['documents']:,} | {r['pairs']:,} (identical) | {r['pairwise_python_s'] * 1e3:.1f} ms | "
            f"{r['pairwise_numpy_s'] * 1e3:.1f} ms | {r['index_batch_s'] * 1e3:.2f} ms | "
            f"{r['index_incremental_s'] * 1e3:.1f} ms | {r['pairwise_python_s'] / r['index_batch_s']:.0f}x | "
            f"{r['pairwise_numpy_s'] / r['index_batch_s']:.1f}x |"
        )

    scale = []
    if args.scale and args.sizes:
        k = args.k[0]
        print(f"\nThe same batch search on more fingerprints (k = {k}; the {len(docs):,} real ones, random ones, "
              "10% near-duplicate copies):\n")  # fmt: skip
        print("| fingerprints | pairs | pairwise, numpy | index, batch | speed-up |")
        print("|---|---|---|---|---|")
        for n in args.sizes:
            big = grown(fps, n, k, seed=n)
            repeats = 1 if n >= 50_000 else 3
            t_np, count_np = best_of(repeats, lambda: pairwise_numpy_count(big, k))
            t_ix, pairs_ix = best_of(args.repeats, lambda: index_batch(big, k))
            assert count_np == len(pairs_ix), "the index must find exactly the pairs pairwise comparison finds"
            scale.append({"k": k, "fingerprints": n, "pairs": count_np, "pairwise_numpy_s": t_np, "index_batch_s": t_ix})
            print(f"| {n:,} | {count_np:,} (identical) | {t_np:.2f} s | {t_ix * 1e3:.1f} ms | {t_np / t_ix:,.0f}x |")

    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pairwise_vs_index.json").write_text(
        json.dumps({"source": source, "documents": rows, "scale": scale, "python": sys.version}, indent=2)
    )


if __name__ == "__main__":
    random.seed(0)
    main()
