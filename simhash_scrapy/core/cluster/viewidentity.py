"""The identity a view takes from its address: a print view lost its page's JSON-LD, not its page's identity.

A page declaring an identity (``core.cluster.identity``: a product's SKU and
price in JSON-LD, microdata or OpenGraph, a listing's page numbers) is
checked in a scope of its own; a page declaring none keeps its plain scope.
The print or reader view of a product page keeps the page's text but not its
markup for machines (no JSON-LD, no ``itemprop``): it declared nothing, so it
was never compared with its page, nor with the page's tracking copies.

``AddressIdentities`` remembers, per plain scope (with the protected text's
digest, ``SIMHASH_DISTINCT_SELECTORS``) and address (``views.address_of``:
host, path, the query values that name an item and the page number), the
identity the pages of that address declared.  A later page of the address
that declares none is checked in that identity's scope, as a view of the
page.  Never between different items or variants:

* an address whose pages declared two different identities (a price that
  changed, a page declaring the variant it shows) gives none;
* a product option the URL names (``?variant=``, ``?color=``:
  ``identity.url_options``) is part of the identity, not of the address: a
  page whose URL names one neither teaches nor takes an identity (the
  product's page is no variant's view);
* a page declaring an identity keeps its own.

A view crawled *before* every page of its address that declares the identity
keeps its plain scope (a kept duplicate, never a lost page).  Bounded:
``MAX_ADDRESSES`` addresses (then new addresses are not remembered: fewer
views joined, never a wrong one).  A crawl resumed from a store replays its
records' URLs and scopes (``replay``: the scope of a page declaring an
identity ends with its digest), so it goes on as the crawl that wrote them;
with ``SIMHASH_DISTINCT_SELECTORS`` a scope's digest mixes the protected
text's in and nothing is replayed.  Another worker of a shared Redis index
starts without the addresses the others saw (fewer views joined).
"""

from __future__ import annotations

from collections.abc import Iterable

from .distinct import scoped_hash, split_scope_key
from .identity import url_options
from .views import address_of

__all__ = ["AddressIdentities", "MAX_ADDRESSES"]

#: The most addresses remembered: about 155 bytes each (90 for its key and slot, 65 for the identity digest it keeps;
#: ``python benchmarks/address_memory.py``), 31 MB at most.
MAX_ADDRESSES = 200_000

_AMBIGUOUS = ""


class AddressIdentities:
    """The identity the pages of each address declared, for the pages of the address that declare none."""

    def __init__(self, max_addresses: int = MAX_ADDRESSES) -> None:
        self.max_addresses = max_addresses
        self._declared: dict[int, str] = {}  # scoped_hash(plain scope, address) -> identity digest, or _AMBIGUOUS

    def __len__(self) -> int:
        return len(self._declared)

    def resolve(self, scope: str, url: str | None, declared: str | None) -> tuple[str | None, bool]:
        """``(identity digest, inherited)`` of a page of ``url`` in ``scope`` (its plain scope, with the
        protected text's digest) that declared ``declared`` (a digest, else ``None``): its own, remembered
        for its address, or the one its address's pages declared when it declares none (``inherited``)."""
        if declared is None and not self._declared:
            return None, False  # (nothing learned yet: no address to parse)
        key = self._key(scope, url)
        if key is None:
            return declared, False
        known = self._declared.get(key)
        if declared is None:
            return (known, True) if known else (None, False)
        if known is None:
            if len(self._declared) < self.max_addresses:
                self._declared[key] = declared
        elif known != declared:
            self._declared[key] = _AMBIGUOUS
        return declared, False

    def declared(self, scope: str, url: str | None) -> str | None:
        """The identity the pages of ``url``'s address declared in ``scope`` (as ``resolve`` gives it a page declaring
        none), without learning: the scope a page of that address was checked in, before it is downloaded
        (its record, for a conditional re-crawl)."""
        key = self._key(scope, url)
        return None if key is None else self._declared.get(key) or None

    @staticmethod
    def _key(scope: str, url: str | None) -> int | None:
        """The key of ``url``'s address in ``scope``; ``None`` for none, or a URL naming a product option."""
        if url_options(url):
            return None
        address = address_of(url)
        return None if address is None else scoped_hash(scope, address)

    def replay(self, pages: Iterable[tuple[str, str]]) -> None:
        """Learn from pages checked before, ``(url, scope)`` in the order they were checked (a store's records):
        a scope ``plain#digest`` is a page of ``plain`` whose identity was ``digest`` (declared or taken).
        Only for scopes without protected text (``SIMHASH_DISTINCT_SELECTORS`` unset)."""
        for url, scope in pages:
            split = split_scope_key(scope)
            if split is not None:
                self.resolve(split[0], url, split[1])
