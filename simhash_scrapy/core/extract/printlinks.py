"""A print view's numbered links are not the page's layout: its address list and link markers leave first.

A content system's print view with links (a CMS print module, a text browser's dump) puts a
numbered marker after each link of the text (``<a>sauté</a> [3] in oil``) and lists the addresses
below it (``<li>[3] https://...</li>``).  The fingerprint leaves both out already
(``core.features.features.strip_not_content``; sentences: ``core.cluster.containment``), but
main-content extraction weighs the page's blocks before that: a marker is text outside a link, so a
menu of short links, each with its marker, is no longer mostly link text, and the address list, text
without a link, outweighs the page's own blocks.  The print view of a home page then gave another part
of the page than the page itself (a shop's home page: the address list; a listing site's home: every
category menu), and a product page's print view a longer text.

``drop_print_links`` runs before extraction: every list (``<ol>``, ``<ul>``) of at least
``MIN_ITEMS`` items, each a marker and one address alone, is removed, and only on a page with such a
list the marker that starts a link's tail.  Both through ``dom`` (undone on Scrapy's own tree).  A
page without such a list is not touched; one whose bytes hold no ``] https://`` is not even walked.
"""

from __future__ import annotations

import re

from lxml import etree

from .dom import drop_elements, set_tail

__all__ = ["drop_print_links", "MIN_ITEMS"]

#: A print view's address list has at least this many items (one link is no list).
MIN_ITEMS = 2

#: One item of the list: a marker of 1-4 digits and one address (``[12] https://shop.test/a``).
_REFERENCE = re.compile(r"\s*\[[0-9]{1,4}\]\s*(?:[A-Za-z][A-Za-z0-9+.\-]{1,9}://|www\.)\S+\s*")
#: What an address list's bytes hold: a marker's end, then an address (``] https://``).
_MAY_LIST = re.compile(rb"\][ \t\r\n]*(?:[A-Za-z][A-Za-z0-9+.\-]{1,9}://|www\.)")
#: The marker that starts a link's tail (``</a> [3]``), the space before it kept.
_TAIL_MARKER = re.compile(r"^(\s*)\[[0-9]{1,4}\]")


def _is_address_list(element: etree._Element) -> bool:
    """Whether ``element`` (an ``<ol>`` or ``<ul>``) is a print view's address list."""
    if len(element) < MIN_ITEMS or (element.text and not element.text.isspace()):
        return False
    for item in element:
        if item.tag != "li" or len(item) or not _REFERENCE.fullmatch(item.text or ""):
            return False
        if item.tail and not item.tail.isspace():
            return False
    return True


def drop_print_links(root: etree._Element, data: bytes | None = None) -> bool:
    """Remove a print view's address lists and its links' markers from ``root`` (in place, undoable);
    whether it had any.  ``data``, the page's bytes, lets a page without ``] http://`` or ``] www.``
    skip the walk (an address list whose brackets are character references is then left: recall only)."""
    if data is not None and _MAY_LIST.search(data) is None:
        return False
    lists = [element for element in root.iter("ol", "ul") if _is_address_list(element)]
    if not lists:
        return False
    drop_elements(lists)
    for link in root.iter("a"):
        tail = link.tail
        if tail and "[" in tail:
            unmarked = _TAIL_MARKER.sub(r"\1", tail, count=1)
            if unmarked != tail:
                set_tail(link, unmarked)
    return True
