"""Learned URL rules (issues 14, 23, 37): downloads avoided and contents lost on real crawls of five local sites.

    python benchmarks/url_rules.py                    # the five sites, rules off / learn / skip, + lookup cost
    python benchmarks/url_rules.py --sites adversarial --modes off,skip   # issue 23's site alone
    python benchmarks/url_rules.py --sites adversarial,realweb --modes off,skip --seeds 1,2,3   # three crawl orders
    python benchmarks/url_rules.py --articles 120     # a smaller run
    python benchmarks/url_rules.py --grid             # also: skip mode for a grid of trust settings

What it does, in one run:

1. Builds articles from real, human-written text: the sections (``<section>``
   with 80 to 1,500 words) of Debian's Python HTML documentation
   (``/usr/share/doc/python3*/html/library``, package ``python3-doc``); the
   fallback is ``pydoc_data.topics``.
2. Serves five sites on 127.0.0.1 (one ``ThreadingHTTPServer`` each, in a
   separate process; every request is logged with the *content id* of the
   page it returned, the ground truth):

   * **dust**: sections with listings (``?page=N``; ``?page=1``,
     ``?sort=relevance`` and ``index.html`` repeat the first page), articles
     linking six related articles, about half of the links decorated the way
     real sites do: tracking parameters (``utm_*``, ``ref``), a session id and
     a cache-buster (``sessionid=<hex>``, ``_=<timestamp>``, new values on
     every link), print and AMP variants (``/print/...``, ``/amp/...`` with a
     ``<link rel="canonical">``), a mobile edition (``/m/...``, its own
     template, links stay mobile) and a mirror (``/mirror/...``, links stay
     mirrored).  Variants carry the same article with a different template
     or a different timestamp/ad/greeting.
   * **plain**: the same articles and listings, no variants at all: nothing
     may be skipped.
   * **params**: URLs that look alike but carry different content:
     ``/item?id=N``, ``/list?page=N``, ``/v1/doc/N`` and ``/v2/doc/N`` (a
     third of the pages unchanged between versions, the rest rewritten), and
     duplicates that tempt the wrong rules: one item in ten is listed again
     under a second id (``drop ?id`` gets support), listing links carry
     ``ref=list`` (a real tracking parameter); the unchanged third supports
     ``/v2/ -> /v1/``.  The tempting rules must meet their counter-evidence.
   * **realweb** (issue 37): ``--articles`` real pages of the real-web set
     (``URL_RULES_REALWEB``, default ``/work/data/realweb``; ``RealWebSite``):
     sections by genre with paginated lists (``?page=N``; ``?sort=newest``
     repeats the default order, ``?sort=oldest`` is another list), each
     article linking six others; links decorated as real sites do
     (``utm_*``, ``fbclid``, ``gclid``, ``PHPSESSID``, ``ref``) or leading to
     a variant (``?print=1``, ``?view=reader``), each served as the set's own
     real variant page of that article (its tracking, print or other-template
     copy) when it has one, else the article with a greeting that changes
     with the parameter.
   * **adversarial** (issue 23): 40 news articles ``/news-N``, 200 products
     ``/shop/product-N``, paginated lists ``/news/`` and ``/shop/``
     (``?page=N``, 20 items a page) and an ``/en/`` edition.  Every article
     and product links six related ones with a ``?page=K`` the page ignores,
     and the home page links articles and products, so ``drop ?page=*``
     gathers support on articles first; on the lists ``?page=`` is real
     pagination and products 21-200 are linked only from list pages 2-10;
     ``/en/`` mirrors the site (same text, one line more) except
     ``/en/news-N``, a real translation (another text).  295 contents.
3. Crawls each site with ``SIMHASH_URL_RULES`` = ``off``, ``learn`` and
   ``skip`` (default trust settings), each a real Scrapy crawl
   (``CrawlerProcess`` in a fresh process, the add-on, default settings,
   ``CONCURRENT_REQUESTS = 8``); a generic spider follows every in-site link.
   The targets printed at the end (``TARGETS``): dust >= 60 % avoided and
   <= 0.5 % lost; realweb >= 50 % and <= 0.5 %; plain and params 0 lost;
   adversarial <= 1 % lost and >= 30 % avoided.  ``--seeds`` crawls each site
   once per seed, each page's links shuffled by it (another crawl order);
   the targets hold for the worst of them.
4. Prints, per site and mode: downloads, duplicate downloads (a content id
   already downloaded in this crawl), the share of the ``off`` crawl's
   duplicate downloads avoided, distinct contents never downloaded (content
   ids the ``off`` crawl got and this one did not), requests skipped and
   explored, trusted rules, CPU time of the crawl process.
5. Measures the rule check alone: ``UrlRuleLearner.predict`` in µs per
   request after learning 100,000 (duplicate, canonical) pairs, and
   ``observe`` in µs per page, against the CPU time per download of the
   ``off`` crawl of the dust site.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import html
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Where the article texts come from; ``URL_RULES_DOC_GLOB`` points elsewhere (an unpacked
#: ``python3.11-doc`` package: ``apt-get download python3.11-doc && dpkg-deb -x python3.11-doc_*.deb DIR``):
#: one or more patterns separated by ``os.pathsep``, ``**`` for any depth (another Sphinx manual:
#: ``DIR/usr/share/doc/sphinx-doc/html/**/*.html``).
DOC_GLOB = os.environ.get("URL_RULES_DOC_GLOB", "/usr/share/doc/python3*/html/library/*.html")


# ------------------------------------------------------------------ articles
def load_articles(count: int) -> tuple[str, list[tuple[str, list[str]]]]:
    """``count`` (title, paragraphs) of real text, and where they come from."""
    from lxml import html as lxml_html

    articles: list[tuple[str, list[str]]] = []
    seen_files: set[str] = set()
    seen_text: set[str] = set()
    names = sorted({name for pattern in DOC_GLOB.split(os.pathsep) for name in glob.glob(pattern, recursive=True)})
    for name in names:
        real = os.path.realpath(name)
        if real in seen_files:
            continue
        seen_files.add(real)
        try:
            tree = lxml_html.parse(real)
        except Exception:  # noqa: BLE001
            continue
        for section in tree.iter("section"):
            heading = section.find("./h2") if section.find("./h2") is not None else section.find("./h3")
            if heading is None:
                continue
            paragraphs = [" ".join(p.text_content().split()) for p in section.iterfind("./p")]
            paragraphs = [p for p in paragraphs if len(p) > 40]
            words = sum(len(p.split()) for p in paragraphs)
            key = " ".join(paragraphs)[:200]
            if 80 <= words <= 1500 and key not in seen_text:
                seen_text.add(key)
                title = " ".join(heading.text_content().split()).rstrip("¶").strip()
                articles.append((title, paragraphs))
                if len(articles) >= count:
                    return f"HTML sections of {DOC_GLOB} ({len(seen_files)} files read)", articles
    import pydoc_data.topics as topics

    for name in sorted(topics.topics):
        paragraphs = [" ".join(p.split()) for p in topics.topics[name].split("\n\n") if len(p.split()) > 8]
        if sum(len(p.split()) for p in paragraphs) >= 80:
            articles.append((name, paragraphs))
        if len(articles) >= count:
            break
    return "Debian python3-doc sections + pydoc_data.topics", articles


def _h(*parts: Any) -> int:
    return int.from_bytes(hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest(), "big")


# --------------------------------------------------------------------- sites
SECTIONS = 8
PER_PAGE = 10
DECORATIONS = ["plain"] * 6 + ["utm", "ref", "sid", "ts", "print", "amp", "m", "mirror"]


class SiteModel:
    """Pages of one site: ``resolve(path) -> (content id, html)`` or ``None`` (404)."""

    def __init__(self, kind: str, articles: list[tuple[str, list[str]]]) -> None:
        self.kind = kind
        self.articles = articles
        self.per_section = (len(articles) + SECTIONS - 1) // SECTIONS

    # ---------------------------------------------------------- templates
    def _page(self, title: str, body: str, template: str, links: list[str], noise: str = "",
              canonical: str | None = None) -> str:
        nav = "".join(f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in links)
        head = f'<link rel="canonical" href="{html.escape(canonical)}">' if canonical else ""
        if template == "print":
            return (f"<!doctype html><html><head><title>{html.escape(title)} (print)</title>{head}</head>"
                    f"<body><h1>{html.escape(title)}</h1>{body}<p>Printed from the documentation site.</p></body></html>")
        if template == "amp":
            return (f"<!doctype html><html amp><head><title>{html.escape(title)}</title>{head}</head>"
                    f'<body><header>Docs AMP</header><article><h1>{html.escape(title)}</h1>{body}</article>'
                    f"<ul>{nav}</ul></body></html>")
        if template == "m":
            return (f"<!doctype html><html><head><title>{html.escape(title)}</title>{head}</head><body>"
                    f'<div class="m-top"><a href="/m/">Home</a> Menu</div><div class="m-body"><h2>{html.escape(title)}</h2>'
                    f"{body}</div><div class='m-links'><ul>{nav}</ul></div><div>Mobile edition {noise}</div></body></html>")
        return (f"<!doctype html><html><head><title>{html.escape(title)}</title>{head}</head><body>"
                f'<div class="cookie">We use cookies. <a href="/privacy">Learn more</a></div>'
                f'<nav class="menu"><ul><li><a href="/">Home</a></li>'
                + "".join(f'<li><a href="/docs/s{s}/">Section {s}</a></li>' for s in range(SECTIONS))
                + f'</ul></nav><main><article><h1>{html.escape(title)}</h1>{body}</article></main>'
                f'<aside class="related"><h3>Related</h3><ul>{nav}</ul></aside>'
                f'<footer class="footer"><p>Copyright the documentation authors. {noise}</p></footer></body></html>')

    @staticmethod
    def _body(paragraphs: list[str]) -> str:
        return "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)

    def _related(self, i: int) -> list[int]:
        rng = random.Random(i)
        return rng.sample(range(len(self.articles)), 6)

    # ---------------------------------------------------------- url helpers
    def article_path(self, i: int) -> str:
        if self.kind == "params":
            return f"/item?id={i}"
        return f"/docs/s{i // self.per_section}/a{i}.html"

    def _decorate(self, path: str, source: str, k: int, mode: str) -> str:
        """A link to ``path`` as the dust site writes it (from page ``source``, link number ``k``)."""
        choice = DECORATIONS[_h(source, path, k) % len(DECORATIONS)] if self.kind == "dust" else "plain"
        if mode in ("m", "mirror") and choice != "plain":
            choice = "plain"  # inside the mobile site and the mirror, links stay there
        sep = "&" if "?" in path else "?"
        token = _h("sid", source, k) & 0xFFFFFFFFFFFF
        if choice == "utm":
            path = f"{path}{sep}utm_source=related&utm_medium=web&utm_campaign=c{_h(source) % 7}"
        elif choice == "ref":
            path = f"{path}{sep}ref=related"
        elif choice == "sid":
            path = f"{path}{sep}sessionid={token:012x}"
        elif choice == "ts":
            path = f"{path}{sep}_={1700000000000 + token % 10**9}"
        elif choice in ("print", "amp", "m", "mirror"):
            path = f"/{choice}{path}"
        if mode in ("m", "mirror"):
            path = f"/{mode}{path}"
        return path

    # ---------------------------------------------------------- routing
    def resolve(self, raw: str) -> tuple[str, str] | None:
        path, _, query = raw.partition("?")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        if self.kind == "params":
            return self._resolve_params(path, params)
        if self.kind == "adversarial":
            return self._resolve_adversarial(path, params)
        mode = "plain"
        if self.kind == "dust":
            for prefix in ("print", "amp", "m", "mirror"):
                if path == f"/{prefix}" or path.startswith(f"/{prefix}/"):
                    mode, path = prefix, path[len(prefix) + 1 :] or "/"
                    break
            unknown = set(params) - {"utm_source", "utm_medium", "utm_campaign", "ref", "sessionid", "_", "page", "sort"}
            if unknown or params.get("sort", "relevance") != "relevance":
                return None
            noise = ""
            if "sessionid" in params:
                noise = f"Welcome back, session {params['sessionid']}."
            elif "_" in params:
                noise = f"Generated at {params['_']}."
            elif params:
                noise = "Thanks for visiting from our newsletter."
        else:
            if set(params) - {"page"}:
                return None
            noise = ""
        if path == "/":
            links = [(f"/docs/s{s}/", f"Section {s}") for s in range(SECTIONS)]
            body = "<p>" + " ".join(t for t, _ in self.articles[:12]) + "</p>"
            return "home", self._page("Documentation home", body, "desk" if mode == "plain" else mode,
                                      [(self._decorate(h, "/", k, mode), t) for k, (h, t) in enumerate(links)], noise)
        m = re.fullmatch(r"/docs/s(\d+)/(index\.html)?", path)
        if m:
            section = int(m.group(1))
            start = section * self.per_section
            count = min(self.per_section, len(self.articles) - start)
            if count <= 0:
                return None
            pages = (count + PER_PAGE - 1) // PER_PAGE
            page = int(params.get("page", "1")) if params.get("page", "1").isdigit() else 0
            if not 1 <= page <= pages:
                return None
            first = start + (page - 1) * PER_PAGE
            items = range(first, min(first + PER_PAGE, start + count))
            body = "".join(
                f"<h3>{html.escape(self.articles[i][0])}</h3><p>{html.escape(' '.join(self.articles[i][1][0].split()[:40]))}</p>"
                for i in items
            )
            links = [(self.article_path(i), self.articles[i][0]) for i in items]
            if self.kind == "plain":
                links += [(f"/docs/s{section}/" + (f"?page={p}" if p > 1 else ""), f"Page {p}") for p in range(1, pages + 1)]
            if self.kind == "dust":
                links += [(f"/docs/s{section}/?page={p}", f"Page {p}") for p in range(1, pages + 1)]
                links.append((f"/docs/s{section}/index.html?sort=relevance", "Sort by relevance"))
            links = [(self._decorate(h, path + query, k, mode), t) for k, (h, t) in enumerate(links)]
            return f"list-{section}-{page}", self._page(f"Section {section}, page {page}", body,
                                                         "desk" if mode in ("plain", "mirror") else mode, links, noise)
        m = re.fullmatch(r"/docs/s(\d+)/a(\d+)\.html", path)
        if m:
            i = int(m.group(2))
            if i >= len(self.articles) or i // self.per_section != int(m.group(1)):
                return None
            title, paragraphs = self.articles[i]
            links = [(self.article_path(j), self.articles[j][0]) for j in self._related(i)]
            links = [(self._decorate(h, path, k, mode), t) for k, (h, t) in enumerate(links)]
            template = {"plain": "desk", "mirror": "desk"}.get(mode, mode)
            canonical = self.article_path(i) if mode == "amp" else None
            return f"article-{i}", self._page(title, self._body(paragraphs), template, links, noise, canonical)
        return None

    def _resolve_params(self, path: str, params: dict[str, str]) -> tuple[str, str] | None:
        # Three distinct texts per number: the item, its v1 doc page, and a rewritten v2 doc page.
        n = len(self.articles) // 3
        if set(params) - {"id", "page", "ref"}:
            return None
        if path == "/":
            links = [("/list?page=1", "All items"), ("/v1/doc/0", "Version 1"), ("/v2/doc/0", "Version 2")]
            return "home", self._page("Items", "<p>" + " ".join(t for t, _ in self.articles[:12]) + "</p>", "desk", links)
        if path == "/list":
            page = int(params["page"]) if params.get("page", "").isdigit() else 0
            pages = (n + PER_PAGE - 1) // PER_PAGE
            if not 1 <= page <= pages:
                return None
            items = range((page - 1) * PER_PAGE, min(page * PER_PAGE, n))
            body = "".join(f"<h3>{html.escape(self.articles[i][0])}</h3>"
                           f"<p>{html.escape(' '.join(self.articles[i][1][0].split()[:40]))}</p>" for i in items)
            # Links from the listing carry a tracking parameter (a real duplicate of the plain item URL).
            links = [(f"/item?id={i}&ref=list", self.articles[i][0]) for i in items]
            links += [(f"/list?page={p}", f"Page {p}") for p in (page - 1, page + 1) if 1 <= p <= pages]
            return f"list-{page}", self._page(f"Items, page {page}", body, "desk", links)
        if path == "/item":
            i = int(params["id"]) if params.get("id", "").isdigit() else -1
            if not 0 <= i < n:
                return None
            # One item in ten is listed twice, under a second id: the same content (tempts "drop ?id").
            same_as = i - 1 if i % 10 == 7 else i
            title, paragraphs = self.articles[same_as]
            links = [(f"/item?id={j % n}", self.articles[j % n][0]) for j in self._related(i)]
            links.append((f"/v1/doc/{i}", "Version 1 documentation"))
            return f"item-{same_as}", self._page(title, self._body(paragraphs), "desk", links)
        m = re.fullmatch(r"/v([12])/doc/(\d+)", path)
        if m and not params:
            version, i = int(m.group(1)), int(m.group(2))
            if not 0 <= i < n:
                return None
            # A third of the pages did not change between versions; the others were rewritten.
            same = version == 1 or i % 3 == 0
            title, paragraphs = self.articles[(n if same else 2 * n) + i]
            links = [(f"/v{version}/doc/{j % n}", f"doc {j % n}") for j in self._related(i)]
            links.append((f"/v{3 - version}/doc/{i}", "Other version"))
            return (f"doc-{i}" if same else f"doc2-{i}"), self._page(title, self._body(paragraphs), "desk", links)
        return None


    # ---------------------------------------------------------- the adversarial site (issue 23)
    def _resolve_adversarial(self, path: str, params: dict[str, str]) -> tuple[str, str] | None:
        """News articles ``/news-N``, products ``/shop/product-N``, paginated lists ``/news/`` and
        ``/shop/`` (``?page=N``, 20 links a page), an ``/en/`` edition.

        Traps for the rules: every article and product links six related ones with a ``?page=K``
        the page ignores (``drop ?page=*`` and ``drop ?page=* under /shop/`` gather support, the
        home page links articles first); on ``/news/`` and ``/shop/`` the same parameter is real
        pagination, and products after the first 20 are linked only from list pages 2 and up;
        ``/en/`` mirrors the site (same text, one line more) except ``/en/news-N``, a real
        translation (another text), so ``/en/… -> /…`` gathers support from the mirror first.
        """
        news, products = ADV_NEWS, ADV_PRODUCTS
        if set(params) - {"page"}:
            return None
        en = path == "/en" or path.startswith("/en/")
        if en:
            path = path[3:] or "/"
        lang = "/en" if en else ""
        noise = "English edition." if en else ""
        nav = [(f"{lang}/", "Home"), (f"{lang}/news/", "News"), (f"{lang}/shop/", "Shop"),
               (f"{lang}/about", "About"), (f"{lang}/contact", "Contact")]

        def noisy(target: str, source: str, k: int) -> str:
            return f"{lang}{target}?page={2 + _h('noise', source, k) % 3}"

        if path == "/":
            links = [(f"{lang}/news-{i}", self.articles[i][0]) for i in range(10)]
            links += [(f"{lang}/shop/product-{i}", self.articles[news + i][0]) for i in range(10)]
            links += nav + ([("/en/", "English")] if not en else [])
            body = "<p>" + " ".join(t for t, _ in self.articles[:12]) + "</p>"
            return "home", self._page("Shop and news", body, "desk", links, noise)
        m = re.fullmatch(r"/(news|shop)/", path)
        if m:
            section = m.group(1)
            count = news if section == "news" else products
            offset = 0 if section == "news" else news
            pages = (count + ADV_PER_PAGE - 1) // ADV_PER_PAGE
            page = int(params.get("page", "1")) if params.get("page", "1").isdigit() else 0
            if not 1 <= page <= pages:
                return None
            items = range((page - 1) * ADV_PER_PAGE, min(page * ADV_PER_PAGE, count))
            item = "news-{}" if section == "news" else "shop/product-{}"
            body = "".join(f"<h3>{html.escape(self.articles[offset + i][0])}</h3>"
                           f"<p>{html.escape(' '.join(self.articles[offset + i][1][0].split()[:30]))}</p>"
                           for i in items)
            links = [(f"{lang}/{item.format(i)}", self.articles[offset + i][0]) for i in items]
            links += [(f"{lang}/{section}/?page={p}", f"Page {p}") for p in range(1, pages + 1) if p != page]
            return f"{section}-list-{page}", self._page(f"{section.title()}, page {page}", body, "desk",
                                                        links + nav, noise)
        m = re.fullmatch(r"/news-(\d+)", path)
        if m:
            i = int(m.group(1))
            if not 0 <= i < news:
                return None
            rng = random.Random(i)
            related = [(noisy(f"/news-{j}", path, k), self.articles[j][0])
                       for k, j in enumerate(rng.sample(range(news), 6))]
            if en:  # a real translation: another text; its related links carry no noise
                title, paragraphs = self.articles[news + products + i]
                links = [(f"/en/news-{j}", t) for j, t in ((int(h.split("-")[1].partition("?")[0]), t)
                                                          for h, t in related)]
                links += [(f"/news-{i}", "Original")] + nav
                return f"news-en-{i}", self._page(title, self._body(paragraphs), "desk", links, noise)
            title, paragraphs = self.articles[i]
            links = related + [(f"/en/news-{i}", "English")] + nav
            return f"news-{i}", self._page(title, self._body(paragraphs), "desk", links)
        m = re.fullmatch(r"/shop/product-(\d+)", path)
        if m:
            i = int(m.group(1))
            if not 0 <= i < products:
                return None
            rng = random.Random(1000 + i)
            # Related products are among the first list page: the others are linked from list pages 2+ only.
            related = [(noisy(f"/shop/product-{j}", path, k), self.articles[news + j][0])
                       for k, j in enumerate(rng.sample(range(ADV_PER_PAGE), 6))]
            title, paragraphs = self.articles[news + i]
            links = related + ([] if en else [(f"/en/shop/product-{i}", "English")]) + nav
            return f"product-{i}", self._page(title, self._body(paragraphs), "desk", links, noise)
        if path in ("/about", "/contact"):
            title, paragraphs = self.articles[news * 2 + products + (path == "/contact")]
            return path[1:], self._page(title, self._body(paragraphs), "desk", nav, noise)
        return None


# ------------------------------------------------------------------ the real-web site
#: The real-web set (``benchmarks/quality/build_realweb.py``); ``URL_RULES_REALWEB`` points elsewhere.
REALWEB = Path(os.environ.get("URL_RULES_REALWEB", "/work/data/realweb"))
#: How a real-web link is decorated (by a hash of the page and the link): most links plain, the others
#: with what real sites add; each value says which of the article's real variants the URL serves.
RW_DECORATIONS = ["plain"] * 8 + ["utm", "fbclid", "gclid", "sid", "ref", "print", "view"]
_RW_IGNORED = {"utm_source", "utm_medium", "utm_campaign", "fbclid", "gclid", "PHPSESSID", "ref", "print", "view"}
_HREF = re.compile(r"""\bhref\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+)""", re.IGNORECASE)


def load_realweb(count: int) -> list[dict[str, Any]]:
    """``count`` articles of the real-web set: each original page (80 words or more) with its real variants
    (``tracking``: the page under tracking or session parameters, its ads and timestamps changed;
    ``print``: its printer-friendly page; ``template``: the article in another site's template), by
    category; pages of both halves, in the set's order."""
    rows = [json.loads(line) for line in (REALWEB / "manifest.jsonl").read_text().splitlines() if line.strip()]
    by_source: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_source.setdefault(row["source"], []).append(row)
    texts = {}
    for line in (REALWEB / "texts.jsonl").read_text().splitlines():
        if line.strip():
            item = json.loads(line)
            texts[item["id"]] = item["text"]
    articles = []
    for row in sorted(rows, key=lambda r: r["id"]):
        if row["role"] != "original" or row["words"] < 80:
            continue
        variants = {v["category"]: v["file"] for v in by_source[row["source"]] if v["role"] == "variant"}
        # A list shows the article's first words (its teaser): list pages of real sites differ by their items.
        teaser = " ".join(texts.get(row["id"], "").split()[:40])
        articles.append({"id": row["id"], "genre": row["genre"], "file": row["file"], "variants": variants,
                         "teaser": teaser})
        if len(articles) >= count:
            break
    return articles


class RealWebSite:
    """A site of real pages (the real-web set): sections by genre, paginated lists (``?page=N``, and
    ``?sort=newest``, the default order, or ``?sort=oldest``, another list), articles whose links are
    decorated as real sites do (``utm_*``, ``fbclid``, ``gclid``, ``PHPSESSID``, ``ref``) or lead to a
    variant (``?print=1``: the printer-friendly page, ``?view=reader``: the other template), each served
    as the real variant page of the set when it has one, else the article with a greeting that changes
    with the parameter.  The pages' own links are cut; each article links six others and its section."""

    def __init__(self, articles: list[dict[str, Any]]) -> None:
        self.articles = articles
        self.genres = sorted({a["genre"] for a in articles})
        self.by_genre = {g: [i for i, a in enumerate(articles) if a["genre"] == g] for g in self.genres}
        self._cache: dict[str, str] = {}

    def _file(self, name: str) -> str:
        if name not in self._cache:
            text = (REALWEB / name).read_bytes().decode("utf-8", "replace")
            self._cache[name] = _HREF.sub('href="#"', text)
        return self._cache[name]

    def _decorate(self, path: str, source: str, k: int) -> str:
        choice = RW_DECORATIONS[_h("rw", source, path, k) % len(RW_DECORATIONS)]
        token = _h("sid", source, path, k) & 0xFFFFFFFFFFFF
        extra = {"plain": "", "utm": f"utm_source=news&utm_medium=social&utm_campaign=c{_h(source) % 5}",
                 "fbclid": f"fbclid=IwAR{token:012x}", "gclid": f"gclid=Cj0K{token:010x}",
                 "sid": f"PHPSESSID={token:012x}", "ref": "ref=related", "print": "print=1",
                 "view": "view=reader"}[choice]
        return f"{path}{'&' if '?' in path else '?'}{extra}" if extra else path

    def _links(self, links: list[tuple[str, str]]) -> str:
        items = "".join(f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in links)
        return f'<aside class="site-links"><ul>{items}</ul></aside>'

    def _with_links(self, page: str, links: list[tuple[str, str]]) -> str:
        block = self._links(links)
        at = page.lower().rfind("</body>")
        return page[:at] + block + page[at:] if at >= 0 else page + block

    def resolve(self, raw: str) -> tuple[str, str] | None:
        path, _, query = raw.partition("?")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        if path == "/":
            links = [(f"/{g}/", g.title()) for g in self.genres]
            return "home", ("<!doctype html><html><head><title>Home</title></head><body><h1>Real pages</h1>"
                            f"{self._links(links)}</body></html>")
        m = re.fullmatch(r"/([a-z]+)/", path)
        if m and m.group(1) in self.by_genre:
            return self._list(m.group(1), params)
        m = re.fullmatch(r"/([a-z]+)/(\d+)\.html", path)
        if m and m.group(1) in self.by_genre:
            return self._article(m.group(1), int(m.group(2)), path, params)
        return None

    def _list(self, genre: str, params: dict[str, str]) -> tuple[str, str] | None:
        if set(params) - {"page", "sort"} - _RW_IGNORED or params.get("sort", "newest") not in ("newest", "oldest"):
            return None  # (a list ignores the tracking parameters, and print= and view=, as real sites do)
        items = self.by_genre[genre][:: -1 if params.get("sort") == "oldest" else 1]
        pages = (len(items) + PER_PAGE - 1) // PER_PAGE
        page = int(params.get("page", "1")) if params.get("page", "1").isdigit() else 0
        if not 1 <= page <= pages:
            return None
        shown = items[(page - 1) * PER_PAGE : page * PER_PAGE]
        links = [(f"/{genre}/{self.articles[i]['id']}.html", f"Article {self.articles[i]['id']}") for i in shown]
        links += [(f"/{genre}/?page={p}", f"Page {p}") for p in range(1, pages + 1)]
        links += [(f"/{genre}/?sort=newest", "Newest first"), (f"/{genre}/?sort=oldest&page={page}", "Oldest first")]
        order = "oldest" if params.get("sort") == "oldest" else "newest"
        body = "".join(f"<h3>Article {self.articles[i]['id']}</h3><p>{html.escape(self.articles[i]['teaser'])}</p>"
                       for i in shown)
        links = [(self._decorate(h, f"/{genre}/{page}", k), t) for k, (h, t) in enumerate(links)]
        return (f"{genre}-{order}-{page}", f"<!doctype html><html><head><title>{genre} {page}</title></head><body>"
                f"<h1>{genre.title()}, page {page}</h1>{body}{self._links(links)}</body></html>")

    def _article(self, genre: str, ident: int, path: str, params: dict[str, str]) -> tuple[str, str] | None:
        if set(params) - _RW_IGNORED or params.get("print", "1") != "1" or params.get("view", "reader") != "reader":
            return None
        index = next((i for i in self.by_genre[genre] if self.articles[i]["id"] == ident), None)
        if index is None:
            return None
        article = self.articles[index]
        category = "print" if "print" in params else "template" if "view" in params else "tracking" if params else ""
        name = article["variants"].get(category) if category else None
        page = self._file(name or article["file"])
        if category and name is None:  # no real variant of that kind: the article, greeted
            greeting = f"<p>Welcome back ({' '.join(sorted(params.values()))}).</p>"
            at = page.lower().find("<body")
            at = page.find(">", at) + 1 if at >= 0 else 0
            page = page[:at] + greeting + page[at:]
        rng = random.Random(ident)
        related = [self.articles[j] for j in rng.sample(range(len(self.articles)), 6)]
        links = [(f"/{a['genre']}/{a['id']}.html", f"Article {a['id']}") for a in related] + [(f"/{genre}/", genre)]
        links = [(self._decorate(h, path, k), t) for k, (h, t) in enumerate(links)]
        return f"article-{ident}", self._with_links(page, links)


ADV_NEWS = 40
ADV_PRODUCTS = 200
ADV_PER_PAGE = 20
#: Texts the adversarial site needs: news, products, translations, about and contact.
ADV_TEXTS = 2 * ADV_NEWS + ADV_PRODUCTS + 2


# -------------------------------------------------------------------- server
def serve(kind: str, articles: list[Any], port_queue: Any, log_path: str) -> None:
    model: Any = RealWebSite(articles) if kind == "realweb" else SiteModel(kind, articles)
    log = open(log_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - the server's log, open while it serves

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            found = model.resolve(self.path)
            if found is None:
                payload = b"<html><body><p>Not found</p></body></html>"
                status, cid = 404, "-"
            else:
                cid, page = found
                payload, status = page.encode("utf-8"), 200
            log.write(f"{cid}\t{self.path}\n")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_queue.put(server.server_address[1])
    server.serve_forever()


# --------------------------------------------------------------------- crawls
CRAWL_SCRIPT = r"""
import json, random, resource, sys, time
import scrapy
from scrapy.crawler import CrawlerProcess

base, settings_json, out = sys.argv[1], sys.argv[2], sys.argv[3]
SEED = json.loads(settings_json).pop("BENCH_SEED", None)

class Site(scrapy.Spider):
    name = "site"
    start_urls = [base + "/"]

    def parse(self, response):
        if not isinstance(response, scrapy.http.TextResponse):
            return
        hrefs = response.css("a::attr(href)").getall()
        if SEED is not None:  # another crawl order: each page's links shuffled (the same for every mode)
            random.Random(f"{SEED}|{response.url[len(base):]}").shuffle(hrefs)
        for href in hrefs:
            url = response.urljoin(href)
            if url.startswith(base):
                yield scrapy.Request(url, callback=self.parse, errback=self.failed)

    def failed(self, failure):
        pass

settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag", "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False,
            "LOG_LEVEL": "WARNING", "CONCURRENT_REQUESTS": 8, "RETRY_ENABLED": False, "LOGSTATS_INTERVAL": 0}
settings.update(json.loads(settings_json))
settings.pop("BENCH_SEED", None)
settings["SIMHASH_REPORT_URI"] = out + ".report.jsonl"
# CPU time spent in the URL-rule component (checks, learning, scheduling hooks), measured in place.
from simhash_scrapy import urlrules as _glue
RULES_CPU = [0.0]

RULES_BY = {}

def _add_time(start, name=""):
    spent = time.thread_time() - start
    RULES_CPU[0] += spent
    RULES_BY[name] = RULES_BY.get(name, 0.0) + spent

_Mw = _glue.UrlRulesMiddleware
_orig = {name: getattr(_Mw, name) for name in
         ("process_request", "page_checked", "request_scheduled", "request_dropped", "opened", "closing", "_save_logged")}

# Explicit signatures: Scrapy's signal dispatch passes only the arguments a handler names.
async def process_request(self, request, spider=None):
    start = time.thread_time()
    try:
        return await _orig["process_request"](self, request, spider)
    finally:
        _add_time(start, "process_request")

def page_checked(self, request, response, verdict):
    start = time.thread_time()
    try:
        return _orig["page_checked"](self, request, response, verdict)
    finally:
        _add_time(start, "page_checked")

def request_scheduled(self, request, spider=None):
    start = time.thread_time()
    try:
        return _orig["request_scheduled"](self, request, spider)
    finally:
        _add_time(start, "request_scheduled")

def request_dropped(self, request, spider=None):
    start = time.thread_time()
    try:
        return _orig["request_dropped"](self, request, spider)
    finally:
        _add_time(start, "request_dropped")

def _timed_coro(name):
    async def wrapper(self):
        start = time.thread_time()
        try:
            return await _orig[name](self)
        finally:
            _add_time(start)
    return wrapper

_Mw.process_request = process_request
_Mw.page_checked = page_checked
_Mw.request_scheduled = request_scheduled
_Mw.request_dropped = request_dropped
for _name in ("opened", "closing", "_save_logged"):
    setattr(_Mw, _name, _timed_coro(_name))
process = CrawlerProcess(settings)
crawler = process.create_crawler(Site)
process.crawl(crawler)
t0 = time.process_time()
process.start()
usage = resource.getrusage(resource.RUSAGE_SELF)
stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
stats["cpu_seconds"] = usage.ru_utime + usage.ru_stime
stats["rules_cpu_seconds"] = RULES_CPU[0]
stats.update({f"rules_cpu/{k}": v for k, v in RULES_BY.items()})
json.dump(stats, open(out, "w"))
"""


def crawl(base: str, settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    script = workdir / "crawl.py"
    script.write_text(CRAWL_SCRIPT)
    out = workdir / "stats.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, str(script), base, json.dumps(settings), str(out)], check=True, env=env,
                   cwd=workdir)
    stats = json.loads(out.read_text())
    report = Path(str(out) + ".report.jsonl")
    stats["rules"] = [json.loads(line) for line in report.read_text().splitlines() if '"url_rule"' in line] if report.exists() else []
    return stats


def read_log(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    return [tuple(line.split("\t", 1)) for line in path.read_text().splitlines() if "\t" in line]  # type: ignore[misc]


def _pattern(path: str) -> str:
    """A coarse class of a URL (for the table of remaining duplicate downloads)."""
    head = path.split("/")[1] if path.count("/") > 1 else ""
    prefix = f"/{head}/" if head in ("print", "amp", "m", "mirror") else ""
    params = ",".join(sorted(p.split("=")[0] for p in path.partition("?")[2].split("&") if p))
    return f"{prefix}{'index.html' if 'index.html' in path else ''}?{params}"


def measure(rows: list[tuple[str, str]]) -> dict[str, Any]:
    got = [cid for cid, _ in rows if cid != "-"]
    distinct = set(got)
    seen: set[str] = set()
    patterns: dict[str, int] = {}
    paths: list[str] = []
    for cid, path in rows:
        if cid in seen and cid != "-":
            patterns[_pattern(path)] = patterns.get(_pattern(path), 0) + 1
            paths.append(path)
        seen.add(cid)
    return {"downloads": len(rows), "duplicates": len(got) - len(distinct), "contents": distinct,
            "duplicate_patterns": patterns, "duplicate_paths": paths}


# ---------------------------------------------------------------- lookup cost
def lookup_cost(pairs: int = 100_000) -> dict[str, float]:
    """CPU µs per ``predict`` after learning ``pairs`` (duplicate, canonical) pairs; CPU µs per ``observe``."""
    from simhash_scrapy.core.urlrules.urlrules import UrlRuleLearner

    learner = UrlRuleLearner()
    rng = random.Random(5)
    host = "http://docs.example"
    kinds = ["utm", "print", "m", "sid", "amp", "mirror", "ts"]

    def variant(url: str, kind: str, utm: str) -> str:
        if kind == "utm":
            return f"{url}?utm_source={utm}&utm_medium=email"
        if kind == "sid":
            return f"{url}?sessionid={rng.getrandbits(48):012x}"
        if kind == "ts":
            return f"{url}?_={rng.getrandbits(40)}"
        if kind == "other":
            return f"{url}?page={rng.randrange(9)}"
        return url if kind == "plain" else url.replace(host, f"{host}/{kind}", 1)

    canon = [f"{host}/docs/s{i % 40}/a{i}.html" for i in range(pairs)]
    start = time.process_time()
    for i, url in enumerate(canon):
        learner.observe(url)
        learner.observe(variant(url, kinds[i % len(kinds)], f"n{i % 9}"), url, url)
    learn_us = (time.process_time() - start) / (2 * pairs) * 1e6
    requests = []
    for _ in range(100_000):
        j = rng.randrange(pairs * 2)  # half of them never seen
        requests.append(variant(f"{host}/docs/s{j % 40}/a{j}.html", rng.choice(kinds + ["plain", "plain", "other"]), "x"))
    start = time.process_time()
    hits = sum(1 for url in requests if learner.predict(url) is not None)
    predict_us = (time.process_time() - start) / len(requests) * 1e6
    # What a change in the trusted set costs (the host's rewritten keys are rebuilt).
    hr = learner._hosts["docs.example"]
    start = time.process_time()
    learner._rebuild(hr)
    rebuild_ms = (time.process_time() - start) * 1e3
    return {"pairs": pairs, "learned": learner.pairs, "observe_us": learn_us, "predict_us": predict_us,
            "predicted": hits / len(requests), "trusted": len(learner.rules(trusted_only=True)),
            "rebuild_ms": rebuild_ms, "known": len(hr.known)}


# ----------------------------------------------------------------------- main
#: Per site: (least share of duplicate downloads avoided, most share of contents lost) in skip mode.
TARGETS = {"dust": (0.60, 0.005), "realweb": (0.50, 0.005), "adversarial": (0.30, 0.01), "plain": (None, 0.0),
           "params": (None, 0.0)}


def _targets(summary: dict[str, Any], labels: dict[str, list[tuple[str, int | None]]]) -> list[tuple[str, bool]]:
    """The targets of the sites crawled, each checked on its worst crawl order (every seed)."""
    found = []
    for kind, (avoid, lose) in TARGETS.items():
        runs = [summary[f"{label}/skip"] for label, _ in labels.get(kind, ()) if f"{label}/skip" in summary]
        if not runs:
            continue
        orders = f" (worst of {len(runs)} crawl orders)" if len(runs) > 1 else ""
        if avoid is not None:
            least = min(r["avoided"] for r in runs)
            found.append((f"{kind}: >= {100 * avoid:.0f}% of duplicate downloads avoided{orders}: "
                          f"{100 * least:.1f}%", least >= avoid))
        most = max(r["lost_share"] for r in runs)
        found.append((f"{kind}: <= {100 * lose:.1f}% of contents never downloaded{orders}: {100 * most:.2f}%",
                      most <= lose))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--articles", type=int, default=240)
    parser.add_argument("--sites", default="dust,realweb,plain,params,adversarial")
    parser.add_argument("--modes", default="off,learn,skip")
    parser.add_argument("--grid", action="store_true", help="also skip mode with a grid of trust settings")
    parser.add_argument("--also", action="append", default=[],
                        help="another mode, NAME:SETTING=VALUE,SETTING=VALUE (e.g. strict:SIMHASH_URL_RULES=skip,"
                             "SIMHASH_URL_RULES_MIN_SUPPORT=5)")
    parser.add_argument("--seeds", default="",
                        help="comma-separated seeds: each crawl (every mode) once per seed, each page's links "
                             "shuffled by the seed (another crawl order); the table has one row per seed")
    parser.add_argument("--no-lookup", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="also the URL patterns of duplicate downloads")
    args = parser.parse_args()

    source, articles = load_articles(max(args.articles * 3, ADV_TEXTS))
    print(f"articles: {len(articles)} from {source}", flush=True)
    if len(articles) < ADV_TEXTS and "adversarial" in args.sites.split(","):
        parser.error(f"the adversarial site needs {ADV_TEXTS} articles, found {len(articles)}: install python3-doc "
                     "or set URL_RULES_DOC_GLOB (see DOC_GLOB)")
    variants: list[tuple[str, dict[str, Any]]] = [(m, {"SIMHASH_URL_RULES": m}) for m in args.modes.split(",")]
    if args.grid:
        for support in (2, 3, 5):
            for precision in (0.5, 0.7, 0.8):
                variants.append((f"skip s={support} p={precision}", {
                    "SIMHASH_URL_RULES": "skip", "SIMHASH_URL_RULES_MIN_SUPPORT": support,
                    "SIMHASH_URL_RULES_MIN_PRECISION": precision}))
    for spec in args.also:
        name, _, pairs = spec.partition(":")
        variants.append((name, {k: json.loads(v) if v[:1].isdigit() else v
                                for k, _, v in (p.partition("=") for p in pairs.split(",") if p)}))
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    labels = {kind: [(f"{kind}@{seed}", seed) for seed in seeds] if seeds else [(kind, None)]
              for kind in args.sites.split(",")}
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="simhash-url-rules-") as tmp:
        workdir = Path(tmp)
        for kind in args.sites.split(","):
            log_path = workdir / f"{kind}.log"
            ports: Any = multiprocessing.Queue()
            site_articles: list[Any] = articles if kind in ("params", "adversarial") else articles[: args.articles]
            if kind == "realweb":
                site_articles = load_realweb(args.articles)
            server = multiprocessing.Process(target=serve, args=(kind, site_articles, ports, str(log_path)), daemon=True)
            server.start()
            base = f"http://127.0.0.1:{ports.get(timeout=30)}"
            try:
                for label, seed in labels[kind]:
                    for name, settings in variants:
                        log_path.write_text("")
                        stats = crawl(base, settings if seed is None else {**settings, "BENCH_SEED": seed}, workdir)
                        time.sleep(0.2)
                        rows = read_log(log_path)
                        results[f"{label}/{name}"] = {**measure(rows), "stats": stats}
                        print(f"  {label:6} {name:18} downloads {len(rows):6,}  cpu {stats['cpu_seconds']:.1f} s", flush=True)
                        if stats.get("log_count/ERROR"):
                            print(f"  WARNING: {stats['log_count/ERROR']} errors logged by this crawl", flush=True)
            finally:
                server.terminate()
                server.join()

    print()
    print("| site | rules | downloads | duplicate downloads | avoided | contents never downloaded | "
          "skipped | explored | trusted rules | crawl CPU s | of which URL rules |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary: dict[str, Any] = {}
    for kind in [label for runs in labels.values() for label, _ in runs]:
        base_result = results.get(f"{kind}/off")
        for name, _ in variants:
            r = results[f"{kind}/{name}"]
            st = r["stats"]
            if base_result is not None:
                avoided = (base_result["duplicates"] - r["duplicates"]) / base_result["duplicates"] if base_result["duplicates"] else 0.0
                lost = base_result["contents"] - r["contents"]
                lost_share = len(lost) / len(base_result["contents"])
                lost_text = f"{len(lost)} of {len(base_result['contents'])} ({100 * lost_share:.2f}%)"
                if lost and args.verbose:
                    print(f"  never downloaded in {kind}/{name}: {', '.join(sorted(lost)[:10])}")
            else:
                avoided, lost_share, lost_text = 0.0, 0.0, "-"
            print(f"| {kind} | {name} | {r['downloads']:,} | {r['duplicates']:,} | {100 * avoided:.1f}% | {lost_text} | "
                  f"{st.get('simhash/requests/skipped', 0):,} | {st.get('simhash/requests/explored', 0):,} | "
                  f"{st.get('simhash/url_rules/trusted', '-')} | {st['cpu_seconds']:.1f} | "
                  f"{100 * st.get('rules_cpu_seconds', 0) / st['cpu_seconds']:.1f}% |")
            summary[f"{kind}/{name}"] = {"avoided": avoided, "lost_share": lost_share}
    if args.verbose:
        for key, r in results.items():
            top = sorted(r["duplicate_patterns"].items(), key=lambda kv: -kv[1])[:8]
            print(f"duplicate downloads of {key}: " + ", ".join(f"{k} {v}" for k, v in top))
            shapes: dict[str, int] = {}
            for path in r["duplicate_paths"]:
                shape = re.sub(r"\d+", "N", path)
                shapes[shape] = shapes.get(shape, 0) + 1
            print("    by shape: " + ", ".join(f"{k} {v}" for k, v in sorted(shapes.items(), key=lambda kv: -kv[1])[:10]))
            split = {k.split("/", 1)[1]: v for k, v in r["stats"].items() if k.startswith("rules_cpu/")}
            if split:
                print("    URL-rule CPU by handler: " + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(split.items())))
            for rule in r["stats"].get("rules", []):
                if rule["trusted"] or rule["skipped"]:
                    print(f"    {rule['rule']:40} +{rule['support']}/-{rule['counter']} skipped {rule['skipped']}"
                          f"{'' if rule['trusted'] else ' (untrusted at the end)'}")
    if not args.no_lookup:
        cost = lookup_cost()
        off = results.get("dust/off")
        print()
        print(f"rule check after {cost['pairs']:,} learned pairs ({cost['trusted']} trusted rules): "
              f"predict {cost['predict_us']:.1f} µs per request ({100 * cost['predicted']:.0f}% predicted duplicates), "
              f"observe {cost['observe_us']:.1f} µs per page; a change of the trusted set rebuilds "
              f"{cost['known']:,} known URLs in {cost['rebuild_ms']:.0f} ms")
        if off is not None and off["downloads"]:
            per_download_us = off["stats"]["cpu_seconds"] / off["downloads"] * 1e6
            share = (cost["predict_us"] + cost["observe_us"]) / per_download_us
            print(f"crawl CPU per download (dust, rules off): {per_download_us:.0f} µs -> the rule check and "
                  f"learning cost {100 * share:.2f}% of it")
    targets = _targets(summary, labels)
    if targets:
        print()
        for text, ok in targets:
            print(f"{'PASS' if ok else 'FAIL'}  {text}")


if __name__ == "__main__":
    main()
