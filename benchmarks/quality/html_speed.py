"""Main-content and visible-text fingerprinting speed against a bare lxml parse, in one process.

    PYTHONPATH=<tree> python benchmarks/quality/html_speed.py [--pages 300] [--rounds 2]

The same measurement as the "HTML page -> fingerprint" rows of ``benchmarks/core.py``
(``lxml.html.fromstring(page).text_content()`` as the baseline, the corpus of
``benchmarks/corpus.py``), reduced to the two ratios, each round measuring the baseline
right before the two fingerprint runs (best of 3 each), so that two trees can be compared
on a shared machine by running this script for each, alternately.  Prints the best
ratio over the rounds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import corpus  # noqa: E402
import lxml.html  # noqa: E402

from simhash_scrapy import fingerprint_html  # noqa: E402


def best(func, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        func()
        times.append(time.process_time() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    source, pages = corpus.html_pages(args.pages)
    ratios = []
    for _ in range(args.rounds):
        base = best(lambda: [lxml.html.fromstring(p).text_content() for p in pages])
        visible = best(lambda: [fingerprint_html(p, main_content=False) for p in pages])
        main_content = best(lambda: [fingerprint_html(p, main_content=True) for p in pages])
        ratios.append((base / visible, base / main_content))
    print(f"{source}: visible text {max(r[0] for r in ratios):.3f}x, main content {max(r[1] for r in ratios):.3f}x "
          "the speed of a bare lxml parse + text_content()")


if __name__ == "__main__":
    main()
