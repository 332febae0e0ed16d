"""An exact index over a few rows: a query compares the fingerprint with every row.

No Scrapy import here: this module is part of the algorithm core.

What one batch of the global Redis backend decides over: the batch's pages
and the canonical pages its reads found near them, a few dozen rows, made and
dropped every batch (``backends.redis.cluster_backend``).  A
``BlockPermutedIndex`` of them cost more to build and ask than the scan it
saves: its tables and their C specs were made for every batch
(``benchmarks/scan_index.py`` measures both).  The answers are a
``BlockPermutedIndex``'s, row for row: every live row within
``max_distance``, nearest first, ties the oldest row first (tested against it).
The scan is one C loop (``_speedups.scan_rows``) when the helpers are built,
Python's ``int.bit_count`` over the rows otherwise.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Iterator
from typing import Any

import numpy as np

from .. import _native
from ..features.fingerprint import check_fingerprint
from .index import Match

__all__ = ["ScanIndex"]


class ScanIndex:
    """``BlockPermutedIndex``'s ``add``/``add_many``/``remove``/``query``/``query_many``, by a scan of every row
    (meant for a few hundred rows at most; the C scan takes up to 2**32 - 1)."""

    def __init__(self, max_distance: int, blocks: int | None = None) -> None:
        """``blocks``: taken as ``Clusterer`` gives it to every index class, and not used (no tables)."""
        if not isinstance(max_distance, int) or isinstance(max_distance, bool) or not 0 <= max_distance <= 63:
            raise ValueError(f"max_distance must be an integer from 0 to 63, got {max_distance!r}")
        self.max_distance = max_distance
        self._keys: list[Any] = []
        self._fps = array("Q")  # (native uint64: the C scan reads the buffer as it is)
        self._alive: list[bool] = []
        self._removed = 0

    def __len__(self) -> int:
        return len(self._fps) - self._removed

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        for key, fp, alive in zip(self._keys, self._fps, self._alive):
            if alive:
                yield key, fp

    def add(self, key: Hashable, fingerprint: int) -> None:
        self._keys.append(key)
        self._fps.append(check_fingerprint(fingerprint))
        self._alive.append(True)

    def add_many(self, keys: Iterable[Hashable] | np.ndarray, fingerprints: Iterable[int] | np.ndarray) -> None:
        keys = keys.tolist() if isinstance(keys, np.ndarray) else list(keys)
        if isinstance(fingerprints, np.ndarray):
            if fingerprints.dtype != np.uint64:
                raise ValueError(f"fingerprints must be a uint64 array, got {fingerprints.dtype}")
            fps = fingerprints.tolist()
        else:
            fps = [check_fingerprint(fp) for fp in fingerprints]
        if len(keys) != len(fps):
            raise ValueError(f"keys and fingerprints must have the same length ({len(keys)} != {len(fps)})")
        self._keys += keys
        self._fps.extend(fps)
        self._alive += [True] * len(fps)

    def remove(self, key: Hashable) -> int:
        """Remove every row stored under ``key``; returns how many were removed."""
        removed = 0
        for row, (k, alive) in enumerate(zip(self._keys, self._alive)):
            if alive and k == key:
                self._alive[row] = False
                removed += 1
        self._removed += removed
        return removed

    def query(self, fingerprint: int) -> list[Match]:
        """Every live row within ``max_distance``, nearest first (ties: the oldest row first)."""
        fp = check_fingerprint(fingerprint)
        k = self.max_distance
        if _native.speedups is not None:
            found = [(hit >> 32, hit & 0xFFFFFFFF) for hit in _native.speedups.scan_rows(self._fps, fp, k)]
        else:
            distances = list(map(int.bit_count, map(fp.__xor__, self._fps)))  # (C loops: no Python frame a row)
            if not distances or min(distances) > k:  # (most pages of a batch are near nothing)
                return []
            found = sorted((distance, row) for row, distance in enumerate(distances) if distance <= k)
        keys, fps, alive = self._keys, self._fps, self._alive
        # (sorted by distance, then row: insertion order)
        return [Match(keys[row], fps[row], distance) for distance, row in found if alive[row]]

    def query_many(self, fingerprints: Iterable[int] | np.ndarray) -> list[list[Match]]:
        values = fingerprints.tolist() if isinstance(fingerprints, np.ndarray) else fingerprints
        return [self.query(fp) for fp in values]
