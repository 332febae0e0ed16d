"""Build the wide evaluation set: real documentation HTML in 13 site templates, tuning and test halves.

    python benchmarks/quality/build_wide.py [--out benchmarks/quality/data/wide] [--cache DIR] [--seed 7]
    python benchmarks/quality/build_wide.py --holdout   # -> benchmarks/quality/data/holdout

``--holdout`` builds the same kinds of page from six other packages instead (``HOLDOUT_SITES``),
four of them in templates the wide set does not have (the Apache httpd manual, Sphinx's
Read-the-Docs and alabaster themes, the older javadoc): a set no default was chosen on, to be
scored as a whole, once the defaults are fixed.

Sources: real, human-written HTML from Debian 12 packages, fetched with ``apt-get download``
at the pinned versions below and unpacked with ``dpkg-deb -x`` (run ``apt-get update`` once
first).  ``python-django-doc`` and ``postgresql-doc-*`` are reserved for an independent check
and never used here.  Template families (how the page's main content is marked up):

======================  ==============================================  ======================
family                  packages                                        main content (truth)
======================  ==============================================  ======================
sphinx-python           python3.11-doc                                  ``div.body``
sphinx-llvm             llvm-14-doc, llvm-15-doc (two releases)         ``div.body``
sphinx-haiku            clang-14-doc, clang-15-doc (two releases)       ``div.content``
sphinx-pallets          python-flask-doc, python-click-doc              ``div.body``
sphinx-sphinx13         sphinx-doc                                      ``div.body``
docbook                 debian-reference-en, debian-faq                 ``body`` between navheader/navfooter
docbook-publican        debian-handbook (en-US)                         ``body`` between banner/docnav
texi2html               gettext-doc (the manual, gettext_N.html)        ``body`` between nav tables
groff-man               gettext-doc (man pages, groff -Thtml)           ``body`` between the rules
doxygen                 libsdl2-doc, libjsoncpp-doc                     ``div.contents``
javadoc                 junit4-doc, libcommons-lang3-java-doc           ``main``
mkdocs                  mkdocs-doc                                      ``div[role=main]``
asciidoc                git-doc                                         ``div#content``
======================  ==============================================  ======================

The truth never runs simhash_scrapy: a page's main content is what the template puts there
(the right-hand column), its words are ``\\w+`` runs of the lower-cased text (``common.words``).

Pages: a seeded sample of every package (capped per package, same paths for both releases),
every page outside it that has a natural twin or a near miss in its site (``natural_census``),
and, made from disjoint sampled pages of each family, the variants the web re-serves pages as:

* ``template``: the article in another family's chrome (a mirror) and in a reader view;
* ``tracking``: tracking/session query strings, a session bar, ads, request stamps;
* ``print_links``: a CMS print view with "[n]" link markers, a numbered "Links:" list of the
  full URLs, a "Source URL:" and a "Printed on" line;
* ``print_plain``: a print view without the link list;
* ``edit``: 1-3% of the words edited;
* ``short``: soft-404 shells (one per family, identical text under many URLs) and pages whose
  short text is word-for-word identical (stubs, releases);
* ``release``/``natural``: pairs of original pages whose main contents have shingle Jaccard >= 0.9
  (``truth.json``'s ``identical`` lists the positive pairs whose main texts are word-for-word the same).

Hard negatives: different pages in one heavy template (``hn_template``), the same title over
a different body (``hn_title``), different pages (from outside the sample) whose articles end
with one long site-wide section (``hn_shared``).

Truth: pages of one group are duplicates; pages with at least ``EMPTY_WORDS`` words whose
word-3-shingle Jaccard is >= 0.9 are duplicates ([0.5, 0.9): gray, not scored); pages with
1..``EMPTY_WORDS - 1`` words ("short") are duplicates of the pages with the identical word
sequence and of nothing else; pages with no word are "empty" and never duplicates.

Halves: every page belongs to the ``tune`` or the ``test`` half, decided by its source page
(family and path, the release left out), so a page, its variants and its other releases are
always in one half.  ``score.py --half tune|test`` scores one half on its own (only that half's
pages are fingerprinted and indexed), so nothing leaks between them.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import hashlib
import json
import random
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import lxml.html
from lxml import etree

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import build_set  # noqa: E402
from build_set import _esc, drop_headerlinks, edit_words, first_sentence, frag, node_text, reader_page, set_title  # noqa: E402

# Pinned (Debian 12 "bookworm"), so the set is the same on every machine.
PACKAGES = {
    "python3.11-doc": "3.11.2-6+deb12u9",
    "llvm-14-doc": "1:14.0.6-12",
    "llvm-15-doc": "1:15.0.6-4",
    "clang-14-doc": "1:14.0.6-12",
    "clang-15-doc": "1:15.0.6-4",
    "python-flask-doc": "2.2.2-3",
    "python-click-doc": "8.1.3-2",
    "sphinx-doc": "5.3.0-4",
    "debian-reference-en": "2.100",
    "debian-faq": "11.1",
    "debian-handbook": "11.20220922",
    "gettext-doc": "0.21-12",
    "libsdl2-doc": "2.26.5+dfsg-1",
    "libjsoncpp-doc": "1.9.5-4",
    "junit4-doc": "4.13.2-3",
    "libcommons-lang3-java-doc": "3.12.0-2+deb12u1",
    "mkdocs-doc": "1.4.2+dfsg-2",
    "git-doc": "1:2.39.5-0+deb12u3",
}
RESERVED = re.compile(r"^(python-django-doc|postgresql-doc)")
assert not any(RESERVED.match(p) for p in PACKAGES)

DEFAULT_OUT = common.DEFAULT_DATA / "wide"
# Original pages kept per package (a seeded sample; both releases keep the same paths).
MAX_PER_PACKAGE = 160
# Beyond the sample, every page of a package that has a natural twin in its site is kept too
# (``natural_census``): pages of one site whose main texts have word-3-shingle Jaccard >= the
# positive line, and the near misses just below the gray zone, [NEAR_MISS_JACCARD, gray line),
# where a word-based fingerprint can call different pages the same.  A 160-page sample kept only
# 5 natural pairs per half, too few to measure the kind.
NEAR_MISS_JACCARD = 0.4
# Source pages per family and kind of variant (fewer for small families).
PER_KIND = 7
SOFT404_URLS = 6
N_HN_TEMPLATE = 160
N_HN_TITLE = 60
# Different pages sharing a long section: per package with pages outside the sample, this many
# of those pages (150-1,500 words) carry one site-wide block of SHARED_WORDS real words.
N_HN_SHARED = 12
SHARED_WORDS = (200, 600)

_BODY_CLASS = etree.XPath("//div[contains(concat(' ', normalize-space(@class), ' '), ' body ')]")
_NAV_TABLE = re.compile(r"^\s*\[")


def _first(xpath: str) -> Callable[[etree._Element], list[etree._Element]]:
    find = etree.XPath(xpath)

    def content(tree: etree._Element) -> list[etree._Element]:
        nodes = find(tree)
        return [nodes[0]] if nodes else []

    return content


def _sphinx(tree: etree._Element) -> list[etree._Element]:
    nodes = _BODY_CLASS(tree)
    return [nodes[0]] if nodes else []


def _body_children(keep: Callable[[etree._Element, int, list[etree._Element]], bool]):
    def content(tree: etree._Element) -> list[etree._Element]:
        body = tree.find("body")
        if body is None:
            return []
        children = [c for c in body if isinstance(c.tag, str)]
        return [c for i, c in enumerate(children) if keep(c, i, children)]

    return content


def _not_docbook_nav(el: etree._Element, i: int, children: list) -> bool:
    return el.tag not in ("script",) and (el.get("class") or "") not in ("navheader", "navfooter")


def _not_publican_nav(el: etree._Element, i: int, children: list) -> bool:
    return el.get("id") not in ("banner", "title") and "docnav" not in (el.get("class") or "") and el.tag != "script"


def _texi_content(el: etree._Element, i: int, children: list) -> bool:
    if el.tag == "hr":
        return False
    if el.tag == "table" and _NAV_TABLE.match(el.text_content() or "") and el.get("cellpadding") == "1":
        return False
    return not (el.tag == "p" and "This document was generated" in el.text_content())


def _groff_content(el: etree._Element, i: int, children: list) -> bool:
    rules = [j for j, c in enumerate(children) if c.tag == "hr"]
    if len(rules) < 2:
        return el.tag != "hr"
    return rules[0] < i < rules[-1]


@dataclass(frozen=True)
class Family:
    name: str
    content: Callable[[etree._Element], list[etree._Element]]
    container: bool  # whether the template marks its content with one container element


FAMILIES = {
    f.name: f
    for f in (
        Family("sphinx-python", _sphinx, True),
        Family("sphinx-llvm", _sphinx, True),
        Family("sphinx-haiku", _first("//div[@class='content']"), True),
        Family("sphinx-pallets", _sphinx, True),
        Family("sphinx-sphinx13", _sphinx, True),
        Family("docbook", _body_children(_not_docbook_nav), False),
        Family("docbook-publican", _body_children(_not_publican_nav), False),
        Family("texi2html", _body_children(_texi_content), False),
        Family("groff-man", _body_children(_groff_content), False),
        Family("doxygen", _first("//div[@class='contents']"), True),
        Family("javadoc", _first("//main"), True),
        Family("mkdocs", _first("//div[@role='main']"), True),
        Family("asciidoc", _first("//div[@id='content']"), True),
    )
}


@dataclass(frozen=True)
class Site:
    name: str
    family: str
    package: str
    root: str
    pattern: str  # regex on the path under root: pages kept
    host: str
    prefix: str
    project: str  # the same for two releases of one manual
    skip: str = r"(^|/)(genindex|py-modindex|modindex|search|index-all|allclasses\w*|overview-tree|deprecated-list|help-doc|constant-values|serialized-form|globals\w*|functions\w*|namespacemembers\w*|files|annotated\w*|classes|hierarchy|inherits|dir_\w+)\.html$|^_|src-html/|_source\.html$|-members\.html$"


SITES = (
    Site("py", "sphinx-python", "python3.11-doc", "usr/share/doc/python3.11/html", r"\.html$", "docs.python.test", "/3.11/", "python"),
    Site("llvm15", "sphinx-llvm", "llvm-15-doc", "usr/share/doc/llvm-15-doc/html", r"\.html$", "llvm.test", "/15/", "llvm"),
    Site("llvm14", "sphinx-llvm", "llvm-14-doc", "usr/share/doc/llvm-14-doc/html", r"\.html$", "llvm.test", "/14/", "llvm"),
    Site("clang15", "sphinx-haiku", "clang-15-doc", "usr/share/doc/clang-15/html", r"\.html$", "clang.test", "/15/", "clang"),
    Site("clang14", "sphinx-haiku", "clang-14-doc", "usr/share/doc/clang-14/html", r"\.html$", "clang.test", "/14/", "clang"),
    Site("flask", "sphinx-pallets", "python-flask-doc", "usr/share/doc/python-flask-doc/html", r"\.html$", "flask.test", "/2.2/", "flask"),
    Site("click", "sphinx-pallets", "python-click-doc", "usr/share/doc/python-click-doc/html", r"\.html$", "click.test", "/8.1/", "click"),
    Site("sphinx", "sphinx-sphinx13", "sphinx-doc", "usr/share/doc/sphinx-doc/html", r"\.html$", "sphinx.test", "/5.3/", "sphinx"),
    Site("debref", "docbook", "debian-reference-en", "usr/share/debian-reference", r"\.en\.html$", "reference.debian.test", "/", "debref"),
    Site("debfaq", "docbook", "debian-faq", "usr/share/doc/debian/FAQ", r"\.html$", "faq.debian.test", "/", "debfaq"),
    Site("handbook", "docbook-publican", "debian-handbook", "usr/share/doc/debian-handbook/html/en-US", r"\.html$", "handbook.debian.test", "/", "handbook"),
    Site("gettext", "texi2html", "gettext-doc", "usr/share/doc/gettext", r"^gettext_\d+\.html$", "gettext.test", "/manual/", "gettext"),
    Site("gettextman", "groff-man", "gettext-doc", "usr/share/doc/gettext", r"^[\w.-]+\.\d\.html$", "gettext.test", "/man/", "gettextman"),
    Site("sdl2", "doxygen", "libsdl2-doc", "usr/share/doc/libsdl2-doc/html", r"\.html$", "sdl.test", "/api/", "sdl2"),
    Site("jsoncpp", "doxygen", "libjsoncpp-doc", "usr/share/doc/libjsoncpp-doc", r"\.html$", "jsoncpp.test", "/doc/", "jsoncpp"),
    Site("junit", "javadoc", "junit4-doc", "usr/share/doc/junit4/api", r"\.html$", "junit.test", "/4.13/", "junit"),
    Site("lang3", "javadoc", "libcommons-lang3-java-doc", "usr/share/doc/libcommons-lang3-java/api", r"\.html$", "commons.test", "/lang3/", "lang3"),
    Site("mkdocs", "mkdocs", "mkdocs-doc", "usr/share/doc/mkdocs/html", r"\.html$", "mkdocs.test", "/", "mkdocs"),
    Site("git", "asciidoc", "git-doc", "usr/share/doc/git-doc", r"^[\w.-]+\.html$", "git.test", "/docs/", "git"),
)


# ------------------------------------------------------------------ the hold-out set
HOLDOUT_PACKAGES = {
    "apache2-doc": "2.4.71-1~deb12u1",
    "python-scrapy-doc": "2.8.0-2",
    "python-attr-doc": "22.2.0-1",
    "python-requests-doc": "2.28.1+dfsg-1",
    "libglfw3-doc": "3.3.8-1",
    "libcommons-io-java-doc": "2.11.0-2",
}
assert not any(RESERVED.match(p) for p in HOLDOUT_PACKAGES)
assert not set(HOLDOUT_PACKAGES) & set(PACKAGES)


def _all(xpath: str) -> Callable[[etree._Element], list[etree._Element]]:
    find = etree.XPath(xpath)
    return lambda tree: list(find(tree))


HOLDOUT_FAMILIES = (
    # The httpd manual: a preamble, sections and directive sections inside div#page-content (beside a
    # quick-view box and "top" links).
    Family("apache", _all(
        "//div[@id='page-content']/div[@id='preamble' or @class='section' or @class='directive-section']"
    ), False),
    Family("sphinx-rtd", _first("//div[@itemprop='articleBody']"), True),
    Family("sphinx-alabaster", _sphinx, True),
    # (The class/package title is in div.header, left out: a variant's text goes into the container.)
    Family("javadoc-11", _first(
        "//div[@class='contentContainer' or @class='allClassesContainer' or @class='allPackagesContainer']"
    ), True),
)
HOLDOUT_SITES = (
    Site("apache", "apache", "apache2-doc", "usr/share/doc/apache2-doc/manual/en", r"\.html$", "httpd.test", "/docs/2.4/", "apache"),
    Site("scrapy", "sphinx-rtd", "python-scrapy-doc", "usr/share/doc/python-scrapy-doc/html", r"\.html$", "scrapy.test", "/2.8/", "scrapy"),
    Site("attrs", "sphinx-rtd", "python-attr-doc", "usr/share/doc/python-attr-doc/html", r"\.html$", "attrs.test", "/22.2/", "attrs"),
    Site("requests", "sphinx-alabaster", "python-requests-doc", "usr/share/doc/python-requests-doc/html", r"\.html$", "requests.test", "/2.28/", "requests"),
    Site("glfw", "doxygen", "libglfw3-doc", "usr/share/doc/libglfw3-dev/html", r"\.html$", "glfw.test", "/3.3/", "glfw"),
    Site("commonsio", "javadoc-11", "libcommons-io-java-doc", "usr/share/doc/libcommons-io-java/api", r"\.html$", "commons-io.test", "/2.11/", "commonsio"),
)


def use_holdout() -> None:
    """Build the hold-out set instead: its packages, sites and template families."""
    global PACKAGES, SITES
    PACKAGES = dict(HOLDOUT_PACKAGES)
    SITES = HOLDOUT_SITES
    FAMILIES.update({f.name: f for f in HOLDOUT_FAMILIES})


def serialize(tree: lxml.html.HtmlElement) -> bytes:
    """The page as UTF-8 HTML, its encoding declarations saying so (groff declares US-ASCII)."""
    for meta in tree.iter("meta"):
        if meta.get("charset") is not None:
            meta.set("charset", "utf-8")
        elif (meta.get("http-equiv") or "").lower() == "content-type":
            meta.set("content", "text/html; charset=utf-8")
    return etree.tostring(tree, method="html", encoding="utf-8", doctype="<!DOCTYPE html>")


# --------------------------------------------------------------------------- fetching


def fetch_packages(cache: Path) -> dict[str, str]:
    """Download (once) and unpack the pinned packages into ``cache/x/<package>``."""
    return build_set.fetch_packages(cache, PACKAGES, "x")


# --------------------------------------------------------------------------- sources


def half_of(project: str, rel: str) -> str:
    """``tune`` or ``test``: a stable hash of the page's family and path (releases share it)."""
    digest = hashlib.sha256(f"{project}:{rel}".encode()).digest()
    return "test" if digest[0] & 1 else "tune"


@dataclass
class Source:
    key: str
    site: Site
    rel: str
    raw: bytes
    title: str
    text: str
    nwords: int
    # kept by the natural census, not the sample: an original only, never made into variants
    census: bool = False

    @property
    def family(self) -> Family:
        return FAMILIES[self.site.family]

    @property
    def url(self) -> str:
        return f"http://{self.site.host}{self.site.prefix}{self.rel}"

    @property
    def half(self) -> str:
        return half_of(self.site.project, self.rel)

    def tree(self) -> lxml.html.HtmlElement:
        return lxml.html.document_fromstring(self.raw)

    def article(self) -> etree._Element:
        """A <div> holding copies of the page's main content (tails included)."""
        box = lxml.html.Element("div")
        for node in self.family.content(self.tree()):
            clone = copy.deepcopy(node)
            box.append(clone)
        drop_headerlinks(box)
        return box


def content_text(nodes: list[etree._Element]) -> str:
    parts = []
    for node in nodes:
        parts.append(node_text(node))
        if node.tail and node.getparent() is not None and node.getparent().tag == "body":
            parts.append(" ".join(node.tail.split()))
    return " ".join(p for p in parts if p)


def load_sources(cache: Path, seed: int) -> dict[str, Source]:
    rng = random.Random(seed)
    chosen_rels: dict[str, set[str]] = {}
    census_rels: dict[str, set[str]] = {}
    sources = {}
    UNSAMPLED.clear()
    for site in SITES:
        root = cache / "x" / site.package / site.root
        keep, skip = re.compile(site.pattern), re.compile(site.skip)
        # (symbolic links, e.g. debian-faq's X.html -> X.en.html, would be the same page twice)
        paths = sorted(
            p for p in root.rglob("*.html")
            if not p.is_symlink()
            and keep.search(p.relative_to(root).as_posix()) and not skip.search(p.relative_to(root).as_posix())
        )  # fmt: skip
        rels = [p.relative_to(root).as_posix() for p in paths]
        census: set[str] = set()
        if site.project in chosen_rels:  # the other release: the same paths where they exist
            picked = [r for r in rels if r in chosen_rels[site.project]]
            census = census_rels[site.project] & set(picked)
        else:
            picked = rels if len(rels) <= MAX_PER_PACKAGE else sorted(rng.sample(rels, MAX_PER_PACKAGE))
            if len(picked) < len(rels):
                census = natural_census(site, root, rels) - set(picked)
                picked = sorted(set(picked) | census)
            chosen_rels[site.project] = set(picked)
            census_rels[site.project] = census
            UNSAMPLED[site.name] = [r for r in rels if r not in chosen_rels[site.project]]
        for rel in picked:
            src = read_source(site, root, rel, census=rel in census)
            if src is not None:
                sources[src.key] = src
    return sources


def read_source(site: Site, root: Path, rel: str, census: bool = False) -> Source | None:
    """The page at ``root / rel`` with its main text, or ``None`` (unparsable, or no main content)."""
    raw = (root / rel).read_bytes()
    try:
        tree = lxml.html.document_fromstring(raw)
    except (etree.ParserError, ValueError):
        return None
    nodes = FAMILIES[site.family].content(tree)
    if not nodes:
        return None
    title = " ".join((tree.findtext(".//title") or "").split())
    text = content_text(nodes)
    return Source(f"{site.name}:{rel}", site, rel, raw, title, text, len(common.words(text)), census)


#: site name -> the paths of its pages outside the sample and the census (first releases only)
UNSAMPLED: dict[str, list[str]] = {}


def unsampled_articles(cache: Path, rng: random.Random, count: int) -> list[Source]:
    """Up to ``count`` pages of 150-1,500 words per site, drawn from outside the set's pages."""
    found = []
    for site in SITES:
        rels = list(UNSAMPLED.get(site.name, ()))
        rng.shuffle(rels)
        root = cache / "x" / site.package / site.root
        kept = 0
        for rel in rels:
            if kept == count:
                break
            src = read_source(site, root, rel)
            if src is not None and 150 <= src.nwords <= 1500:
                found.append(src)
                kept += 1
    return found


def natural_census(site: Site, root: Path, rels: list[str]) -> set[str]:
    """The pages of one site (all of them read) with a natural twin or a near miss in it.

    A pair counts when both pages have at least ``EMPTY_WORDS`` words of main text and their
    word-3-shingle Jaccard is >= the positive line (a natural duplicate) or in
    [``NEAR_MISS_JACCARD``, gray line) (different pages with much the same words).  No random
    draw: the seeded sample of the rest of the set is the same with or without the census.
    """
    texts, kept = [], []
    for rel in rels:
        src = read_source(site, root, rel)
        if src is not None and src.nwords >= common.EMPTY_WORDS:
            texts.append(src.text)
            kept.append(rel)
    found = set()
    for a, c, j in common.similar_pairs([common.shingles(t) for t in texts], NEAR_MISS_JACCARD):
        if j >= common.POSITIVE_JACCARD or j < common.GRAY_JACCARD:
            found.update((kept[a], kept[c]))
    return found


# --------------------------------------------------------------------------- the builder


class Builder:
    def __init__(self, sources: dict[str, Source], out: Path, seed: int) -> None:
        self.sources = sources
        self.out = out
        self.rng = random.Random(seed)
        self.pages: list[dict] = []
        self.texts: list[str] = []
        self.urls: set[str] = set()
        (out / "pages").mkdir(parents=True, exist_ok=True)
        self.donor_words: list[str] = []
        self.donor_sentences: list[str] = []
        self.donor_keys: list[str] = []

    def add(self, html: bytes, url: str, text: str, kind: str, role: str, group: str | None, src: Source | None,
            half: str, family: str, variant: str = "") -> int:  # fmt: skip
        if url in self.urls:
            raise ValueError(f"duplicate url {url}")
        self.urls.add(url)
        pid = len(self.pages)
        file = f"pages/{pid:05d}.html"
        (self.out / file).write_bytes(html)
        self.pages.append(dict(
            id=pid, url=url, file=file, host=url.split("/")[2], category=kind, role=role, group=group,
            source=src.key if src else "", words=len(common.words(text)), variant=variant, half=half, family=family,
        ))  # fmt: skip
        self.texts.append(text)
        return pid

    def add_original(self, src: Source) -> int:
        return self.add(src.raw, src.url, src.text, "original", "original", None, src, src.half, src.site.family)

    def stamp(self) -> dt.datetime:
        return dt.datetime(2025, 5, 1) + dt.timedelta(seconds=self.rng.randrange(0, 40 * 86400))

    def token(self, n: int = 16) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def teaser(self, src: Source) -> tuple[str, str]:
        title = re.split(r" [—|\-–] ", src.title)[0]
        return title, first_sentence(src.text)

    def variant(self, html: bytes, url: str, src: Source, kind: str, group: str, text: str | None = None, variant: str = "") -> int:
        return self.add(html, url, src.text if text is None else text, kind, "variant", group, src, src.half,
                        src.site.family, variant or kind)  # fmt: skip

    # -- same article, other template

    def mirror(self, src: Source, chrome: Source, host: str, group: str) -> int:
        tree = chrome.tree()
        target = chrome.family.content(tree)[0]
        article = src.article()
        for child in list(target):
            target.remove(child)
        target.text = None
        target.append(frag(
            f'<div class="admonition note"><p>This is a mirror of <a href="{src.url}">{_esc(src.site.project)}</a>, '
            f"last synchronised on {self.stamp():%Y-%m-%d}.</p></div>"
        ))  # fmt: skip
        target.append(article)
        set_title(tree, f"{src.title} | {host}")
        url = f"http://{host}/{src.site.project}/{src.rel}"
        return self.variant(serialize(tree), url, src, "template", group, variant=f"mirror:{chrome.site.family}")

    def reader(self, src: Source, group: str) -> int:
        tree, page = reader_page(src.title, src.url, src.site.host, src.nwords)
        page.append(src.article())
        url = f"http://reader.test/{src.site.project}/{src.rel}"
        return self.variant(serialize(tree), url, src, "template", group, variant="reader")

    # -- tracking / session variants

    def tracking(self, src: Source, n: int, group: str) -> None:
        queries = ["utm_source=newsletter&utm_medium=email&utm_campaign=spring-{t}", "sessionid={t}",
                   "ref=home&ts={ts}", "PHPSESSID={t}&lang=en", "fbclid=IwAR{t}"]  # fmt: skip
        for i in range(n):
            tree = src.tree()
            nodes = src.family.content(tree)
            when, tok = self.stamp(), self.token(24)
            ad_src = self.sources[self.rng.choice(self.donor_keys)]
            title, sentence = self.teaser(ad_src)
            ad = frag(
                f'<div id="div-gpt-ad-{self.rng.randrange(10**12)}-0" class="adunit">'
                f'<span class="label">Advertisement</span><a href="{ad_src.url}?utm_source=ad"><b>{_esc(title)}</b></a>'
                f"<p>{_esc(sentence)}</p></div>"
            )
            blocks = [el for node in nodes for el in node.iter("p") if el.getparent() is not None]
            if blocks:
                blocks[min(len(blocks) - 1, 1)].addnext(ad)
            else:
                nodes[0].addnext(ad) if nodes[0].getparent() is not None else None
            body = tree.find("body")
            body.insert(0, frag(
                f'<div class="session-bar">Welcome, guest. Session {tok[:12]} started '
                f"{when:%H:%M:%S}. {self.rng.randrange(90, 2400)} readers online.</div>"
            ))  # fmt: skip
            body.append(frag(
                f"<div class='request-info'><p>Page generated {when:%B %d, %Y at %H:%M:%S} UTC in "
                f"0.{self.rng.randrange(10, 99)} seconds. Request id {tok}.</p></div>"
            ))  # fmt: skip
            body.append(frag(f'<form><input type="hidden" name="csrf" value="{self.token(32)}"></form>'))
            for a in tree.iter("a"):
                href = a.get("href") or ""
                if href and not href.startswith(("http", "#")):
                    a.set("href", f"{href}{'&' if '?' in href else '?'}sid={tok[:12]}")
            query = queries[i % len(queries)].format(t=self.token(10), ts=int(when.timestamp()))
            self.variant(serialize(tree), f"{src.url}?{query}", src, "tracking", group)

    # -- printer-friendly, with and without the link list

    def printable(self, src: Source, group: str, links: bool) -> int:
        article = src.article()
        urls: list[str] = []
        if links:
            for a in article.iter("a"):
                href = a.get("href")
                if not href or href.startswith(("#", "javascript:", "mailto:")):
                    continue
                urls.append(urljoin(src.url, href))
                a.tail = f" [{len(urls)}]" + (a.tail or "")
        listing = "".join(f"<li>[{i + 1}] {_esc(h)}</li>" for i, h in enumerate(urls))
        name = f"{src.site.project.capitalize()} documentation"
        html = (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{_esc(src.title)} (printer-friendly)</title>"
            "<style media='print'>.noprint{display:none}</style></head><body class='print'>"
            f"<div class='print-header'>{_esc(name)}</div>"
            "<div id='print-content'></div>"
            f"<div class='print-footer'><p>Source URL: {_esc(src.url)}</p>"
            f"<p>Printed on {self.stamp():%Y-%m-%d %H:%M}</p>"
            + (f"<p>Links:</p><ol class='print-links'>{listing}</ol>" if urls else "")
            + "</div></body></html>"
        )
        tree = lxml.html.document_fromstring(html)
        tree.get_element_by_id("print-content").append(article)
        kind = "print_links" if links else "print_plain"
        return self.variant(serialize(tree), f"{src.url}?format=print{'&links=1' if links else ''}", src, kind, group)

    # -- small edits

    def edited(self, src: Source, rate: float, group: str, revision: int) -> int:
        tree = src.tree()
        nodes = src.family.content(tree)
        slots = []
        for node in nodes:
            for el in node.iter():
                if not isinstance(el.tag, str) or el.tag in ("script", "style", "pre"):
                    continue
                if el.text and el.text.strip():
                    slots.append((el, "text"))
                if el is not node and el.tail and el.tail.strip():
                    slots.append((el, "tail"))
        edit_words(self.rng, slots, max(1, round(rate * src.nwords)), self.donor_words, self.donor_sentences)
        text = content_text(nodes)
        return self.variant(serialize(tree), f"{src.url}?revision={revision}", src, "edit", group, text, f"edit{rate:.3f}")

    # -- soft-404 shells: one per family, the same text under many URLs

    def soft404(self, chrome: Source, half: str, n: int) -> None:
        group = f"short:soft404:{chrome.site.family}:{half}"
        for i in range(n):
            tree = chrome.tree()
            nodes = chrome.family.content(tree)
            target = nodes[0]
            for extra in nodes[1:]:
                extra.getparent().remove(extra)
            for child in list(target):
                target.remove(child)
            target.text = None
            target.append(frag(f"<h1>Page not found: {_esc(chrome.site.project)} documentation</h1>"))
            target.append(frag("<p>Sorry, we could not find that page. Try the search box or go back to the home page.</p>"))
            set_title(tree, "404 Not Found")
            text = content_text(chrome.family.content(tree))
            missing = f"{half}-{self.token(6)}/{self.rng.choice(['guide', 'api', 'faq', 'howto'])}-{i}.html"
            url = f"http://{chrome.site.host}{chrome.site.prefix}{missing}"
            self.add(serialize(tree), url, text, "short", "variant", group, None, half, chrome.site.family, "soft404")

    # -- hard negatives

    def shared(self, src: Source, block: str) -> int:
        """The page with a site-wide block (``block``: HTML) at the end of its article."""
        tree = src.tree()
        nodes = src.family.content(tree)
        nodes[-1].append(lxml.html.fragment_fromstring(block))
        text = content_text(src.family.content(tree))
        return self.add(serialize(tree), src.url, text, "hn_shared", "hn_shared", None, src, src.half, src.site.family)

    def heavy_parts(self, pool: list[Source]) -> dict:
        menu = "".join(f'<a href="/{s.rel}">{_esc(self.teaser(s)[0])}</a>' for s in pool[:40])
        trending = "".join(f'<div class="_9xk2"><a href="/t/{i}">{_esc(t)}</a><p>{_esc(s)}</p></div>'
                           for i, (t, s) in enumerate(self.teaser(x) for x in pool[40:46]))  # fmt: skip
        popular = "".join(f'<li><a href="/p/{i}">{_esc(self.teaser(x)[0])}</a></li>' for i, x in enumerate(pool[46:58]))
        topics = " ".join(f'<a href="/topic/{i}">{_esc(self.teaser(x)[0].split()[0] if self.teaser(x)[0] else "x")}</a>'
                          for i, x in enumerate(pool[58:90]))  # fmt: skip
        footer = " ".join(first_sentence(x.text, 60) for x in pool[90:93])
        return dict(menu=menu, trending=trending, popular=popular, topics=topics, footer=_esc(footer))

    def heavy(self, src: Source, parts: dict, related: list[Source], slug: str) -> int:
        article = src.article()
        inner = "".join(etree.tostring(c, method="html", encoding="unicode") for c in article)
        rel = "".join(f'<li><a href="{s.url}">{_esc(self.teaser(s)[0])}</a> <span>{_esc(self.teaser(s)[1])}</span></li>'
                      for s in related)  # fmt: skip
        title = self.teaser(src)[0]
        html = f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_esc(title)} | Dev Digest</title></head>
<body class="post-template-default single">
<div class="cc-window cc-banner" role="dialog"><span class="cc-message">This website uses cookies to ensure you get the best experience on our website. <a class="cc-link" href="/privacy">Learn more</a></span><a class="cc-btn cc-dismiss">Got it!</a></div>
<div id="page" class="site">
<div id="masthead" class="site-header"><p class="site-title"><a href="/">Dev Digest</a></p><p class="site-description">Articles about programming, tools and free software</p>
<div id="site-navigation" class="main-navigation"><div class="mega">{parts['menu']}</div></div></div>
<div id="content" class="site-content"><div class="row"><div class="col-md-8">
<article id="post-{slug}" class="post type-post status-publish">
<div class="entry-meta"><span class="posted-on">Posted on {self.stamp():%B %d, %Y}</span> by <span class="author">the editors</span></div>
<div class="entry-content">{inner}</div>
<div class="sharedaddy sd-sharing-enabled"><h3 class="sd-title">Share this:</h3><a href="#">Twitter</a> <a href="#">Facebook</a> <a href="#">LinkedIn</a> <a href="#">Reddit</a> <a href="#">Email</a></div>
<div class="yarpp-related"><h3>Related posts</h3><ol>{rel}</ol></div>
<div class="css-1dbjc4n"><h3>Trending now</h3>{parts['trending']}</div>
</article></div>
<div id="secondary" class="widget-area col-md-4"><div class="widget"><h3>Most read</h3><ul>{parts['popular']}</ul></div>
<div class="box"><h3>Topics</h3><div class="tagcloud">{parts['topics']}</div></div>
<div class="mc4wp-form"><h3>Get the weekly digest</h3><p>One email a week with the best new articles. No spam, unsubscribe at any time.</p><form><input type="email"><button>Subscribe</button></form></div></div>
</div></div>
<div id="colophon" class="site-footer"><div class="footer-widgets">{parts['footer']}</div><div class="site-info">&copy; 2025 Dev Digest</div></div>
</div></body></html>"""
        url = f"http://digest.test/posts/{slug}.html"
        return self.add(html.encode("utf-8"), url, src.text, "hn_template", "hn_template", "hn_template", src,
                        src.half, src.site.family)  # fmt: skip


# --------------------------------------------------------------------------- main


def build(out: Path, cache: Path, seed: int) -> dict:
    t0 = time.perf_counter()
    print("fetching packages", flush=True)
    versions = fetch_packages(cache)
    print("reading pages", flush=True)
    sources = load_sources(cache, seed)
    print(f"  {len(sources)} pages read ({time.perf_counter() - t0:.1f}s)", flush=True)
    if (out / "pages").exists():
        shutil.rmtree(out / "pages")
    b = Builder(sources, out, seed)
    rng = b.rng
    keys = sorted(sources)
    by_family: dict[str, list[str]] = {}  # the sampled pages, of which variants are made
    for k in keys:
        if sources[k].census:
            continue
        by_family.setdefault(sources[k].site.family, []).append(k)

    def articles(ks: list[str]) -> list[str]:
        return [k for k in ks if 150 <= sources[k].nwords <= 15000]

    # Sources reserved for hard negatives (never originals in the set): short-to-medium articles.
    hn_pool: list[str] = []
    title_bodies: list[str] = []
    reserved: set[str] = set()
    for _fam, ks in sorted(by_family.items()):
        single = [k for k in ks if sources[k].site.name not in ("llvm14", "clang14")]
        mid = [k for k in single if 60 <= sources[k].nwords <= 600]
        rng.shuffle(mid)
        take = mid[: max(2, min(len(mid) // 5, N_HN_TEMPLATE // len(by_family)))]
        hn_pool.extend(take)
        rest = [k for k in articles(single) if k not in take]
        rng.shuffle(rest)
        bodies = rest[: max(1, min(len(rest) // 8, N_HN_TITLE // len(by_family)))]
        title_bodies.extend(bodies)
        reserved.update(take, bodies)
    # A release's twin of a reserved page is reserved too (it would be its duplicate).
    for k in list(reserved):
        _, rel = k.split(":", 1)
        for other in keys:
            if other.endswith(":" + rel) and sources[other].site.project == sources[k].site.project:
                reserved.add(other)
    b.donor_keys = [k for k in keys if k not in reserved and not sources[k].census and sources[k].nwords >= 150]
    for k in b.donor_keys:
        ws = sources[k].text.split()
        b.donor_words.extend(w for w in ws[50:250] if w.isalpha())
        b.donor_sentences.extend(re.findall(r"[A-Z][^.?!]{40,160}[.?!]", sources[k].text[:3000]))

    original_ids: dict[str, int] = {}
    for k in keys:
        if k not in reserved:
            original_ids[k] = b.add_original(sources[k])

    # Chrome pages for mirrors: one per family with a single content container.
    chromes = {}
    for fam, ks in sorted(by_family.items()):
        if FAMILIES[fam].container:
            cands = [k for k in articles(ks) if k not in reserved]
            if cands:
                chromes[fam] = sources[cands[0]]
    used: set[str] = set(c.key for c in chromes.values())
    kinds = ("template", "tracking", "print_links", "print_plain", "edit")
    for fam, ks in sorted(by_family.items()):
        # one release per manual for the constructed variants (the other release is a natural duplicate)
        pool = [k for k in articles(ks) if k not in reserved and k not in used and sources[k].site.name not in ("llvm14", "clang14")]
        rng.shuffle(pool)
        per_kind = max(2, min(PER_KIND, len(pool) // len(kinds)))
        for ki, kind in enumerate(kinds):
            for k in pool[ki * per_kind : (ki + 1) * per_kind]:
                used.add(k)
                src = sources[k]
                group = f"{kind}:{k}"
                b.pages[original_ids[k]]["group"] = group
                if kind == "template":
                    others = [f for f in sorted(chromes) if f != fam]
                    chrome = chromes[others[rng.randrange(len(others))]]
                    b.mirror(src, chrome, f"mirror-{chrome.site.family}.test", group)
                    b.reader(src, group)
                elif kind == "tracking":
                    b.tracking(src, 3, group)
                elif kind == "print_links":
                    b.printable(src, group, links=True)
                elif kind == "print_plain":
                    b.printable(src, group, links=False)
                else:
                    b.edited(src, rng.uniform(0.01, 0.017), group, 2)
                    b.edited(src, rng.uniform(0.023, 0.03), group, 3)
    # soft-404 shells in each family's chrome, for each half
    for _fam, ks in sorted(by_family.items()):
        chrome = sources[next(k for k in ks if k not in reserved)]
        for half in ("tune", "test"):
            b.soft404(chrome, half, SOFT404_URLS)

    # hard negatives: one heavy template over different pages
    donors = [sources[k] for k in b.donor_keys]
    rng.shuffle(donors)
    parts = b.heavy_parts(donors)
    hn_ids = []
    for i, k in enumerate(hn_pool):
        slug = f"{i:03d}-" + re.sub(r"[^a-z0-9]+", "-", sources[k].rel.lower()).strip("-")[:60]
        hn_ids.append(b.heavy(sources[k], parts, rng.sample(donors, 3), slug))
    # same title, different body: a reserved page given the title and heading of an original of its half
    hn_title_pairs = []
    for half in ("tune", "test"):
        bodies = [k for k in title_bodies if sources[k].half == half]
        titled = [k for k in original_ids
                  if sources[k].half == half and k not in used and not sources[k].census and sources[k].nwords >= 150]
        rng.shuffle(titled)
        for a_key, b_key in zip(titled, bodies):
            a_src, b_src = sources[a_key], sources[b_key]
            tree = b_src.tree()
            set_title(tree, a_src.title)
            nodes = b_src.family.content(tree)
            h_new = next((h for n in nodes for h in n.iter("h1", "h2")), None)
            a_h = next((h for n in a_src.family.content(a_src.tree()) for h in n.iter("h1", "h2")), None)
            if h_new is not None and a_h is not None:
                a_h = copy.deepcopy(a_h)
                a_h.tail = h_new.tail
                h_new.getparent().replace(h_new, a_h)
            text = content_text(b_src.family.content(tree))
            pid = b.add(serialize(tree), b_src.url, text, "hn_title", "hn_title", f"hn_title:{a_key}", b_src, half,
                        b_src.site.family)  # fmt: skip
            hn_title_pairs.append((original_ids[a_key], pid))
    # different pages sharing a long section: pages from outside the set, each site's with one block
    # of real text from another site's page (also outside the set).  Its own random stream: the
    # rest of the set is the same with or without these pages.
    shared_rng = random.Random(seed + 1)
    outside = unsampled_articles(cache, shared_rng, N_HN_SHARED + 1)
    by_site: dict[str, list[Source]] = {}
    for src in outside:
        by_site.setdefault(src.site.name, []).append(src)
    names = sorted(by_site)
    shared_groups: list[list[int]] = []
    for i, name in enumerate(names):
        donor = by_site[names[(i + 1) % len(names)]][-1]  # the last page of the next site: never a page here
        words = donor.text.split()
        n = shared_rng.randint(*SHARED_WORDS)
        paragraphs = [" ".join(words[j : j + 60]) for j in range(0, min(n, len(words)), 60)]
        block = ('<div class="section" id="about-these-documents"><h2>About these documents</h2>'
                 + "".join(f"<p>{_esc(para)}</p>" for para in paragraphs) + "</div>")  # fmt: skip
        shared_groups.append([b.shared(src, block) for src in by_site[name][:-1][:N_HN_SHARED]])
    # empty pages: JavaScript shells
    for i, name in enumerate(("dashboard", "search", "settings", "playground")):
        html = (
            f"<!DOCTYPE html><html><head><title>Dev Digest {name}</title></head><body>"
            "<noscript>You need to enable JavaScript to run this app.</noscript><div id='root'></div>"
            "<script src='/static/js/main.js'></script></body></html>"
        )
        b.add(html.encode(), f"http://digest.test/app/{name}", "", "empty", "empty", None, None,
              ("tune", "test")[i % 2], "app")  # fmt: skip

    print(f"  {len(b.pages)} pages written ({time.perf_counter() - t0:.1f}s); computing truth", flush=True)
    truth = compute_truth(b, hn_ids, hn_title_pairs, rng, shared_groups)
    truth["info"] = dict(
        packages=versions, seed=seed, shingle=common.SHINGLE, positive_jaccard=common.POSITIVE_JACCARD,
        gray_jaccard=common.GRAY_JACCARD, empty_words=common.EMPTY_WORDS, pages=len(b.pages),
        build_seconds=round(time.perf_counter() - t0, 1), families=sorted(FAMILIES),
    )  # fmt: skip
    with open(out / "manifest.jsonl", "w") as fh:
        for p in b.pages:
            fh.write(json.dumps(p) + "\n")
    (out / "truth.json").write_text(json.dumps(truth))
    return truth


def compute_truth(b: Builder, hn_ids: list[int], hn_title_pairs: list[tuple[int, int]], rng: random.Random,
                  shared_groups: list[list[int]]) -> dict:  # fmt: skip
    pages = b.pages
    empty = [p["id"] for p in pages if p["words"] == 0]
    for pid in empty:
        pages[pid]["role"], pages[pid]["category"] = "empty", "empty"
    empty_set = set(empty)
    short = {p["id"] for p in pages if 0 < p["words"] < common.EMPTY_WORDS}
    positive: dict[tuple[int, int], str] = {}
    gray: list[list] = []
    groups: dict[str, list[int]] = {}
    for p in pages:
        g = p["group"]
        if g and not g.startswith("hn_") and p["id"] not in empty_set:
            groups.setdefault(g, []).append(p["id"])
    for g, ids in groups.items():
        kind = g.split(":")[0]
        for i, a in enumerate(ids):
            for c in ids[i + 1 :]:
                if (a in short or c in short) and common.words(b.texts[a]) != common.words(b.texts[c]):
                    continue  # short pages are duplicates only when word-for-word identical (below)
                positive[common.pair(a, c)] = kind
    # short pages: identical word sequences
    by_words: dict[tuple, list[int]] = {}
    for pid in sorted(short):
        by_words.setdefault(tuple(common.words(b.texts[pid])), []).append(pid)
    for ids in by_words.values():
        for i, a in enumerate(ids):
            for c in ids[i + 1 :]:
                positive.setdefault(common.pair(a, c), "short")
    sets = [common.shingles(t) for t in b.texts]
    for a, c, j in common.similar_pairs(sets, common.GRAY_JACCARD):
        key = common.pair(a, c)
        if key in positive or a in empty_set or c in empty_set:
            continue
        if a in short or c in short:
            gray.append([a, c, round(j, 3)])  # similar but not identical short pages: not scored
            continue
        if pages[a]["role"].startswith("hn_") or pages[c]["role"].startswith("hn_"):
            # A hard-negative page is made from a page kept out of the set; that page's natural twin
            # (an original here) is a near-duplicate of it by text, which is neither what the kind
            # tests nor a duplicate "within one site": not scored.
            gray.append([a, c, round(j, 3)])
            continue
        if j >= common.POSITIVE_JACCARD:
            positive[key] = common.similar_kind(pages[a], pages[c])
        else:
            gray.append([a, c, round(j, 3)])
    hn_title_pairs = [(a, c) for a, c in hn_title_pairs if common.pair(a, c) not in positive]
    gray_keys = {common.pair(a, c) for a, c, _ in gray}
    shared_keys = (common.pair(a, c) for ids in shared_groups for i, a in enumerate(ids) for c in ids[i + 1 :])
    hn_shared_pairs = [key for key in shared_keys if key not in positive and key not in gray_keys]
    # every positive pair's word-3-shingle Jaccard (score.py --by-jaccard: are misses at truth's line?)
    positive_jaccard = [[a, c, round(common.jaccard(sets[a], sets[c]), 3)] for a, c in sorted(positive)]
    common.set_crawl_order(pages, rng)
    identical = [list(key) for key in sorted(positive) if common.words(b.texts[key[0]]) == common.words(b.texts[key[1]])]
    return dict(
        positive=[[a, c, kind] for (a, c), kind in sorted(positive.items())],
        identical=identical,
        positive_jaccard=positive_jaccard,
        gray=sorted(gray),
        hn_template=hn_ids,
        hn_title=[list(x) for x in hn_title_pairs],
        hn_shared=[list(x) for x in hn_shared_pairs],
        empty=empty,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--cache", type=Path, default=None, help="where .deb files are kept (default OUT/debs)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--holdout", action="store_true", help="build the hold-out set (other packages and templates)")
    args = parser.parse_args(argv)
    if args.holdout:
        use_holdout()
        if args.out == DEFAULT_OUT:
            args.out = common.DEFAULT_DATA / "holdout"
    args.out.mkdir(parents=True, exist_ok=True)
    truth = build(args.out, args.cache or args.out / "debs", args.seed)
    pages = [json.loads(line) for line in (args.out / "manifest.jsonl").read_text().splitlines()]
    for half in ("tune", "test"):
        ids = {p["id"] for p in pages if p["half"] == half}
        counts: dict[str, int] = {}
        for a, c, kind in truth["positive"]:
            if a in ids and c in ids:
                counts[kind] = counts.get(kind, 0) + 1
        fams = sorted({p["family"] for p in pages if p["half"] == half})
        print(f"{half}: {len(ids)} pages, {len(fams)} families; positive pairs: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))  # fmt: skip
    print(f"pages: {truth['info']['pages']}  build: {truth['info']['build_seconds']}s")
    print(f"gray pairs: {len(truth['gray'])}  hn_template pages: {len(truth['hn_template'])}  "
          f"hn_title pairs: {len(truth['hn_title'])}  hn_shared pairs: {len(truth['hn_shared'])}  "
          f"empty pages: {len(truth['empty'])}")  # fmt: skip


if __name__ == "__main__":
    main()
