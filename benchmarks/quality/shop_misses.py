"""Why the shop set's duplicate pairs are missed and its variants merged (issue #33, a diagnosis).

Reads the missed pairs ``score.py --misses`` wrote (``--misses-file``) and the set itself, and prints:

* the missed print / cross / tracking pairs by the Hamming distance of the two pages' fingerprints (the
  library's analysis: ``core.analysis.analyse_html`` at the defaults), and whether the two pages declare
  the same identity (``core.cluster.identity``: a page declaring one and its copy declaring none are in
  different scopes and never compared);
* what two candidate "identity from plain text" signals would do if they rode in the scope as the
  declared identity does: the page's ``<title>``, and the set of prices its main text shows. For each:
  how many duplicate pairs it would split (lost recall), how many variants and hard negatives it
  would keep apart.

    python benchmarks/quality/score.py --data /work/data/shops2 --half tune --mode e2e --no-naive \\
        --misses > /tmp/misses.txt
    python benchmarks/quality/shop_misses.py --data /work/data/shops2 --half tune --misses-file /tmp/misses.txt
"""

from __future__ import annotations

import argparse
import html
import json
import re
from collections import Counter
from pathlib import Path

from lxml import html as lxml_html

from simhash_scrapy.core.analysis import analyse_html
from simhash_scrapy.core.settings.config import SimhashConfig
from simhash_scrapy.core.cluster.identity import identity_signals

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.S | re.I)
_PRICE = re.compile(r"[$€£¥]\s?\d[\d.,]*\d|\d[\d.,]*\d\s?(?:€|EUR|USD|GBP)\b")
_BANDS = ((0, 4), (5, 8), (9, 12), (13, 16), (17, 24), (25, 64))


class ShopSet:
    """The set's manifest and truth, with each page's analysis and signals made once."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.pages = {r["id"]: r for r in map(json.loads, (data / "manifest.jsonl").read_text().splitlines())}
        self.truth = json.loads((data / "truth.json").read_text())
        self.config = SimhashConfig.from_settings({})
        self._cache: dict[int, tuple[int | None, str, str | None, str | None]] = {}

    def raw(self, page: int) -> bytes:
        return (self.data / self.pages[page]["file"]).read_bytes()

    def facts(self, page: int) -> tuple[int | None, str, str | None, str | None]:
        """(fingerprint, main text, declared identity digest, title) of one page."""
        if page not in self._cache:
            raw = self.raw(page)
            answer = analyse_html(raw, None, self.config.analysis)
            source = answer.source or ""
            text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
            try:
                declared = identity_signals(lxml_html.document_fromstring(raw), raw).digest()
            except (ValueError, TypeError):
                declared = None
            match = _TITLE.search(raw)
            title = " ".join(html.unescape(match.group(1).decode("utf-8", "replace")).split()).lower() if match else None
            self._cache[page] = (answer.fingerprint, text, declared, title)
        return self._cache[page]

    def prices(self, page: int) -> frozenset[str]:
        return frozenset(re.sub(r"\s", "", p) for p in _PRICE.findall(self.facts(page)[1]))

    def distance(self, a: int, b: int) -> int | None:
        fa, fb = self.facts(a)[0], self.facts(b)[0]
        return None if fa is None or fb is None else (fa ^ fb).bit_count()


def _band(distance: int | None) -> str:
    if distance is None:
        return "no fingerprint"
    return next(f"{lo}-{hi}" for lo, hi in _BANDS if lo <= distance <= hi)


def missed_table(shops: ShopSet, misses: Path) -> str:
    """Missed pairs per kind: by distance band, and how many are split by the declared identity."""
    bands: Counter[tuple[str, str]] = Counter()
    split: Counter[str] = Counter()
    for line in misses.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 4 or not parts[2].split()[0].isdigit():
            continue
        kind, a, b = parts[0], int(parts[2].split()[0]), int(parts[3].split()[0])
        bands[(kind, _band(shops.distance(a, b)))] += 1
        split[kind] += shops.facts(a)[2] != shops.facts(b)[2]
    kinds = sorted({k for k, _ in bands})
    names = [f"{lo}-{hi}" for lo, hi in _BANDS] + ["no fingerprint"]
    rows = ["| missed kind | " + " | ".join(f"d {n}" for n in names) + " | declared identities differ |",
            "|---|" + "---:|" * (len(names) + 1)]  # fmt: skip
    for kind in kinds:
        cells = " | ".join(str(bands[(kind, n)]) for n in names)
        rows.append(f"| {kind} | {cells} | {split[kind]} |")
    return "\n".join(rows)


def signal_table(shops: ShopSet, half: str) -> str:
    """What the title, or the main text's prices, would keep apart if they were identity signals."""
    signals = {
        "title": lambda p: shops.facts(p)[3],
        "prices in the main text": lambda p: shops.prices(p) or None,
    }
    rows = ["| signal | duplicate pairs split | variants kept apart | hard negatives kept apart |", "|---|---:|---:|---:|"]
    positives = [(a, b) for a, b, *_ in shops.truth["positive"] if shops.pages[a].get("half") == half]
    hard = [(a, b) for kind, pairs in shops.truth["hard_pairs"].items() if kind != "variant" for a, b in pairs
            if shops.pages[a].get("half") == half]  # fmt: skip
    variants = [(a, b) for a, b in shops.truth["hard_pairs"]["variant"] if shops.pages[a].get("half") == half]
    for name, of in signals.items():
        def apart(pairs: list[tuple[int, int]]) -> str:
            n = sum(1 for a, b in pairs if of(a) != of(b))  # noqa: B023 (used at once)
            return f"{n} / {len(pairs)}"

        rows.append(f"| {name} | {apart(positives)} | {apart(variants)} | {apart(hard)} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/data/shops2"))
    parser.add_argument("--half", choices=("tune", "test"), default="tune")
    parser.add_argument("--misses-file", type=Path, required=True, help="score.py --misses output")
    args = parser.parse_args()
    shops = ShopSet(args.data)
    print(missed_table(shops, args.misses_file))
    print()
    print(signal_table(shops, args.half))


if __name__ == "__main__":
    main()
