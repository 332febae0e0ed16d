"""Other views of one address: the print or reader view of a page, found by step 7 at a smaller size.

A print view, a reader view or a tracking copy of a page usually keeps the
page's address and adds a query (``?print=1``, ``?format=print``,
``?view=reader``, ``?utm_source=...``).  A print view of a shop or recipe
page keeps only part of the page (the recipe card, the product box): a
fifth of its sentences, too small a share for step 7's ``MIN_RATIO``
(``core.cluster.containment``: a page holding another plus as much again is
not a copy of it).  Between two pages of the **same address** (host, path
and the page number the URL names; only the rest of the query and the
fragment differ) the share may be as small as ``MIN_RATIO``: every sampled
sentence of the smaller page must still be one of the larger's, with at
least ``MIN_SHARED`` shared (no sentence left out as common: a page's own
copies would make its sentences common), or ``MIN_CONTAINMENT`` of them once
the common sentences are left out (the print view of a page whose canonical
copy was edited).  ``MIN_SHARED`` is one less than step 7's
``containment.MIN_SHARED``: a sketch keeps a long page's 32 smallest sentence
hashes, so a recipe card a twentieth of its page has only about three sentences
in the pair's sample, every one of which must then be the larger page's;
pages of one address are already one item (the query values that name an
item are part of the address).  Pages of other addresses keep step 7's own
bounds.

Such a pair is found by its address, not only by a shared anchor: a
canonical page with a sketch is listed under its scope and address
(``AddressBook``), and a page that step 7 left unmatched is verified against
the canonical pages of its own address (at most ``MAX_PER_ADDRESS``).  Listing
pages of one address (``?page=2``, ``?sort=price``) that show other items are
not contained in each other and stay apart, as do a product's variants, whose
options (``?variant=``, ``?color=``) put them in scopes of their own
(``core.cluster.identity``).  A query value that names an item is part of
the address (``item.php?id=7``, ``details.php?page=offer_1_14``,
``?p=123``: a parameter named like an identifier, or a value of letters and
digits or of three digits or more; tracking and session parameters aside),
so a site that names its items in the query does not give them one address:
a small item page whose sampled sentences are all shared boilerplate would
otherwise join a larger item page.  An unknown parameter of that shape
(``?token=a1b2``) only costs recall: its views are left to step 7's own
bounds.
"""

from __future__ import annotations

import re

from urllib.parse import parse_qsl, urlsplit

from .distinct import scoped_hash
from .identity import url_page_number
from .sitetemplate import host_of, plain_parts

__all__ = ["AddressBook", "address_of", "page_address", "host_and_address", "MIN_RATIO", "MIN_CONTAINMENT", "MIN_SHARED", "MAX_PER_ADDRESS"]

#: Between two pages of one address, the smaller has at least this share of the larger's sentences (a twentieth:
#: a recipe card of 8 sentences under a post of 95, the product box of a long shop page; chosen on the shop
#: set's tuning half, where a tenth missed them).
MIN_RATIO = 0.05
#: ... and all of the smaller's sampled sentences are in the larger, or this share of them once the sentences
#: ``containment.COMMON`` pages had are left out (a print view of an edited copy of the page).
MIN_CONTAINMENT = 0.8
#: ... with at least this many sampled sentences shared (step 7's ``containment.MIN_SHARED`` is 4).
MIN_SHARED = 3
#: The most canonical pages an address lists (later ones are not listed: fewer pairs, never a wrong one).
MAX_PER_ADDRESS = 4


#: A query parameter whose name says it identifies an item (``id``, ``productId``, ``item_id``, ``sku``, ``p``),
#: whatever its value: letters only too (``?name=red-scarf``, MediaWiki's ``?title=Main_Page``, ``?q=boots``).
_ID_NAME = re.compile(r"(?:^|[_\-.]|[a-z](?=I[dD]$))(?:id|sku|pid|item|product|article|offer|post|topic|thread|p"
                      r"|name|title|slug|handle|q|query|search|keywords?|cat|category|tag)$", re.IGNORECASE)
#: phpBB's topic (``viewtopic.php?t=123``): ``t`` names the item unless its value is a timestamp (cache busting).
_TOPIC_T = re.compile(r"^\d{1,8}$")
#: A value that names something: letters and digits together, or three digits or more (``1``, ``print``: no).
_ID_VALUE = re.compile(r"^(?=.*\d)(?=.*[A-Za-z]).{2,}$|\d{3}")
#: Parameters that never name the item: tracking, sessions, sorting and the views themselves.
_NOT_NAMING = re.compile(r"^(?:utm_.*|.*sess(?:ion)?(?:id)?|sid|[gf]clid|msclkid|mc_[ce]id|ref|source|sort|order(?:by)?"
                         r"|dir|view|format|print|output|mode|layout|ts|t|_)$", re.IGNORECASE)


def _naming_query(query: str) -> str:
    """The parameters of ``query`` that name an item (``_ID_NAME`` or ``_ID_VALUE``, not ``_NOT_NAMING``),
    sorted, as ``name=value``; ``""`` for most queries."""
    named = sorted(
        f"{name}={value}" for name, value in parse_qsl(query, keep_blank_values=False)
        if (not _NOT_NAMING.match(name) and (_ID_NAME.search(name) or _ID_VALUE.search(value)))
        or (name == "t" and _TOPIC_T.match(value))
    )
    return "&".join(named)


def address_of(url: str | None, host: str | None = None) -> str | None:
    """A page's address: host (``host_of``) and path, no trailing slash, the query parameters that name an
    item (``_naming_query``) and the page number its URL names (``identity.url_page_number``: page 2 of a
    thread is another page); the fragment and the rest of the query are left out.  ``None`` for no URL or
    one without a host.  ``host``: ``host_of(url)``, when the caller has it already."""
    if not url:
        return None
    return _address(url, plain_parts(url), host)


def host_and_address(url: str | None, sketch: object | None) -> tuple[str | None, str | None]:
    """``(host_of(url), page_address(url, sketch))`` of a page with a URL (one reading of a plain URL: a Redis
    worker asks it of every page), ``(None, None)`` without one."""
    if not url:
        return None, None
    plain = plain_parts(url)
    host = plain[0] if plain is not None else host_of(url)
    return host, (_address(url, plain, host) if sketch is not None else None)


def _address(url: str, plain: tuple[str, str, str] | None, host: str | None) -> str | None:
    """``address_of(url, host)``, ``plain``: ``plain_parts(url)``."""
    if host is None:  # (a plain URL's host is ``host_of``'s: one match of the URL, not two)
        host = plain[0] if plain is not None else host_of(url)
    if not host:
        return None
    if plain is not None:
        _, path, query = plain
    else:
        try:
            parts = urlsplit(url)
        except ValueError:
            return None
        path, query = parts.path, parts.query
    naming = _naming_query(query) if query else ""
    number = url_page_number(url)
    return (f"{host}{path.rstrip('/') or '/'}" + (f"?{naming}" if naming else "")
            + ("" if number is None else f" page {number}"))


def page_address(url: str | None, sketch: object | None, host: str | None = None) -> str | None:
    """The address step 7 checks a page at (``address_of``): only a page with a sentence sketch has one (the
    in-process rule, the store and the Redis mirror all take it from here)."""
    return address_of(url, host) if sketch is not None else None


class AddressBook:
    """The canonical pages with a sentence sketch, per scope and address (step 7's views).

    Each (scope, address) is kept as its 64-bit hash (``distinct.scoped_hash``: the same in every process, so
    every worker and run lists alike; the book is rebuilt when a store is opened), about 170 bytes a listed
    page (``python benchmarks/address_memory.py``); two addresses of one hash share candidates, the same in
    every process.
    """

    def __init__(self) -> None:
        self._entries: dict[int, int | list[int]] = {}  # key -> entry, or entries (in the order listed)
        self._where: dict[int, int] = {}  # entry -> key

    def __len__(self) -> int:
        return len(self._where)

    def add(self, scope: str, address: str, entry: int) -> None:
        if entry in self._where:
            return
        key = scoped_hash(scope, address)
        listed = self._entries.get(key)
        if listed is None:
            self._entries[key] = entry
        elif isinstance(listed, int):
            self._entries[key] = [listed, entry]
        elif len(listed) < MAX_PER_ADDRESS:
            listed.append(entry)
        else:
            return
        self._where[entry] = key

    def remove(self, entry: int) -> None:
        key = self._where.pop(entry, None)
        if key is None:
            return
        listed = self._entries[key]
        if isinstance(listed, int):
            del self._entries[key]
            return
        listed.remove(entry)
        if len(listed) == 1:
            self._entries[key] = listed[0]

    def entries(self, scope: str, address: str) -> list[int]:
        """The canonical entries listed under ``scope`` and ``address``, in the order they were listed."""
        listed = self._entries.get(scoped_hash(scope, address))
        return [] if listed is None else [listed] if isinstance(listed, int) else list(listed)

    def listed_at(self, entry: int, scope: str, address: str | None) -> bool:
        """Whether ``entry`` is listed under ``scope`` and ``address``."""
        return address is not None and self._where.get(entry) == scoped_hash(scope, address)
