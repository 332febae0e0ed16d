"""Main-content mode: keep a page's main content, drop the site's boilerplate.

No Scrapy import here: this module is part of the algorithm core.

Real templates put navigation, sidebars, cookie banners, "related" lists and
share bars in plain ``div``s, so tag names alone find little.  Three cheap
passes over the cleaned lxml tree:

1. **Container**: if the page marks its main content (``<main>``,
   ``role="main"``, a single ``<article>``, or a common content id such as
   ``#content``), only that subtree is kept.
2. **Named boilerplate**: elements whose tag (``nav``, ``aside``, ``header``,
   ``footer``, ``form``...), ARIA role or ``class``/``id`` words name
   boilerplate (``sidebar``, ``cookie``, ``related``, ``share``...) are removed,
   unless they hold most of the remaining text (a wrapper with a bad name).
3. **Link lists**: block containers whose text is mostly link text (menus,
   tag clouds, "popular pages") are removed.
"""

from __future__ import annotations

import re

from lxml import etree

__all__ = ["keep_main_content"]

_BOILERPLATE_TAGS = {"nav", "aside", "header", "footer", "form", "menu", "dialog", "button", "select"}
_BOILERPLATE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog"}
_BOILERPLATE_WORDS = {
    "nav", "navbar", "navigation", "menu", "menubar", "submenu", "sidebar", "sidenav", "side",
    "footer", "header", "masthead", "topbar", "toolbar", "breadcrumb", "breadcrumbs",
    "cookie", "cookies", "consent", "gdpr", "banner", "related", "popular", "trending",
    "recommended", "recommendations", "share", "sharing", "social", "newsletter", "subscribe",
    "signup", "promo", "advert", "advertisement", "ad", "ads", "adsense", "sponsor",
    "sponsored", "widget", "widgets", "comments", "comment", "disqus", "pagination", "pager",
    "skip", "skiplink", "outbrain", "taboola", "tags", "tagcloud", "login", "search",
    "copyright", "legal", "modal", "popup", "overlay", "toc", "sphinxsidebar", "related-posts",
}  # fmt: skip
_WORD_SPLIT = re.compile(r"[\s_\-]+")
_CONTENT_XPATH = etree.XPath(
    "//main | //*[@role='main'] | //*[@id='content' or @id='main-content' or @id='main' "
    "or @itemprop='articleBody' or contains(concat(' ', normalize-space(@class), ' '), ' body ')]"
)
_ARTICLE_XPATH = etree.XPath("//article")
_CANDIDATES_XPATH = etree.XPath("//*[@class or @id or @role]")
_LINK_LIST_TAGS = ("ul", "ol", "dl", "div", "table", "section", "p", "td")
# Containers with at least this share of link text and little text of their own go.
_LINK_DENSITY = 0.6
_LINK_LIST_MAX_CHARS = 3000


def _text_len(element: etree._Element) -> int:
    return len(etree.tostring(element, method="text", encoding="unicode", with_tail=False).strip())


def _names_boilerplate(element: etree._Element) -> bool:
    tag = element.tag
    if not isinstance(tag, str):
        return False
    if tag in _BOILERPLATE_TAGS:
        return True
    role = element.get("role")
    if role and role.strip().lower() in _BOILERPLATE_ROLES:
        return True
    names = f"{element.get('class') or ''} {element.get('id') or ''}".lower()
    if not names.strip():
        return False
    return any(word in _BOILERPLATE_WORDS for word in _WORD_SPLIT.split(names))


def _pick_container(root: etree._Element) -> etree._Element:
    candidates = _CONTENT_XPATH(root)
    if not candidates:
        articles = _ARTICLE_XPATH(root)
        if len(articles) == 1:
            candidates = articles
    if not candidates:
        return root
    best = max(candidates, key=_text_len)
    # A marked container with almost no text is a false lead (an empty <main> shell).
    if _text_len(best) < 200 and _text_len(root) > 4 * max(1, _text_len(best)):
        return root
    return best


def _remove(element: etree._Element) -> None:
    parent = element.getparent()
    if parent is None:
        return
    tail = element.tail
    if tail:
        previous = element.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(element)


def _drop_named_boilerplate(container: etree._Element) -> None:
    total = _text_len(container)
    doomed = [el for el in container.iter() if el is not container and _names_boilerplate(el)]
    for element in doomed:
        if element.getparent() is None:
            continue
        # A wrapper named like boilerplate that holds most of the text is the content.
        if total and _text_len(element) > 0.5 * total:
            continue
        _remove(element)


def _drop_link_lists(container: etree._Element) -> None:
    for element in list(container.iter(*_LINK_LIST_TAGS)):
        if element is container or element.getparent() is None:
            continue
        text = _text_len(element)
        if text == 0 or text > _LINK_LIST_MAX_CHARS:
            continue
        links = sum(_text_len(a) for a in element.iter("a"))
        if links >= _LINK_DENSITY * text:
            _remove(element)


def keep_main_content(root: etree._Element) -> etree._Element:
    """Return the subtree holding the page's main content, with boilerplate removed (in place)."""
    container = _pick_container(root)
    _drop_named_boilerplate(container)
    _drop_link_lists(container)
    return container
