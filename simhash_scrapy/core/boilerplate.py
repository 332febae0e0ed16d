"""Main-content mode: keep a page's main content, drop the site's boilerplate.

No Scrapy import here: this module is part of the algorithm core.

Real templates put navigation, sidebars, cookie banners, "related" lists and
share bars in plain ``div``s, so tag names alone find little.  Three passes
over the cleaned lxml tree, each a handful of XPath queries that libxml2
evaluates in C (text and link-text lengths use EXSLT ``str:concat``), so the
Python side only touches the few elements that are removed:

1. **Container**: the element the page marks as its main content (``<main>``,
   ``role="main"``, a single ``<article>``, ``itemprop="articleBody"``, a
   common content id such as ``#content``, Sphinx's ``div.body``), the
   innermost one that still holds most of the marked text.  A page that marks
   nothing is walked down from ``<body>`` through wrappers to the element that
   holds most of its non-link text (siblings such as menus and sidebars stay
   behind).
2. **Named boilerplate**: elements whose tag (``nav``, ``aside``, ``header``,
   ``footer``, ``form``...), ARIA role or ``class``/``id`` words name
   boilerplate (``sidebar``, ``cookie``, ``related``, ``share``...) are
   removed, unless they hold most of the container's text (a wrapper with a
   bad name).  ``id``s of ``section`` elements are heading slugs, not names.
3. **Link lists**: blocks whose text is mostly link text (menus, tag clouds,
   "popular pages") are removed, unless together they are most of the
   container's text: then the page *is* a list of links (a table of contents,
   an index) and the links are its content.
"""

from __future__ import annotations

import re

from lxml import etree

from .dom import drop_element

__all__ = ["keep_main_content", "BOILERPLATE_WORDS"]

_NS = {"str": "http://exslt.org/strings"}

BOILERPLATE_WORDS = frozenset({
    "nav", "navbar", "navigation", "menu", "menubar", "submenu", "sidebar", "sidenav", "sidebars",
    "footer", "header", "masthead", "topbar", "toolbar", "breadcrumb", "breadcrumbs", "colophon",
    "cookie", "cookies", "consent", "gdpr", "cookieconsent", "banner", "related", "popular", "trending",
    "recommended", "recommendations", "share", "sharing", "sharedaddy", "social", "newsletter",
    "subscribe", "signup", "promo", "advert", "advertisement", "ad", "ads", "adsense", "adunit",
    "sponsor", "sponsored", "widget", "widgets", "comments", "disqus", "pagination", "pager",
    "skiplink", "outbrain", "taboola", "tagcloud", "login", "copyright", "legal", "modal", "popup",
    "overlay", "sphinxsidebar", "sphinxsidebarwrapper", "related-posts", "yarpp", "secondary",
})  # fmt: skip
# Class/id words are split at whitespace, '-' and '_' and compared whole.
_NAME_WORDS = re.compile(r"[^\s_\-]+")

_BOILERPLATE_TAGS = frozenset({"nav", "aside", "header", "footer", "form", "menu", "dialog", "button", "select"})
_BOILERPLATE_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog", "alertdialog"}
)
# Tags that may hold (or name) boilerplate; lxml's C-level tag filter finds them without a Python walk.
_BLOCK_TAGS = (
    "div", "section", "ul", "ol", "dl", "table", "figure", "article", "main",
    "nav", "aside", "header", "footer", "form", "menu", "dialog", "button", "select",
)  # fmt: skip
# Blocks that can be link lists (menus, tag clouds, "popular pages").
_LIST_TAGS = frozenset({"div", "ul", "ol", "dl", "table", "nav", "menu"})
_CONTENT_IDS = frozenset(
    {"content", "main", "main-content", "maincontent", "primary", "article", "article-body", "articlebody"}
)
_ARTICLE_BODY = ("articlebody",)

_TEXT_LEN = etree.XPath("string-length(normalize-space(.))")
_LINK_LEN = etree.XPath("string-length(normalize-space(str:concat(.//a//text())))", namespaces=_NS)

# Link lists: at least two links, at most this much text, and at least this share of link text.
_LINK_DENSITY = 0.6
_LINK_LIST_MAX_CHARS = 3000
# How deep below the container link lists are looked for (through plain wrapper divs).
_LINK_LIST_DEPTH = 3
# When the link lists together hold more than this share of the container's text, they are the content.
_LINK_LISTS_MAX_SHARE = 0.7

_WRAPPERS = frozenset({"body", "div", "section", "main", "article", "center", "table", "tbody", "tr", "td", "form"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_PARAGRAPHS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote"})
# Walking down an unmarked page: a child holding this share of the non-link text is "the" content.
_DOMINANT = 0.7


def _text_len(element: etree._Element) -> int:
    return int(_TEXT_LEN(element))


def _content_len(element: etree._Element) -> int:
    """Text length without link text."""
    return int(_TEXT_LEN(element)) - int(_LINK_LEN(element))


def names_boilerplate(element: etree._Element) -> bool:
    """True when the element's tag, role or class/id words name it boilerplate."""
    tag = element.tag
    if not isinstance(tag, str):
        return False
    if tag in _BOILERPLATE_TAGS:
        return True
    role = element.get("role")
    if role and role.strip().lower() in _BOILERPLATE_ROLES:
        return True
    names = element.get("class") or ""
    ident = element.get("id")
    # Section ids (and those of docutils' div.section) are slugs of their heading.
    if ident and tag != "section" and "section" not in names:
        names = f"{names} {ident}"
    if not names:
        return False
    return not BOILERPLATE_WORDS.isdisjoint(_NAME_WORDS.findall(names.lower()))


def _is_inside(element: etree._Element, ancestor: etree._Element) -> bool:
    parent = element.getparent()
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.getparent()
    return False


def _marker(element: etree._Element) -> int:
    """2: an explicit main-content marker (<main>, role=main), 1: a content id/class, 0: none."""
    if element.tag == "main" or element.get("role") == "main":
        return 2
    ident = element.get("id")
    if ident and ident.lower() in _CONTENT_IDS:
        return 1
    if element.tag == "div" and element.get("class") == "body":  # Sphinx
        return 1
    itemprop = element.get("itemprop")
    return 1 if itemprop and itemprop.lower() in _ARTICLE_BODY else 0


def _single_article(node: etree._Element) -> etree._Element | None:
    articles = node.iter("article")
    first = next(articles, None)
    if first is None or next(articles, None) is not None:
        return None
    return first


def _pick_marked(root: etree._Element) -> etree._Element | None:
    candidates = []
    for element in root.iter("div", "main", "section", "article", "td"):
        strength = _marker(element)
        if strength == 2:
            # Explicit marker: taken as is, unless it wraps a single <article> holding most of its text.
            article = _single_article(element)
            if article is not None and _text_len(article) >= 0.5 * _text_len(element):
                return article
            return element
        if strength:
            candidates.append(element)
    article = _single_article(root)
    if article is not None:
        candidates.append(article)
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    sized = sorted(((_text_len(c), i, c) for i, c in enumerate(candidates)), key=lambda x: (-x[0], x[1]))
    best_len, _, best = sized[0]
    # the innermost candidate that still holds most of the best one's text
    for length, _, candidate in sized[1:]:
        if length >= 0.5 * best_len and _is_inside(candidate, best):
            best, best_len = candidate, length
    return best if best_len else None


def _has_text(element: etree._Element, chars: int) -> bool:
    """True when ``element`` holds at least ``chars`` non-space characters (stops early)."""
    count = 0
    for text in element.itertext():
        count += len(text) - text.count(" ") - text.count("\n")
        if count >= chars:
            return True
    return False


def _has_heading(node: etree._Element) -> bool:
    return any(child.tag in _HEADINGS for child in node)


def _walk_down(root: etree._Element) -> etree._Element:
    """From <body> down through wrappers to the element holding most of the non-link text."""
    node = root.find("body")
    if node is None:
        node = root
    total = _content_len(node)
    while total > 0:
        best, best_len = None, 0
        paragraphs = 0
        for child in node:
            if child.tag in _PARAGRAPHS:
                paragraphs += 1
                continue
            if child.tag not in _WRAPPERS:
                continue
            length = _content_len(child)
            if length > best_len:
                best, best_len = child, length
        # An element with a heading or paragraphs of its own is the article (or a section of it).
        if best is None or best_len < _DOMINANT * total or paragraphs >= 2 or _has_heading(node):
            break
        node, total = best, best_len
    return node


def _pick_container(root: etree._Element) -> tuple[etree._Element, bool]:
    """The content container and whether the page marked it."""
    marked = _pick_marked(root)
    if marked is None:
        return _walk_down(root), False
    # <main> and role="main" are taken at their word: with little text in them, the page has
    # little content (it is skipped by the caller, never matched).  A content id or class with
    # almost no text is a false lead when the page has much more text elsewhere.
    if marked.tag == "main" or marked.get("role") == "main" or _has_text(marked, 200):
        return marked, True
    if _text_len(root) <= 4 * max(1, _text_len(marked)):
        return marked, True
    return _walk_down(root), False


def _drop_named_boilerplate(container: etree._Element) -> None:
    total = -1
    dead: set[etree._Element] = set()  # inside an element already doomed
    named: list[etree._Element] = []
    for element in container.iter(*_BLOCK_TAGS):
        if element in dead or element is container or not names_boilerplate(element):
            continue
        if total < 0:
            total = _text_len(container)
        # A wrapper named like boilerplate ("has-sidebar") that holds most of the text and
        # the page's heading is the content.
        if total and _text_len(element) > 0.5 * total and next(element.iter("h1", "h2"), None) is not None:
            continue
        named.append(element)
        dead.update(element.iter(*_BLOCK_TAGS))
    for element in named:
        drop_element(element)


def _link_list_candidates(container: etree._Element, depth: int) -> list[etree._Element]:
    """Blocks near the top of ``container``: its children, and theirs through plain wrappers."""
    out = []
    for child in container:
        tag = child.tag
        if tag in _LIST_TAGS:
            out.append(child)
            if depth > 1 and tag in ("div", "section") and not _has_heading(child):
                out.extend(_link_list_candidates(child, depth - 1))
    return out


def _drop_link_lists(container: etree._Element) -> None:
    """Remove menus, tag clouds and "popular pages" lists standing next to the content."""
    lists: list[tuple[etree._Element, int]] = []
    done: etree._Element | None = None
    for element in _link_list_candidates(container, _LINK_LIST_DEPTH):
        if done is not None and _is_inside(element, done):
            continue
        links = element.iter("a")
        if next(links, None) is None or next(links, None) is None:
            continue  # fewer than two links
        length = _text_len(element)
        if 0 < length <= _LINK_LIST_MAX_CHARS and _LINK_LEN(element) >= _LINK_DENSITY * length:
            lists.append((element, length))
            done = element
    if not lists:
        return
    total = _text_len(container)
    if total and sum(length for _, length in lists) > _LINK_LISTS_MAX_SHARE * total:
        return  # a table of contents, an index: the links are the content
    for element, _ in lists:
        drop_element(element)


def keep_main_content(root: etree._Element) -> etree._Element:
    """Return the subtree holding the page's main content, with boilerplate removed (in place)."""
    container, marked = _pick_container(root)
    _drop_named_boilerplate(container)
    if not marked:
        # Inside a container the page marks, lists of links are its own (tables of contents);
        # on a page that marks nothing, menus and sidebars in plain divs sit next to the content.
        _drop_link_lists(container)
    return container
