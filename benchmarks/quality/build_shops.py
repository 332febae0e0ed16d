"""Build the shop development set: real saved product and profile pages of shops and listing sites, by site.

    python benchmarks/quality/build_shops.py [--out /work/data/shops] [--mirror /work/.mirror]

Source: public saved pages, pinned to one commit (``SOURCES``) and read from a local git snapshot of the
repository (``--mirror DIR``: ``DIR/<owner>+<name>/repo``, as ``build_realweb.py`` reads its own; nothing
is downloaded).  ``genai-data-scraping/genai-data-scraping`` holds complete saved pages of three sites:
five Amazon product pages, five cars.com vehicle pages (a car dealer's product page) and five Upwork
freelancer profiles (a listing site's item pages), each 1-2 MB of the site's real template.  Its
``sample_data`` of other sites (news, Wikipedia, finance) is not in the pinned commit and not read.

Reserved, never used here (an independent check): scrapinghub/product-extraction-benchmark,
TeamHG-Memex/autopager, adbar/htmldate, scrapinghub/extruct and the sources ``build_realweb.py`` names.

Main content (truth): the element each site's template puts the item in (``CONTENT``).  Pages are made
with ``build_realweb.RealBuilder`` (``build_wide.Builder``'s variants):

* ``tracking``: tracking/session query strings, a session bar, an ad, request stamps (2 per page);
* ``print``: a print view of the item, with and without a numbered link list;
* ``edit``: 1-1.7% of the words of the item edited;
* ``sidebar``: the page re-rendered with another sidebar (teasers of the site's other items);
* ``cross``: two copies of one page of different kinds (a print view and a tracking copy).

Hard negatives (``truth.json``'s ``hard_pairs``): ``hn_product``: two different products of one shop
(Amazon, cars.com); ``hn_site``: two different items of one listing site (Upwork profiles).  The
**variant** row (``hard_pairs["variant"]``): the same product in another colour or size, its name, the
prices and the product code in its text changed (and in its JSON-LD / microdata when it has them): kept
apart it is right, merged it is a lost variant; a variant pair is neither rewarded nor penalised in
F1 (gray), only counted in its row.

Halves by site: Amazon and Upwork are the tuning half, cars.com the test half.

The other collections (recipe, Q&A forum, price-comparison, sandbox-shop, home and forum-archive pages: more
than 100 sites, product, listing and forum pages, the hard negatives ``hn_listing``, ``hn_thread``,
``hn_page`` and a listing sorted another way) are read by ``shop_sources.py``; their sites are split into
halves there (seeded, dealt out per kind of site).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from lxml import etree

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_realweb  # noqa: E402
import build_wide  # noqa: E402
import common  # noqa: E402
import shop_sources  # noqa: E402

DEFAULT_OUT = common.DEFAULT_DATA / "shops"
SOURCES = {"genai-data-scraping/genai-data-scraping": "be2e243ec9360eff068df8d2a5778c213f291485"}
assert not any(build_realweb.RESERVED.search(s) for s in SOURCES)
RESERVED = re.compile(r"product-extraction-benchmark|autopager|htmldate|extruct", re.I)
assert not any(RESERVED.search(s) for s in SOURCES)

#: Folder of the collection -> (XPath of the item's main content, genre, hard-negative kind, half).
CONTENT = {
    "amazon.com": ("//div[@id='ppd']", "shop", "hn_product", "tune"),
    "upwork.com": ("//main", "listing", "hn_site", "tune"),
    "cars.com": ("//main", "shop", "hn_product", "test"),
}
#: Words that name another colour or size of a product (a variant's name gets one).
VARIANT_WORDS = ("Red", "Blue", "Large", "Small", "Graphite", "Sand")
_PRICE = re.compile(r"([$€£])\s?(\d{1,3}(?:,\d{3})*|\d+)(\.\d{2})?")
_CODE = re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{8,17}\b")


class ShopSnapshot(build_realweb.Snapshot):
    """``build_realweb.Snapshot`` of a repository pinned here."""

    def __init__(self, mirror: Path, repo: str) -> None:
        self.repo, self.commit = repo, SOURCES[repo]
        self.git = build_realweb.git_dir(mirror, repo)


def shop_half(site: str) -> str:
    half = next((spec[3] for name, spec in CONTENT.items() if site.endswith(name)), None)
    return half or shop_sources.HALVES.get(site, "tune")


def load_sources(mirror: Path) -> tuple[dict[str, build_realweb.RealSource], dict[str, str]]:
    """The saved pages as ``RealSource`` objects (key -> source), and the pages left out (key -> why)."""
    snap = ShopSnapshot(mirror, "genai-data-scraping/genai-data-scraping")
    sources: dict[str, build_realweb.RealSource] = {}
    skipped: dict[str, str] = {}
    sites: dict = {}
    try:
        for folder, (xpath, genre, _, _) in CONTENT.items():
            sites[folder] = build_realweb.RealSite(folder, f"{folder}.test", genre)
            names = sorted(p for p, _ in snap.ls(f"sample_data/{folder}") if p.endswith(".html") and "_files/" not in p)
            for i, path in enumerate(names):
                raw = snap.read(path)
                key = f"{folder}:{i}"
                src, why = build_realweb.make_source(raw or b"", key, f"{snap.repo}:{path}", folder,
                                                     lambda tree, x=xpath: (tree.xpath(x)[:1], 1.0), sites,
                                                     url=_address(raw or b"", folder, i))  # fmt: skip
                if src is None:
                    skipped[key] = why
                    continue
                sources[key] = src
    finally:
        snap.close()
    return sources, skipped


def _address(raw: bytes, folder: str, i: int) -> str:
    """The page's real address (its canonical link or og:url), else one made from its position."""
    tree = build_realweb.parse(raw)
    for found in (tree.xpath("//link[@rel='canonical']/@href"), tree.xpath("//meta[@property='og:url']/@content")):
        if found and urlsplit(found[0]).path not in ("", "/"):
            return found[0]
    return f"https://www.{folder}/item/{i}"


class ShopBuilder(build_realweb.RealBuilder):
    """``RealBuilder`` with the shop moves: another sidebar, and a product variant."""

    def add(self, html: bytes, url: str, *args, **kwargs) -> int:
        """``RealBuilder.add``, a copy's query joined to its page's with ``&`` (``?page=2&format=print``: the
        builders' moves append ``?...`` to the page's address, which may hold a query of its own)."""
        head, mark, query = url.partition("?")
        return super().add(html, head + mark + query.replace("?", "&"), *args, **kwargs)

    def sidebar(self, src: build_realweb.RealSource, group: str) -> int:
        tree = src.tree()
        others = [s for s in self.sources.values() if s.site.name == src.site.name and s.key != src.key]
        teasers = "".join(
            f'<li><a href="{s.url}">{build_wide._esc(s.headline[:80])}</a> <p>{build_wide._esc(build_wide.first_sentence(s.text))}</p></li>'
            for s in self.rng.sample(others, min(3, len(others)))
        )
        box = build_wide.frag(f'<aside class="sidebar recommended"><h3>Customers also viewed</h3><ul>{teasers}</ul></aside>')
        body = tree.find("body")
        body.insert(min(1, len(body)), box)
        return self.variant(build_wide.serialize(tree), f"{src.url.split('#')[0]}{'&' if '?' in src.url else '?'}ref=sidebar",
                            src, "sidebar", group)  # fmt: skip

    def product_variant(self, src: build_realweb.RealSource) -> int:
        """The same product in another colour or size: name, prices and product codes changed."""
        tree = src.tree()
        word = self.rng.choice(VARIANT_WORDS)
        nodes = src.family.content(tree)
        renamed = _rename(tree, src.headline, word)
        repriced = sum(_reprice(node, self.rng) for node in nodes)
        _structured(tree, word, self.rng)
        text = build_wide.content_text(src.family.content(tree))
        url = f"{src.url.split('#')[0]}{'&' if '?' in src.url else '?'}variant={word.lower()}"
        return self.add(build_wide.serialize(tree), url, text, "variant", "variant", None, src, src.half,
                        src.site.family, f"variant:{renamed}:{repriced}")  # fmt: skip


def _texts(node: etree._Element):
    for el in node.iter():
        if not isinstance(el.tag, str) or el.tag in ("script", "style"):
            continue
        yield el, "text"
        if el is not node:
            yield el, "tail"


def _rename(tree: etree._Element, name: str, word: str) -> int:
    """Append ``word`` to every text holding the product's name (its title, headline, breadcrumbs)."""
    name = name.strip()
    count = 0
    if len(name) < 4:
        return 0
    for el, attr in _texts(tree):
        value = getattr(el, attr)
        if value and name in value:
            setattr(el, attr, value.replace(name, f"{name} {word}"))
            count += 1
    return count


def _reprice(node: etree._Element, rng) -> int:
    """Every price and product code of ``node``'s text changed (one new price, one new code for the page)."""
    delta = rng.choice((3, 5, 10, 20))
    code = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(10)) + "9"
    count = 0
    for el, attr in _texts(node):
        value = getattr(el, attr)
        if not value:
            continue
        new = _PRICE.sub(lambda m: f"{m.group(1)}{int(m.group(2).replace(',', '')) + delta:,}{m.group(3) or ''}", value)
        new = _CODE.sub(code[: 10], new)
        if new != value:
            setattr(el, attr, new)
            count += 1
    return count


def _structured(tree: etree._Element, word: str, rng) -> None:
    """The variant's own name, SKU and price in the page's JSON-LD and microdata, when it has them."""
    for script in tree.xpath("//script[contains(@type, 'ld+json')]"):
        try:
            data = json.loads(script.text or "")
        except ValueError:
            continue
        for node in _json_nodes(data):
            for key in ("sku", "mpn", "gtin13", "productID"):
                if isinstance(node.get(key), str):
                    node[key] = node[key] + "-" + word.upper()[:3]
            if isinstance(node.get("price"), (str, int, float)):
                node["price"] = str(float(str(node["price"]).replace(",", "") or 0) + 5)
        script.text = json.dumps(data)
    for el in tree.xpath("//*[@itemprop='sku' or @itemprop='price' or @itemprop='mpn']"):
        if el.get("content"):
            el.set("content", el.get("content") + "1")


def _json_nodes(data):
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def assemble(b: ShopBuilder, sources: dict) -> dict:
    originals = {k: b.add_original(sources[k]) for k in sorted(sources)}
    variants = []
    for k in sorted(sources):
        src = sources[k]
        b.pages[originals[k]]["group"] = group = f"shop:{k}"
        b.tracking(src, 2, group)
        b.printable(src, group, links=True)
        b.printable(src, group, links=False)
        for p in b.pages[-2:]:
            p["category"] = "print"
        b.edited(src, b.rng.uniform(0.01, 0.017), group, 2)
        b.sidebar(src, group)
        shop_sources.sorted_listing(b, src, group)
        if shop_sources.has_variant(src):
            variants.append((originals[k], b.product_variant(src)))
    truth = build_wide.compute_truth(b, [], [], b.rng, [])
    truth["positive"] = _kinds(b, truth["positive"])
    variant_pairs = {common.pair(a, c) for a, c in variants}
    rows = {v for _, v in variants}
    # a product variant and any copy of its product: not scored in F1 (the variant row counts them)
    moved = [row for row in truth["positive"] if row[0] in rows or row[1] in rows]
    truth["positive"] = [row for row in truth["positive"] if row[0] not in rows and row[1] not in rows]
    gray = {common.pair(a, c) for a, c, _ in truth["gray"]}
    truth["gray"] += [[a, c, 1.0] for a, c, _ in moved if common.pair(a, c) not in gray]
    gray = {common.pair(a, c) for a, c, _ in truth["gray"]}
    truth["gray"] += [[a, c, 1.0] for a, c in sorted(variant_pairs - gray)]
    scored = {common.pair(a, c) for a, c, _ in truth["positive"]} | {common.pair(a, c) for a, c, _ in truth["gray"]}
    by_site: dict[str, list[int]] = {}
    for k, pid in originals.items():
        by_site.setdefault(sources[k].site.name, []).append(pid)
    hard: dict[str, list[list[int]]] = {"variant": [list(p) for p in sorted(variant_pairs)]}
    for site, ids in by_site.items():
        kind = next((spec[2] for name, spec in CONTENT.items() if site.endswith(name)), "hn_product")
        for a, c in (common.pair(a, c) for i, a in enumerate(ids) for c in ids[i + 1 :]):
            if (a, c) not in scored:
                name = shop_sources.hard_kind(b.pages[a]["source"], b.pages[c]["source"]) or kind
                hard.setdefault(name, []).append([a, c])
    truth["hard_pairs"] = hard
    return truth


def _kinds(b: ShopBuilder, rows: list) -> list:
    """Each positive pair named by its copy's kind; two copies of different kinds (a print view and a
    tracking copy of one page): ``cross``."""
    out = []
    for a, c, _ in rows:
        kinds = {b.pages[i]["category"] for i in (a, c) if b.pages[i]["role"] == "variant"}
        out.append([a, c, kinds.pop() if len(kinds) == 1 else "cross" if kinds else "natural"])
    return out


def build(out: Path, mirror: Path, seed: int) -> dict:
    t0 = time.perf_counter()
    build_realweb.half_of = shop_half  # (RealSource.half asks build_realweb.half_of: the halves are by site here)
    sources, skipped = load_sources(mirror)
    more, more_skipped = shop_sources.load(mirror, seed)  # the other collections (shop_sources.py)
    sources.update(more)
    skipped.update(more_skipped)
    if (out / "pages").exists():
        shutil.rmtree(out / "pages")
    b = ShopBuilder(sources, out, seed)
    b.donor_keys = sorted(sources)
    b.donor_words = [w for s in sources.values() for w in s.text.split()[50:250] if w.isalpha()] or ["the"]
    b.donor_sentences = [m for s in sources.values() for m in re.findall(r"[A-Z][^.?!]{40,160}[.?!]", s.text[:3000])]
    b.donor_sentences = b.donor_sentences or ["This sentence was added to the page by an editor later on."]
    truth = assemble(b, sources)
    truth["info"] = dict(sources=SOURCES | shop_sources.SOURCES, seed=seed, pages=len(b.pages), left_out=skipped,
                         sites=len({s.site.name for s in sources.values()}), kinds=shop_sources.kind_counts(b.pages),
                         build_seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
    build_realweb.write(out, b, truth)
    return truth


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--mirror", type=Path, default=build_realweb.DEFAULT_MIRROR)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    truth = build(args.out, args.mirror, args.seed)
    print(build_realweb.summary(args.out, truth))


if __name__ == "__main__":
    main()
