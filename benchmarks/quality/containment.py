"""Choose the parameters of clustering step 7 (``simhash_scrapy.core.cluster.containment``) on a set's tuning half.

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
both sets (``--mode e2e`` of ``score.py`` is the crawl's own figure); ``--seeds 40
--sketch 24,32 --theta 0.95,1.0``: the same pairs over 40 hashings of the
sentences (how much a result owes to which sentences one hash samples).
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

from simhash_scrapy.core import _native  # noqa: E402
from simhash_scrapy.core.cluster import containment as c  # noqa: E402


def cost(evalset: common.EvalSet, rounds: int = 5) -> int:
    """CPU time of the step per page, against the page's whole analysis, and its memory per canonical page.

    Every page of the half in crawl order: ``analyse_html`` as the crawl runs it (defaults, sketch off, then
    on: the sketch is the difference), ``sketch_of`` of the main text alone (with the C helper, and on the
    pure-Python path), and the rule's check
    (``Clusterer.check``) with and without sketches; best of ``rounds``, process CPU time.  Memory: the
    traced allocations of a ``ContainmentIndex`` holding every sketched page, per page.
    """
    import time  # noqa: PLC0415
    import tracemalloc  # noqa: PLC0415
    from dataclasses import replace as _replace  # noqa: PLC0415

    from simhash_scrapy.core.analysis import analyse_html  # noqa: PLC0415
    from simhash_scrapy.core.cluster.clustering import Clusterer  # noqa: PLC0415
    from simhash_scrapy.core.settings.config import SimhashConfig  # noqa: PLC0415

    pages = sorted(evalset.pages, key=lambda p: p.order)
    bodies = [evalset.html(p) for p in pages]
    options = SimhashConfig.from_settings({}).analysis
    without = _replace(options, sketch=False)

    def best(run) -> float:  # noqa: ANN001
        times = []
        for _ in range(rounds):
            t0 = time.process_time()
            run()
            times.append(time.process_time() - t0)
        return min(times)

    answers = [analyse_html(body, options=options) for body in bodies]
    texts = [a.source for a in answers]
    t_with = best(lambda: [analyse_html(body, options=options) for body in bodies])
    t_without = best(lambda: [analyse_html(body, options=without) for body in bodies])
    t_sketch = best(lambda: [c.sketch_of(text) for text in texts if text is not None])
    with _native.switched(False):  # the pure-Python twin, the path without the C helpers
        t_pure = best(lambda: [c.sketch_of(text) for text in texts if text is not None])

    def rule(sketches: bool) -> None:
        clusters = Clusterer()
        for n, a in enumerate(answers):
            if a.fingerprint is not None:
                clusters.check("s", str(n), a.fingerprint, a.exact, edit_keys=a.edit_keys, second=a.second,
                               sketch=a.sketch if sketches else None)

    t_rule = best(lambda: rule(True)) - best(lambda: rule(False))
    n = len(pages)
    sketched = [a.sketch for a in answers if a.sketch is not None]
    tracemalloc.start()
    index = c.ContainmentIndex()
    for entry, sketch in enumerate(sketched):
        index.add(entry, sketch)
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{n} pages ({len(sketched)} with a sketch), CPU seconds, best of {rounds}:")
    print(f"  analyse_html, defaults: {t_with:.3f} s ({1000 * t_with / n:.3f} ms a page); without the sketch "
          f"{t_without:.3f} s: the sketch is {100 * (t_with - t_without) / t_without:+.1f}%")
    print(f"  sketch_of alone: {1000 * t_sketch / n:.3f} ms a page ({100 * t_sketch / t_without:.1f}% of analysis); "
          f"pure-Python path {1000 * t_pure / n:.3f} ms a page")
    print(f"  the rule's step 7 (check with sketches minus without): {1000 * t_rule / n:.3f} ms a page")
    print(f"  ContainmentIndex: {size / max(1, len(sketched)):.0f} bytes a canonical page (traced, "
          f"{len(sketched)} pages); SentenceCounts: {c.SentenceCounts().nbytes()} bytes, fixed")
    return 0


def seeded(evalset: common.EvalSet, texts: score.Texts, seeds: int, grid: list[dict]) -> int:
    """How the pairs step 7 adds vary with which sentences the sketches sample: per grid point, the pairs
    added (true, false, of which hard negatives, gray) averaged over ``seeds`` hashings of the same sentences
    (every sentence hash h re-mixed as ``mix64(h ^ seed * golden)``, seed 0 the hash itself: another
    uniform sample each time) and the most false pairs any one of them added."""
    from simhash_scrapy.core.features.features import _mix64_int  # noqa: PLC0415

    setup = replace(score.default_setup(), containment=False)
    fps = score.run_library(evalset, setup, texts).fps
    flagged = score.flagged_pairs(fps, setup.k, score.template_free(evalset, setup, fps, texts))
    flagged |= score.second_pairs(fps, setup, texts) | score.one_edit_pairs(evalset, texts, setup)
    hard = set(evalset.hn_shared) | {common.pair(a, b) for a, b in evalset.hn_title}
    for rows in evalset.hard_pairs.values():
        hard |= set(rows)
    plain = c.sentence_hashes
    cache: dict[tuple[int, int], list[int]] = {}
    print(f"{seeds} hashings of the sentences, pairs added a hashing on average:")
    try:
        for params in grid:
            true = false = hn = gray = worst = 0
            for seed in range(seeds):
                salt = (seed * 0x9E3779B97F4A7C15) & ((1 << 64) - 1)

                def hashes(text: str | bytes, min_words: int = c.MIN_WORDS, salt: int = salt) -> list[int]:
                    key = (id(text), min_words)
                    if key not in cache:
                        cache[key] = plain(text, min_words)
                    return sorted(_mix64_int(h ^ salt) for h in cache[key]) if salt else cache[key]

                c.sentence_hashes = hashes  # type: ignore[assignment]  # sketch_of reads the module's name
                added = score.containment_pairs(evalset, fps, flagged, texts, setup, params)
                t, g = len(added & set(evalset.positive)), len(added & set(evalset.gray))
                true, gray, hn = true + t, gray + g, hn + len(added & hard)
                false += len(added) - t - g
                worst = max(worst, len(added) - t - g)
            print(f"  {params}: {true / seeds:.2f} true, {false / seeds:.2f} false (at most {worst}), of which "
                  f"{hn / seeds:.2f} hard negatives, {gray / seeds:.2f} gray", flush=True)
    finally:
        c.sentence_hashes = plain  # type: ignore[assignment]
    return 0


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
    parser.add_argument("--cost", action="store_true",
                        help="only the step's cost: CPU time per page and bytes per canonical page (defaults)")
    parser.add_argument("--seeds", type=int, default=0,
                        help="only the grid's pairs averaged over this many hashings of the sentences (sketch t, "
                             "theta: the sampling's variance)")
    args = parser.parse_args(argv)
    evalset = common.load_set(args.data, args.half)
    texts = score.Texts(evalset)
    if args.cost:
        return cost(evalset)
    if args.seeds:
        grid = [dict(t=int(t), theta=float(theta)) for t in args.sketch.split(",") for theta in args.theta.split(",")]
        return seeded(evalset, texts, args.seeds, grid)
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
