"""Build the real-web development set: saved news, blog, shop and government pages, tuning and test halves.

    python benchmarks/quality/build_realweb.py [--out benchmarks/quality/data/realweb] [--mirror DIR]

Sources: public collections of real saved web pages, each pinned to one commit (``SOURCES``) and read
from a local git snapshot of its repository (``--mirror DIR``: ``DIR/<owner>+<name>/repo`` or
``DIR/<owner>+<name>``, a bare git directory or a clone; nothing is downloaded by this script).  To get
one: ``git clone https://github.com/<owner>/<name> DIR/<owner>+<name>`` (the pinned commit must be in
it).  CI has no snapshots: the set is a benchmark, not a test (the variant logic is unit-tested on
synthetic pages, ``tests/unit/test_build_realweb.py``).  No page of these collections is in this repository.

=============================  ==========================================  ================================
collection (pinned)            pages                                       main content (truth)
=============================  ==========================================  ================================
mozilla/readability            ``test/test-pages/*/source.html`` of real   the element whose words best
                               sites (>= 20 kB)                            match ``expected.html`` (the
                                                                           checked article)
postlight/parser               ``fixtures/<domain>[--<name>].html``        the element the site's hand-
                                                                           written extractor selects
                                                                           (``content.selectors`` less
                                                                           ``content.clean``)
codelucas/newspaper            ``tests/data/html`` (+ ``text``)            best match of the expected text
geodrome/page-signal           L3S-GN1: ``original/`` (+ ``annotated/``)   best match of the assessors'
                               (a seeded sample)                           headline + full-text spans
ppke-nlpg/CleanPortalEval      ``input/`` (+ ``GoldStandard/``)            best match of the gold text
j-szulc/html-cleaning-         only its ``cleaneval-dev``,                 best match of the gold text
dataset-merged                 ``cleaneval-final`` and ``dragnet_data``    (dragnet: before its comments
                               folders (seeded samples)                    mark)
=============================  ==========================================  ================================

"Best match": the element with the highest word-multiset F1 against the collection's text, at
least ``MIN_LOCATE_F1``; a page with no such element is left out (``truth.json``'s
``info.left_out`` says why, for every page left out).

Reserved, never used here (an independent check): adbar/trafilatura's test pages,
scrapinghub/article-extraction-benchmark, any collection containing them (chatnoir-eu's
web-content-extraction-benchmark), Debian python-django-doc and postgresql-doc-*.  The merged
collection above holds none of them (CleanEval, CleanPortalEval, readability, dragnet, L3S-GN1),
and only its CleanEval and dragnet folders are read (seomoz/dragnet_data's own snapshot lacks its
HTML archive, over the snapshot's 4 MiB file limit).

A page's site is its registered domain (from the collection's URL, else ``<link rel=canonical>`` /
``og:url``, else the host most of its links go to, else the file's name); its host in the set is
``<domain>.test`` and its path the real one.  Each site has a genre (``genre_of``: news, blog, shop,
government, education, reference, forum, other).

Pages, made the way a crawler meets the web (``build_wide``'s ``Builder`` makes the variants):

* ``template``: the article in another real site's page (that site's content element emptied and the
  article put in, its headline and <title> set to the article's): a syndicated copy, 2 per source;
* ``tracking``: tracking/session query strings, a session bar, an ad, request stamps (2 per source);
* ``print``: a CMS print view, with a numbered link list (``print_links``) and without (``print_plain``);
* ``edit``: 1-1.7% and 2.3-3% of the words edited (not for pages written without spaces: CJK);
* ``natural``: pairs of original pages whose main texts have word-3-shingle Jaccard >= 0.9.

Hard negatives (``truth.json``'s ``hard_pairs``):

* ``hn_swap``: two different articles in one site's real template: a page of the site with its content
  element's article swapped for another (``DONOR_SHARE`` of the pages only give articles), beside that
  site's original page and the other swaps into it (template variants placed in it count too);
* ``hn_title``: a page's own template, <title> and headline over another article;
* ``hn_site``: different original pages of one site.

Truth: as the other sets (``common``): pages of one group are duplicates, pairs of pages with at least
``EMPTY_WORDS`` words and Jaccard >= 0.9 are duplicates ([0.5, 0.9): gray, not scored), short pages are
duplicates only when word-for-word identical, pages with no word of main content are "empty".
``texts.jsonl`` holds every page's truth main text (``{"id": .., "text": ..}``) for scoring an
extraction on its own (``extractors.py`` reads it).

Halves: every page is in the ``tune`` or ``test`` half by its site (a hash of the registered domain): all
pages of a site, their variants, and the pages placed in its template are in one half; a template
variant's and a swap's other site is taken from the same half.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import lxml.html
from lxml import etree

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_wide  # noqa: E402
import common  # noqa: E402
from build_set import drop_headerlinks, set_title  # noqa: E402

DEFAULT_OUT = common.DEFAULT_DATA / "realweb"
#: Where the snapshots are looked for: ``--mirror DIR``, else ``$SIMHASH_MIRROR``, else ``benchmarks/quality/mirror``
#: (ignored by git, like the built sets).
DEFAULT_MIRROR = Path(os.environ.get("SIMHASH_MIRROR") or Path(__file__).resolve().parent / "mirror")

#: Pinned snapshots: repository -> commit (the set is the same on every machine that has them).
SOURCES = {
    "mozilla/readability": "ab4027a8b37669745016869a37a504727992b2ba",
    "postlight/parser": "e8ba7ece291efa4d915d50dd4deeec17d54359f2",
    "codelucas/newspaper": "1618b547f31c2d1fd19ae3b6afd8f7542dd02074",
    "geodrome/page-signal": "186d8153b3d111f84865ddc180600a9cbe35ac7f",
    "ppke-nlpg/CleanPortalEval": "517726d64d8ded8846bf27ae2808853b1cd0ffe8",
    "j-szulc/html-cleaning-dataset-merged": "46e01a04b47051838a228bf23631430b2c9de375",
}
#: At most this many pages of a collection are read (a seeded sample of its files), by collection part.
MAX_PAGES = {"l3s-gn1": 160, "cleaneval": 160, "dragnet": 160}
RESERVED = re.compile(
    r"trafilatura|article-extraction-benchmark|web-content-extraction-benchmark|python-django-doc|postgresql-doc",
    re.I,
)
assert not any(RESERVED.search(s) for s in SOURCES)

#: readability test pages smaller than this are synthetic unit cases, not saved pages.
MIN_SOURCE_BYTES = 20_000
#: A located article must match ``expected.html`` this well (word-multiset F1).
MIN_LOCATE_F1 = 0.8
#: Gold texts shorter than this are left out (newspaper's test texts are snippets for some pages).
MIN_GOLD_WORDS = 80
#: Pages whose main text has fewer words are not made into variants (they stay as originals).
MIN_VARIANT_WORDS = 80
#: Share of the usable pages kept out of the set as originals, to give articles for the hard negatives.
DONOR_SHARE = 0.2
KINDS = ("template", "tracking", "print", "edit")

#: Two-level public suffixes seen in the collections (the registered domain is one label more).
_SUFFIX2 = {"co.uk", "co.jp", "ne.jp", "ad.jp", "go.jp", "or.jp", "ac.jp", "com.br", "com.ar", "com.au", "co.in",
            "org.uk", "gov.uk", "ac.uk", "com.cn", "com.tw", "gov.au", "edu.au", "org.au", "net.au", "co.nz",
            "co.za", "gc.ca", "com.mx", "com.sg", "co.kr",
            # blog platforms: every subdomain is a site of its own
            "blogspot.com", "wordpress.com", "typepad.com", "livejournal.com", "tumblr.com"}  # fmt: skip
_US_STATE = re.compile(r"^[a-z]{2}\.us$")

#: Genre of a site (registered domain) when its address does not say (``genre_of``).
GENRES = {
    # government and public bodies
    "clinicaltrials.gov": "government", "archives.gov": "government", "ipa.go.jp": "government",
    "jvn.jp": "government", "gruene.de": "government", "ietf.org": "government", "aclu.org": "government",
    "jnsa.org": "government", "nih.gov": "government", "whitehouse.gov": "government",
    # shops and product pages
    "elecom.co.jp": "shop", "sanwa.co.jp": "shop", "bookwalker.jp": "shop", "fortinet.com": "shop",
    "otrs.com": "shop",
    # blogs (personal, company, platform)
    "daringfireball.net": "blog", "blogspot.com": "blog", "wordpress.com": "blog", "medium.com": "blog",
    "tumblr.com": "blog", "ma.ttias.be": "blog", "postlight.com": "blog", "iij.ad.jp": "blog",
    "takagi-hiromitsu.jp": "blog", "thoughtcatalog.com": "blog", "dropbox.com": "blog", "gitlab.com": "blog",
    "v8.dev": "blog", "mozilla.org": "blog", "phpspot.org": "blog", "moongift.jp": "blog", "lifehacker.com": "blog",
    "simplyfound.com": "blog", "topicseed.com": "blog", "spiceworks.com": "blog", "ebb.org": "blog",
    "royalroad.com": "blog", "archiveofourown.org": "blog", "pixnet.net": "blog", "blogger.com": "blog",
    "sciencefly.com": "blog", "publickey1.jp": "blog", "linkedin.com": "blog", "hellogiggles.com": "blog",
    "apartmenttherapy.com": "blog", "thepennyhoarder.com": "blog", "mercurial-scm.org": "blog",
    # reference works, wikis, code hosting, forums
    "wikipedia.org": "reference", "wikia.com": "reference", "fandom.com": "reference", "github.com": "reference",
    "google.com": "reference", "sre.google": "reference", "pastebin.com": "reference", "lwn.net": "reference",
    "ehow.com": "reference", "webmd.com": "reference", "medicalnewstoday.com": "reference",
    "genius.com": "reference", "biorxiv.org": "reference", "infoq.com": "reference",
    "reddit.com": "forum", "twitter.com": "forum", "youtube.com": "forum",
}  # fmt: skip

_GOV = re.compile(r"(^|\.)(gov|mil|gouv|gob|govt|gc\.ca|go\.jp|europa\.eu|un\.org|[a-z]{2}\.us)$")
_BLOG = re.compile(r"blog|typepad|wordpress|livejournal|tumblr|substack", re.I)
_SHOP = re.compile(r"/(shop|store|products?|item|catalog|cart)/", re.I)
#: Genre of the pages of a collection whose site's address says nothing (CleanEval: any kind of page).
DEFAULT_GENRE = {"cleaneval": "other"}


def genre_of(domain: str, url: str, tree: etree._Element, part: str) -> str:
    """news, blog, shop, government, education, reference, forum or other."""
    if domain in GENRES:
        return GENRES[domain]
    host = urlsplit(url).hostname or ""
    if _GOV.search(domain):
        return "government"
    if domain.endswith((".edu", ".ac.uk", ".ac.jp", ".edu.au")):
        return "education"
    if _SHOP.search(urlsplit(url).path) or "product" in " ".join(tree.xpath("//meta[@property='og:type']/@content")).lower():
        return "shop"
    if _BLOG.search(host) or "/blog" in urlsplit(url).path.lower():
        return "blog"
    return DEFAULT_GENRE.get(part, "news")


_WS = re.compile(r"\s+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


# --------------------------------------------------------------------------- snapshots


def git_dir(mirror: Path, repo: str) -> Path:
    """The git directory of ``repo``'s snapshot under ``mirror``; a clear error when it is absent."""
    base = mirror / repo.replace("/", "+")
    for cand in (base / "repo", base, base / ".git"):
        if (cand / "HEAD").exists() or (cand / "objects").exists():
            return cand
    raise SystemExit(
        f"no snapshot of {repo} under {mirror} (looked for {base}/repo, {base}): get one with\n"
        f"  git clone https://github.com/{repo} {base}\n"
        f"(it must hold commit {SOURCES[repo]}), or pass --mirror DIR"
    )


class Snapshot:
    """Files of one pinned commit of a repository's git snapshot."""

    def __init__(self, mirror: Path, repo: str) -> None:
        self.repo, self.commit, self.git = repo, SOURCES[repo], git_dir(mirror, repo)
        ok = subprocess.run(["git", "--git-dir", str(self.git), "cat-file", "-e", f"{self.commit}^{{commit}}"],
                            capture_output=True)  # fmt: skip
        if ok.returncode != 0:
            raise SystemExit(f"{self.git}: commit {self.commit} of {repo} is not in this snapshot (fetch it)")

    def ls(self, path: str) -> list[tuple[str, int]]:
        """(path, size) of the files under ``path`` (recursive)."""
        out = subprocess.run(["git", "--git-dir", str(self.git), "ls-tree", "-r", "-l", self.commit, "--", path],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        rows = []
        for line in out.splitlines():
            meta, name = line.split("\t", 1)
            size = meta.split()[3]
            rows.append((name, int(size) if size.isdigit() else -1))
        return rows

    def read(self, path: str) -> bytes | None:
        """The file's bytes at the pinned commit, or None (one ``git cat-file --batch`` serves every read)."""
        if getattr(self, "_batch", None) is None:
            self._batch = subprocess.Popen(["git", "--git-dir", str(self.git), "cat-file", "--batch"],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
        batch = self._batch
        batch.stdin.write(f"{self.commit}:{path}\n".encode())
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            return None  # "<name> missing" (or not a file)
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)  # the newline after the content
        return data

    def close(self) -> None:
        if getattr(self, "_batch", None) is not None:
            self._batch.stdin.close()
            self._batch.wait()
            self._batch.stdout.close()
            self._batch = None


# --------------------------------------------------------------------------- pages


_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w:.-]+)""", re.I)


def decode(raw: bytes) -> str:
    """The saved page as text: its BOM, else its declared charset, else UTF-8, else windows-1252."""
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", "replace")
    m = _CHARSET.search(raw[:8192])
    tried = [m.group(1).decode("ascii", "ignore").lower()] if m else []
    for codec in tried + ["utf-8", "cp1252"]:
        codec = {"iso-8859-1": "cp1252", "latin1": "cp1252", "unset": "utf-8", "utf8": "utf-8"}.get(codec, codec)
        try:
            return raw.decode(codec)
        except (UnicodeDecodeError, LookupError):
            continue
    return raw.decode("utf-8", "replace")


#: Hosts whose links say nothing about which site a page is on.
_THIRD_PARTY = re.compile(r"(^|\.)(facebook|twitter|google|googleapis|doubleclick|addthis|w3|youtube|digg|"
                          r"delicious|stumbleupon|reddit|linkedin|feedburner|adobe|macromedia|gstatic|yahoo|"
                          r"quantserve|scorecardresearch|wordpress|blogger|sharethis|technorati)\.", re.I)  # fmt: skip


def guess_host(tree: etree._Element) -> str | None:
    """The registered domain most of the page's absolute links point to (a saved page with no address)."""
    counts: collections.Counter = collections.Counter()
    for href in tree.xpath("//a/@href | //link/@href | //img/@src | //form/@action"):
        host = urlsplit(href.strip()).hostname if href.strip().startswith(("http://", "https://")) else None
        if host and not _THIRD_PARTY.search(host + "."):
            counts[registered_domain(host)] += 1
    if counts:
        domain, n = counts.most_common(1)[0]
        if n >= 3:
            return domain
    return None


def parse(raw: bytes) -> lxml.html.HtmlElement:
    """The page's tree, read as UTF-8 (what the collections hold) whatever its <meta charset> says."""
    return lxml.html.document_fromstring(raw, parser=lxml.html.HTMLParser(encoding="utf-8", remove_comments=True))


def registered_domain(host: str) -> str:
    labels = host.lower().strip(".").split(".")
    if labels and labels[0] == "www":
        labels = labels[1:]
    n = 3 if ".".join(labels[-2:]) in _SUFFIX2 or _US_STATE.match(".".join(labels[-2:])) else 2
    return ".".join(labels[-n:])


def page_url(tree: lxml.html.HtmlElement) -> str | None:
    """The page's own address, from its canonical link or og:url."""
    for xpath in ("//link[@rel='canonical']/@href", "//meta[@property='og:url']/@content",
                  "//meta[@name='og:url']/@content", "//meta[@name='twitter:url']/@content"):  # fmt: skip
        for href in tree.xpath(xpath):
            href = href.strip()
            if href.startswith("//"):
                href = "https:" + href
            if href.startswith("http") and urlsplit(href).hostname:
                return href
    return None


def words_f1(a: collections.Counter, b: collections.Counter) -> float:
    common_n = sum((a & b).values())
    if not common_n:
        return 0.0
    p, r = common_n / sum(a.values()), common_n / sum(b.values())
    return 2 * p * r / (p + r)


_NOT_TEXT = frozenset(("script", "style", "noscript", "template"))


def locate(tree: etree._Element, truth: str) -> tuple[etree._Element | None, float]:
    """The element whose words best match ``truth`` (word-multiset F1), and that F1 (the smaller element on a tie).

    One walk puts the page's words in a stream, each element owning a slice of it, so only the
    elements of a fitting size (half to three times the truth's words) are compared.
    """
    want = collections.Counter(common.words(truth))
    total = sum(want.values())
    body = tree.find("body")
    if not total or body is None:
        return None, 0.0
    stream: list[str] = []
    spans: list[tuple[etree._Element, int, int]] = []
    starts: dict[etree._Element, int] = {}
    hidden = 0
    for event, el in etree.iterwalk(body, events=("start", "end")):
        if not isinstance(el.tag, str):
            if event == "end" and el.tail and not hidden:
                stream.extend(common.words(el.tail))
            continue
        if event == "start":
            starts[el] = len(stream)
            if el.tag in _NOT_TEXT:
                hidden += 1
            elif el.text and not hidden:
                stream.extend(common.words(el.text))
        else:
            if el.tag in _NOT_TEXT:
                hidden -= 1
            spans.append((el, starts.pop(el), len(stream)))
            if el.tail and not hidden and el is not body:
                stream.extend(common.words(el.tail))
    best, best_f1 = None, 0.0
    for el, a, c in spans:  # children before their parents: a parent must do strictly better
        if not 0.5 * total <= c - a <= 3 * total or el.tag in ("a", "span", "p", "li", "img"):
            continue
        f1 = words_f1(collections.Counter(stream[a:c]), want)
        if f1 > best_f1:
            best, best_f1 = el, f1
    return best, best_f1


def index_path(node: etree._Element) -> str:
    """The child indexes from the root to ``node`` ("0/1/4"): found again in the same page parsed again."""
    steps = []
    while node.getparent() is not None:
        parent = node.getparent()
        steps.append(str(list(parent).index(node)))
        node = parent
    return "/".join(reversed(steps))


def by_index_path(tree: etree._Element, path: str) -> etree._Element | None:
    node = tree
    for step in path.split("/") if path else ():
        children = list(node)
        if int(step) >= len(children):
            return None
        node = children[int(step)]
    return node


def js_strings(text: str) -> list:
    """The string literals of a JavaScript array literal, nested arrays kept (``['a', ['b', 'c']]``)."""
    out: list = []
    stack = [out]
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "[":
            new: list = []
            stack[-1].append(new)
            stack.append(new)
        elif ch == "]":
            stack.pop()
            if len(stack) == 1:
                break
        elif ch in "'\"`":
            j = i + 1
            buf = []
            while j < len(text) and text[j] != ch:
                if text[j] == "\\":
                    j += 1
                buf.append(text[j])
                j += 1
            stack[-1].append("".join(buf))
            i = j
        elif ch == "/" and text[i : i + 2] == "//":
            i = text.find("\n", i)
            if i < 0:
                break
        i += 1
    return out[0] if out and isinstance(out[0], list) else out


def mercury_content_rule(js: str) -> tuple[list, list[str]]:
    """(selectors, clean) of an extractor's ``content`` block."""
    m = re.search(r"\n  content: \{(.*?)\n  \},", js, re.S)
    if not m:
        return [], []
    block = m.group(1)
    rules = []
    for key in ("selectors", "clean"):
        k = re.search(rf"\b{key}:\s*\[", block)
        rules.append(js_strings(block[k.end() - 1 :]) if k else [])
    return rules[0], [c for c in rules[1] if isinstance(c, str)]


def select_content(tree: etree._Element, selectors: list, clean: list[str]) -> list[etree._Element]:
    """The nodes the first matching selector picks (a list entry: every selector of it must match)."""
    from lxml.cssselect import CSSSelector  # noqa: PLC0415

    for sel in selectors:
        group = sel if isinstance(sel, list) else [sel]
        if len(group) == 2 and isinstance(sel, list) and not re.search(r"[.#\[\s>:]", group[1]):
            continue  # [selector, attribute]: not a content rule
        try:
            found = [CSSSelector(s)(tree) for s in group]
        except Exception:  # noqa: BLE001 - a selector cssselect cannot read (jQuery extensions)
            continue
        if all(found):
            nodes = [f[0] for f in found]
            for node in nodes:
                for c in clean:
                    try:
                        for el in CSSSelector(c)(node):
                            if el is not node and el.getparent() is not None:
                                el.drop_tree()
                    except Exception:  # noqa: BLE001
                        continue
            return nodes
    return []


@dataclass(frozen=True)
class RealSite:
    """A site of the set, with the fields ``build_wide.Builder`` reads of a ``Site``."""

    name: str  # registered domain
    host: str
    genre: str
    prefix: str = "/"

    @property
    def family(self) -> str:
        return self.name

    @property
    def project(self) -> str:
        return self.name.split(".")[0]


@dataclass
class RealSource(build_wide.Source):
    """A saved page: its (cleaned, UTF-8) HTML and the XPaths of its main-content elements."""

    paths: tuple[str, ...] = ()
    origin: str = ""  # "<repo>:<path>"
    path: str = "/"  # the URL path it is served at
    cjk: bool = False
    locate_f1: float = 1.0

    @property
    def family(self) -> build_wide.Family:  # type: ignore[override]
        paths = self.paths

        def content(tree: etree._Element) -> list[etree._Element]:
            return [n for n in (by_index_path(tree, p) for p in paths) if n is not None]

        return build_wide.Family(self.site.family, content, len(paths) == 1)

    @property
    def url(self) -> str:
        return f"http://{self.site.host}{self.path}"

    @property
    def half(self) -> str:
        return half_of(self.site.name)

    def tree(self) -> lxml.html.HtmlElement:
        return parse(self.raw)

    @property
    def headline(self) -> str:
        return re.split(r" [—|\-–·:] | \| ", self.title)[0].strip() or self.title


def half_of(site: str) -> str:
    """``tune`` or ``test``: a stable hash of the site's registered domain."""
    return "test" if hashlib.sha256(f"realweb:{site}".encode()).digest()[0] & 1 else "tune"


def make_source(raw: bytes, key: str, origin: str, fallback_host: str, nodes_of, sites: dict,
                url: str | None = None) -> tuple[RealSource | None, str]:  # fmt: skip
    """A ``RealSource`` of the saved page ``raw`` (``nodes_of(tree)`` -> (content nodes, F1)), or (None, why not).

    Its address: ``url``, else its canonical link, else (no path known) the host most of its links go to,
    else ``fallback_host``.
    """
    text = re.sub(r"^\s*<\?xml[^>]*>", "", decode(raw))
    try:
        tree = parse(text.encode("utf-8"))
    except (etree.ParserError, ValueError):
        return None, "unparsable"
    for el in tree.xpath("//meta[@charset] | //meta[translate(@http-equiv,'CONTENT-TYPE','content-type')='content-type']"):
        el.drop_tree()
    head = tree.find("head")
    if head is None:
        head = etree.Element("head")
        tree.insert(0, head)
    head.insert(0, etree.Element("meta", charset="utf-8"))
    nodes, f1 = nodes_of(tree)
    if not nodes:
        return None, "no main content found"
    for node in nodes:
        drop_headerlinks(node)
    real = url or page_url(tree)
    parts = urlsplit(real) if real else None
    host = parts.hostname if parts and parts.hostname else (guess_host(tree) or fallback_host)
    domain = registered_domain(host)
    part = key.split(":")[0]
    site = sites.setdefault(domain, RealSite(domain, f"{domain}.test", genre_of(domain, real or f"http://{host}/", tree, part)))
    path = parts.path if parts and parts.path not in ("", "/") else "/" + key.split(":")[-1].strip("/")
    path = re.sub(r"[^\w./~%+-]", "-", path)
    raw_out = build_wide.serialize(tree)
    tree = parse(raw_out)  # the paths below are those of the page as stored
    nodes, _ = nodes_of(tree)
    if not nodes:
        return None, "main content lost when re-read"
    paths = tuple(index_path(n) for n in nodes)
    text = build_wide.content_text(nodes)
    title = _WS.sub(" ", tree.findtext(".//title") or "").strip()
    cjk = len(_CJK.findall(text)) > 0.2 * max(1, len(text))
    src = RealSource(key, site, key, raw_out, title, text, len(common.words(text)), paths=paths, origin=origin,
                     path=path, cjk=cjk, locate_f1=round(f1, 3))  # fmt: skip
    return src, ""


#: Sites of readability test pages saved without a canonical address (from the links and titles they carry).
READABILITY_HOSTS = {
    "archive-of-our-own": "archiveofourown.org", "clean-links": "vcu.edu", "google-sre-book-1": "sre.google",
    "hukumusume": "hukumusume.com", "ietf-1": "ietf.org", "keep-tabular-data": "factorio.com", "lwn-1": "lwn.net",
    "mathjax": "mathjax.example", "mercurial": "mercurial-scm.org", "qq": "qq.com", "webmd-1": "webmd.com",
    "webmd-2": "webmd.com", "wikipedia-4": "wikipedia.org", "youth": "youth.cn",
}  # fmt: skip


def load_readability(snap: Snapshot, sites: dict, skipped: dict) -> list[RealSource]:
    out = []
    names = sorted({p.split("/")[2] for p, _ in snap.ls("test/test-pages")})
    for name in names:
        base = f"test/test-pages/{name}"
        raw = snap.read(f"{base}/source.html")
        expected = snap.read(f"{base}/expected.html")
        if raw is None or expected is None or len(raw) < MIN_SOURCE_BYTES:
            continue
        truth = build_wide.build_set.node_text(parse(expected))

        def nodes_of(tree, truth=truth):
            node, f1 = locate(tree, truth)
            return ([node] if node is not None and f1 >= MIN_LOCATE_F1 else []), f1

        host = READABILITY_HOSTS.get(name, f"{name}.example")
        src, why = make_source(raw, f"readability:{name}", f"{snap.repo}:{base}/source.html", host,
                               nodes_of, sites)  # fmt: skip
        if src is None:
            skipped[f"readability:{name}"] = why
        else:
            out.append(src)
    return out


def load_mercury(snap: Snapshot, sites: dict, skipped: dict) -> list[RealSource]:
    out = []
    for path, size in snap.ls("fixtures"):
        m = re.fullmatch(r"fixtures/([^/]+?)(--[\w-]+)?\.html", path)
        if not m:
            continue
        domain = m.group(1)
        key = f"mercury:{domain}{m.group(2) or ''}"
        if size > 1_000_000:
            skipped[key] = "over 1 MB"
            continue
        js = snap.read(f"src/extractors/custom/{domain}/index.js")
        if js is None:
            skipped[key] = "no custom extractor"
            continue
        selectors, clean = mercury_content_rule(js.decode("utf-8", "replace"))
        raw = snap.read(path)

        def nodes_of(tree, selectors=selectors, clean=clean):
            return select_content(tree, selectors, clean), 1.0

        src, why = make_source(raw, key, f"{snap.repo}:{path}", domain, nodes_of, sites)
        if src is None:
            skipped[key] = why
        else:
            out.append(src)
    return out


def gold_nodes(gold: str):
    """A ``nodes_of`` for a page whose article text is ``gold``: the element that best matches it."""

    def nodes_of(tree):
        node, f1 = locate(tree, gold)
        return ([node] if node is not None and f1 >= MIN_LOCATE_F1 else []), f1

    return nodes_of


def _sample(names: list[str], part: str, seed: int = 1) -> list[str]:
    names = sorted(names)
    cap = MAX_PAGES.get(part)
    if cap is None or len(names) <= cap:
        return names
    return sorted(random.Random(f"{part}:{seed}").sample(names, cap))


def _gold_pages(snap: Snapshot, part: str, pages: list[tuple[str, str, str, str | None, str]], sites: dict,
                skipped: dict) -> list[RealSource]:  # fmt: skip
    """Sources of ``(key, html path, gold text, url or None, fallback host)`` rows."""
    out = []
    for key, path, gold, url, fallback in pages:
        raw = snap.read(path)
        if raw is None:
            skipped[key] = "file missing"
            continue
        if len(common.words(gold)) < MIN_GOLD_WORDS:
            skipped[key] = f"gold text under {MIN_GOLD_WORDS} words (a snippet, not the article)"
            continue
        src, why = make_source(raw, key, f"{snap.repo}:{path}", fallback, gold_nodes(gold), sites, url)
        if src is None:
            skipped[key] = why
        else:
            out.append(src)
    return out


def _text(raw: bytes | None) -> str:
    return decode(raw) if raw is not None else ""


_CLEANEVAL_MARK = re.compile(r"^\s*<(p|h|l)>\s*", re.M)


def cleaneval_gold(text: str) -> tuple[str, str | None]:
    """(text, URL) of a CleanEval-format gold standard file (``URL: ...`` line, ``<p>``/``<h>``/``<l>`` marks)."""
    url = None
    m = re.match(r"\s*URL:\s*(\S+)", text)
    if m:
        url, text = m.group(1), text[m.end() :]
    return _CLEANEVAL_MARK.sub("", text), url


def cleaneval_input(raw: bytes) -> tuple[bytes, str | None]:
    """The HTML of a CleanEval-format input file (without its ``<text id=URL ...>`` wrapper) and its URL."""
    m = re.match(rb"\s*<text id=\"([^\"]*)\"[^>]*>", raw)
    if not m:
        return raw, None
    return raw[m.end() :].rsplit(b"</text>", 1)[0], m.group(1).decode("utf-8", "replace")


def load_newspaper(snap: Snapshot, sites: dict, skipped: dict) -> list[RealSource]:
    rows = []
    for path, _ in snap.ls("tests/data/html"):
        m = re.fullmatch(r"tests/data/html/(.+?)(\d*)\.html", path)
        if not m:
            continue
        stem = f"{m.group(1)}{m.group(2)}"
        gold = _text(snap.read(f"tests/data/text/{stem}.txt") or snap.read(f"tests/data/text/{stem.replace('_article', '')}.txt"))
        rows.append((f"newspaper:{m.group(1)}{m.group(2)}", path, gold, None, m.group(1)))
    return _gold_pages(snap, "newspaper", rows, sites, skipped)


def load_l3s(snap: Snapshot, sites: dict, skipped: dict) -> list[RealSource]:
    base = "L3S-GN1-20100130203947-00001"
    names = [p.rsplit("/", 1)[1] for p, _ in snap.ls(f"{base}/original") if p.endswith(".html")]
    rows = []
    for name in _sample(names, "l3s-gn1"):
        annotated = snap.read(f"{base}/annotated/{name}")
        if annotated is None:
            continue
        tree = parse(decode(annotated).encode("utf-8"))
        # headline and full text (x-nc-sel1, x-nc-sel2), as the assessors marked them
        parts = [" ".join(el.text_content().split()) for el in tree.xpath("//span[@class='x-nc-sel1' or @class='x-nc-sel2']")]
        rows.append((f"l3s-gn1:{name[:8]}", f"{base}/original/{name}", " ".join(parts), None, f"{name[:8]}.l3s"))
    return _gold_pages(snap, "l3s-gn1", rows, sites, skipped)


class _Unwrapped(Snapshot):
    """A snapshot whose pages are CleanEval input files: read() gives the HTML inside the wrapper."""

    def __init__(self, snap: Snapshot) -> None:
        self.__dict__.update(snap.__dict__)
        self.urls: dict[str, str | None] = {}

    def read(self, path: str) -> bytes | None:
        raw = super().read(path)
        if raw is None:
            return None
        html, url = cleaneval_input(raw)
        self.urls[path] = url
        return html


def _cleaneval_dirs(snap: Snapshot, sites: dict, skipped: dict, dirs: list[str], part: str) -> list[RealSource]:
    unwrapped = _Unwrapped(snap)
    names = [(d, p.rsplit("/", 1)[1]) for d in dirs for p, _ in snap.ls(f"{d}/input") if p.endswith(".html")]
    keyed = {f"{d}/{n}": (d, n) for d, n in names}
    rows = []
    for k in _sample(list(keyed), part):
        d, n = keyed[k]
        gold, url = cleaneval_gold(_text(snap.read(f"{d}/GoldStandard/{n[:-5]}.txt")))
        if part == "dragnet":
            gold = gold.split("!@#$%^&*()  COMMENTS")[0]
        if url is None:
            raw = snap.read(f"{d}/input/{n}")
            url = cleaneval_input(raw)[1] if raw else None
        label = d.split("/")[-1].replace("-master", "")
        rows.append((f"{part}:{label}/{n[:-5]}", f"{d}/input/{n}", gold, url or None, f"{label}-{n[:-5]}.example"))
    return _gold_pages(unwrapped, part, rows, sites, skipped)


def load_cleanportaleval(snap: Snapshot, sites: dict, skipped: dict) -> list[RealSource]:
    unwrapped = _Unwrapped(snap)
    rows = []
    for path, _ in snap.ls("input"):
        name = path.rsplit("/", 1)[1]
        stem = name.rsplit(".", 1)[0]
        gold, url = cleaneval_gold(_text(snap.read(f"GoldStandard/{stem}.txt")))
        if url is None:
            raw = snap.read(path)
            url = cleaneval_input(raw)[1] if raw else None
        rows.append((f"cleanportaleval:{stem}", path, gold, url, stem.split("_")[0]))
    return _gold_pages(unwrapped, "cleanportaleval", rows, sites, skipped)


def load_merged(snap: Snapshot, sites: dict, skipped: dict) -> list[RealSource]:
    """CleanEval (dev and final) and the dragnet data, from the merged collection (only those parts of it)."""
    return (_cleaneval_dirs(snap, sites, skipped, ["cleaneval-dev", "cleaneval-final"], "cleaneval")
            + _cleaneval_dirs(snap, sites, skipped, ["dragnet_data"], "dragnet"))  # fmt: skip


LOADERS = {
    "mozilla/readability": load_readability,
    "postlight/parser": load_mercury,
    "codelucas/newspaper": load_newspaper,
    "geodrome/page-signal": load_l3s,
    "ppke-nlpg/CleanPortalEval": load_cleanportaleval,
    "j-szulc/html-cleaning-dataset-merged": load_merged,
}


def load_sources(mirror: Path) -> tuple[dict[str, RealSource], dict[str, str]]:
    sites: dict[str, RealSite] = {}
    skipped: dict[str, str] = {}
    found: list[RealSource] = []
    for repo in SOURCES:
        snap = Snapshot(mirror, repo)
        try:
            found.extend(LOADERS[repo](snap, sites, skipped))
        finally:
            snap.close()
    sources: dict[str, RealSource] = {}
    paths: set[tuple[str, str]] = set()
    for src in found:
        if (src.site.host, src.path) in paths:  # two saves of one address: serve the second under its key
            src.path = "/" + src.key.replace(":", "/")
        paths.add((src.site.host, src.path))
        sources[src.key] = src
    return sources, skipped


# --------------------------------------------------------------------------- the builder


class RealBuilder(build_wide.Builder):
    """``build_wide.Builder`` with the real-web moves: an article put in another real page's template."""

    def transplant(self, article_src: RealSource, chrome: RealSource, kind: str, role: str, group: str | None,
                   url: str, keep_title: bool = False) -> int:  # fmt: skip
        """``chrome``'s page with its content element holding ``article_src``'s article.

        The headline (the first <h1> outside the content) and <title> become the article's, unless
        ``keep_title`` (then the page keeps the chrome's own: the same title over another article).
        """
        tree = chrome.tree()
        nodes = chrome.family.content(tree)
        target = nodes[0]
        for extra in nodes[1:]:
            extra.drop_tree()
        tail = target.tail
        for child in list(target):
            target.remove(child)
        target.text = None
        article = article_src.article()
        for child in list(article):
            target.append(child)
        target.text = article.text
        target.tail = tail
        if not keep_title:
            h1 = next((h for h in tree.iter("h1") if not any(h is d for d in target.iterdescendants())), None)
            if h1 is not None:
                h1_tail = h1.tail
                for child in list(h1):
                    h1.remove(child)
                h1.text = article_src.headline
                h1.tail = h1_tail
            set_title(tree, f"{article_src.headline} | {chrome.site.name}")
        text = build_wide.content_text(chrome.family.content(tree))
        html = build_wide.serialize(tree)
        if kind == "template":
            return self.variant(html, url, article_src, kind, group, text, f"template:{chrome.site.name}")
        # a hard negative: the page is the chrome site's (its half and family)
        return self.add(html, url, text, kind, role, group, article_src, chrome.half, chrome.site.family,
                        f"{kind}:{article_src.site.name}")  # fmt: skip

    def add(self, html: bytes, url: str, text: str, kind: str, role: str, group: str | None, src, half: str,
            family: str, variant: str = "") -> int:  # fmt: skip
        pid = super().add(html, url, text, kind, role, group, src, half, family, variant)
        site = self.site_of(url)
        self.pages[pid]["genre"] = site.genre if site else ""
        return pid

    def site_of(self, url: str) -> RealSite | None:
        host = urlsplit(url).hostname or ""
        return next((s.site for s in self.sources.values() if s.site.host == host), None)


def slug(text: str, n: int = 50) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:n] or "page"


def build(out: Path, mirror: Path, seed: int) -> dict:
    t0 = time.perf_counter()
    common.CJK_CHARACTERS = True  # Japanese and Chinese pages: a word per character (truth's words, shingles)
    sources, skipped = load_sources(mirror)
    print(f"  {len(sources)} pages read, {len(skipped)} left out ({time.perf_counter() - t0:.1f}s)", flush=True)
    if (out / "pages").exists():
        shutil.rmtree(out / "pages")
    b = RealBuilder(sources, out, seed)
    truth = assemble(b, sources, seed)
    truth["info"] = dict(
        sources=SOURCES, seed=seed, shingle=common.SHINGLE, positive_jaccard=common.POSITIVE_JACCARD,
        gray_jaccard=common.GRAY_JACCARD, empty_words=common.EMPTY_WORDS, pages=len(b.pages),
        build_seconds=round(time.perf_counter() - t0, 1), sites=len({s.site.name for s in sources.values()}),
        cjk_characters=True, left_out=skipped, genres=dict(collections.Counter(s.site.genre for s in sources.values())),
    )  # fmt: skip
    write(out, b, truth)
    return truth


def assemble(b: RealBuilder, sources: dict[str, RealSource], seed: int) -> dict:
    """Every page of the set, written by ``b``; the truth (``compute_truth`` plus the hard-negative pairs)."""
    rng = b.rng
    keys = sorted(sources)
    # donors: pages whose articles only go into hard negatives (never originals here)
    usable = [k for k in keys if sources[k].nwords >= MIN_VARIANT_WORDS]
    shuffled = usable[:]
    rng.shuffle(shuffled)
    donors = set(shuffled[: round(DONOR_SHARE * len(usable))])
    b.donor_keys = sorted(donors) or usable
    for k in b.donor_keys:
        ws = sources[k].text.split()
        b.donor_words.extend(w for w in ws[50:250] if w.isalpha())
        b.donor_sentences.extend(re.findall(r"[A-Z][^.?!]{40,160}[.?!]", sources[k].text[:3000]))
    if not b.donor_words:
        b.donor_words = ["the", "page", "new"]
    if not b.donor_sentences:
        b.donor_sentences = ["This sentence was added to the page by an editor later on."]
    original_ids = {k: b.add_original(sources[k]) for k in keys if k not in donors}
    # one kind of variant per page (round robin over a seeded order, per half)
    chromes = {h: [k for k in original_ids if sources[k].half == h and len(sources[k].paths) == 1
                   and sources[k].nwords >= MIN_VARIANT_WORDS] for h in ("tune", "test")}  # fmt: skip
    swap_groups: dict[str, list[int]] = {}  # chrome key -> pages in its template with different articles
    for half in ("tune", "test"):
        pool = [k for k in original_ids if sources[k].half == half and sources[k].nwords >= MIN_VARIANT_WORDS]
        rng.shuffle(pool)
        turn = 0
        for k in pool:
            src = sources[k]
            kinds = [kd for kd in KINDS if not (kd == "edit" and src.cjk)]
            kind = kinds[turn % len(kinds)]
            turn += 1  # noqa: SIM113 - counts across all pools, not this loop's
            group = f"{kind}:{k}"
            b.pages[original_ids[k]]["group"] = group
            if kind == "template":
                others = [c for c in chromes[half] if sources[c].site.name != src.site.name]
                for chrome_key in rng.sample(others, min(2, len(others))):
                    chrome = sources[chrome_key]
                    url = f"http://{chrome.site.host}/syndicated/{src.site.project}/{slug(src.headline)}-{len(b.pages)}"
                    pid = b.transplant(src, chrome, "template", "variant", group, url)
                    swap_groups.setdefault(chrome_key, [original_ids[chrome_key]]).append(pid)
            elif kind == "tracking":
                b.tracking(src, 2, group)
            elif kind == "print":
                b.printable(src, group, links=True)
                b.printable(src, group, links=False)
                for p in b.pages[-2:]:
                    p["category"] = "print"  # one kind: print views (the variant says which)
            else:
                b.edited(src, rng.uniform(0.01, 0.017), group, 2)
                b.edited(src, rng.uniform(0.023, 0.03), group, 3)
    # hard negatives: donors' articles in the templates of the set's sites, of the same half
    hn_title_pairs = []
    donor_list = sorted(donors)
    rng.shuffle(donor_list)
    for i, d in enumerate(donor_list):
        half = sources[d].half
        cands = [c for c in chromes[half] if sources[c].site.name != sources[d].site.name]
        if not cands:
            continue
        chrome = sources[cands[rng.randrange(len(cands))]]
        if i % 3 == 2:  # the chrome's own title and headline over the donor's article
            url = f"{chrome.url.split('?')[0].rstrip('/')}-{i}?page=2"
            pid = b.transplant(sources[d], chrome, "hn_title", "hn_title", f"hn_title:{chrome.key}", url, keep_title=True)
            hn_title_pairs.append((original_ids[chrome.key], pid))
        else:
            url = f"http://{chrome.site.host}/{slug(sources[d].headline)}-{i}"
            pid = b.transplant(sources[d], chrome, "hn_swap", "hn_swap", f"hn_swap:{chrome.key}", url)
            swap_groups.setdefault(chrome.key, [original_ids[chrome.key]]).append(pid)
    print(f"  {len(b.pages)} pages written; computing truth", flush=True)
    truth = build_wide.compute_truth(b, [], hn_title_pairs, rng, [])
    # two original pages of one site under different first path segments are not two releases here
    truth["positive"] = [[a, c, "natural" if kind == "release" else kind] for a, c, kind in truth["positive"]]
    positive = {common.pair(a, c) for a, c, _ in truth["positive"]}
    gray = {common.pair(a, c) for a, c, _ in truth["gray"]}

    def negatives(pairs) -> list[list[int]]:
        return sorted({common.pair(a, c) for a, c in pairs if a != c} - positive - gray)

    swap_pairs = [(a, c) for ids in swap_groups.values() for i, a in enumerate(ids) for c in ids[i + 1 :]
                  if b.pages[a]["source"] != b.pages[c]["source"]]  # fmt: skip
    by_site: dict[str, list[int]] = collections.defaultdict(list)
    for k, pid in original_ids.items():
        by_site[sources[k].site.name].append(pid)
    site_pairs = [(a, c) for ids in by_site.values() for i, a in enumerate(ids) for c in ids[i + 1 :]]
    truth["hard_pairs"] = {
        "hn_swap": [list(p) for p in negatives(swap_pairs)],
        "hn_site": [list(p) for p in negatives(site_pairs)],
    }
    return truth


def write(out: Path, b: RealBuilder, truth: dict) -> None:
    with open(out / "manifest.jsonl", "w") as fh:
        for p in b.pages:
            fh.write(json.dumps(p) + "\n")
    with open(out / "texts.jsonl", "w") as fh:
        for p, text in zip(b.pages, b.texts):
            fh.write(json.dumps({"id": p["id"], "text": text}, ensure_ascii=False) + "\n")
    (out / "truth.json").write_text(json.dumps(truth))


def summary(out: Path, truth: dict) -> str:
    pages = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    lines = []
    for half in ("tune", "test"):
        ids = {p["id"] for p in pages if p["half"] == half}
        counts = collections.Counter(kind for a, c, kind in truth["positive"] if a in ids and c in ids)
        hard = {name: sum(1 for a, c in rows if a in ids and c in ids) for name, rows in truth["hard_pairs"].items()}
        hard["hn_title"] = sum(1 for a, c in truth["hn_title"] if a in ids and c in ids)
        sites = {p["family"] for p in pages if p["half"] == half}
        genres = collections.Counter(p.get("genre", "") for p in pages if p["half"] == half and p["role"] == "original")
        lines.append(f"{half}: {len(ids)} pages, {len(sites)} sites; originals by genre {dict(sorted(genres.items()))}; "
                     f"positive pairs {dict(sorted(counts.items()))}; hard-negative pairs {hard}")  # fmt: skip
    info = truth["info"]
    lines.append(f"pages: {info['pages']}  sites: {info['sites']}  gray pairs: {len(truth['gray'])}  "
                 f"empty: {len(truth['empty'])}  left out: {len(info['left_out'])}  build: {info['build_seconds']}s")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR,
                        help="where the pinned snapshots are (DIR/<owner>+<name>[/repo]); env SIMHASH_MIRROR")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    truth = build(args.out, args.mirror, args.seed)
    print(summary(args.out, truth))


if __name__ == "__main__":
    main()
