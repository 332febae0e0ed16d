"""Build the example project's sample site: static HTML + routes + ground truth.

Run from anywhere (any Python >= 3.10)::

    python example_project/sample_site/build.py          # rebuild pages/, routes.json, ground_truth.json
    python example_project/sample_site/build.py --check  # rebuild in memory, compare with the committed files

The article text is real human-written prose: the Python Language Reference
topics that ship with every CPython in ``pydoc_data.topics`` (© Python Software
Foundation, PSF License).  The output is committed instead of being generated at
crawl time because ``pydoc_data`` differs between Python versions (3.11 and
3.13 word the same topics differently, topics come and go): committed pages
keep the site, and the ground truth the tests check, identical on every
interpreter.  ``--check`` tells whether the committed site still matches what
this script makes with the running interpreter (it only will on the Python
version that built it, see ``ground_truth.json`` -> ``built_with``).

The site imitates what crawlers meet on a real magazine/documentation site:

* ``/articles/<slug>.html``: long articles in a heavy desktop template
  (cookie banner, navigation, sidebar with "popular" links, newsletter box,
  ad slot, big footer, page-generation timestamp);
* tracking-parameter variants (``?utm_source=...``) and session variants
  (``?sid=...``) of some articles: same article, different timestamp,
  different ad, a session token in the header;
* printer-friendly versions (``/print/...``): a bare template;
* the same article under a second template (``/m/...``, a mobile edition);
* lightly edited copies (``/community/...-repost.html``): new title, a note
  on top, a few words changed, the last paragraph cut;
* ``/reference/<topic>.html``: short, *distinct* pages in the same heavy
  template, where the template outweighs the text.  These must never be
  reported as near-duplicates of each other;
* hub pages, an RSS feed (not HTML), a broken link (404) and robots.txt.

``ground_truth.json`` lists every URL with its role, and the groups of URLs
that are near-duplicates of each other.  The build checks its own ground truth
with simhash-scrapy's core (``fingerprint_html``, main-content mode, the default k=4)
when the package is importable, and prints the distances it measured.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import itertools
import json
import re
import shutil
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGES = HERE / "pages"
SITE_NAME = "Interpreter Notes"
# The plugin's default k (simhash_scrapy.core.defaults.MAX_DISTANCE): the example project runs on defaults.
MAX_DISTANCE = 4

# --------------------------------------------------------------------------- content choice
# Long articles (desktop template).  Each may have variants.
ARTICLES = [
    "try", "import", "with", "function", "calls", "execmodel", "raise", "typesmapping",
    "assignment", "comparisons", "class", "async", "formatstrings", "for",
]  # fmt: skip
# Variants: (article, kind, url, label)
TRACKING = {
    "try": ["utm_source=newsletter&utm_medium=email&utm_campaign=week-19", "utm_source=mastodon&utm_medium=social"],
    "assignment": ["utm_source=newsletter&utm_medium=email&utm_campaign=week-20"],
}
SESSIONS = {"import": ["sid=3f9c2a17e0b84d51", "sid=b71e4d0c9a2f6385"]}
PRINT = ["comparisons", "function", "assignment"]
MOBILE = ["calls", "execmodel", "assignment"]
REPOSTS = {"formatstrings": "format-strings-explained", "typesmapping": "dictionaries-in-depth"}
# Short, distinct reference pages in the heavy template.  No topic here or in ARTICLES
# contains another ("else" is "if", "naming" and "exceptions" are parts of "execmodel",
# "in" is part of "comparisons"): those would be real near-duplicates.
REFERENCE = [
    "pass", "break", "continue", "del", "return", "yield", "global", "nonlocal", "assert",
    "lambda", "exprlists", "truth", "while", "if", "booleans", "unary", "shifting", "power",
    "bitwise", "imaginary", "floating", "integers", "lists", "numbers", "slicings", "dict",
]  # fmt: skip

ADS = [
    ("Sponsored", "Ship smaller containers: the build cache that understands your lock file. Free for open source."),
    ("Advertisement", "Conference season is here. Early-bird tickets for the autumn Python meetup end on Friday."),
    ("Sponsored", "Your logs, searchable in seconds. Try the hosted log explorer for thirty days, no card needed."),
    ("Advertisement", "Learn to profile Python code in an afternoon: a hands-on workshop with real services."),
]


# --------------------------------------------------------------------------- text -> HTML
def topic_text(key: str) -> str:
    import pydoc_data.topics

    return pydoc_data.topics.topics[key]


_UNDERLINE = re.compile(r"^([*=\-~^])\1+$")
_LIST_ITEM = re.compile(r"^(\d+\.|\*|\-)\s+")
_FOOTNOTE = re.compile(r"^\[\d+\]\s")


def _inline(text: str) -> str:
    """Escape, and render the reference's "quoted" code spans as <code>."""
    out = html.escape(text, quote=False)
    return re.sub(r'"([^"\n]{1,60})"', r"<code>\1</code>", out)


def _is_prose(block: str) -> bool:
    flat = " ".join(block.split())
    return (
        flat[:1].isalpha()
        and flat.endswith((".", ":", ","))
        and len(flat.split()) >= 6
        and not any(mark in block for mark in ("::=", ">>>", "#", " = ", "\n "))
    )


def topic_html(key: str) -> tuple[str, list[str]]:
    """(title, list of HTML blocks) for a pydoc topic.  Blocks are <h2>/<h3>, <p>, <pre>, <li> runs."""
    lines = topic_text(key).strip("\n").split("\n")
    title = lines[0].strip()
    assert _UNDERLINE.match(lines[1].strip()), key
    lines = lines[2:]
    blocks: list[str] = []
    i = 0
    list_items: list[str] = []
    list_tag = "ul"

    def flush_list() -> None:
        nonlocal list_items
        if list_items:
            blocks.append(f"<{list_tag}>" + "".join(f"<li>{item}</li>" for item in list_items) + f"</{list_tag}>")
            list_items = []

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            para = [line]
            i += 1
            # List items and footnotes ("[1] ...") continue on indented lines.
            is_item = bool(_LIST_ITEM.match(line) or _FOOTNOTE.match(line))
            while i < len(lines) and lines[i].strip() and (is_item or not lines[i].startswith(" ")):
                para.append(lines[i])
                i += 1
            if len(para) >= 2 and _UNDERLINE.match(para[-1].strip()):
                flush_list()
                level = "h3" if para[-1].strip()[0] in "-~^" else "h2"
                blocks.append(f"<{level}>{_inline(' '.join(p.strip() for p in para[:-1]))}</{level}>")
                continue
            text = " ".join(p.strip() for p in para)
            if text == "-[ Footnotes ]-":
                flush_list()
                blocks.append("<h2>Footnotes</h2>")
                continue
            item = _LIST_ITEM.match(text)
            if item:
                tag = "ol" if item.group(1)[0].isdigit() else "ul"
                if list_items and tag != list_tag:
                    flush_list()
                list_tag = tag
                list_items.append(_inline(text[item.end():]))
                continue
            flush_list()
            blocks.append(f"<p>{_inline(text)}</p>")
            continue
        # Indented run: code, grammar, or a note; blank lines inside it belong to it.
        run = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            run.append(lines[i])
            i += 1
        while run and not run[-1].strip():
            run.pop()
        body = textwrap.dedent("\n".join(run))
        first = body.lstrip().split("\n", 1)[0]
        if first.rstrip(":") in ("Note", "See also", "Warning", "Tip") or first.startswith(("Note:", "See also:")):
            paras = [p for p in textwrap.dedent(body.split("\n", 1)[1] if "\n" in body else "").split("\n\n") if p.strip()]
            inner = "".join(f"<p>{_inline(' '.join(p.split()))}</p>" for p in paras)
            flush_list()
            blocks.append(f'<div class="admonition"><p class="admonition-title">{html.escape(first.rstrip(":"))}</p>{inner}</div>')
            continue
        paras = [p for p in body.split("\n\n") if p.strip()]
        if all(_is_prose(p) for p in paras):
            inner = "".join(f"<p>{_inline(' '.join(p.split()))}</p>" for p in paras)
            if list_items:
                # Continuation paragraphs of the previous list item.
                list_items[-1] += inner
            else:
                blocks.append(f"<blockquote>{inner}</blockquote>")
            continue
        flush_list()
        blocks.append(f"<pre>{html.escape(body, quote=False)}</pre>")
    flush_list()
    return title, blocks


def first_sentence(key: str) -> str:
    for block in topic_html(key)[1]:
        if block.startswith("<p>"):
            text = re.sub(r"<[^>]+>", "", block)
            text = html.unescape(text)
            match = re.match(r"(.{20,220}?[.:])(\s|$)", text)
            return (match.group(1) if match else text[:200]).rstrip(":") + ("." if match and match.group(1).endswith(":") else "")
    return ""


def light_edit(blocks: list[str]) -> list[str]:
    """What a community editor does to a repost: a few words changed, the last paragraph cut."""
    out = list(blocks)
    paragraphs = [i for i, b in enumerate(out) if b.startswith("<p>")]
    if len(paragraphs) >= 6:
        del out[paragraphs[-1]]
    replacements = [(" is used to ", " serves to "), (" For example", " As an example"), (" must ", " has to "), (" cannot ", " can't ")]
    for old, new in replacements:
        for i, block in enumerate(out):
            if block.startswith("<p>") and old in block:
                out[i] = block.replace(old, new, 1)
                break
    return out


# --------------------------------------------------------------------------- templates
def stamp(url: str) -> datetime:
    """A deterministic page-generation time per URL (the value a real server would print)."""
    h = int(hashlib.sha1(url.encode()).hexdigest()[:8], 16)
    return datetime(2024, 5, 6, tzinfo=timezone.utc) + timedelta(seconds=h % (30 * 86400))


NAV = [("/", "Home"), ("/articles/", "Articles"), ("/reference/", "Language reference"), ("/community/", "Community"),
       ("/feed.xml", "RSS feed"), ("/about.html", "About")]  # fmt: skip

COOKIE = (
    "We use cookies to remember your reading list and to count which pages are read. "
    "You can accept all cookies, refuse the optional ones, or choose purpose by purpose in the privacy centre. "
    "Your choice is kept for six months."
)
NEWSLETTER = (
    "Every Friday we send one email with the week's new articles, the reference pages people read most and "
    "a short note from the editors. No tracking pixels, and you can unsubscribe with one click."
)
FOOTER_ABOUT = (
    "Interpreter Notes republishes the Python Language Reference as readable articles, with a mobile edition, "
    "printer-friendly pages and a community section where readers repost and annotate their favourite chapters."
)
FOOTER_LEGAL = (
    "Article text is taken from the Python documentation, copyright Python Software Foundation, and is used under the "
    "PSF License. Site design and editorial notes copyright Interpreter Notes. All trademarks belong to their owners. "
    "Advertising on this site is sold by a third party and does not imply endorsement."
)


def desktop(url: str, title: str, main_html: str, *, session: str | None = None, ad: int = 0, crumbs: str = "",
            canonical: str | None = None, popular: list[str] | None = None) -> str:  # fmt: skip
    popular = popular if popular is not None else ARTICLES[:8]
    popular_items = "".join(f'<li><a href="/articles/{k}.html">{html.escape(topic_html(k)[0])}</a></li>' for k in popular)
    ref_items = "".join(f'<li><a href="/reference/{k}.html">{html.escape(topic_html(k)[0])}</a></li>' for k in REFERENCE)
    nav = "".join(f'<li><a href="{href}">{label}</a></li>' for href, label in NAV)
    ad_label, ad_text = ADS[ad % len(ADS)]
    when = stamp(url)
    user = (
        f'<p class="account">Reading as guest &middot; session <span class="token">{session}</span> &middot; '
        f'<a href="/account/login.html">Sign in</a></p>'
        if session
        else '<p class="account"><a href="/account/login.html">Sign in</a> to keep a reading list</p>'
    )
    canonical_tag = f'\n<link rel="canonical" href="{canonical or url}">'
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} &middot; {SITE_NAME}</title>{canonical_tag}
<link rel="alternate" type="application/rss+xml" href="/feed.xml">
<style>body{{font-family:Georgia,serif;margin:0}}.layout{{display:flex;gap:2em}}main{{flex:3}}aside{{flex:1}}
.cookie-banner{{background:#222;color:#eee;padding:1em}}pre{{background:#f5f5f5;overflow:auto}}</style>
<script>window.dataLayer=window.dataLayer||[];function gtag(){{dataLayer.push(arguments)}}gtag('js',new Date());</script>
</head>
<body>
<div class="cookie-banner" id="cookie-consent"><p>{COOKIE}</p>
<button>Accept all</button> <button>Refuse optional cookies</button> <a href="/privacy.html">Privacy centre</a></div>
<header class="site-header">
<a class="logo" href="/">{SITE_NAME}</a>
<nav class="main-nav"><ul>{nav}</ul></nav>
<form class="search" action="/search"><input name="q" placeholder="Search the reference"><button>Search</button></form>
{user}
</header>
<div class="layout">
<main id="content">
<nav class="breadcrumb"><a href="/">Home</a> &rsaquo; {crumbs}</nav>
{main_html}
<div class="share-bar">Share this page: <a href="https://mastodon.social/share">Mastodon</a> &middot;
<a href="mailto:?subject={html.escape(title)}">Email</a> &middot; <a href="#">Copy link</a></div>
</main>
<aside class="sidebar">
<section class="popular"><h2>Popular this week</h2><ul>{popular_items}</ul></section>
<div class="ad-slot"><p class="ad-label">{ad_label}</p><p>{ad_text}</p></div>
<section class="newsletter"><h2>The Friday digest</h2><p>{NEWSLETTER}</p>
<form action="/newsletter"><input name="email" placeholder="you@example.org"><button>Subscribe</button></form></section>
<section class="reference-index"><h2>Language reference</h2><ul>{ref_items}</ul></section>
</aside>
</div>
<footer class="site-footer">
<div class="footer-about"><h2>About {SITE_NAME}</h2><p>{FOOTER_ABOUT}</p></div>
<div class="footer-links"><ul>{nav}<li><a href="/privacy.html">Privacy</a></li><li><a href="/account/login.html">Sign in</a></li></ul></div>
<p class="legal">{FOOTER_LEGAL}</p>
<p class="generated">Page generated {when:%Y-%m-%d %H:%M:%S} UTC by server web-{int(when.timestamp()) % 7 + 1} in {int(when.timestamp()) % 90 + 12} ms.</p>
</footer>
</body>
</html>
"""


def article_main(key: str, blocks: list[str], *, title: str | None = None, extra_top: str = "", sponsor: str = "",
                 links: bool = True, url: str = "") -> str:  # fmt: skip
    title = title or topic_html(key)[0]
    tools = []
    if key in PRINT:
        tools.append(f'<a href="/print/articles/{key}.html">Printer-friendly version</a>')
    if key in MOBILE:
        tools.append(f'<a href="/m/articles/{key}.html">Mobile edition</a>')
    tool_html = f'<p class="article-tools">{" &middot; ".join(tools)}</p>' if tools and links else ""
    body = list(blocks)
    if sponsor:
        # An ad the ad network injects mid-article.
        body.insert(min(3, len(body)), sponsor)
    # A view counter: a different number on every request, so in every URL variant.
    views = int(hashlib.sha1(url.encode()).hexdigest()[:6], 16) % 20000 + 300
    return (
        f'<article class="post">\n<h1>{_inline(title)}</h1>\n'
        f'<p class="byline">From the Python Language Reference &middot; {max(1, len(" ".join(blocks).split()) // 220)} min read'
        f" &middot; {views:,} views</p>\n"
        f"{tool_html}{extra_top}\n" + "\n".join(body) + "\n"
        '<p class="source">Adapted from the Python Language Reference (Python 3.11). '
        "Copyright Python Software Foundation, PSF License.</p>\n</article>"
    )


def mobile_page(url: str, key: str, blocks: list[str]) -> str:
    title = topic_html(key)[0]
    when = stamp(url)
    body = "\n".join(blocks)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{html.escape(title)} | {SITE_NAME} mobile</title><link rel="canonical" href="/articles/{key}.html">
<style amp-custom>body{{font:16px/1.5 sans-serif;padding:0 1em}}</style></head>
<body class="m">
<div class="m-top"><a href="/">{SITE_NAME}</a> <a class="m-menu" href="/articles/">Menu</a></div>
<div role="main" class="m-body">
<h1>{_inline(title)}</h1>
<div class="m-meta">Mobile edition &middot; updated {when:%d %b %Y}</div>
{body}
</div>
<div class="m-bottom"><a href="/articles/{key}.html">Full site</a> &middot; &copy; {SITE_NAME}, text &copy; Python Software Foundation</div>
</body></html>
"""


def print_page(url: str, key: str, blocks: list[str]) -> str:
    title = topic_html(key)[0]
    when = stamp(url)
    body = "\n".join(blocks)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Print: {html.escape(title)}</title><meta name="robots" content="noindex">
<link rel="canonical" href="/articles/{key}.html"><style>@media print{{.noprint{{display:none}}}}</style></head>
<body onload="window.print()">
<p class="noprint"><a href="/articles/{key}.html">Back to the article</a></p>
<h1>{_inline(title)}</h1>
<p><i>From the Python Language Reference</i></p>
{body}
<hr>
<p><small>Adapted from the Python Language Reference (Python 3.11). Copyright Python Software Foundation, PSF License.
Printed from {SITE_NAME} on {when:%Y-%m-%d}.</small></p>
</body></html>
"""


def hub_main(title: str, intro: str, items: list[tuple[str, str, str]]) -> str:
    lis = "\n".join(
        f'<li><a href="{href}">{html.escape(label)}</a>' + (f"<p>{html.escape(summary)}</p>" if summary else "") + "</li>"
        for href, label, summary in items
    )
    return f'<h1>{html.escape(title)}</h1>\n<p class="intro">{intro}</p>\n<ul class="listing">\n{lis}\n</ul>'


# --------------------------------------------------------------------------- site
def build() -> tuple[dict[str, bytes], dict, dict]:
    files: dict[str, bytes] = {}
    routes: dict[str, dict] = {}
    roles: dict[str, dict] = {}
    groups: list[dict] = []

    def add(url: str, filename: str, text: str, role: str, ctype: str = "text/html; charset=utf-8", **info) -> None:
        files[filename] = text.encode("utf-8")
        routes[url] = {"file": filename, "content_type": ctype}
        roles[url] = {"role": role, **info}

    ad = itertools.count()
    for key in ARTICLES:
        title, blocks = topic_html(key)
        url = f"/articles/{key}.html"
        crumbs = f'<a href="/articles/">Articles</a> &rsaquo; {html.escape(title)}'
        add(url, f"articles/{key}.html", desktop(url, title, article_main(key, blocks, url=url), ad=next(ad), crumbs=crumbs), "article")
        members = {url: "original"}
        for n, query in enumerate(TRACKING.get(key, [])):
            vurl = f"{url}?{query}"
            label, text = ADS[(n + 2) % len(ADS)]
            sponsor = f'<div class="sponsored-inline"><p><b>{label}:</b> {text}</p></div>'
            page = desktop(vurl, title, article_main(key, blocks, sponsor=sponsor, url=vurl), ad=next(ad), crumbs=crumbs, canonical=url)
            add(vurl, f"articles/{key}.tracking-{n + 1}.html", page, "duplicate", kind="tracking-parameters", of=url)
            members[vurl] = "tracking-parameters: other timestamp, other ads"
        for n, query in enumerate(SESSIONS.get(key, [])):
            vurl = f"{url}?{query}"
            page = desktop(vurl, title, article_main(key, blocks, url=vurl), session=query.split("=")[1], ad=next(ad), crumbs=crumbs, canonical=url)
            add(vurl, f"articles/{key}.session-{n + 1}.html", page, "duplicate", kind="session-id", of=url)
            members[vurl] = "session id: other timestamp, session token, other ad"
        if key in PRINT:
            vurl = f"/print/articles/{key}.html"
            add(vurl, f"print/{key}.html", print_page(vurl, key, blocks), "duplicate", kind="printer-friendly", of=url)
            members[vurl] = "printer-friendly version"
        if key in MOBILE:
            vurl = f"/m/articles/{key}.html"
            add(vurl, f"m/{key}.html", mobile_page(vurl, key, blocks), "duplicate", kind="second-template", of=url)
            members[vurl] = "same article, mobile template"
        if key in REPOSTS:
            slug = REPOSTS[key]
            vurl = f"/community/{slug}.html"
            note = (
                '<p class="editor-note">Reposted by the community editors, with minor corrections. '
                f'The original is in <a href="{url}">our articles section</a>.</p>'
            )
            edited = light_edit(blocks)
            page = desktop(
                vurl, f"Repost: {title}", article_main(key, edited, title=f"Repost: {title}", extra_top=note, links=False, url=vurl),
                ad=next(ad), crumbs='<a href="/community/">Community</a> &rsaquo; Repost', popular=ARTICLES[4:12],
            )  # fmt: skip
            add(vurl, f"community/{slug}.html", page, "duplicate", kind="lightly-edited-copy", of=url)
            members[vurl] = "lightly edited copy: new title, editor's note, words changed, last paragraph cut"
        if len(members) > 1:
            groups.append({"original": url, "members": members})

    for key in REFERENCE:
        title, blocks = topic_html(key)
        url = f"/reference/{key}.html"
        main_html = f"<h1>{_inline(title)}</h1>\n" + "\n".join(blocks)
        crumbs = f'<a href="/reference/">Language reference</a> &rsaquo; {html.escape(title)}'
        add(url, f"reference/{key}.html", desktop(url, title, main_html, ad=next(ad), crumbs=crumbs), "distinct-shared-template")

    # Hubs.  Every page is reachable from a hub that is never a duplicate, so the set of
    # pages crawled does not depend on which member of a group is crawled first.
    intro_home = (
        "The Python Language Reference, one chapter at a time: statements, expressions, the data model and the "
        "execution model, with a mobile edition and printer-friendly pages."
    )
    home_items = [(f"/articles/{k}.html", topic_html(k)[0], "") for k in ARTICLES[:6]]
    home_items += [(f"/articles/{k}.html?{q}", f"Newsletter pick: {topic_html(k)[0]}", "") for k, qs in TRACKING.items() for q in qs]
    home_items += [(f"/articles/{k}.html?{q}", f"Continue reading: {topic_html(k)[0]}", "") for k, qs in SESSIONS.items() for q in qs]
    home_items += [("/subscribe/confirmed.html", "Newsletter: confirm your subscription", "")]
    home_items += [("/articles/", "All articles", ""), ("/reference/", "The language reference, topic by topic", ""),
                   ("/community/", "Community reposts", ""), ("/feed.xml", "Subscribe to the RSS feed", "")]  # fmt: skip
    add("/", "index.html", desktop("/", SITE_NAME, hub_main(SITE_NAME, intro_home, home_items), ad=next(ad), crumbs="Start"), "hub")

    intro = "Every article on the site, oldest first. Each one is a full chapter of the language reference."
    items = [(f"/articles/{k}.html", topic_html(k)[0], first_sentence(k)) for k in ARTICLES]
    add("/articles/", "articles/index.html", desktop("/articles/", "Articles", hub_main("Articles", intro, items), ad=next(ad), crumbs="Articles"), "hub")

    intro = "Short reference pages for single statements, operators and literals."
    items = [(f"/reference/{k}.html", topic_html(k)[0], "") for k in REFERENCE]
    add("/reference/", "reference/index.html",
        desktop("/reference/", "Language reference", hub_main("Language reference", intro, items), ad=next(ad), crumbs="Language reference"),
        "hub")  # fmt: skip

    intro = "Chapters our readers reposted with their own corrections, and links they shared."
    items = [(f"/community/{slug}.html", f"Repost: {topic_html(k)[0]}", first_sentence(k)) for k, slug in REPOSTS.items()]
    items.append(("/articles/draft-removed.html", "An article draft that was taken down", ""))
    add("/community/", "community/index.html",
        desktop("/community/", "Community", hub_main("Community", intro, items), ad=next(ad), crumbs="Community"), "hub")  # fmt: skip

    about = [
        "<h1>About this site</h1>",
        f"<p>{FOOTER_ABOUT}</p>",
        "<p>It is the sample site of the simhash-scrapy example project. Its pages imitate the near-duplicates a "
        "crawler meets on real sites: the same article behind tracking parameters and session ids, printer-friendly "
        "pages, a second template for phones, and lightly edited reposts. The reference pages share one heavy "
        "template but are different pages.</p>",
        f"<p>{FOOTER_LEGAL}</p>",
    ]
    add("/about.html", "about.html", desktop("/about.html", "About", "\n".join(about), ad=next(ad), crumbs="About"), "hub")

    # A thin page: too little text to fingerprint (skipped, counted as simhash/skipped/thin).
    thin = '<h1>Newsletter</h1>\n<p class="notice">Subscription confirmed. See you on Friday!</p>'
    add("/subscribe/confirmed.html", "subscribe/confirmed.html",
        desktop("/subscribe/confirmed.html", "Newsletter", thin, ad=next(ad), crumbs="Newsletter"), "thin")  # fmt: skip

    # Not HTML, and plain text for robots.
    feed_items = "".join(
        f"<item><title>{html.escape(topic_html(k)[0])}</title><link>/articles/{k}.html</link>"
        f"<description>{html.escape(first_sentence(k))}</description></item>"
        for k in ARTICLES
    )
    feed = f'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel><title>{SITE_NAME}</title>{feed_items}</channel></rss>\n'
    add("/feed.xml", "feed.xml", feed, "not-html", ctype="application/rss+xml; charset=utf-8")
    add("/robots.txt", "robots.txt", "User-agent: *\nDisallow: /search\nDisallow: /newsletter\n", "robots", ctype="text/plain; charset=utf-8")
    # Linked but missing (404): /articles/draft-removed.html, /privacy.html, /account/login.html.
    for missing in ("/articles/draft-removed.html", "/privacy.html", "/account/login.html"):
        roles[missing] = {"role": "broken-link"}

    truth = {
        "description": "Ground truth of the example project's sample site; see build.py.",
        "built_with": f"Python {sys.version_info.major}.{sys.version_info.minor} pydoc_data.topics",
        "max_distance": MAX_DISTANCE,
        "groups": groups,
        "pages": dict(sorted(roles.items())),
    }
    return files, routes, truth


def measure(files: dict[str, bytes], routes: dict, truth: dict) -> dict:
    """Distances with the core (main-content and visible-text modes); raises if the ground truth is wrong."""
    try:
        from simhash_scrapy import DEFAULT_FEATURES, MIN_TOKENS, fingerprint_html, hamming_distance
        from simhash_scrapy.core.defaults import MAX_DISTANCE as DEFAULT_K
    except ImportError:  # pragma: no cover
        print("simhash_scrapy not importable: ground truth not checked")
        return {}
    assert MAX_DISTANCE == DEFAULT_K, f"build.py's MAX_DISTANCE ({MAX_DISTANCE}) is not the plugin's default ({DEFAULT_K})"
    html_urls = [u for u, r in routes.items() if r["content_type"].startswith("text/html")]
    # The plugin's defaults are the core's defaults (SIMHASH_* unset).
    report: dict = {"checked_with": {"features": DEFAULT_FEATURES.signature(), "min_tokens": MIN_TOKENS, "max_distance": MAX_DISTANCE}}
    for mode in ("main_content", "visible_text"):
        fps = {u: fingerprint_html(files[routes[u]["file"]], main_content=mode == "main_content") for u in html_urls}
        ok = sorted(u for u in html_urls if fps[u] is not None)
        group_of = {m: g["original"] for g in truth["groups"] for m in g["members"]}
        within = {}
        for g in truth["groups"]:
            ms = [m for m in g["members"] if fps[m] is not None]
            within[g["original"]] = max((hamming_distance(fps[a], fps[b]) for a, b in itertools.combinations(ms, 2)), default=None)
            if len(ms) < len(g["members"]):
                within[g["original"]] = None  # a member was not fingerprinted: the group cannot be found
        closest_unrelated = min(
            (hamming_distance(fps[a], fps[b]), a, b)
            for a, b in itertools.combinations(ok, 2)
            if group_of.get(a, a) != group_of.get(b, b)
        )
        ref = [u for u in ok if truth["pages"][u]["role"] == "distinct-shared-template"]
        ref_pairs_within_k = sum(
            1 for a, b in itertools.combinations(ref, 2) if hamming_distance(fps[a], fps[b]) <= MAX_DISTANCE
        )
        report[mode] = {
            "max_distance_within_groups": within,
            "closest_unrelated_pair": {"distance": closest_unrelated[0], "urls": list(closest_unrelated[1:])},
            "shared_template_pairs_within_k": ref_pairs_within_k,
            "unfingerprinted": sorted(u for u in html_urls if fps[u] is None),
        }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = parser.parse_args()
    files, routes, truth = build()
    report = measure(files, routes, truth)
    print(json.dumps(report, indent=1))
    if report:
        main_mode = report["main_content"]
        bad = {k: d for k, d in main_mode["max_distance_within_groups"].items() if d is None or d > MAX_DISTANCE}
        thin = sorted(u for u, info in truth["pages"].items() if info["role"] == "thin")
        if bad or main_mode["closest_unrelated_pair"]["distance"] <= MAX_DISTANCE or main_mode["unfingerprinted"] != thin:
            print("ground truth does not hold in main-content mode", file=sys.stderr)
            return 1
        truth["measured_at_build"] = report
    outputs = {f"pages/{name}": data for name, data in files.items()}
    outputs["routes.json"] = (json.dumps(dict(sorted(routes.items())), indent=1) + "\n").encode()
    outputs["ground_truth.json"] = (json.dumps(truth, indent=1) + "\n").encode()
    if args.check:
        stale = [n for n, d in outputs.items() if not (HERE / n).exists() or (HERE / n).read_bytes() != d]
        stale += [str(p.relative_to(HERE)) for p in PAGES.rglob("*") if p.is_file() and str(p.relative_to(HERE)) not in outputs]
        print("up to date" if not stale else f"differs: {stale[:10]}")
        return 1 if stale else 0
    if PAGES.exists():
        shutil.rmtree(PAGES)
    for name, data in outputs.items():
        path = HERE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"wrote {len(files)} pages, {len(routes)} routes, {len(truth['groups'])} duplicate groups to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
