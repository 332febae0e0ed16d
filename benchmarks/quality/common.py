"""Shared pieces of the quality benchmark: truth text, shingles, Jaccard, set loading.

The truth side never uses simhash_scrapy: main content is the node the builder
knows it put the article in, words are ``\\w+`` runs of the lower-cased text and
shingles are word 3-grams.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE / "data"

#: Word shingle length used for truth.
SHINGLE = 3
#: Pairs of different sources whose main-content shingle Jaccard reaches this are duplicates.
POSITIVE_JACCARD = 0.9
#: Pairs between this and POSITIVE_JACCARD are "gray": neither rewarded nor penalised.
GRAY_JACCARD = 0.5
#: Pages whose main content has fewer words than this are "empty": they must never be matched.
EMPTY_WORDS = 25

_WORD = re.compile(r"\w+")
# One character of a script written without spaces (kana, CJK ideographs, hangul), or a run of other word characters.
_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_WORD_CJK = re.compile(rf"[{_CJK_RANGES}]|[^\W{_CJK_RANGES}]+")
#: Whether ``words`` counts each character of a script written without spaces as a word (the real-web set,
#: ``build_realweb.py``, whose Japanese and Chinese pages would otherwise be a few "words" a sentence; its
#: ``truth.json`` info says ``cjk_characters``).  False for the documentation sets (their figures unchanged).
CJK_CHARACTERS = False

#: Kinds of duplicate, in report order (a set holds a subset: the first set has "print", the wide one
#: "print_links", "print_plain" and "short").
CATEGORIES = (
    "template", "tracking", "print", "print_links", "print_plain", "edit", "sidebar", "sort", "cross", "release",
    "natural", "short",
)  # fmt: skip
HARD_NEGATIVES = (
    "hn_template", "hn_title", "hn_shared", "hn_swap", "hn_site", "hn_product", "hn_listing", "hn_thread", "hn_page",
)  # fmt: skip
#: Pairs that must stay apart but are no hard negative of the text (the shop set's product variants:
#: ``score.py`` reports the share merged on a row of its own, outside "all hard negatives").
APART_ROWS = ("variant",)
CATEGORY_TITLES = {
    "template": "same article, other template (mirror, reader view)",
    "tracking": "tracking/session URL variants (timestamps, tokens, ads)",
    "print": "printer-friendly versions",
    "print_links": "print views with a link list",
    "print_plain": "print views without links",
    "short": "short pages, identical text (soft-404 shells, stubs)",
    "edit": "1-3% content edits",
    "release": "two releases of the same docs",
    "natural": "natural duplicates within one site",
    "hn_template": "different pages, one heavy template",
    "hn_title": "same title, different body",
    "hn_shared": "different pages sharing a long section",
    "hn_swap": "different articles in one site's real template",
    "hn_site": "different pages of one site",
    "hn_product": "different products of one shop",
    "hn_listing": "different listing pages of one site (page N vs M, category vs home)",
    "hn_thread": "different threads of one forum",
    "hn_page": "different pages of one forum thread",
    "sidebar": "the page with another sidebar",
    "sort": "a listing sorted another way (its item grid reordered)",
    "cross": "two copies of one page, of different kinds",
    "variant": "product variants (other colour/size: name, SKU, price) merged",
    "empty": "(nearly) empty main content",
}


def words(text: str) -> list[str]:
    return (_WORD_CJK if CJK_CHARACTERS else _WORD).findall(text.lower())


def shingles(text: str, n: int = SHINGLE) -> np.ndarray:
    """Sorted distinct 64-bit hashes of the word n-grams of ``text`` (stable: crc32 based)."""
    ws = words(text)
    if not ws:
        return np.zeros(0, dtype=np.uint64)
    if len(ws) < n:
        grams = [" ".join(ws)]
    else:
        grams = [" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1)]
    values = set()
    for gram in grams:
        data = gram.encode("utf-8")
        values.add((zlib.crc32(data) << 32) | zlib.crc32(data, 0x5BD1E995))
    return np.array(sorted(values), dtype=np.uint64)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def minhash(sets: list[np.ndarray], perms: int = 128, seed: int = 1) -> np.ndarray:
    """MinHash signatures (len(sets) x perms) of 64-bit shingle sets, computed with numpy."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 2**63, size=perms, dtype=np.uint64) | np.uint64(1)
    b = rng.integers(0, 2**63, size=perms, dtype=np.uint64)
    out = np.full((len(sets), perms), np.iinfo(np.uint64).max, dtype=np.uint64)
    for i, values in enumerate(sets):
        if len(values) == 0:
            continue
        for start in range(0, len(values), 4096):
            chunk = values[start : start + 4096]
            hashed = chunk[:, None] * a[None, :] + b[None, :]
            hashed ^= hashed >> np.uint64(29)
            np.minimum(out[i], hashed.min(axis=0), out=out[i])
    return out


def similar_pairs(sets: list[np.ndarray], threshold: float) -> list[tuple[int, int, float]]:
    """All pairs (i < j) whose exact Jaccard is >= threshold (MinHash candidates, exact check)."""
    sig = minhash(sets)
    n = len(sets)
    found = []
    # MinHash estimates have a standard error of about 0.045 at 128 permutations.
    cand_threshold = max(0.0, threshold - 0.2)
    for start in range(0, n, 128):
        block = sig[start : start + 128]
        est = (block[:, None, :] == sig[None, :, :]).mean(axis=2)
        rows, cols = np.nonzero(est >= cand_threshold)
        for r, c in zip(rows.tolist(), cols.tolist()):
            i = start + r
            if c <= i:
                continue
            if len(sets[i]) == 0 or len(sets[c]) == 0:
                continue
            j = jaccard(sets[i], sets[c])
            if j >= threshold:
                found.append((i, c, j))
    return found


@dataclass
class Page:
    id: int
    url: str
    file: str
    host: str
    category: str
    role: str
    group: str | None
    source: str
    words: int
    variant: str = ""
    order: int = 0
    half: str = ""  # "tune" | "test" (wide set)
    family: str = ""  # template family of the source page (wide set); the site (real-web set)
    genre: str = ""  # news, blog, shop, government, reference, forum (real-web set)


@dataclass
class EvalSet:
    root: Path
    pages: list[Page]
    positive: dict[tuple[int, int], str]
    gray: set[tuple[int, int]]
    hn_template: list[int]
    hn_title: list[tuple[int, int]]
    empty: list[int]
    info: dict = field(default_factory=dict)
    # positive pairs whose main texts are word-for-word the same (the rest differ somewhere)
    identical: set[tuple[int, int]] = field(default_factory=set)
    # positive pair -> word-3-shingle Jaccard of the two main texts (wide set)
    positive_jaccard: dict[tuple[int, int], float] = field(default_factory=dict)
    # pairs of different pages whose articles end with one shared long section (wide set)
    hn_shared: list[tuple[int, int]] = field(default_factory=list)
    # further hard negatives as pairs, by kind (real-web set: "hn_swap", "hn_site")
    hard_pairs: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def html(self, page: Page) -> bytes:
        return (self.root / page.file).read_bytes()

    def categories(self) -> list[str]:
        """The kinds of duplicate this set has, in report order."""
        present = set(self.positive.values())
        return [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))

    def genres(self) -> list[str]:
        return sorted({p.genre for p in self.pages if p.genre})

    def families(self) -> list[str]:
        return sorted({p.family for p in self.pages if p.family})

    def by_id(self) -> dict[int, Page]:
        return {p.id: p for p in self.pages}


def similar_kind(pa: dict, pc: dict) -> str:
    """The kind of duplicate of two pages (manifest records) found by their shingle Jaccard.

    A variant's own kind when one page is a variant; else "release" for pages of one host
    under different first path segments (versions), "natural" otherwise.
    """
    variant = next((p for p in (pa, pc) if p["role"] != "original"), None)
    if variant is not None and not variant["category"].startswith("hn_"):
        return variant["category"]
    same_host = pa["host"] == pc["host"]
    return "release" if same_host and pa["url"].split("/")[3] != pc["url"].split("/")[3] else "natural"


def set_crawl_order(pages: list[dict], rng) -> None:
    """Give every page record an ``order``: a seeded shuffle, as a crawl of several hosts sees them."""
    order = list(range(len(pages)))
    rng.shuffle(order)
    for rank, pid in enumerate(order):
        pages[pid]["order"] = rank


def pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def load_set(root: str | Path = DEFAULT_DATA, half: str | None = None) -> EvalSet:
    """The set at ``root``; with ``half`` ("tune"/"test") only that half's pages and the pairs among them."""
    root = Path(root)
    manifest = root / "manifest.jsonl"
    if not manifest.exists():
        raise SystemExit(f"{manifest} not found: build the set first (python benchmarks/quality/build_set.py)")
    pages = [Page(**json.loads(line)) for line in manifest.read_text().splitlines() if line.strip()]
    truth = json.loads((root / "truth.json").read_text())
    if half:
        pages = [p for p in pages if p.half == half]
        if not pages:
            raise SystemExit(f"{root}: no page in half {half!r} (only the wide set has halves)")
        ids = {p.id for p in pages}
        for name in ("positive", "gray", "hn_title", "identical", "positive_jaccard", "hn_shared"):
            truth[name] = [row for row in truth.get(name, []) if row[0] in ids and row[1] in ids]
        truth["hard_pairs"] = {
            name: [row for row in rows if row[0] in ids and row[1] in ids]
            for name, rows in truth.get("hard_pairs", {}).items()
        }
        truth["hn_template"] = [i for i in truth["hn_template"] if i in ids]
        truth["empty"] = [i for i in truth["empty"] if i in ids]
    return EvalSet(
        root=root,
        pages=pages,
        positive={pair(a, b): cat for a, b, cat in truth["positive"]},
        gray={pair(a, b) for a, b, _ in truth["gray"]},
        hn_template=truth["hn_template"],
        hn_title=[pair(a, b) for a, b in truth["hn_title"]],
        empty=truth["empty"],
        info=truth.get("info", {}),
        identical={pair(a, b) for a, b in truth.get("identical", [])},
        positive_jaccard={pair(a, b): j for a, b, j in truth.get("positive_jaccard", [])},
        hn_shared=[pair(a, b) for a, b in truth.get("hn_shared", [])],
        hard_pairs={name: [pair(a, b) for a, b in rows] for name, rows in truth.get("hard_pairs", {}).items()},
    )
