"""CPU time of the clustering rule on a quality set's pages: ``Detector.check`` (steps 1-7, the host
template learner included), the pages analysed first (not timed), in the set's crawl order, one scope.

    python benchmarks/quality/rule_cost.py --data /work/data/shops3
    PYTHONPATH=<other tree> python benchmarks/quality/rule_cost.py --data /work/data/shops3   # to compare

Prints the best of ``--rounds`` runs in CPU ms a page (a fresh ``Detector`` each run).  The inline
path ``crawl_overhead.py --costs-only`` times is the page's analysis; this is the rule the backend
then applies (in-process backends).  Compare two trees alternately, in the same hour.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from simhash_scrapy.core.analysis import analyse_html
from simhash_scrapy.core.detector import Detector, Page, page_of
from simhash_scrapy.core.settings.config import SimhashConfig


def pages_of(data: Path, config: SimhashConfig) -> list[Page]:
    rows = sorted((json.loads(line) for line in (data / "manifest.jsonl").read_text().splitlines()),
                  key=lambda row: row.get("order", row["id"]))  # fmt: skip
    out = []
    for row in rows:
        answer = analyse_html((data / row["file"]).read_bytes(), None, config.analysis)
        if answer.fingerprint is not None:
            out.append(page_of(answer, "quality", row["url"], row["url"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    config = SimhashConfig.from_settings({})
    pages = pages_of(args.data, config)
    best = float("inf")
    for _ in range(args.rounds):
        detector = Detector.from_config(config)
        start = time.process_time()
        for page in pages:
            detector.check(page)
        best = min(best, time.process_time() - start)
    print(f"{len(pages)} pages: {1000 * best / len(pages):.3f} CPU ms a page (steps 1-7), best of {args.rounds}")


if __name__ == "__main__":
    main()
