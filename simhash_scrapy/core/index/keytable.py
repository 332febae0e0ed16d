"""A compact table of one-edit keys: key -> the entry that owns it (no Scrapy import).

Canonical pages of a few dozen tokens carry up to 64 one-edit keys each
(``core.features.edits``).  A dict of Python ints costs ~97 bytes a key (6.2 KB a
page); this table keeps most keys in two sorted numpy arrays (16 bytes a key)
and only the recent ones in a dict, merged into the arrays in bulk, as the
Redis replica does with its recent index: ~27 bytes a key with the entry's
packed copy (``python benchmarks/edit_keys.py``).  Removed keys are marked (owner -1)
and dropped at the next merge.

The first owner of a key keeps it (``add`` never replaces a live owner), and
``owner`` of several keys is the lowest owner among them: the clustering
rule's tie (the entry recorded first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["KEY", "KeyTable", "pack_keys", "unpack_keys"]

#: Recent keys kept in the dict before a merge (at least; a quarter of the table when larger).
_RECENT = 1 << 16


#: One key packed: big-endian unsigned 64-bit, in memory as in the store's ``edit_keys`` column.
KEY = np.dtype(">u8")


def pack_keys(keys: Sequence[int]) -> bytes:
    """Keys as 8 bytes each (``KEY``): what an entry keeps of its keys, and what the store writes."""
    return np.asarray(keys, dtype=np.uint64).astype(KEY).tobytes()


def unpack_keys(data: bytes) -> tuple[int, ...]:
    if not data:  # most pages have no keys: no array for them (the persistent backend asks for every page)
        return ()
    return tuple(np.frombuffer(data, dtype=KEY).tolist())


class KeyTable:
    """Key -> owner (a non-negative int), for exact lookups of many keys at once."""

    def __init__(self) -> None:
        self._keys = np.zeros(0, dtype=np.uint64)  # sorted, distinct
        self._owners = np.zeros(0, dtype=np.int64)  # -1: removed
        self._recent: dict[int, int] = {}
        self._live = 0

    def __len__(self) -> int:
        """Live keys."""
        return self._live

    def nbytes(self) -> int:
        """Bytes of the sorted arrays (the recent keys' dict not counted)."""
        return self._keys.nbytes + self._owners.nbytes

    def _find(self, keys: np.ndarray) -> np.ndarray:
        """Positions of ``keys`` in the sorted arrays, -1 where absent (or removed)."""
        if not len(self._keys) or not len(keys):
            return np.full(len(keys), -1, dtype=np.int64)
        at = np.searchsorted(self._keys, keys)
        at[at == len(self._keys)] = 0
        hit = (self._keys[at] == keys) & (self._owners[at] >= 0)
        return np.where(hit, at, -1)

    def owners(self, keys: Sequence[int]) -> set[int]:
        """The live owners of any of ``keys``."""
        if not keys or not self._live:
            return set()
        found = {owner for key in keys if (owner := self._recent.get(key)) is not None}
        at = self._find(np.asarray(keys, dtype=np.uint64))
        found.update(self._owners[at[at >= 0]].tolist())
        return found

    def owner(self, keys: Sequence[int]) -> int | None:
        """The lowest live owner of any of ``keys``, or ``None``."""
        return min(self.owners(keys), default=None)

    def add(self, owner: int, keys: Sequence[int]) -> list[int]:
        """Give ``owner`` each of ``keys`` that has no live owner yet; the keys another live owner kept."""
        if not keys:
            return []
        at = self._find(np.asarray(keys, dtype=np.uint64))
        kept = []
        for key, position in zip(keys, at.tolist()):
            held = self._recent.get(key) if position < 0 else int(self._owners[position])
            if held is None:
                self._recent[key] = owner
                self._live += 1
            elif held != owner:
                kept.append(key)
        if len(self._recent) >= max(_RECENT, len(self._keys) // 4):
            self._merge()
        return kept

    def add_many(self, owners: Iterable[int], keys: Iterable[Sequence[int]]) -> None:
        """``add`` for many owners at once (in order: earlier owners win)."""
        for owner, some in zip(owners, keys):
            self.add(owner, some)
        self._merge()

    def remove(self, owner: int, keys: Sequence[int]) -> None:
        """Take away the keys of ``keys`` that ``owner`` owns."""
        if not keys:
            return
        for key in keys:
            if self._recent.get(key) == owner:
                del self._recent[key]
                self._live -= 1
        at = self._find(np.asarray(keys, dtype=np.uint64))
        at = at[at >= 0]
        mine = at[self._owners[at] == owner]
        self._owners[mine] = -1
        self._live -= len(mine)

    def _merge(self) -> None:
        if not self._recent:
            return
        keep = self._owners >= 0
        keys = np.concatenate([self._keys[keep], np.fromiter(self._recent.keys(), np.uint64, len(self._recent))])
        owners = np.concatenate([self._owners[keep], np.fromiter(self._recent.values(), np.int64, len(self._recent))])
        order = np.argsort(keys, kind="stable")
        self._keys, self._owners = keys[order], owners[order]
        self._recent = {}
