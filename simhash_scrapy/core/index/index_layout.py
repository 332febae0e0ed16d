"""The block-permuted layout of the index: blocks, tables, buckets and key filters.

No Scrapy import here: this module is part of the algorithm core.

The 64 bits are split into B blocks.  Two fingerprints within distance k differ
in at most k blocks, so at least B - k blocks are equal.  For each of the
C(B, k) choices of B - k blocks there is one table whose *key* is those blocks
put side by side (a permutation of the bits): every fingerprint within k of a
query shares the query's key in at least one table.

With fewer blocks than k + 1 (B <= k) each block is a table's key and a
match differs from the query in at most r = floor(k / B) bits of some block
(B numbers summing to k cannot all exceed it): a query reads every bucket
whose key is within r bits of its own (the bucket's bits flipped, one or two
at a time, ``Table.probes``), and each table keeps a 16-bit filter beside every row number (the
key's bits below the bucket, then a sample of fingerprint bits outside the
key: ``Table.filter_values``), so the rows of a probed bucket that cannot be
within k are dropped before their row number and fingerprint are read.

A ``Table`` holds its rows (``index.BlockPermutedIndex`` fills and queries them): a uint32 array of
row numbers sorted by key bucket, a directory of bucket offsets (``bounds``) and, when r > 0, the
uint16 filter in the same order.
"""

from __future__ import annotations

import functools
import math
from itertools import combinations

import numpy as np

__all__ = ["Table", "tables_for", "block_widths", "key_errors", "MAX_TABLES", "MAX_KEY_ERRORS", "FILTER_PAD"]

#: Largest number of tables (C(blocks, max_distance)) an index accepts.
MAX_TABLES = 5000
#: Largest number of key bits a query may flip when B <= k (floor(k / B)); more reads too many buckets.
MAX_KEY_ERRORS = 2
#: Spare items after a table's filter: the C loop reads filters 4 items (8 bytes) at a time.
FILTER_PAD = 4


def key_errors(max_distance: int, blocks: int) -> int:
    """Bits a table key may differ in: 0 when B > k (B - k blocks match exactly), else floor(k / B)."""
    return 0 if blocks > max_distance else max_distance // blocks


def block_widths(blocks: int) -> list[int]:
    """Bit widths of the blocks, most significant block first (the first 64 % B blocks get one more bit)."""
    base, extra = divmod(64, blocks)
    return [base + 1 if i < extra else base for i in range(blocks)]


def tables_for(max_distance: int, blocks: int) -> tuple[int, list[Table]]:
    """``(key errors, the empty tables)`` of the layout for ``max_distance`` (k) and ``blocks`` (B).

    Raises ``ValueError`` when the layout would read too many buckets per query
    (``MAX_KEY_ERRORS``) or need too many tables (``MAX_TABLES``).
    """
    errors = key_errors(max_distance, blocks)
    if errors > MAX_KEY_ERRORS:
        raise ValueError(
            f"blocks={blocks} with max_distance={max_distance} lets a table key differ in {errors} bits "
            f"(more than {MAX_KEY_ERRORS}: too many buckets per query); use more blocks"
        )
    count = math.comb(blocks, max_distance) if errors == 0 else blocks
    if count > MAX_TABLES:
        raise ValueError(
            f"blocks={blocks} with max_distance={max_distance} needs {count} tables "
            f"(more than {MAX_TABLES}); use fewer blocks"
        )
    widths = block_widths(blocks)
    lows = []
    low = 64
    for width in widths:
        low -= width
        lows.append(low)
    tables: list[Table] = []
    for chosen in combinations(range(blocks), blocks - max_distance if errors == 0 else 1):
        spans: list[tuple[int, int, int]] = []
        for b in chosen:
            width, shift = widths[b], lows[b]
            if spans and spans[-1][0] == shift + width:  # adjacent to the previous run: extend it
                _, _, prev_width = spans[-1]
                width, shift = prev_width + width, shift
                spans[-1] = (shift, (1 << width) - 1, width)
            else:
                spans.append((shift, (1 << width) - 1, width))
        sample = (0, 0)
        if errors and blocks > 1:  # the filter samples the low bits of the next block
            following = (chosen[0] + 1) % blocks
            sample = (lows[following], widths[following])
        tables.append(Table(spans, sum(widths[b] for b in chosen), errors, sample))
    return errors, tables


class Table:
    """One permutation: the key is the concatenation of some blocks."""

    __slots__ = (
        "spans", "key_bits", "errors", "sample", "dir_bits", "entries", "room", "filter", "filter_room", "bounds"
    )

    def __init__(
        self, spans: list[tuple[int, int, int]], key_bits: int, errors: int, sample: tuple[int, int] = (0, 0)
    ) -> None:
        self.spans = spans  # (shift, mask, width) of contiguous bit runs, high to low
        self.key_bits = key_bits
        self.errors = errors  # bits the key of a match may differ in (0: exact buckets)
        self.sample = sample  # (shift, width): fingerprint bits outside the key that the filter samples
        self.dir_bits = 0
        # Row numbers sorted by bucket; ``entries`` is a prefix of ``room``, the rest is spare
        # for merges.  With errors > 0, ``filter`` holds 16 bits of each row in the same order
        # (a prefix of ``filter_room``, which keeps FILTER_PAD spare items): see filter_values.
        self.entries = self.room = np.zeros(0, dtype=np.uint32)
        self.filter_room: np.ndarray | None = np.zeros(FILTER_PAD, dtype=np.uint16) if errors else None
        self.filter: np.ndarray | None = self.filter_room[:0] if self.filter_room is not None else None
        self.bounds = np.zeros(2, dtype=np.uint32)

    @property
    def order(self) -> np.ndarray:
        """Row numbers sorted by bucket."""
        return self.entries

    def key(self, fp: int) -> int:
        key = 0
        for shift, mask, width in self.spans:
            key = (key << width) | ((fp >> shift) & mask)
        return key

    def bucket(self, fp: int) -> int:
        return self.key(fp) >> (self.key_bits - self.dir_bits)

    def keys(self, fps: np.ndarray) -> np.ndarray:
        key = np.zeros(len(fps), dtype=np.uint64)
        for shift, mask, width in self.spans:
            key = (key << np.uint64(width)) | ((fps >> np.uint64(shift)) & np.uint64(mask))
        return key

    def buckets_of_keys(self, keys: np.ndarray) -> np.ndarray:
        buckets: np.ndarray = (keys >> np.uint64(self.key_bits - self.dir_bits)).astype(np.int64)
        return buckets

    def buckets(self, fps: np.ndarray) -> np.ndarray:
        return self.buckets_of_keys(self.keys(fps))

    def probes(self) -> tuple[np.ndarray, np.ndarray]:
        """(XOR masks of the buckets to read, key bits each spends): the bucket itself, then 1, 2 flips."""
        return _probes(self.dir_bits, self.errors)

    def filter_low_bits(self) -> int:
        """Key bits below the bucket that the filter holds (bits inside the bucket are already counted)."""
        return min(8, self.key_bits - self.dir_bits)

    def filter_mask(self) -> int:
        """The filter's key bits (its low bits)."""
        return (1 << self.filter_low_bits()) - 1

    def filter_sample_bits(self) -> int:
        return min(self.sample[1], 16 - self.filter_low_bits())

    def filter_values(self, keys: np.ndarray, fps: np.ndarray) -> np.ndarray:
        """Each row's 16-bit filter: the key's low bits below the bucket, and above them a sample of
        fingerprint bits outside the key.  A match within k that spent ``s`` bits in the bucket
        differs in at most ``errors - s`` of the key bits and at most ``k - s`` of all 16, so
        most rows of a probed bucket are dropped before their row number and fingerprint are
        read (two random loads each)."""
        low, width = self.filter_low_bits(), self.filter_sample_bits()
        sample = (fps >> np.uint64(self.sample[0])) & np.uint64((1 << width) - 1)
        values: np.ndarray = ((sample << np.uint64(low)) | (keys & np.uint64((1 << low) - 1))).astype(np.uint16)
        return values

    def dir_bits_for(self, rows: int) -> int:
        """Bits of the bucket directory for a table of ``rows`` rows."""
        if self.errors:
            # Buckets of ~8-16 rows: each flipped bit is one more bucket to read.
            return min(self.key_bits, max(8, rows.bit_length() - 2), 22)
        return min(self.key_bits, max(8, rows.bit_length() - 2), 22)


@functools.lru_cache(maxsize=64)
def _probes(dir_bits: int, errors: int) -> tuple[np.ndarray, np.ndarray]:
    masks, spent = [0], [0]
    for flips in range(1, errors + 1):
        for bits in combinations(range(dir_bits), flips):
            masks.append(sum(1 << b for b in bits))
            spent.append(flips)
    return np.array(masks, dtype=np.int64), np.array(spent, dtype=np.int64)
