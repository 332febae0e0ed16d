"""Build the detection-quality evaluation set from real documentation HTML.

    python benchmarks/quality/build_set.py [--out benchmarks/quality/data] [--seed 5]

Sources (real, human-written HTML from Debian packages, fetched with
``apt-get download`` at pinned versions and unpacked with ``dpkg-deb -x``; no
root needed once ``apt-get update`` has run):

* ``python3.11-doc``: the Python 3.11 documentation (Sphinx, pydoctheme);
* ``llvm-14-doc`` / ``llvm-15-doc`` and ``clang-14-doc`` / ``clang-15-doc``:
  two releases of the LLVM and Clang documentation (Sphinx, llvm-theme).

Every page of the set is one of these pages, or one of them re-served the way
the web re-serves pages (other template, query variants, print view, small
edits), or a hard negative made from them.  All text is taken from the
packages; the builder writes only markup, short fixed strings (a mirror
notice, a 404 message, the standard cookie-consent sentence) and random
tokens/timestamps.

Truth (see ``common.py``): the builder knows where it put each page's main
content and stores its word count.  Two pages are duplicates when they were
made from the same source page (one group), or when the word-3-shingle Jaccard
of their main contents is >= 0.9; pairs with Jaccard in [0.5, 0.9) are "gray"
(not scored); pages with fewer than 25 words of main content are "empty" and
every pair with them is a negative.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import lxml.html
from lxml import etree

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

# Pinned so the set is the same on every machine (Debian 12 "bookworm").
PACKAGES = {
    "python3.11-doc": "3.11.2-6+deb12u9",
    "llvm-15-doc": "1:15.0.6-4",
    "llvm-14-doc": "1:14.0.6-12",
    "clang-15-doc": "1:15.0.6-4",
    "clang-14-doc": "1:14.0.6-12",
}


@dataclass(frozen=True)
class Site:
    name: str
    package: str
    root: str
    host: str
    prefix: str
    project: str
    version: str


SITES = (
    Site("py", "python3.11-doc", "usr/share/doc/python3.11/html", "docs.python.test", "/3.11/", "python", "3.11"),
    Site("llvm15", "llvm-15-doc", "usr/share/doc/llvm-15-doc/html", "llvm.test", "/15/", "llvm", "15"),
    Site("llvm14", "llvm-14-doc", "usr/share/doc/llvm-14-doc/html", "llvm.test", "/14/", "llvm", "14"),
    Site("clang15", "clang-15-doc", "usr/share/doc/clang-15/html", "clang.test", "/15/", "clang", "15"),
    Site("clang14", "clang-14-doc", "usr/share/doc/clang-14/html", "clang.test", "/14/", "clang", "14"),
)
SITE = {s.name: s for s in SITES}

# Not articles: generated indexes (huge link lists).
_SKIP = re.compile(r"(^|/)(genindex[^/]*|py-modindex|modindex|objects\.inv)\.html$|^_")
# LLVM 15's AMDGPU/ folder holds ~800 generated operand pages, many repeated for each GPU
# generation: the set keeps those with at least this many words (natural near-duplicates).
_AMDGPU_MIN_WORDS = 40
_CONTENT = etree.XPath("//div[contains(concat(' ', normalize-space(@class), ' '), ' body ')]")
_NOT_TEXT = ("script", "style", "noscript", "template")

# How many source pages each constructed category uses (disjoint sources).
N_TEMPLATE = 40
N_TRACKING = 30
N_PRINT = 30
N_EDIT = 30
N_HN_SHORT = 100
N_HN = 150  # short Python pages, completed with sections of LLVM pages
N_HN_TITLE = 40


# --------------------------------------------------------------------------- fetching


def fetch_packages(cache: Path, packages: dict[str, str] | None = None, unpack_dir: str = "") -> dict[str, str]:
    """Download (once) and unpack the pinned packages into ``cache/unpack_dir/<package>``.

    Returns package -> version used.  ``packages`` defaults to this set's ``PACKAGES``.
    """
    cache.mkdir(parents=True, exist_ok=True)
    used = {}
    for package, version in (PACKAGES if packages is None else packages).items():
        target = cache / unpack_dir / package
        marker = target / ".unpacked"
        debs = sorted(cache.glob(f"{package}_*.deb"))
        if not debs:
            print(f"  apt-get download {package}={version}", flush=True)
            result = subprocess.run(
                ["apt-get", "download", f"{package}={version}"], cwd=cache, capture_output=True, text=True
            )
            if result.returncode != 0:
                raise SystemExit(
                    f"apt-get download {package}={version} failed (run 'apt-get update' first?):\n{result.stderr}"
                )
            debs = sorted(cache.glob(f"{package}_*.deb"))
        deb = debs[-1]
        used[package] = deb.name.split("_")[1].replace("%3a", ":")
        if not marker.exists():
            if target.exists():
                shutil.rmtree(target)
            target.mkdir(parents=True)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
            marker.write_text(deb.name)
    return used


# --------------------------------------------------------------------------- pages


@dataclass
class Source:
    key: str  # "site:relpath"
    site: Site
    rel: str
    raw: bytes
    title: str
    text: str  # truth main-content text
    nwords: int

    def tree(self) -> lxml.html.HtmlElement:
        return lxml.html.document_fromstring(self.raw)

    @property
    def url(self) -> str:
        return f"http://{self.site.host}{self.site.prefix}{self.rel}"


def node_text(node: etree._Element) -> str:
    """Whitespace-normalised text of ``node`` without scripts/styles (the truth's view of content)."""
    parts = []
    for el in node.iter():
        if el.tag in _NOT_TEXT or not isinstance(el.tag, str):
            if el.tail and el is not node:
                parts.append(el.tail)
            continue
        if el.text and not _inside_not_text(el, node):
            parts.append(el.text)
        if el is not node and el.tail and not _inside_not_text(el.getparent(), node):
            parts.append(el.tail)
    return " ".join(" ".join(parts).split())


def _inside_not_text(el: etree._Element | None, stop: etree._Element) -> bool:
    while el is not None:
        if el.tag in _NOT_TEXT:
            return True
        if el is stop:
            return False
        el = el.getparent()
    return False


def content_node(tree: lxml.html.HtmlElement) -> etree._Element:
    nodes = _CONTENT(tree)
    if not nodes:
        raise ValueError("no content node")
    return nodes[0]


def load_sources(cache: Path) -> dict[str, Source]:
    sources = {}
    for site in SITES:
        root = cache / site.package / site.root
        for path in sorted(root.rglob("*.html")):
            rel = path.relative_to(root).as_posix()
            if _SKIP.search(rel):
                continue
            raw = path.read_bytes()
            tree = lxml.html.document_fromstring(raw)
            try:
                node = content_node(tree)
            except ValueError:
                continue
            title = " ".join((tree.findtext(".//title") or "").split())
            text = node_text(node)
            if rel.startswith("AMDGPU/") and (site.name != "llvm15" or len(common.words(text)) < _AMDGPU_MIN_WORDS):
                continue
            sources[f"{site.name}:{rel}"] = Source(
                f"{site.name}:{rel}", site, rel, raw, title, text, len(common.words(text))
            )
    return sources


# --------------------------------------------------------------------------- variants


def serialize(tree: lxml.html.HtmlElement) -> bytes:
    return etree.tostring(tree, method="html", encoding="utf-8", doctype="<!DOCTYPE html>")


def frag(html: str) -> etree._Element:
    return lxml.html.fragment_fromstring(html)


def set_title(tree: lxml.html.HtmlElement, title: str) -> None:
    el = tree.find(".//title")
    if el is not None:
        el.text = title


def replace_children(node: etree._Element, new_children: list[etree._Element], text: str | None = None) -> None:
    for child in list(node):
        node.remove(child)
    node.text = text
    for child in new_children:
        node.append(child)


def drop_headerlinks(node: etree._Element) -> None:
    for a in node.xpath(".//a[@class='headerlink']"):
        a.drop_tree()


def headings(node: etree._Element) -> list[tuple[int, str, str]]:
    out = []
    for h in node.iter("h1", "h2", "h3"):
        section = h.getparent()
        anchor = section.get("id", "") if section is not None else ""
        text = " ".join("".join(t for t in h.itertext() if t != "¶").split())
        out.append((int(h.tag[1]), text, anchor))
    return out


def local_toc(node: etree._Element) -> str:
    items = "".join(f'<li><a class="reference internal" href="#{a}">{_esc(t)}</a></li>' for _, t, a in headings(node))
    return f'<div><h3><a href="../contents.html">Table of Contents</a></h3><ul>{items}</ul></div>'


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def first_sentence(text: str, limit: int = 30) -> str:
    ws = text.split()
    # skip the title-ish start: take from the first word after a pilcrow if any
    if "¶" in ws[:20]:
        ws = ws[ws.index("¶") + 1 :] if ws.index("¶") < 20 else ws
    out = []
    for w in ws:
        out.append(w)
        if w.endswith(".") and len(out) >= 8:
            break
        if len(out) >= limit:
            break
    return " ".join(out)


def reader_page(title: str, url: str, host: str, nwords: int) -> tuple[lxml.html.HtmlElement, etree._Element]:
    """A Firefox-style reader view (the tree, and the element the article goes into)."""
    minutes = max(1, nwords // 230)
    html = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{_esc(title)}</title></head><body class='reader'>"
        "<div class='container'><div class='header reader-header'>"
        f"<a class='domain reader-domain' href='{url}'>{host}</a>"
        f"<div class='meta-data'><div class='reader-estimated-time'>{minutes}-{minutes + 2} minutes</div></div>"
        "</div><hr><div class='content'><div class='moz-reader-content'>"
        "<div id='readability-page-1' class='page'></div></div></div></div></body></html>"
    )
    tree = lxml.html.document_fromstring(html)
    return tree, tree.get_element_by_id("readability-page-1")


def edit_words(
    rng: random.Random, slots: list[tuple[etree._Element, str]], budget: int, donor_words: list[str],
    donor_sentences: list[str],
) -> None:
    """Edit about ``budget`` words of the text slots ``(element, "text" | "tail")``, in place.

    Words are replaced, deleted or inserted, sentences of other pages inserted, numbers changed.
    """
    sizes = [len(getattr(el, attr).split()) for el, attr in slots]
    changed = 0
    while changed < budget and slots:
        el, attr = rng.choices(slots, weights=sizes)[0]
        ws = getattr(el, attr).split()
        if not ws:
            continue
        i = rng.randrange(len(ws))
        op = rng.random()
        if op < 0.3:  # replace a word
            ws[i] = rng.choice(donor_words)
            changed += 1
        elif op < 0.5:  # delete a word
            del ws[i]
            changed += 1
        elif op < 0.65:  # insert a word
            ws.insert(i, rng.choice(donor_words))
            changed += 1
        elif op < 0.85:  # insert a sentence from another page
            sentence = rng.choice(donor_sentences).split()
            if changed + len(sentence) > budget + 3:
                continue
            ws[i:i] = sentence
            changed += len(sentence)
        else:  # change a number or a word's spelling
            w = ws[i]
            ws[i] = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), w) if re.search(r"\d", w) else w[::-1]
            changed += 1
        setattr(el, attr, " " + " ".join(ws) + " ")


class Builder:
    def __init__(self, sources: dict[str, Source], out: Path, seed: int) -> None:
        self.sources = sources
        self.out = out
        self.rng = random.Random(seed)
        self.pages: list[dict] = []
        self.texts: list[str] = []
        (out / "pages").mkdir(parents=True, exist_ok=True)
        self.urls: set[str] = set()
        self.donor_words: list[str] = []
        self.donor_sentences: list[str] = []

    # -- output

    def add(
        self, html: bytes, url: str, text: str, category: str, role: str, group: str | None, source: str, variant: str = ""
    ) -> int:
        if url in self.urls:
            raise ValueError(f"duplicate url {url}")
        self.urls.add(url)
        pid = len(self.pages)
        file = f"pages/{pid:05d}.html"
        (self.out / file).write_bytes(html)
        host = url.split("/")[2]
        self.pages.append(
            dict(
                id=pid, url=url, file=file, host=host, category=category, role=role, group=group,
                source=source, words=len(common.words(text)), variant=variant,
            )
        )  # fmt: skip
        self.texts.append(text)
        return pid

    def add_original(self, src: Source, category: str = "original") -> int:
        role = "empty" if src.nwords < common.EMPTY_WORDS else "original"
        return self.add(src.raw, src.url, src.text, "empty" if role == "empty" else category, role, None, src.key)

    # -- helpers

    def stamp(self) -> dt.datetime:
        return dt.datetime(2025, 5, 1) + dt.timedelta(seconds=self.rng.randrange(0, 40 * 86400))

    def token(self, n: int = 16) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def teaser(self, src: Source) -> tuple[str, str]:
        title = src.title.split(" — ")[0].split(" \u2014 ")[0]
        return title, first_sentence(src.text)

    # -- same article, other template

    def mirror(self, src: Source, chrome: Source, host: str, group: str) -> int:
        tree = chrome.tree()
        body = content_node(tree)
        article = copy.deepcopy(content_node(src.tree()))
        replace_children(body, list(article), article.text)
        body.insert(0, frag(
            f'<div class="admonition note"><p>This is a mirror of <a href="{src.url}">{_esc(src.url)}</a>, '
            f'last synchronised on {self.stamp():%Y-%m-%d}.</p></div>'
        ))  # fmt: skip
        set_title(tree, f"{src.title} | {host}")
        # the chrome's own local table of contents would describe the chrome page: rebuild it
        for toc in tree.xpath("//div[@class='sphinxsidebarwrapper']/div[h3/a[contains(@href,'contents.html')]]"):
            toc.getparent().replace(toc, frag(local_toc(article)))
        url = f"http://{host}/{src.site.project}/{src.rel}"
        return self.add(serialize(tree), url, src.text, "template", "variant", group, src.key, "mirror")

    def reader(self, src: Source, group: str) -> int:
        article = copy.deepcopy(content_node(src.tree()))
        drop_headerlinks(article)
        tree, page = reader_page(src.title, src.url, src.site.host, src.nwords)
        for child in list(article):
            page.append(child)
        url = f"http://reader.test/{src.site.project}/{src.rel}"
        return self.add(serialize(tree), url, src.text, "template", "variant", group, src.key, "reader")

    # -- tracking / session variants

    def tracking(self, src: Source, n: int, group: str) -> list[int]:
        ids = []
        queries = [
            "utm_source=newsletter&utm_medium=email&utm_campaign=spring-{t}",
            "sessionid={t}",
            "ref=home&ts={ts}",
            "PHPSESSID={t}&lang=en",
            "fbclid=IwAR{t}",
        ]
        for i in range(n):
            tree = src.tree()
            body = content_node(tree)
            when = self.stamp()
            tok = self.token(24)
            # a rotating ad inside the article (after the first or second block) and one in the sidebar
            ad_src = self.sources[self.rng.choice(self.donor_keys)]
            title, sentence = self.teaser(ad_src)
            ad = frag(
                f'<div id="div-gpt-ad-{self.rng.randrange(10**12)}-0" class="adunit">'
                f'<span class="label">Advertisement</span><a href="{ad_src.url}?utm_source=ad"><b>{_esc(title)}</b></a>'
                f"<p>{_esc(sentence)}</p></div>"
            )
            blocks = [el for el in body.iter("p") if el.getparent() is not None]
            anchor = blocks[min(len(blocks) - 1, 1)] if blocks else None
            if anchor is not None:
                anchor.addnext(ad)
            else:
                body.append(ad)
            side_src = self.sources[self.rng.choice(self.donor_keys)]
            title2, sentence2 = self.teaser(side_src)
            side = tree.xpath("//div[@class='sphinxsidebarwrapper']")
            box = frag(
                f'<div class="sponsor-box"><h3>Sponsored</h3><p><a href="{side_src.url}">{_esc(title2)}</a> '
                f"{_esc(sentence2)}</p></div>"
            )
            (side[0] if side else tree.body).append(box)
            # session / timestamp / counters in the page chrome
            tree.body.insert(0, frag(
                f'<div class="session-bar">Welcome, guest. Session {tok[:12]} started '
                f'{when:%H:%M:%S}. {self.rng.randrange(90, 2400)} readers online.</div>'
            ))  # fmt: skip
            footer = tree.xpath("//div[@class='footer']")
            stamp = f"Page generated {when:%B %d, %Y at %H:%M:%S} UTC in 0.{self.rng.randrange(10, 99)} seconds. Request id {tok}."
            (footer[0] if footer else tree.body).append(frag(f"<p>{stamp}</p>"))
            tree.body.append(frag(f'<form><input type="hidden" name="csrf" value="{self.token(32)}"></form>'))
            for a in tree.iter("a"):
                href = a.get("href") or ""
                if href and not href.startswith(("http", "#")):
                    a.set("href", f"{href}{'&' if '?' in href else '?'}sid={tok[:12]}")
            query = queries[i % len(queries)].format(t=self.token(10), ts=int(when.timestamp()))
            url = f"{src.url}?{query}"
            ids.append(self.add(serialize(tree), url, src.text, "tracking", "variant", group, src.key, "tracking"))
        return ids

    # -- printer-friendly

    def printable(self, src: Source, group: str) -> int:
        article = copy.deepcopy(content_node(src.tree()))
        drop_headerlinks(article)
        links = []
        for a in article.iter("a"):
            href = a.get("href") or ""
            if href.startswith("http"):
                links.append(href)
                a.tail = f" [{len(links)}]" + (a.tail or "")
        listing = "".join(f"<li>[{i + 1}] {_esc(h)}</li>" for i, h in enumerate(links))
        html = (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{_esc(src.title)} (printer-friendly)</title>"
            "<style media='print'>.noprint{display:none}</style></head><body class='print'>"
            f"<div class='print-header'>{_esc(src.site.project.capitalize())} {src.site.version} documentation</div>"
            "<div id='print-content'></div>"
            f"<div class='print-footer'><p>Source URL: {_esc(src.url)}</p>"
            f"<p>Printed on {self.stamp():%Y-%m-%d %H:%M}</p>"
            + (f"<p>Links:</p><ul>{listing}</ul>" if links else "")
            + "</div></body></html>"
        )
        tree = lxml.html.document_fromstring(html)
        target = tree.get_element_by_id("print-content")
        target.text = article.text
        for child in list(article):
            target.append(child)
        url = f"{src.url}?format=print"
        return self.add(serialize(tree), url, src.text, "print", "variant", group, src.key, "print")

    # -- small edits

    def edited(self, src: Source, rate: float, group: str, revision: int) -> int:
        tree = src.tree()
        body = content_node(tree)
        slots = []  # (element, attribute)
        for el in body.iter():
            if not isinstance(el.tag, str) or el.tag in _NOT_TEXT or el.tag == "pre":
                continue
            if el.text and el.text.strip():
                slots.append((el, "text"))
            if el is not body and el.tail and el.tail.strip():
                slots.append((el, "tail"))
        budget = max(1, round(rate * src.nwords))
        edit_words(self.rng, slots, budget, self.donor_words, self.donor_sentences)
        footer = tree.xpath("//div[@class='footer']")
        if footer:
            footer[0].append(frag(f"<p>Revised {self.stamp():%B %d, %Y}.</p>"))
        text = node_text(body)
        url = f"{src.url}?revision={revision}"
        return self.add(serialize(tree), url, text, "edit", "variant", group, src.key, f"edit{rate:.3f}")

    # -- hard negatives

    def heavy_template_parts(self) -> dict:
        """Fixed chrome of the heavy-template site: menus and lists built from real page titles."""
        py = [s for s in self.sources.values() if s.site.name == "py" and s.nwords >= 150]
        self.rng.shuffle(py)
        groups = {}
        for src in py[:80]:
            groups.setdefault(src.rel.split("/")[0] if "/" in src.rel else "general", []).append(src)
        menu = "".join(
            f'<div class="col"><span class="col-title">{_esc(name.capitalize())}</span>'
            + "".join(f'<a href="/{s.rel}">{_esc(self.teaser(s)[0])}</a>' for s in items[:12])
            + "</div>"
            for name, items in sorted(groups.items())
        )
        trending = "".join(
            f'<div class="_9xk2"><a href="/t/{i}">{_esc(t)}</a><p>{_esc(s)}</p></div>'
            for i, (t, s) in enumerate(self.teaser(x) for x in py[80:86])
        )
        popular = "".join(f'<li><a href="/p/{i}">{_esc(self.teaser(x)[0])}</a></li>' for i, x in enumerate(py[86:98]))
        topics = " ".join(f'<a href="/topic/{i}">{_esc(self.teaser(x)[0].split()[0])}</a>' for i, x in enumerate(py[98:130]))
        about = self.sources.get("py:about.html")
        copyright_ = self.sources.get("py:copyright.html")
        footer_text = " ".join(x.text for x in (about, copyright_) if x is not None)
        return dict(menu=menu, trending=trending, popular=popular, topics=topics, footer=_esc(footer_text))

    def heavy(self, text_html: str, title: str, text: str, slug: str, parts: dict, related: list[Source], source: str) -> int:
        rel = "".join(
            f'<li><a href="{s.url}">{_esc(self.teaser(s)[0])}</a> <span>{_esc(self.teaser(s)[1])}</span></li>'
            for s in related
        )
        html = f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_esc(title)} | Python Digest</title>
<link rel="stylesheet" href="/static/site.css"></head><body class="post-template-default single">
<div class="cc-window cc-banner" role="dialog" aria-label="cookieconsent"><span class="cc-message">This website uses cookies to ensure you get the best experience on our website. <a class="cc-link" href="/privacy">Learn more</a></span><a class="cc-btn cc-dismiss">Got it!</a></div>
<div id="page" class="site">
<div id="masthead" class="site-header"><div class="site-branding"><p class="site-title"><a href="/">Python Digest</a></p><p class="site-description">Articles about the Python language and its standard library</p></div>
<div id="site-navigation" class="main-navigation"><div class="menu-primary-container"><div class="mega">{parts['menu']}</div></div></div></div>
<div id="content" class="site-content"><div class="row"><div class="col-md-8">
<article id="post-{slug}" class="post type-post status-publish">
<div class="entry-meta"><span class="posted-on">Posted on {self.stamp():%B %d, %Y}</span> by <span class="author">the editors</span></div>
<div class="entry-content">{text_html}</div>
<div class="sharedaddy sd-sharing-enabled"><h3 class="sd-title">Share this:</h3><a href="#">Twitter</a> <a href="#">Facebook</a> <a href="#">LinkedIn</a> <a href="#">Reddit</a> <a href="#">Email</a></div>
<div class="yarpp-related"><h3>Related posts</h3><ol>{rel}</ol></div>
<div class="css-1dbjc4n"><h3>Trending now</h3>{parts['trending']}</div>
</article></div>
<div id="secondary" class="widget-area col-md-4"><div class="widget"><h3>Most read</h3><ul>{parts['popular']}</ul></div>
<div class="box"><h3>Topics</h3><div class="tagcloud">{parts['topics']}</div></div>
<div class="mc4wp-form"><h3>Get the weekly digest</h3><p>One email a week with the best new articles. No spam, unsubscribe at any time.</p><form><input type="email" placeholder="you@example.com"><button>Subscribe</button></form></div></div>
</div></div>
<div id="colophon" class="site-footer"><div class="footer-widgets">{parts['footer']}</div><div class="site-info">&copy; 2025 Python Digest</div></div>
</div></body></html>"""
        url = f"http://digest.test/posts/{slug}.html"
        return self.add(html.encode("utf-8"), url, text, "hn_template", "hn_template", "hn_template", source)


def sections_of(src: Source, lo: int, hi: int) -> list[tuple[str, str, str]]:
    """(title, html, text) of the level-2 sections of ``src`` with lo..hi words."""
    out = []
    article = content_node(src.tree())
    for section in article.xpath("./section/section | ./div[@class='section']/div[@class='section']"):
        drop_headerlinks(section)
        text = node_text(section)
        n = len(common.words(text))
        if lo <= n <= hi:
            h = section.find("h2")
            title = " ".join(h.text_content().split()) if h is not None else src.title
            html = etree.tostring(section, method="html", encoding="unicode", with_tail=False)
            out.append((title, html, text))
    return out


# --------------------------------------------------------------------------- main


def build(out: Path, cache: Path, seed: int) -> dict:
    t0 = time.perf_counter()
    print("fetching packages", flush=True)
    versions = fetch_packages(cache)
    print("reading pages", flush=True)
    sources = load_sources(cache)
    print(f"  {len(sources)} pages read ({time.perf_counter() - t0:.1f}s)", flush=True)
    if (out / "pages").exists():
        shutil.rmtree(out / "pages")
    b = Builder(sources, out, seed)
    rng = b.rng

    keys = sorted(sources)
    py_keys = [k for k in keys if k.startswith("py:")]
    new_keys = [k for k in keys if k.startswith(("llvm15:", "clang15:"))]
    articles = lambda ks: [k for k in ks if 150 <= sources[k].nwords <= 20000]  # noqa: E731

    # --- partition the Python pages: in the set, reserved for hard negatives, or donors only
    short_py = [k for k in py_keys if 40 <= sources[k].nwords < 400 and not k.endswith("search.html")]
    rng.shuffle(short_py)
    hn_short = short_py[:N_HN_SHORT]
    long_py = articles(py_keys)
    rng.shuffle(long_py)
    hn_title_bodies = [k for k in long_py if k not in hn_short][:N_HN_TITLE]
    excluded = set(hn_short) | set(hn_title_bodies)
    b.donor_keys = [k for k in long_py if k not in excluded]
    for k in b.donor_keys:
        ws = sources[k].text.split()
        b.donor_words.extend(w for w in ws[50:250] if w.isalpha())
        for sentence in re.findall(r"[A-Z][^.?!]{40,160}[.?!]", sources[k].text[:3000]):
            b.donor_sentences.append(sentence)

    # --- originals (every kept page of every site, in site order)
    original_ids = {}
    for k in keys:
        if k in excluded:
            continue
        original_ids[k] = b.add_original(sources[k])

    # --- choose disjoint sources for the constructed categories
    pool = [k for k in articles(py_keys) + articles(new_keys) if k not in excluded]
    rng.shuffle(pool)
    py_pool = [k for k in pool if k.startswith("py:")]
    other_pool = [k for k in pool if not k.startswith("py:")]
    used: set[str] = set()

    def take(candidates: list[str], n: int) -> list[str]:
        chosen = [k for k in candidates if k not in used][:n]
        used.update(chosen)
        return chosen

    chrome_llvm = sources["llvm15:CommandGuide/llc.html"]
    chrome_py = sources["py:library/concurrent.futures.html"]
    used.update({chrome_llvm.key, chrome_py.key})
    # same article, other template: mirror (other site's chrome) and reader view
    for k in take(py_pool, N_TEMPLATE // 2) + take(other_pool, N_TEMPLATE // 2):
        src = sources[k]
        group = f"template:{k}"
        if src.site.name == "py":
            b.mirror(src, chrome_llvm, "mirror-a.test", group)
        else:
            b.mirror(src, chrome_py, "mirror-b.test", group)
        b.reader(src, group)
        b.pages[original_ids[k]]["group"] = group
    for k in take(py_pool, N_TRACKING * 2 // 3) + take(other_pool, N_TRACKING // 3):
        group = f"tracking:{k}"
        b.tracking(sources[k], 3, group)
        b.pages[original_ids[k]]["group"] = group
    for k in take(py_pool, N_PRINT * 2 // 3) + take(other_pool, N_PRINT // 3):
        group = f"print:{k}"
        b.printable(sources[k], group)
        b.pages[original_ids[k]]["group"] = group
    for k in take(py_pool, N_EDIT * 2 // 3) + take(other_pool, N_EDIT // 3):
        group = f"edit:{k}"
        b.edited(sources[k], rng.uniform(0.01, 0.017), group, 2)
        b.edited(sources[k], rng.uniform(0.023, 0.03), group, 3)
        b.pages[original_ids[k]]["group"] = group

    # --- hard negative: different pages, one heavy template (short Python pages and sections of LLVM pages)
    parts = b.heavy_template_parts()
    hn_ids = []
    related_pool = [sources[k] for k in b.donor_keys]
    for i, k in enumerate(hn_short):
        src = sources[k]
        article = copy.deepcopy(content_node(src.tree()))
        drop_headerlinks(article)
        inner = "".join(etree.tostring(c, method="html", encoding="unicode") for c in article)
        slug = f"{i:03d}-" + re.sub(r"[^a-z0-9]+", "-", src.rel.lower()).strip("-")
        hn_ids.append(b.heavy(inner, src.title.split(" \u2014 ")[0], src.text, slug, parts, rng.sample(related_pool, 3), k))
    sections = []
    for k in articles([k for k in new_keys if k.startswith("llvm15:")]):
        sections.extend((k, s) for s in sections_of(sources[k], 60, 400))
    rng.shuffle(sections)
    for i, (k, (title, html, text)) in enumerate(sections[: N_HN - len(hn_ids)]):
        slug = f"s{i:03d}-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]
        hn_ids.append(b.heavy(html, title, text, slug, parts, rng.sample(related_pool, 3), k))

    # --- hard negative: same title, different body (a reserved page re-titled as an original)
    hn_title_pairs = []
    titled = [k for k in py_pool if k in original_ids and k not in used]
    for a_key, b_key in zip(titled, hn_title_bodies):
        a_src, b_src = sources[a_key], sources[b_key]
        tree = b_src.tree()
        set_title(tree, a_src.title)
        h1 = content_node(tree).find(".//h1")
        a_h1 = content_node(a_src.tree()).find(".//h1")
        if h1 is not None and a_h1 is not None:
            h1.getparent().replace(h1, copy.deepcopy(a_h1))
        text = node_text(content_node(tree))
        pid = b.add(serialize(tree), b_src.url, text, "hn_title", "hn_title", f"hn_title:{a_key}", b_key)
        hn_title_pairs.append((original_ids[a_key], pid))

    # --- (nearly) empty pages: 404 and JavaScript shells in each site's chrome
    for _n, (chrome, host_prefix) in enumerate(((chrome_py, "http://docs.python.test/3.11/"), (chrome_llvm, "http://llvm.test/15/"))):
        for _i, missing in enumerate(("library/urllib3.html", "howto/asyncio.html", "reference/macros.html")):
            tree = chrome.tree()
            body = content_node(tree)
            replace_children(body, [frag("<h1>Page not found</h1>"), frag(
                f"<p>Sorry, the page {missing} does not exist.</p>")])  # fmt: skip
            set_title(tree, "404 Not Found")
            b.add(serialize(tree), f"{host_prefix}{missing}", node_text(body), "empty", "empty", None, f"404:{missing}")
    for _i, name in enumerate(("dashboard", "search", "settings", "playground")):
        html = (
            f"<!DOCTYPE html><html><head><title>Python Digest {name}</title></head><body>"
            "<noscript>You need to enable JavaScript to run this app.</noscript><div id='root'></div>"
            "<script src='/static/js/main.js'></script></body></html>"
        )
        b.add(html.encode(), f"http://digest.test/app/{name}", "", "empty", "empty", None, f"app:{name}")

    # --- truth
    print(f"  {len(b.pages)} pages written ({time.perf_counter() - t0:.1f}s); computing truth", flush=True)
    pages = b.pages
    empty = [p["id"] for p in pages if p["words"] < common.EMPTY_WORDS]
    for pid in empty:
        pages[pid]["role"] = "empty"
        pages[pid]["category"] = "empty"
    empty_set = set(empty)
    positive: dict[tuple[int, int], str] = {}
    groups: dict[str, list[int]] = {}
    for p in pages:
        g = p["group"]
        if g and not g.startswith("hn_") and p["id"] not in empty_set:
            groups.setdefault(g, []).append(p["id"])
    for g, ids in groups.items():
        cat = g.split(":")[0]
        for i, a in enumerate(ids):
            for c in ids[i + 1 :]:
                positive[common.pair(a, c)] = cat
    sets = [common.shingles(t) for t in b.texts]
    similar = common.similar_pairs(sets, common.GRAY_JACCARD)
    gray = []
    for a, c, j in similar:
        key = common.pair(a, c)
        if key in positive or a in empty_set or c in empty_set:
            continue
        if j >= common.POSITIVE_JACCARD:
            positive[key] = common.similar_kind(pages[a], pages[c])
        else:
            gray.append([a, c, round(j, 3)])
    # the hard negatives must be negatives: drop any pair that the truth calls similar
    hn_title_pairs = [(a, c) for a, c in hn_title_pairs if common.pair(a, c) not in positive]
    # crawl order: sites interleaved as a breadth-first crawl of several hosts would see them
    common.set_crawl_order(pages, rng)
    info = dict(
        packages=versions, seed=seed, shingle=common.SHINGLE, positive_jaccard=common.POSITIVE_JACCARD,
        gray_jaccard=common.GRAY_JACCARD, empty_words=common.EMPTY_WORDS, pages=len(pages),
        build_seconds=round(time.perf_counter() - t0, 1),
    )  # fmt: skip
    truth = dict(
        positive=[[a, c, cat] for (a, c), cat in sorted(positive.items())],
        gray=sorted(gray),
        hn_template=hn_ids,
        hn_title=[list(x) for x in hn_title_pairs],
        empty=empty,
        info=info,
    )
    with open(out / "manifest.jsonl", "w") as fh:
        for p in pages:
            fh.write(json.dumps(p) + "\n")
    (out / "truth.json").write_text(json.dumps(truth))
    return truth


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=None, help="where .deb files are kept (default OUT/debs)")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    truth = build(out, args.cache or out / "debs", args.seed)
    counts: dict[str, int] = {}
    for _, _, cat in truth["positive"]:
        counts[cat] = counts.get(cat, 0) + 1
    n = len(truth["hn_template"])
    print(f"pages: {truth['info']['pages']}  build: {truth['info']['build_seconds']}s  packages: {truth['info']['packages']}")
    print("positive pairs: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(
        f"gray pairs: {len(truth['gray'])}  hn_template pages: {n} ({n * (n - 1) // 2} pairs)  "
        f"hn_title pairs: {len(truth['hn_title'])}  empty pages: {len(truth['empty'])}"
    )


if __name__ == "__main__":
    main()
