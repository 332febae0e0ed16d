"""Identity signals: what a page itself declares it is (a product's SKU and price, a listing's page number).

Two product pages of one shop that differ only in a SKU and a price (two
variants, two products on one template), or two pages of one listing, are
near-duplicates by the text rule.  Many pages say what they are in markup
made for machines; when two pages declare *different* identities they are
different pages, whatever their text.  ``SIMHASH_IDENTITY_SIGNALS`` (on by
default) reads, from the tree the page is already parsed into (no second parse;
only the kinds of markup the page's bytes mention are looked for):

* schema.org ``Product`` / ``Offer`` (and their kin, ``PRODUCT_TYPES``) in
  JSON-LD: ``sku``, ``gtin*``, ``mpn``, ``productID``, ``price`` /
  ``lowPrice``, the product's ``name`` (variants, related and similar
  products left out: ``SKIPPED_KEYS``);
* the same properties in microdata (``itemprop``) and RDFa (``property``) of
  a product or an offer item, or of no item at all (a bare
  ``itemprop="price"``; a ``name`` only a product's or an offer's), not
  those of another item (a stock quote's price, a person's name);
* OpenGraph / Facebook ``product:`` meta (``product:price:amount``,
  ``product:retailer_item_id``, ``product:upc`` ...);
* pagination: the page numbers a page's ``<link rel=next>`` /
  ``<link rel=prev>`` (in its head) name (``page=3``, ``/page/3/``,
  ``start=40`` ...);
* a product option its address names (``option``): the query parameters
  shops name a variant by (``OPTION_PARAMETERS``: Shopify's ``variant=``,
  ``color=``, ``size=``, WooCommerce's ``attribute_*=``), read from the URL
  only: two variants of one product (their text a price or a word apart)
  are different offers.  A copy of a variant that keeps its address's
  option (a tracking copy, a print view) is compared with it; the
  product's page without the option is not (a kept duplicate, never a
  lost variant).

Each signal's values (lower case, spaces collapsed; prices as their digits
and separators) are a set per kind (a listing sorted another way declares the
same products); their digest is folded into the page's scope
(``core.cluster.distinct.scope_key``), as ``SIMHASH_DISTINCT_SELECTORS``' digest is,
so every backend keeps such pages apart without a change to its rule.  A
page declaring nothing keeps its plain scope.

What this cannot do (the price of riding in the scope): a page declaring an
identity and a copy that declares none (a print view without the JSON-LD) are
in different scopes, unless the copy comes after a page of its address that
declared it (``core.cluster.viewidentity``: the copy then takes it); a page
whose declared price changed between two crawls is a new page of a new scope.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from lxml import etree

__all__ = [
    "IdentitySignals", "identity_signals", "identity_digest", "may_declare", "combine_digests", "SIGNAL_KINDS",
    "url_options", "url_page_number", "OPTION_PARAMETERS",
]

#: The kinds of signal (the ``simhash/identity/<kind>`` stats count the pages declaring each).
SIGNAL_KINDS = ("sku", "gtin", "mpn", "productid", "price", "name", "page", "option")

#: schema.org types whose properties identify a product or an offer (lower case).
PRODUCT_TYPES = frozenset(
    {"product", "productmodel", "individualproduct", "someproducts", "offer", "aggregateoffer", "vehicle", "car"}
)
#: JSON-LD keys whose values are other products (a variant group, related items): not this page's identity.
SKIPPED_KEYS = frozenset(
    {"hasvariant", "isvariantof", "isrelatedto", "issimilarto", "isaccessoryorsparepartfor", "isconsumablefor",
     "review", "reviews", "aggregaterating", "itemreviewed", "mainentityofpage", "breadcrumb", "ispartof",
     "publisher", "provider", "sourceorganization", "copyrightholder", "sponsor", "funder", "author", "creator"}
)  # fmt: skip
#: Item types that stand for the whole page (``<body itemscope itemtype="WebPage">``): a property inside one
#: and no other item counts as the page's own, as a property outside any item does.
PAGE_TYPES = frozenset({"webpage", "itempage", "collectionpage", "searchresultspage", "website", "offercatalog"})
#: Property (lower case, prefix left out) -> kind.
_PROPERTY_KIND = {
    "sku": "sku", "gtin": "gtin", "gtin8": "gtin", "gtin12": "gtin", "gtin13": "gtin", "gtin14": "gtin",
    "mpn": "mpn", "productid": "productid", "price": "price", "lowprice": "price",
}  # fmt: skip
#: OpenGraph / Facebook product meta (``<meta property=...>``) -> kind.
_META_KIND = {
    "product:price:amount": "price", "og:price:amount": "price", "product:sale_price:amount": "price",
    "product:retailer_item_id": "sku", "product:sku": "sku", "product:upc": "gtin", "product:ean": "gtin",
    "product:isbn": "gtin", "og:upc": "gtin", "og:ean": "gtin", "og:isbn": "gtin", "product:mfr_part_no": "mpn",
}  # fmt: skip

#: The elements that may carry a signal, one XPath per family (``_families`` says which a page needs):
#: JSON-LD scripts, microdata / RDFa / OpenGraph properties, and the pagination links of the head (a path
#: of a few steps, not a walk of the page).
_FIND_JSONLD = etree.XPath("//script[contains(@type, 'ld+json')]")
_FIND_PROPERTY = etree.XPath("//*[@itemprop or @property]")
_FIND_REL = etree.XPath("/*/head/link[@rel]")
#: The property values a page's bytes must name for its properties to be read (a search of the bytes is
#: much cheaper than a walk of the tree, and most pages declare nothing).
#: (``itemprop=`` and ``property=``: one search for "prop", the regular expression's literal start.)
_PROPERTIES = re.compile(
    rb"""prop(?:erty)?\s*=\s*["']?[^"'>]*?(?:sku|gtin|mpn|productid|productID|price|name|product:)"""
)
_REL_PAGES = re.compile(rb"""rel\s*=\s*["']?[^"'>]*?\b(?:next|prev)""")
_ALL_FAMILIES = (_FIND_JSONLD, _FIND_PROPERTY, _FIND_REL)

#: Bounds (a hostile page cannot make the walk costly): elements looked at, JSON-LD characters parsed,
#: JSON nodes visited, values kept per kind, characters of one value.
MAX_ELEMENTS = 5000
MAX_JSONLD_CHARS = 512 * 1024
MAX_JSON_NODES = 5000
MAX_VALUES = 200
MAX_VALUE_CHARS = 200

#: The page number in a pagination link (query parameters and path segments that number pages).
_PAGE_NUMBER = re.compile(
    r"(?:[?&;](?:page|pg|paged|pagenum|pageno|page_no|pagenumber|currentpage|start|offset)=(\d{1,9})(?:[&;#]|$))"
    r"|(?:/page[/_-]?(\d{1,9})(?:[/?#.]|$))",
    re.I,
)
_PRICE_JUNK = re.compile(r"[^\d.,]")
#: Query parameters that name a product's option (lower case), and prefixes of such parameters.
OPTION_PARAMETERS = frozenset({"variant", "variant_id", "variantid", "color", "colour", "size"})
OPTION_PREFIXES = ("attribute_",)
#: The bytes of a query that may hold one (a search of the URL before it is parsed).
_MAY_OPTION = re.compile(r"[?&;](?:variant|colou?r|size|attribute_)", re.I)


class IdentitySignals:
    """The identity a page declares: per kind, its values (``values``), and JSON-LD blocks that could not be read."""

    def __init__(self) -> None:
        self.values: dict[str, set[str]] = {}
        self.bad_jsonld = 0

    def add(self, kind: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return
        text = " ".join(str(value).split()).lower()[:MAX_VALUE_CHARS]
        if kind == "price":
            text = _PRICE_JUNK.sub("", text).strip(".,")
        if text:
            found = self.values.setdefault(kind, set())
            if len(found) < MAX_VALUES:
                found.add(text)

    def kinds(self) -> list[str]:
        """The kinds this page declares, in ``SIGNAL_KINDS`` order."""
        return [kind for kind in SIGNAL_KINDS if self.values.get(kind)]

    def digest(self) -> str | None:
        """16 hex digits of BLAKE2b over the sorted values, or ``None`` when the page declares nothing."""
        kinds = self.kinds()
        if not kinds:
            return None
        payload = json.dumps([[kind, sorted(self.values[kind])] for kind in kinds], ensure_ascii=False)
        return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _local(name: str) -> str:
    """A property's name without its vocabulary (``schema:sku``, ``http://schema.org/sku`` -> ``sku``)."""
    return re.split(r"[:/#]", name)[-1].lower()


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("@type", ())
    names = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    return {_local(n) for n in names if isinstance(n, str)}


def _walk_jsonld(data: Any, signals: IdentitySignals) -> None:
    """Collect the identifying properties of every product and offer in one JSON-LD document (bounded)."""
    stack: list[tuple[Any, bool]] = [(data, False)]
    seen = 0
    while stack and seen < MAX_JSON_NODES:
        node, offered = stack.pop()
        seen += 1
        if isinstance(node, list):
            stack.extend((item, offered) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        types = _types(node)
        product = offered or bool(types & PRODUCT_TYPES)
        for key, value in node.items():
            name = key.lower() if isinstance(key, str) else ""
            if name in SKIPPED_KEYS:
                continue
            if product and (name in _PROPERTY_KIND or (name == "name" and "offer" not in types)):
                for item in value if isinstance(value, list) else [value]:
                    signals.add(_PROPERTY_KIND.get(name, "name"), item)
            elif isinstance(value, (dict, list)):
                stack.append((value, product and name == "offers"))


def _read_jsonld(text: str | None, signals: IdentitySignals, budget: list[int]) -> None:
    if not text or ("roduct" not in text and "ffer" not in text):
        return  # no product or offer in it: not parsed
    budget[0] -= len(text)
    if budget[0] < 0:
        signals.bad_jsonld += 1
        return
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # broken, or nested deeper than the parser goes
        signals.bad_jsonld += 1
        return
    _walk_jsonld(data, signals)


def _item_type(element: Any) -> str | None:
    """The type of the item ``element``'s property belongs to: the nearest ``itemscope`` / ``typeof`` above it
    (``None``: none); ``"-"`` for an item that is itself a property ``SKIPPED_KEYS`` names (the product a
    paywall's ``isPartOf`` names, a related product): not the page's."""
    parent = element.getparent()
    while parent is not None:
        kind = parent.get("itemtype") or parent.get("typeof")
        if kind is not None or parent.get("itemscope") is not None:
            role = parent.get("itemprop") or parent.get("property") or ""
            if any(_local(name) in SKIPPED_KEYS for name in role.split()):
                return "-"
            return " ".join(_local(k) for k in kind.replace("%20", " ").split()) if kind else ""
        parent = parent.getparent()
    return None


def _value(element: Any) -> str:
    for attribute in ("content", "value"):
        value = element.get(attribute)
        if value is not None:
            return str(value)
    if element.tag == "meta":
        return ""
    return str(element.xpath("string()"))[: MAX_VALUE_CHARS * 4]


def _read_property(element: Any, names: str, signals: IdentitySignals) -> None:
    for name in names.split():
        full = name.lower()
        meta = _META_KIND.get(full)
        if meta is not None:
            signals.add(meta, element.get("content"))
            continue
        local = _local(full)
        kind = _PROPERTY_KIND.get(local) or ("name" if local == "name" else None)
        if kind is None:
            continue
        item = set((_item_type(element) or "").split()) - PAGE_TYPES
        # a property of a product or an offer, or of no item at all (a bare itemprop="price"); not one
        # of another item (a stock quote's price, a person's name); a name only a product's or offer's
        if (item & PRODUCT_TYPES) or (not item and kind != "name"):
            signals.add(kind, _value(element))


def _page_numbers(element: Any, signals: IdentitySignals) -> None:
    rel = (element.get("rel") or "").lower().split()
    side = "next" if "next" in rel else "prev" if ("prev" in rel or "previous" in rel) else None
    if side is not None:
        match = _PAGE_NUMBER.search(element.get("href") or "")
        if match is not None:
            signals.add("page", f"{side}:{int(match.group(1) or match.group(2))}")


def url_page_number(url: str) -> int | None:
    """The page number ``url`` names (``?page=3``, ``/page/3/``, ``start=40``: as a pagination link's), else ``None``."""
    match = _PAGE_NUMBER.search(url)
    return None if match is None else int(match.group(1) or match.group(2))


def url_options(url: str | None) -> list[str]:
    """The product options ``url``'s query names (``OPTION_PARAMETERS``), as ``name=value`` (lower case),
    sorted; ``[]`` for most URLs (one search of the URL)."""
    if not url or _MAY_OPTION.search(url) is None:
        return []
    query = urlsplit(url).query
    found = set()
    for name, value in parse_qsl(query, keep_blank_values=False):
        key = name.strip().lower()
        if key in OPTION_PARAMETERS or key.startswith(OPTION_PREFIXES):
            found.add(f"{key}={value.strip().lower()}")
    return sorted(found)


def _families(raw: bytes | None) -> tuple[Any, ...]:
    """The XPaths worth running on a page whose source is ``raw`` (``None``, or bytes with NULs, as UTF-16
    has: all of them).  Each test is a search of the bytes (the first for a byte or a word few pages
    hold), so a page that declares nothing costs a few microseconds; attribute names are looked for in
    lower case, as HTML pages write them (the crawl and ``compare`` both pass the bytes: one answer)."""
    if raw is None or b"\x00" in raw:
        return _ALL_FAMILIES
    head = raw.find(b"</head")  # (the pagination links are read from the head: only its bytes are searched)
    rel = _REL_PAGES.search(raw, 0, head if head >= 0 else len(raw)) is not None
    jsonld = b"+" in raw and b"ld+json" in raw and (b"roduct" in raw or b"ffer" in raw)
    prop = _PROPERTIES.search(raw) is not None
    if not (rel or jsonld or prop):
        return ()
    return tuple(find for find, wanted in zip(_ALL_FAMILIES, (jsonld, prop, rel)) if wanted)


def _read_element(element: Any, signals: IdentitySignals, budget: list[int]) -> None:
    tag = element.tag
    if tag == "script":
        _read_jsonld(element.text, signals, budget)
        return
    names = element.get("itemprop") or element.get("property")
    if names:
        _read_property(element, names, signals)
    if tag == "link":
        _page_numbers(element, signals)


def identity_signals(root: Any, raw: bytes | None = None, url: str | None = None) -> IdentitySignals:
    """The identity signals of the page whose tree is ``root`` (an lxml element or tree, or a function
    giving it, called only when the page may declare something; ``None``: nothing).

    ``raw``: the page's bytes, when known: a family of signals whose words the bytes do not hold is not
    looked for in the tree (most pages: the tree is then never asked for).  ``url``: the page's address,
    when known: the product options it names (``url_options``).
    """
    signals = IdentitySignals()
    for option in url_options(url):
        signals.add("option", option)
    families = _families(raw)
    if root is None or not families:
        return signals
    if callable(root):
        root = root()
        if root is None:
            return signals
    budget = [MAX_JSONLD_CHARS]
    seen: set[Any] = set()  # (the elements themselves: their proxies stay alive, so one element is one proxy)
    looked = 0
    for find in families:
        try:
            found = find(root)
        except (etree.XPathError, ValueError):  # pragma: no cover - a tree lxml cannot walk
            continue
        for element in found if isinstance(found, list) else ():
            if looked >= MAX_ELEMENTS:
                return signals
            if element in seen:  # (an element found by two families is read once)
                continue
            seen.add(element)
            looked += 1
            _read_element(element, signals, budget)
    return signals


def may_declare(raw: bytes | None, url: str | None = None) -> bool:
    """Whether a page whose bytes are ``raw`` (at ``url``) may declare an identity (``False``: it declares none)."""
    return bool(_families(raw)) or bool(url_options(url))


def identity_digest(root: Any, raw: bytes | None = None, url: str | None = None) -> str | None:
    """The digest of the identity a page (at ``url``) declares (``IdentitySignals.digest``), ``None`` when none."""
    return identity_signals(root, raw, url).digest() if may_declare(raw, url) else None


def combine_digests(digests: Iterable[str | None]) -> str | None:
    """One digest for a page's protected text and its identity (``None`` when it has neither): either alone
    is itself, so a crawl with only one of them keeps the scopes it had."""
    present = [d for d in digests if d is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return hashlib.blake2b("|".join(present).encode("ascii"), digest_size=8).hexdigest()
