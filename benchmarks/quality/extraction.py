"""How close main-content extraction comes to the builder's truth text, per template family.

    python benchmarks/quality/extraction.py --data benchmarks/quality/data/wide --half tune
    python benchmarks/quality/extraction.py --data benchmarks/quality/data/wide --half tune --kinds --worst 10

For every page made from a source page of the wide set (originals, mirrors, reader views, print
views without links, tracking variants: the kinds whose truth is the source page's text unchanged),
the words (``common.words``) of ``extract_text(main_content=True)`` are compared, as multisets, with
the words of the source page's truth text (the element ``build_wide.FAMILIES`` names for its
template). "missing" is the share of truth words the extraction lost, "extra" the share of words it
kept that truth does not have (chrome leaking in, a mirror notice), both over all truth words of
the family.  This scores the extraction alone, without simhash or k.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import lxml.html

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_wide  # noqa: E402
import common  # noqa: E402

from simhash_scrapy.core.extract.text import extract_text  # noqa: E402

#: Kinds of page whose truth is their source page's text, unchanged.
KINDS = ("original", "template", "print_plain", "tracking")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=build_wide.DEFAULT_OUT)
    parser.add_argument("--half", choices=("tune", "test"))
    parser.add_argument("--kinds", action="store_true", help="also a row per family and kind of page")
    parser.add_argument("--worst", type=int, default=0, help="list the pages that lost the most truth words")
    args = parser.parse_args(argv)
    evalset = common.load_set(args.data, args.half)
    truths: dict[str, collections.Counter] = {}
    for page in evalset.pages:
        if page.role == "original" and page.family in build_wide.FAMILIES:
            tree = lxml.html.document_fromstring(evalset.html(page))
            nodes = build_wide.FAMILIES[page.family].content(tree)
            truths[page.source] = collections.Counter(common.words(build_wide.content_text(nodes)))
    rows: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0])
    worst = []
    for page in evalset.pages:
        truth = truths.get(page.source)
        if truth is None or page.category not in KINDS or sum(truth.values()) < common.EMPTY_WORDS:
            continue
        got = collections.Counter(common.words(extract_text(evalset.html(page), main_content=True)))
        extra, missing, total = sum((got - truth).values()), sum((truth - got).values()), sum(truth.values())
        kind = page.variant.split(":")[0] if page.category == "template" else page.category
        for key in ((page.family, kind), (page.family, ""), ("all", "")):
            row = rows[key]
            row[0] += extra
            row[1] += missing
            row[2] += total
            row[3] += 1
        worst.append((missing / total, page.id, page.url, total))
    print("| template family | kind | pages | truth words | missing | extra |")
    print("|---|---|---:|---:|---:|---:|")
    for (family, kind), (extra, missing, total, pages) in sorted(rows.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        if kind and not args.kinds:
            continue
        print(f"| {family} | {kind or 'all'} | {pages} | {total} | {missing / total:.3f} | {extra / total:.3f} |")
    for share, pid, url, total in sorted(worst, reverse=True)[: args.worst]:
        print(f"{share:.3f} of {total} words missing: page {pid} {url}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
