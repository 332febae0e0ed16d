"""An index that takes many single additions cheaply at any size: a big ``BlockPermutedIndex`` and a small one.

``BlockPermutedIndex.add`` sorts its unsorted tail into the tables every few
thousand rows, a step that copies the tables: at a million rows that is
~13 µs an added row.  A ``LayeredIndex`` adds to a small ``recent`` index
and moves it into the big one every ``recent_rows`` rows, so an addition costs
about the same at every size (the replica of the Redis backend does the same:
``backends.redis.replica``).  Queries ask both and answer as one
``BlockPermutedIndex`` holding the same rows would: every row within
``max_distance``, nearest first (ties: the big index's, i.e. older, rows first).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any

import numpy as np

from .index import BlockPermutedIndex, Match, _as_fingerprint_array

__all__ = ["LayeredIndex"]

#: Rows the small index takes before it is moved into the big one.
RECENT_ROWS = 1 << 16


class LayeredIndex:
    """``BlockPermutedIndex``'s ``add``/``add_many``/``remove``/``query`` over a big and a small index."""

    def __init__(self, max_distance: int, blocks: int | None, recent_rows: int = RECENT_ROWS) -> None:
        self.max_distance = max_distance
        self.blocks = blocks
        self.recent_rows = recent_rows
        self.big = BlockPermutedIndex(max_distance, blocks)
        self.recent = BlockPermutedIndex(max_distance, blocks)

    def __len__(self) -> int:
        return len(self.big) + len(self.recent)

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        yield from self.big
        yield from self.recent

    def __contains__(self, key: object) -> bool:
        return key in self.recent or key in self.big

    def add(self, key: Hashable, fingerprint: int) -> None:
        self.recent.add(key, fingerprint)
        self._settle()

    def add_many(self, keys: Iterable[Hashable] | np.ndarray, fingerprints: Iterable[int] | np.ndarray) -> None:
        self.recent.add_many(keys, fingerprints)
        self._settle()

    def _settle(self) -> None:
        if len(self.recent) >= self.recent_rows:
            keys, fps = self.recent.rows()
            self.big.add_many(keys, fps)
            self.recent = BlockPermutedIndex(self.max_distance, self.blocks)

    def remove(self, key: Hashable) -> int:
        return self.recent.remove(key) + self.big.remove(key)

    def query(self, fingerprint: int) -> list[Match]:
        """Every stored fingerprint within ``max_distance``, nearest first (ties: oldest first)."""
        return _merged(self.big.query(fingerprint), self.recent.query(fingerprint))

    def query_many(self, fingerprints: list[int]) -> list[list[Match]]:
        """``query`` of each fingerprint (``BlockPermutedIndex.query_many``: one call an index)."""
        queries = _as_fingerprint_array(fingerprints, "fingerprints")  # (checked once, for both)
        return [
            _merged(found, more)
            for found, more in zip(self.big.query_many(queries), self.recent.query_many(queries))
        ]

    def nbytes(self) -> int:
        return self.big.nbytes() + self.recent.nbytes()


def _merged(found: list[Match], more: list[Match]) -> list[Match]:
    """The big index's matches and the small one's as one index's: nearest first, ties the big index's first."""
    if not more:
        return found
    if not found:
        return more
    return sorted(found + more, key=lambda m: m.distance)  # stable: the big index's rows first
