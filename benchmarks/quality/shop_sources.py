"""More saved shop, item, listing and forum pages for the shop set (``build_shops.py``), by collection.

Each collection is pinned to one commit (``SOURCES``) and read from its local snapshot
(``--mirror DIR``: ``DIR/<owner>+<name>/repo``, as ``build_realweb.py`` reads its own; nothing is downloaded):

=============================  =====================================  ===================================
collection (pinned)            pages                                  main content (truth)
=============================  =====================================  ===================================
hhursev/recipe-scrapers        ``tests/test_data/<host>/*.testhtml``:  the element whose words best match
                               recipe pages of recipe sites saved by   the page's ``.json`` (title,
                               the scrapers' authors (a seeded sample  description, ingredients and
                               of ``MAX_RECIPE_SITES`` sites with two  instructions the scraper must find)
                               pages or more, ``MAX_PER_SITE`` each)
chaoss/grimoirelab-perceval    ``tests/data/askbot/*.html``: question  the site's question column
                               pages of two Askbot Q&A forums          (``//div[@id='ContentLeft']``)
                               (askbot.org, ask.openstack.org), pages
                               2-4 of one long thread among them
ingonader/rgeizhals            ``inst/extdata/gh-*.html``: geizhals.at the page's content wrapper
                               price-comparison pages: two categories  (``//div[@id='gh_content_wrapper']``)
                               (page 1 and 2 of one), three products
scrapy/scrapy-bench            ``bookfiles.tar.gz``: books.toscrape.   the product column
                               com product pages (a sandbox shop's     (``//article[@class='product_page']``)
                               real template; ``MAX_BOOKS`` of them);
                               ``sites.tar.gz``: home pages of popular the first of ``main``, ``[role=main]``,
                               sites, of which the shop, listing and   ``#content``, ``#main``, else ``body``
                               forum ones (``BENCH_HOMES``, 22 sites)  (``HOME_CONTENT``: no per-site truth)
opendcl/forum-archive          a static archive of the OpenDCL SMF     ``//main``
                               forum (its own light template): a
                               sample of threads, three boards, the
                               board index
openenergymonitor/             a static copy of the OpenEnergyMonitor  ``//div[@id='main']``
forum-archive                  Drupal 6 forum: threads, four pages of
                               one category's listing (by its pager),
                               the other categories' first pages, the
                               forum's home page
mathagmann/computerscreen-     ``data/cs2023_minimal``: offer pages    the shop's product element
spec-extraction                of computer screens in German-speaking  (``SCREEN_CONTENT``: five shops
                               online shops                            with a rule, the others left out)
=============================  =====================================  ===================================

None of them holds pages of the reserved collections (scrapinghub/product-extraction-benchmark,
TeamHG-Memex/autopager, adbar/htmldate, scrapinghub/extruct, adbar/trafilatura,
scrapinghub/article-extraction-benchmark, chatnoir-eu's web-content-extraction-benchmark, Debian's
docs): recipe-scrapers' and perceval's pages were saved by their own authors for their parsers' tests,
rgeizhals' by its author from geizhals.at, scrapy-bench's for its crawl benchmarks (``wget`` copies), the
two forum archives by the forums' own projects.

Every page has a kind (``PAGE_KIND``: product, listing or forum; a recipe page is an item page, kind
product, genre ``recipe``) and a thread (forum pages: pages of one question share it).  Hard negatives
between two original pages of one site (``hard_kind``): ``hn_product`` (two items), ``hn_listing`` (two
listing pages: page N vs page M of one category, or two categories), ``hn_thread`` (two threads of one
forum), ``hn_page`` (two pages of one thread), ``hn_site`` (an item page and a listing page).
A listing page also gets a copy sorted another way (``sorted_listing``: its item grid reordered, a
``sort=`` parameter): a duplicate of kind ``sort``.

Halves (``assign_halves``): by site, seeded, alternating within each kind (a site's kind is its pages'
most common kind), so both halves hold sites of every kind that has two sites or more.
"""

from __future__ import annotations

import copy
import io
import json
import random
import re
import tarfile
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from lxml import etree

import build_realweb
import build_wide
import common

SOURCES = {
    "hhursev/recipe-scrapers": "d08ddd0240ee0ff73dd9d705e43077a821944716",
    "chaoss/grimoirelab-perceval": "78fd47401d8f17a757186c9eb82677f617fce3f4",
    "ingonader/rgeizhals": "0f2f74b28b3e6757ed4e25df598c5ff23513c153",
    "scrapy/scrapy-bench": "48626327dc5d3b2195a16ad755b92174de123e35",
    "opendcl/forum-archive": "ad10ae279fbf8f36dfcfe552356b1bfca6ecf94c",
    "openenergymonitor/forum-archive": "e0a42e321b9faca872ff9ef3f617757c3d97ef12",
    "mathagmann/computerscreen-spec-extraction": "5f5bd1c8537ec884ed73049e66727add7ec0ac2e",
}
RESERVED = re.compile(r"product-extraction-benchmark|autopager|htmldate|extruct|trafilatura|"
                      r"article-extraction-benchmark|web-content-extraction|django-doc|postgresql-doc|rust-doc", re.I)  # fmt: skip
assert not any(RESERVED.search(s) or build_realweb.RESERVED.search(s) for s in SOURCES)

#: Pages taken of the two big one-site collections (their hard pairs grow as the square of this).
MAX_BOOKS = 10
MAX_THREADS = 8
#: ``sites.tar.gz`` of scrapy-bench: home pages of shop, listing and forum sites (file -> address, genre).
BENCH_HOMES = {
    "9": ("https://www.amazon.com/", "shop"), "65": ("https://www.ebay.com/", "shop"),
    "70": ("https://www.etsy.com/", "shop"), "17": ("https://www.asos.com/", "shop"),
    "74": ("https://www.flipkart.com/", "shop"), "75": ("https://www.gearbest.com/", "shop"),
    "4": ("https://www.aliexpress.com/", "shop"), "24": ("https://allegro.pl/", "shop"),
    "97": ("https://www.homedepot.com/", "shop"), "98": ("https://www.ikea.com/", "shop"),
    "41": ("https://www.bukalapak.com/", "shop"), "6": ("https://www.alibaba.com/", "shop"),
    "126": ("https://www.jd.com/", "shop"), "80": ("https://www.booking.com/", "listing"),
    "18": ("https://www.airbnb.co.in/", "listing"), "91": ("https://ahmedabad.craigslist.org/", "listing"),
    "28": ("https://www.avito.ru/", "listing"), "102": ("https://www.indeed.com/", "listing"),
    "113": ("https://www.goodreads.com/", "listing"), "127": ("https://www.kaskus.co.id/", "forum"),
    "5": ("https://www.4chan.org/", "forum"), "87": ("https://www.gamefaqs.com/", "forum"),
}  # fmt: skip
#: A home page's content element: the first of these the page has (the home pages have no per-site truth).
HOME_CONTENT = "(//main | //*[@role='main'] | //*[@id='content'] | //*[@id='main'] | //body)[1]"
MIN_WORDS = 50
MAX_RECIPE_SITES = 80
MAX_PER_SITE = 3
#: A recipe page's content element must match the expected text at least this well (word-multiset F1).  Lower
#: than ``build_realweb.MIN_LOCATE_F1`` (0.8): the recipe card also holds notes and nutrition facts the scraper
#: does not return (most cards match at 0.67-0.8; below 0.65 the match is another block).
RECIPE_MIN_F1 = 0.65
#: key -> kind of page (product / listing / forum) and key -> thread (forum pages), filled by the loaders.
PAGE_KIND: dict[str, str] = {}
THREAD: dict[str, str] = {}
#: site (registered domain) -> "tune" / "test", filled by ``assign_halves``.
HALVES: dict[str, str] = {}
_SORTS = ("price_asc", "price_desc", "rating", "newest", "name")


class Snapshot(build_realweb.Snapshot):
    """``build_realweb.Snapshot`` of a repository pinned here."""

    def __init__(self, mirror: Path, repo: str) -> None:
        self.repo, self.commit = repo, SOURCES[repo]
        self.git = build_realweb.git_dir(mirror, repo)


def _gold_nodes(truth: str, least: float):
    def nodes_of(tree):
        node, f1 = build_realweb.locate(tree, truth)
        return ([node] if node is not None and f1 >= least else []), f1

    return nodes_of


def _xpath_nodes(xpath: str):
    def nodes_of(tree):
        return tree.xpath(xpath)[:1], 1.0

    return nodes_of


def _add(out: dict, skipped: dict, sites: dict, snap: Snapshot, path: str, key: str, kind: str, nodes_of,
         url: str | None, genre: str) -> None:  # fmt: skip
    raw = snap.read(path)
    if raw is None:
        skipped[key] = "file missing"
        return
    _add_raw(out, skipped, sites, snap, path, raw, key, kind, nodes_of, url, genre)


def _add_raw(out: dict, skipped: dict, sites: dict, snap: Snapshot, path: str, raw: bytes, key: str, kind: str,
             nodes_of, url: str | None, genre: str) -> None:  # fmt: skip
    src, why = build_realweb.make_source(raw, key, f"{snap.repo}:{path}", key.split(":")[0], nodes_of, sites, url)
    if src is None or src.nwords < MIN_WORDS:
        skipped[key] = why or f"main content under {MIN_WORDS} words (a stub or an error page)"
        return
    if src.site.genre != genre:  # the collection says what the site is (genre_of guesses from the address)
        src.site = sites[src.site.name] = build_realweb.RealSite(src.site.name, src.site.host, genre)
    taken = {s.path for s in out.values() if s.site.name == src.site.name}
    if src.path in taken:  # two saved pages of one address (pages of one thread): the page number tells them apart
        src.path = f"{src.path}{'&' if '?' in src.path else '?'}page={key.rsplit('-', 1)[-1]}"
    out[key] = src
    PAGE_KIND[key] = kind


def recipe_truth(data: dict) -> str:
    """The text recipe-scrapers expects of the page: its title, description, ingredients and instructions."""
    parts = [data.get("title") or "", data.get("description") or ""]
    parts += [str(x) for x in data.get("ingredients") or []]
    steps = data.get("instructions_list") or [data.get("instructions") or ""]
    parts += [str(x) for x in steps]
    return "\n".join(p for p in parts if p)


def load_recipes(snap: Snapshot, sites: dict, skipped: dict) -> dict:
    by_site: dict[str, list[str]] = {}
    for path, _ in snap.ls("tests/test_data"):
        if path.endswith(".testhtml"):
            by_site.setdefault(path.split("/")[2], []).append(path)
    many = sorted(s for s, paths in by_site.items() if len(paths) >= 2)
    chosen = sorted(random.Random("recipes:1").sample(many, min(MAX_RECIPE_SITES, len(many))))
    out: dict = {}
    for folder in chosen:
        for i, path in enumerate(sorted(by_site[folder])[:MAX_PER_SITE]):
            key = f"recipe:{folder}-{i}"
            try:
                data = json.loads(snap.read(path[: -len(".testhtml")] + ".json") or b"")
            except ValueError:
                skipped[key] = "no expected .json"
                continue
            truth = recipe_truth(data)
            if len(common.words(truth)) < build_realweb.MIN_GOLD_WORDS:
                skipped[key] = f"expected text under {build_realweb.MIN_GOLD_WORDS} words"
                continue
            url = data.get("canonical_url") or f"https://{folder}/recipe-{i}"
            url = url if "://" in url else f"https://{url.lstrip('/')}"
            _add(out, skipped, sites, snap, path, key, "product", _gold_nodes(truth, RECIPE_MIN_F1), url, "recipe")
    return out


def load_askbot(snap: Snapshot, sites: dict, skipped: dict) -> dict:
    out: dict = {}
    for path, _ in sorted(snap.ls("tests/data/askbot")):
        if not path.endswith(".html"):
            continue
        raw = snap.read(path) or b""
        tree = build_realweb.parse(raw)
        url = (tree.xpath("//link[@rel='canonical']/@href") or [None])[0]
        if url is None:
            skipped[f"askbot:{path}"] = "no canonical address (an error page)"
            continue
        page = re.search(r"multipage_(\d)", path)
        key = f"askbot:{Path(path).stem}-{page.group(1) if page else 1}"
        THREAD[key] = url
        _add(out, skipped, sites, snap, path, key, "forum", _xpath_nodes("//div[@id='ContentLeft']"), url, "forum")
    return out


def load_geizhals(snap: Snapshot, sites: dict, skipped: dict) -> dict:
    out: dict = {}
    for path, _ in sorted(snap.ls("inst/extdata")):
        name = Path(path).name
        if not (name.startswith("gh-") and name.endswith(".html")):
            continue
        raw = snap.read(path) or b""
        url = (build_realweb.parse(raw).xpath("//link[@rel='canonical']/@href") or [None])[0]
        kind = "listing" if name.startswith("gh-lst") else "product"
        _add(out, skipped, sites, snap, path, f"geizhals:{Path(path).stem}", kind,
             _xpath_nodes("//div[@id='gh_content_wrapper']"), url, "shop")  # fmt: skip
    return out


def load_bench(snap: Snapshot, sites: dict, skipped: dict) -> dict:
    """scrapy-bench's two archives: books.toscrape.com product pages, and home pages of shop/listing/forum sites."""
    out: dict = {}
    books = _tar_pages(snap, "bookfiles.tar.gz")
    names = sorted(books, key=lambda n: int(Path(n).stem))
    for name in sorted(random.Random("books:1").sample(names, min(MAX_BOOKS, len(names)))):
        title = build_realweb.parse(books[name]).findtext(".//title") or ""
        slug = re.sub(r"[^a-z0-9]+", "-", title.split("|")[0].strip().lower()).strip("-")
        url = f"http://books.toscrape.com/catalogue/{slug}_{Path(name).stem}/index.html"
        _add_raw(out, skipped, sites, snap, f"bookfiles.tar.gz:{name}", books[name], f"books:{Path(name).stem}",
                 "product", _xpath_nodes("//article[@class='product_page']"), url, "shop")  # fmt: skip
    homes = _tar_pages(snap, "sites.tar.gz")
    for number, (url, genre) in BENCH_HOMES.items():
        name = next((n for n in homes if Path(n).name == f"{number}.html"), None)
        if name is None:
            skipped[f"home:{number}"] = "file missing"
            continue
        _add_raw(out, skipped, sites, snap, f"sites.tar.gz:{name}", homes[name], f"home:{number}", "listing",
                 _xpath_nodes(HOME_CONTENT), url, genre)  # fmt: skip
    return out


def _tar_pages(snap: Snapshot, path: str) -> dict[str, bytes]:
    data = snap.read(path)
    if data is None:
        raise SystemExit(f"{snap.repo}: {path} is missing from commit {snap.commit}")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile() and m.name.endswith(".html")}


def load_opendcl(snap: Snapshot, sites: dict, skipped: dict) -> dict:
    """The OpenDCL forum archive: a seeded sample of its threads, three boards and the board index."""
    out: dict = {}
    base = "https://opendcl.github.io/forum-archive/"
    topics = sorted(p for p, size in snap.ls("topics") if p.endswith(".html") and size > 3000)
    for path in sorted(random.Random("opendcl:1").sample(topics, min(MAX_THREADS, len(topics)))):
        key = f"opendcl:{Path(path).stem}"
        THREAD[key] = path
        _add(out, skipped, sites, snap, path, key, "forum", _xpath_nodes("//main"), base + path, "forum")
    boards = sorted(p for p, _ in snap.ls("boards") if p.endswith(".html"))[:3]
    for path in ["index.html", *boards]:
        _add(out, skipped, sites, snap, path, f"opendcl:{Path(path).stem}", "listing", _xpath_nodes("//main"),
             base + path, "forum")  # fmt: skip
    return out


_TITLE = re.compile(rb"<title>\s*([^<]*?)\s*</title>", re.I)
_PAGER = re.compile(rb'class="pager-current[^"]*">(?:<[^>]+>)*\s*(\d+)')
_SORTED = re.compile(rb'<th class="active[^"]*"[^>]*>(?:<[^>]+>)*\s*([^<]+)')
#: Pages of one forum category listing taken (by their pager's number), besides each category's first page.
OEM_PAGES = (1, 2, 5, 10)


def load_oem(snap: Snapshot, sites: dict, skipped: dict) -> dict:
    """The OpenEnergyMonitor forum (a static copy of its Drupal 6 site): threads and forum listings.

    A listing page's number and sort column come from its pager and its table head: of the biggest category,
    the pages ``OEM_PAGES`` in the default order (by last reply; a page sorted by another column is left out);
    of the others, their first page; and the forum's home page.
    """
    out: dict = {}
    base = "https://openenergymonitor.org/forum-archive/"
    listed: dict[tuple[bytes, int], str] = {}
    for path, _ in sorted(snap.ls("forum")):
        raw = snap.read(path) or b""
        title, page, order = (rx.search(raw) for rx in (_TITLE, _PAGER, _SORTED))
        if title and page and order and order.group(1).strip() == b"Last reply":
            listed.setdefault((title.group(1), int(page.group(1))), path)
    biggest = Counter(t for t, _ in listed).most_common(1)[0][0] if listed else b""
    chosen = [p for (t, n), p in sorted(listed.items()) if (t == biggest and n in OEM_PAGES) or (t != biggest and n == 1)]
    for path in ["index.html", *chosen]:
        _add(out, skipped, sites, snap, path, f"oem:{Path(path).stem}", "listing", _xpath_nodes("//div[@id='main']"),
             base + path, "forum")  # fmt: skip
    nodes = [p for p, size in snap.ls("node") if p.endswith(".html") and size > 8000]
    taken = 0
    for path in random.Random("oem:1").sample(sorted(nodes), len(nodes)):
        title = _TITLE.search(snap.read(path) or b"")
        if taken == MAX_THREADS or not title or not title.group(1).endswith(b"| Archived Forum"):
            continue  # (nodes of the site's other content are no forum threads)
        key = f"oem:{Path(path).stem}"
        THREAD[key] = path
        _add(out, skipped, sites, snap, path, key, "forum", _xpath_nodes("//div[@id='main']"), base + path, "forum")
        taken += 1
    return out


#: The screen shops with a content rule (the shop's product element); the other shops' pages are left out
#: (their whole page as truth would make two products of one shop look alike).
SCREEN_CONTENT = {
    "ditech.at": "//div[@id='LowerDetails']",
    "jacob.de": "//div[contains(@class, 'productDetailTable') and not(contains(@class, '__'))]",
    "ebay.de": "//div[@id='CenterPanel']",
    "taufnaus.de": "//div[contains(@class, 'col-main')]",
    "haym.info": "//main[@id='main']",
}


def load_screens(snap: Snapshot, sites: dict, skipped: dict) -> dict:
    """Offer pages of computer screens in German-speaking online shops (``data/cs2023_minimal``): each page's
    ``.json`` names its shop and its address; main content by the shop's rule (``SCREEN_CONTENT``)."""
    out: dict = {}
    for path, _ in sorted(snap.ls("data/cs2023_minimal")):
        if not path.endswith(".json"):
            continue
        meta = json.loads(snap.read(path) or b"{}")
        if not meta.get("offer_link") or not meta.get("html_file"):
            continue  # a product's reference record, not a saved page
        key = f"screen:{Path(meta['html_file']).stem}"
        rule = SCREEN_CONTENT.get(build_realweb.registered_domain(urlsplit(meta["offer_link"]).hostname or ""))
        if rule is None:
            skipped[key] = "no content rule for this shop (SCREEN_CONTENT)"
            continue
        _add(out, skipped, sites, snap, f"data/cs2023_minimal/{meta['html_file']}", key, "product",
             _xpath_nodes(rule), meta["offer_link"], "shop")  # fmt: skip
    return out


LOADERS = {
    "hhursev/recipe-scrapers": load_recipes,
    "chaoss/grimoirelab-perceval": load_askbot,
    "ingonader/rgeizhals": load_geizhals,
    "scrapy/scrapy-bench": load_bench,
    "opendcl/forum-archive": load_opendcl,
    "openenergymonitor/forum-archive": load_oem,
    "mathagmann/computerscreen-spec-extraction": load_screens,
}


def load(mirror: Path, seed: int = 5) -> tuple[dict[str, build_realweb.RealSource], dict[str, str]]:
    """The pages of every collection of ``SOURCES`` (key -> source), and those left out (key -> why)."""
    sources: dict[str, build_realweb.RealSource] = {}
    skipped: dict[str, str] = {}
    sites: dict = {}
    for table in (PAGE_KIND, THREAD, HALVES):  # a build's own (a second build in one process starts afresh)
        table.clear()
    for repo in SOURCES:
        snap = Snapshot(mirror, repo)
        try:
            sources.update(LOADERS[repo](snap, sites, skipped))
        finally:
            snap.close()
    assign_halves(sources, seed)
    return sources, skipped


def assign_halves(sources: dict, seed: int) -> None:
    """Each site's half: within each kind of site, the sites shuffled (seeded) and dealt out in turn."""
    kinds: dict[str, Counter] = {}
    for key, src in sources.items():
        kinds.setdefault(src.site.name, Counter())[PAGE_KIND.get(key, "product")] += 1
    by_kind: dict[str, list[str]] = {}
    for site, counts in sorted(kinds.items()):
        by_kind.setdefault(max(sorted(counts), key=counts.__getitem__), []).append(site)
    for kind, names in sorted(by_kind.items()):
        random.Random(f"{seed}:{kind}").shuffle(names)
        for i, site in enumerate(names):
            HALVES[site] = ("tune", "test")[i % 2]


def hard_kind(key_a: str, key_b: str) -> str | None:
    """The hard-negative kind of two original pages of one site, or None when neither page is loaded here."""
    if key_a not in PAGE_KIND and key_b not in PAGE_KIND:
        return None
    kinds = {PAGE_KIND.get(key_a, "product"), PAGE_KIND.get(key_b, "product")}  # the first collection's: items
    if kinds == {"forum"}:
        return "hn_page" if THREAD.get(key_a) == THREAD.get(key_b) else "hn_thread"
    if len(kinds) == 1:
        return f"hn_{kinds.pop()}"
    return "hn_site"


def has_variant(src: build_realweb.RealSource) -> bool:
    """A product variant is made of shop products (and of the first collection's pages, as before)."""
    kind = PAGE_KIND.get(src.key)
    return kind is None or (kind == "product" and src.site.genre == "shop")


def item_grid(node: etree._Element) -> etree._Element | None:
    """The element under ``node`` with the most children of one tag and class (at least 4), outside its menus
    (``nav``, ``header``, ``footer``): the item grid."""
    best, best_n = None, 3
    for el in node.iter():
        if not isinstance(el.tag, str) or el.xpath("ancestor-or-self::*[self::nav or self::header or self::footer]"):
            continue
        shapes = Counter((c.tag, c.get("class", "")) for c in el if isinstance(c.tag, str))
        n = max(shapes.values(), default=0)
        if n > best_n:
            best, best_n = el, n
    return best


def reorder(grid: etree._Element, rng: random.Random) -> int:
    """The grid's items (its children of its most common tag and class) in another order; how many moved."""
    shapes = Counter((c.tag, c.get("class", "")) for c in grid if isinstance(c.tag, str))
    shape = shapes.most_common(1)[0][0]
    slots = [i for i, c in enumerate(grid) if isinstance(c.tag, str) and (c.tag, c.get("class", "")) == shape]
    items = [grid[i] for i in slots]
    order = items[:]
    while len(items) > 1 and order == items:
        rng.shuffle(order)
    copies = [(copy.deepcopy(item), grid[slot].tail) for slot, item in zip(slots, order)]
    for slot, (item, tail) in zip(slots, copies):
        item.tail = tail
        grid[slot] = item
    return sum(a is not b for a, b in zip(items, order))


def sorted_listing(b, src: build_realweb.RealSource, group: str) -> int | None:
    """A listing page sorted another way: its item grid reordered, at a ``sort=`` address (a duplicate)."""
    if PAGE_KIND.get(src.key) != "listing":
        return None
    tree = src.tree()
    nodes = src.family.content(tree)
    grid = next((g for g in map(item_grid, nodes) if g is not None), None)
    if grid is None:
        return None
    moved = reorder(grid, b.rng)
    url = f"{src.url.split('#')[0]}{'&' if '?' in src.url else '?'}sort={b.rng.choice(_SORTS)}"
    text = build_wide.content_text(src.family.content(tree))
    return b.variant(build_wide.serialize(tree), url, src, "sort", group, text=text, variant=f"sort:{moved}")


def kind_counts(pages: list[dict]) -> dict[str, dict[str, int]]:
    """Original pages per half and kind (the pages of the first collection counted as products)."""
    out: dict[str, dict[str, int]] = {}
    for p in pages:
        if p["role"] == "original":
            kind = PAGE_KIND.get(p["source"], "product")
            out.setdefault(p["half"], {}).setdefault(kind, 0)
            out[p["half"]][kind] += 1
    return out
