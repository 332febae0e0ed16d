"""Protected text: selected text that must also be equal for two pages to be near-duplicates.

Two product pages that differ only in a price or a SKU are near-duplicates by
the rule (``core.cluster.clustering``): one token apart, or a few bits.  With
``SIMHASH_DISTINCT_SELECTORS = [".price", ".sku"]`` the text those selectors
find on a page is *protected*: a digest of it is folded into the page's scope
(``scope_key``), and pages of different scopes are never compared, so pages
whose protected text differs can never be each other's near-duplicates.  Pages
with the same protected text are compared as before.  Every backend keeps one
index per scope, so this works on all of them without a change to their rule.

A page on which no selector matches anything keeps its plain scope.

``DistinctSelectors`` takes the selectors already translated to XPath (the
glue translates CSS with parsel, as ``response.css`` does, so ``::text`` and
``::attr(name)`` work); it needs only lxml.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from lxml import etree

__all__ = ["DistinctSelectors", "scope_key", "split_scope_key", "scoped_hash", "SCOPE_SEPARATOR"]

#: Between the plain scope and the protected text's digest: ``"myspider#3f09c2d1a4b5e6f7"``.
SCOPE_SEPARATOR = "#"


def _text(result: Any) -> str:
    """An element's string value (its text, comments left out) or an attribute/text node, spaces collapsed."""
    value = result.xpath("string()") if isinstance(result, etree._Element) else str(result)
    return " ".join(value.split())


def _follows(previous: Any, marker: Any) -> bool:
    """Whether the text node ``previous`` is the one just before ``marker`` (a comment or processing instruction)."""
    if not isinstance(previous, etree._ElementUnicodeResult):
        return False
    before = marker.getprevious()
    if before is None:  # the marker opens its parent: the parent's own text is just before it
        return bool(previous.is_text) and previous.getparent() is marker.getparent()
    return bool(previous.is_tail) and previous.getparent() is before


def _joined(results: list[Any]) -> list[Any]:
    """The results with each text node that a comment or processing instruction cut off joined to the one
    before it: the protected text of a page is the same whether its parse kept comments (Scrapy's, in a
    crawl) or dropped them (``core.extract.text``, in ``compare`` and ``dedup``)."""
    out: list[Any] = []
    last: Any = None
    for result in results:
        marker = result.getparent() if isinstance(result, etree._ElementUnicodeResult) and result.is_tail else None
        if out and marker is not None and marker.tag in (etree.Comment, etree.PI) and _follows(last, marker):
            out[-1] = out[-1] + str(result)
        else:
            out.append(result if isinstance(result, etree._Element) else str(result))
        last = result
    return out


class DistinctSelectors:
    """Selectors whose text must be equal too (``names``: what the user wrote, ``xpaths``: the same in XPath)."""

    def __init__(self, names: Sequence[str], xpaths: Sequence[str]) -> None:
        if len(names) != len(xpaths):
            raise ValueError("one XPath expression per selector is needed")
        self.names = tuple(names)
        self.xpaths = tuple(xpaths)
        compiled = []
        for name, xpath in zip(self.names, self.xpaths):
            try:
                compiled.append(etree.XPath(xpath))
            except etree.XPathSyntaxError as exc:
                raise ValueError(f"selector {name!r} gives an invalid XPath expression {xpath!r}: {exc}") from None
        self._compiled = tuple(compiled)

    def __bool__(self) -> bool:
        return bool(self._compiled)

    def texts(self, root: Any) -> list[list[str]]:
        """The protected text of a page: per selector, the text of each match in document order."""
        found = []
        for xpath in self._compiled:
            result = xpath(root)
            found.append([_text(r) for r in _joined(result)] if isinstance(result, list) else [_text(result)])
        return found

    def digest(self, root: Any) -> str | None:
        """16 hex digits of BLAKE2b over the protected text, or ``None`` when no selector matched anything."""
        texts = self.texts(root)
        if not any(texts):
            return None
        payload = json.dumps(texts, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        return hashlib.blake2b(payload, digest_size=8).hexdigest()


def scope_key(scope: str, digest: str | None) -> str:
    """The scope a page is checked in: its plain scope, with the protected text's digest when it has one."""
    return scope if digest is None else f"{scope}{SCOPE_SEPARATOR}{digest}"


def split_scope_key(key: str) -> tuple[str, str] | None:
    """``scope_key``'s ``(scope, digest)`` back, of a key with a digest; ``None`` for a plain scope."""
    scope, separator, digest = key.rpartition(SCOPE_SEPARATOR)
    return (scope, digest) if separator and digest else None


def scoped_hash(scope: str, name: str) -> int:
    """A 64-bit hash of a name in a scope (a page's identity, an address), the same in every process (BLAKE2b):
    what is keyed by it decides alike in every worker, every run (never the built-in ``hash``, seeded per process)."""
    data = f"{scope}\x1f{name}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
