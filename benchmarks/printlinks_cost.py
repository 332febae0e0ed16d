"""CPU time of ``core.extract.printlinks.drop_print_links`` against a page's whole analysis, in one run.

    python benchmarks/printlinks_cost.py --site DIR [--pages 600] [--rounds 5]

``DIR`` is a site folder of ``crawl_overhead.py --keep`` (its ``pages/``); the pages are read, parsed
(not timed) and then, alternately and best of ``--rounds``: the print-link check on each parsed page
with its bytes (what ``keep_main_content`` runs first), and ``analyse_html`` at the defaults (the page's
whole analysis, parse included).  Prints both per page and their ratio: a same-run figure, unlike two
crawls' timings on a shared machine.  (The first call removes a print view's lists: the timed calls
check the bytes and walk the lists, the removals themselves, on print views only, are not timed.)
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from pathlib import Path

from lxml import etree

from simhash_scrapy.core.analysis import analyse_html
from simhash_scrapy.core.extract.printlinks import drop_print_links


def _best(rounds: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    files = sorted(path for path in (args.site / "pages").rglob("*.html"))
    random.Random(0).shuffle(files)
    datas = [path.read_bytes() for path in files[: args.pages]]
    if not datas:
        parser.error(f"no pages under {args.site / 'pages'}")
    trees = [etree.fromstring(data, etree.HTMLParser()) for data in datas]
    hits = sum(drop_print_links(tree, data) for tree, data in zip(trees, datas))
    check = analysis = float("inf")
    for _ in range(3):  # alternating: the machine's load falls on both
        check = min(check, _best(args.rounds, lambda: [drop_print_links(t, d) for t, d in zip(trees, datas)]))
        analysis = min(analysis, _best(args.rounds, lambda: [analyse_html(d) for d in datas]))
    n = len(datas)
    print(f"{n} pages ({hits} with a print view's address list), CPU ms a page, best of {args.rounds} x 3 alternating:")
    print(f"  print-link check: {1000 * check / n:.4f}")
    print(f"  analyse_html at the defaults: {1000 * analysis / n:.4f}")
    print(f"  ratio: {check / analysis:.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
