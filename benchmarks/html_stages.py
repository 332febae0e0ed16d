"""Where the time of ``fingerprint_html`` (visible text) goes, a stage at a time.

    python benchmarks/html_stages.py            # the corpus of core.py (300 pages), best of 5 rounds
    python benchmarks/html_stages.py --rounds 9 --pages 100

Each page goes through the stages of ``fingerprint_html(page, main_content=False)`` one after
the other, as there (the tree is still in the cache when the walk reads it), and each stage's
CPU time (``time.process_time``) is summed over the pages; a stage's figure is its best round.
The baseline of core.py (``lxml.html`` parse + ``text_content()``) and ``fingerprint_html``
itself are timed in the same rounds.  Per page, in µs.  The stages call the library's internals
(``text._parse_bytes``, the C walk, ``features``' steps), so this script follows them when they
change; with the C helpers off (``SIMHASH_SCRAPY_PURE_PYTHON=1``) it stops with a message.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import lxml.html
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

from simhash_scrapy import fingerprint_html  # noqa: E402
from simhash_scrapy.core import _native  # noqa: E402
from simhash_scrapy.core.features import features, fingerprint  # noqa: E402
from simhash_scrapy.core.extract import text  # noqa: E402
from simhash_scrapy.core.extract.decode import to_utf8  # noqa: E402

_LARGE = 64 * 1024  # a request of glibc's "large" size, below its mmap threshold
STAGES = ("to_utf8", "parse", "walk (C)", "free the tree (+ malloc_consolidate)", "not-content rules", "token hashes",
          "distinct + weights", "bit vote")  # fmt: skip


def staged_round(pages: list[bytes]) -> dict[str, float]:
    """One round: each stage's CPU seconds summed over the pages."""
    clock = time.process_time
    spent = dict.fromkeys(STAGES, 0.0)
    config = features.DEFAULT_FEATURES
    for page in pages:
        t0 = clock()
        data = to_utf8(page)
        t1 = clock()
        root = text._parse_bytes(data)
        t2 = clock()
        words = _native.walker.visible_text(root, b"\n")
        t3 = clock()
        del root
        # The next large allocation makes glibc merge the freed tree's small chunks (malloc_consolidate,
        # ~0.1 ms a page here); in fingerprint_html the first stage that allocates pays it.  Made here,
        # so that the free is counted with the cost it brings.
        bytearray(_LARGE)
        t4 = clock()
        stripped = features.strip_not_content(words)
        t5 = clock()
        # token_hashes without its strip_not_content (timed above), for texts up to features._CHUNK
        packed, specials = _native.speedups.hash_text(stripped, features._ASCII_TABLE)
        tokens = features._with_specials(np.frombuffer(packed, dtype=np.uint64), stripped, specials, config.cjk_ngram,
                                         translate=True)
        t6 = clock()
        hashes, weights = features.feature_hashes(stripped, config, hashes=tokens)
        t7 = clock()
        fingerprint.simhash_from_features(hashes, weights)
        t8 = clock()
        for stage, seconds in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t8 - t7)):
            spent[stage] += seconds
    return spent


def timed(func) -> float:
    gc.collect()
    start = time.process_time()
    func()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=300, help="HTML pages to use (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each figure is its best round (default 5)")
    args = parser.parse_args()
    if _native.speedups is None or _native.walker is None:
        sys.exit("html_stages.py times the C path: build the C helpers (and unset SIMHASH_SCRAPY_PURE_PYTHON)")
    source, pages = corpus.html_pages(args.pages)
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        gc.collect()
        for stage, seconds in staged_round(pages).items():
            best[stage] = min(best.get(stage, seconds), seconds)
        for name, func in (
            ("baseline: lxml.html parse + text_content()", lambda: [lxml.html.fromstring(p).text_content() for p in pages]),
            ("fingerprint_html, visible text", lambda: [fingerprint_html(p, main_content=False) for p in pages]),
        ):
            seconds = timed(func)
            best[name] = min(best.get(name, seconds), seconds)
    per_page = {name: seconds / len(pages) * 1e6 for name, seconds in best.items()}
    print(f"{source}; µs a page, best of {args.rounds} rounds (CPU time)\n")
    print("| stage | µs a page |\n|---|---|")
    for name, micros in per_page.items():
        print(f"| {name} | {micros:,.1f} |")
    print(f"| sum of the stages | {sum(per_page[s] for s in STAGES):,.1f} |")
    baseline = per_page["baseline: lxml.html parse + text_content()"]
    print(f"\nfingerprint_html, visible text: {baseline / per_page['fingerprint_html, visible text']:.3f}x the baseline; "
          f"the stages after the parse and the free: "
          f"{sum(per_page[s] for s in STAGES if s not in ('parse', STAGES[3])):,.1f} µs a page")


if __name__ == "__main__":
    main()
