"""Which pairs the identity signals kept apart, and by which signal: a count for stats and reports.

Identity signals (``core.cluster.identity``) put a page that declares an identity in
a scope of its own, so the backend never compares it with a page declaring
another.  Whether that kept apart two pages the text rule would have joined
is not known to the backend; ``KeptApart`` answers it in the crawl's process:
it keeps, per plain scope, the simhashes (and one-edit keys) of the pages
that declared an identity and became canonical in their own scope, and for
each new such page looks for an earlier one within k (or one token away)
that declared something else.  The signals whose values differ between the
two name the pair (``sku``, ``price``...).  It counts; it never decides.

Pages that declare nothing are not kept, so a pair of which one page
declares nothing (a print view without the product's JSON-LD) is not
counted.  Bounded: at most ``limit`` pages are kept (later ones are checked,
not added), and it is not saved with a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import defaults
from ..index.index import BlockPermutedIndex
from ..index.keytable import KeyTable

__all__ = ["KeptApart", "LIMIT"]

#: At most this many pages are kept (about 100 bytes each, plus their declared values).
LIMIT = 100_000


class KeptApart:
    """Pages that declared an identity, per plain scope; ``check`` names what kept a new one apart."""

    def __init__(self, max_distance: int = defaults.MAX_DISTANCE, blocks: int | None = defaults.BLOCKS,
                 limit: int = LIMIT) -> None:  # fmt: skip
        self.max_distance, self.blocks, self.limit = max_distance, blocks, limit
        self._indexes: dict[str, BlockPermutedIndex] = {}
        self._keys: dict[str, KeyTable] = {}
        self._declared: list[Mapping[str, frozenset[str]]] = []

    def __len__(self) -> int:
        return len(self._declared)

    def check(self, scope: str, fingerprint: int, edit_keys: Sequence[int], declared: Mapping[str, set[str]]) -> list[str]:
        """The kinds of signal whose values differ between this page and the nearest earlier page of ``scope``
        (the plain scope) within k or one token away that declared another identity (``[]``: none), then
        keep this page."""
        values = {kind: frozenset(found) for kind, found in declared.items() if found}
        other = self._nearest(scope, fingerprint, edit_keys)
        differ: list[str] = []
        if other is not None:
            before = self._declared[other]
            differ = sorted(kind for kind in set(before) | set(values) if before.get(kind) != values.get(kind))
        if len(self._declared) < self.limit:
            entry = len(self._declared)
            self._declared.append(values)
            index = self._indexes.get(scope)
            if index is None:
                index = self._indexes[scope] = BlockPermutedIndex(self.max_distance, self.blocks)
            index.add(entry, fingerprint)
            if edit_keys:
                self._keys.setdefault(scope, KeyTable()).add(entry, edit_keys)
        return differ

    def _nearest(self, scope: str, fingerprint: int, edit_keys: Sequence[int]) -> int | None:
        index = self._indexes.get(scope)
        matches = index.query(fingerprint) if index is not None else []
        if matches:
            nearest = min(m.distance for m in matches)
            return min(int(m.key) for m in matches if m.distance == nearest)
        table = self._keys.get(scope)
        return table.owner(edit_keys) if table is not None and edit_keys else None
