"""What the one-edit rule costs (``core.features.edits``): time to make a page's keys, memory to keep them.

    python benchmarks/edit_keys.py

* CPU time (``time.process_time``) to make the keys of a page of 31 and of
  63 tokens, against ``analyse_html`` of the real 31-token AMDGPU page of
  ``tests/fixtures/quality`` with the rule off (what the rule adds to it);
* memory per canonical page in the in-process rule (``Clusterer``, traced
  with ``tracemalloc``), with 64 keys and without, so the difference is what
  the keys cost (the Redis replica keeps them in the same ``KeyTable``).

In Redis each key of a canonical page is one 24-byte entry of the scope's log
(``backends/redis/layout.py``): up to 64 x 24 = 1,536 bytes a page.
"""

from __future__ import annotations

import random
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simhash_scrapy.core.analysis import AnalysisOptions, analyse_html  # noqa: E402
from simhash_scrapy.core.cluster.clustering import Clusterer  # noqa: E402
from simhash_scrapy.core.features.edits import edit_keys_of_tokens  # noqa: E402

PAGE = (ROOT / "tests" / "fixtures" / "quality" / "amdgpu_vdst_gfx940.html").read_bytes()


def cpu_per_call(func, repeats: int) -> float:
    """Best of three runs of ``repeats`` calls, CPU seconds per call."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(repeats):
            func()
        best = min(best, (time.process_time() - start) / repeats)
    return best


def memory_per_page(keys_per_page: int, pages: int = 50_000) -> float:
    rng = random.Random(1)
    rule = Clusterer()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(pages):
        keys = tuple(sorted(rng.getrandbits(64) for _ in range(keys_per_page)))
        rule.check("spider", str(i), rng.getrandbits(64), edit_keys=keys)  # random: each page canonical
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used / pages


def main() -> None:
    rng = np.random.default_rng(1)
    print("| what | CPU per page |\n|---|---:|")
    page_alone = cpu_per_call(lambda: analyse_html(PAGE, options=AnalysisOptions(one_edit_below=0)), 500)
    print(f"| analyse_html of a 31-token page, rule off | {page_alone * 1e6:.0f} us |")
    for tokens in (31, 63):
        hashes = rng.integers(0, 2**63, tokens, dtype=np.uint64)
        cost = cpu_per_call(lambda hashes=hashes: edit_keys_of_tokens(hashes), 2000)
        print(f"| keys of a {tokens}-token page | {cost * 1e6:.0f} us ({cost / page_alone:.0%} of the line above) |")
    with_keys, without = memory_per_page(64), memory_per_page(0)
    print("\n| canonical page in the in-process rule | bytes |\n|---|---:|")
    print(f"| without keys | {without:.0f} |\n| with 64 keys | {with_keys:.0f} |")
    print(f"| the keys alone | {with_keys - without:.0f} ({(with_keys - without) / 64:.1f} a key) |")


if __name__ == "__main__":
    main()
