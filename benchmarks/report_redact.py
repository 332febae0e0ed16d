"""What masking passwords in page URLs costs a cluster report (``core.report.report._written``, ``shown``).

    python benchmarks/report_redact.py                      # 200,000 members, jsonl and csv, 3 rounds
    python benchmarks/report_redact.py --members 20000 --rounds 1

What it does:

1. Builds ``--members`` recorded pages in clusters of 2 to 5 (URLs shaped like a shop's: host, path,
   a query on a third of them; one page in ``--with-password`` (default 1 in 1,000) reached as
   ``https://bob:pw@host/...``, a referer and a rel=canonical link on every other member).
2. ``build_clusters`` once, then renders the JSON Lines and the CSV report ``--rounds`` times each,
   alternately with the masking (the code as it is: a document that may hold a password, one with an ``@``
   or the word ``password``, is rendered again from its records as ``shown`` gives them) and without it
   (``_written`` rendering once: the baseline, the code before the masking), and prints the best CPU time of
   each and the ratio.  ``--with-password 0``: no page has one (nor an ``@``): what every other report pays.

No network, no Scrapy: the report's rendering alone (the crawl's, ``report``'s and ``dedup``'s share it).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from simhash_scrapy.core.report import report


def members(count: int, with_password: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    while len(out) < count:
        head = f"https://shop{rng.randrange(50)}.example/catalog/{rng.randrange(10**6)}/item-{len(out)}"
        size = rng.randint(2, 5)
        fingerprint = rng.getrandbits(64)
        for n in range(size):
            url = head + (f"?utm_source=mail&ref={n}" if n and rng.random() < 0.33 else f"/v{n}" if n else "")
            if with_password and rng.randrange(with_password) == 0:
                url = url.replace("https://", "https://bob:pw-1234@")
            out.append({
                "url": url, "fingerprint": fingerprint ^ (1 << rng.randrange(64) if n else 0), "scope": "shop",
                "canonical_url": None if n == 0 else head, "distance": None if n == 0 else 1,
                "referer": head.rsplit("/", 1)[0] if n % 2 else None, "depth": n,
                "canonical_link": head if n % 2 else None, "exact": False,
            })  # fmt: skip
    return out[:count]


def cpu(render: Any) -> float:
    start = time.process_time()
    render()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=200_000)
    parser.add_argument("--with-password", type=int, default=1000, help="one page in N has a password (0: none)")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    pages = members(opts.members, opts.with_password)
    clusters = report.build_clusters(pages, max_distance=4)
    print(f"{len(pages):,} members in {len(clusters):,} clusters")
    masked = report._written
    for fmt in ("jsonl", "csv"):
        best = {"masked": float("inf"), "baseline": float("inf")}
        for _ in range(opts.rounds):
            for name in ("baseline", "masked"):
                report._written = masked if name == "masked" else (lambda render, *parts: render(*parts))  # type: ignore[assignment]
                try:
                    best[name] = min(best[name], cpu(lambda: report.render_report(clusters, fmt)))
                finally:
                    report._written = masked  # type: ignore[assignment]
        ratio = best["masked"] / best["baseline"]
        print(f"{fmt}: masked {best['masked']:.2f} s CPU, baseline (no masking) {best['baseline']:.2f} s CPU, "
              f"ratio {ratio:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
