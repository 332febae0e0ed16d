"""Choose the parameters of clustering step 7 (``simhash_scrapy.core.containment``) on a set's tuning half.

    python benchmarks/quality/containment.py --data benchmarks/quality/data/realweb --half tune
    python benchmarks/quality/containment.py --data benchmarks/quality/data/wide --half tune

Library mode, as ``score.py``: the defaults' flagged pairs (steps 1-6), plus
the pairs step 7 adds in the set's crawl order (``score.containment_pairs``).
It prints, for the duplicate pairs steps 1-6 miss, their exact containment and
size ratio (in sentences), then per grid point (sentence length N, sketch size
t, containment theta, size ratio rho, shared m, the fewest sentences a page
needs, and after how many pages a sentence is common; 0: never) the pairs
added (true, false, gray), F1, the hard negatives flagged and recall by kind.
The figures of ``docs/quality.md``: ``--words 6,8,10 --sketch 16,24,32 --theta
0.9,0.95 --rho 0.4,0.5,0.6 --shared 3,4 --min-sentences 3,4 --common 3`` on
both sets (``--mode e2e`` of ``score.py`` is the crawl's own figure).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import score  # noqa: E402

from simhash_scrapy.core import containment as c  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--half", choices=("tune",), default="tune", help="tuning half only")
    parser.add_argument("--words", default="6,8,10", help="sentence lengths N to try")
    parser.add_argument("--sketch", default="16,24,32", help="sketch sizes t to try")
    parser.add_argument("--theta", default="0.6,0.7,0.8,0.9")
    parser.add_argument("--rho", default="0.2,0.3,0.5")
    parser.add_argument("--shared", default="2,3,4,6")
    parser.add_argument("--min-sentences", default="2,4")
    parser.add_argument("--common", default="0,3", help="a sentence in this many pages is common (0: no counts)")
    args = parser.parse_args(argv)
    evalset = common.load_set(args.data, args.half)
    texts = score.Texts(evalset)
    setup = replace(score.default_setup(), containment=False)
    base = score.run_library(evalset, setup, texts)
    fps = base.fps
    # every pair steps 1-6 flag (true, gray and false), as run_library does
    flagged = score.flagged_pairs(fps, setup.k, score.template_free(evalset, setup, fps, texts))
    flagged |= score.second_pairs(fps, setup, texts) | score.one_edit_pairs(evalset, texts, setup)
    print(f"steps 1-6: {score.one_line(base)}")
    data = texts.get("main")
    missed = [key for key in evalset.positive if key not in flagged]
    for n in map(int, args.words.split(",")):
        exact = {pid: c.sketch_of(data[pid], 1 << 30, n, 1) for pid, fp in fps.items() if fp and fp[0] == "simhash"}
        print(f"\nN={n}: the {len(missed)} missed pairs, exact containment / size ratio (sentences):")
        for key in sorted(missed, key=lambda k: evalset.positive[k]):
            a, b = exact.get(key[0]), exact.get(key[1])
            if a is None or b is None:
                print(f"  {evalset.positive[key]:<9} {key} no sentences ({a and a.sentences}, {b and b.sentences})")
                continue
            inter = len(set(a.hashes) & set(b.hashes))
            small = min(a.sentences, b.sentences)
            print(f"  {evalset.positive[key]:<9} {key} C={inter / small:.2f} ratio={small / max(a.sentences, b.sentences):.2f}"
                  f" counts={a.sentences},{b.sentences} shared={inter}")
        for t in map(int, args.sketch.split(",")):
            grid = itertools.product(*(getattr(args, name).split(",") for name in
                                       ("theta", "rho", "shared", "min_sentences", "common")))
            for theta, rho, m, ms, df in grid:
                params = dict(words=n, t=t, theta=float(theta), rho=float(rho), m=int(m), min_sentences=int(ms),
                              common=int(df))
                added = score.containment_pairs(evalset, fps, flagged, texts, setup, params)
                r = score.evaluate(evalset, setup, fps, flagged | added)
                true = len(added & set(evalset.positive))
                gray = len(added & set(evalset.gray))
                hard = r.hard_total()
                print(f"N={n} t={t} theta={theta} rho={rho} m={m} minsent={ms} common={df}: added {true} true, "
                      f"{len(added) - true - gray} false, {gray} gray | F1={r.overall.f1:.4f} "
                      f"hard={hard[0]}/{hard[1]} | "
                      + " ".join(f"{k}={v.recall:.3f}" for k, v in r.categories.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
