"""Exact Hamming-distance search over 64-bit fingerprints (Manku, Jain, Das Sarma 2007).

No Scrapy import here: this module is part of the algorithm core.

The fingerprints are stored in tables whose keys are permutations of blocks of
the 64 bits (``index_layout``: which tables, keys, buckets and key filters):
every fingerprint within k of a query shares the query's key, or a key within
a bit or two of it, in at least one table.  A query reads the matching
buckets of every table and verifies each candidate with a popcount, so the
answer is exact: every stored fingerprint within k, nothing farther.  At k = 4
that is B = 3 (three tables of ~21-bit keys, each read at ~19 buckets) against
C(5, 4) = 5 tables of 13-bit keys with B = 5: about 15x fewer fingerprints to
verify per query and fewer tables (``default_blocks``; figures in ``benchmarks/core.py``).

This module holds the storage and the two query paths over it (the C loop and
its numpy twin), the in-place merges and chunked rebuilds, and removal; the
file format of ``save`` / ``load`` is ``index_file``.

Storage (chosen for memory and numpy speed): fingerprints live once in a uint64
array; each table is a uint32 array of row numbers sorted by key bucket plus a
directory of bucket offsets (plus the uint16 filter when keys may differ).  New rows
go to a small unsorted tail that queries scan by brute force, and are merged
into the tables in batches.  With k = 3, B = 4 that is about 33 bytes per
stored fingerprint with integer keys; with k = 4, B = 3 about 38.
"""

from __future__ import annotations

import mmap
import sys
from collections.abc import Hashable, Iterable, Iterator, Sequence
from os import PathLike
from typing import Any, NamedTuple

import numpy as np

from .. import _native, defaults
from ..defaults import default_blocks
from ..features.fingerprint import check_fingerprint
from .index_file import IndexFormatError, read_index, write_index
from .index_layout import FILTER_PAD, MAX_TABLES, Table, block_widths, tables_for

__all__ = ["BlockPermutedIndex", "Match", "block_widths", "default_blocks", "IndexFormatError", "MAX_TABLES"]

_MAX_ROWS = (1 << 32) - 1
_QUERY_CHUNK = 1 << 15
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1
_BYTE_ORDER = sys.byteorder  # a query's bytes as numpy's native uint64


class Match(NamedTuple):
    """One stored fingerprint found by a query."""

    key: Any
    fingerprint: int
    distance: int


#: Rows sorted at a time when the tables are rebuilt (small: the temporaries are ~100 bytes a row).
_REBUILD_CHUNK = 1 << 14
#: Arrays from this size on get their own memory map (see ``_empty``).
_MAPPED_BYTES = 1 << 20


def _empty(size: int, dtype: Any) -> np.ndarray:
    """An uninitialised array; a large one in its own anonymous memory map.

    The index's big arrays grow by a quarter at a time.  From malloc, each old
    array would leave a hole in the heap that the next, larger one does not fit
    (and glibc serves arrays of up to 32 MB from its heap once one that size was
    freed), so the process would keep ~10 bytes per fingerprint of freed memory.
    A map of its own goes back to the system when the array is dropped.
    """
    dtype = np.dtype(dtype)
    nbytes = size * dtype.itemsize
    if nbytes < _MAPPED_BYTES:
        return np.empty(size, dtype=dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype, count=size)


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """``array`` copied into a new array of ``size`` items (the tail left uninitialised).

    Not ``np.resize``: it returns a view of a buffer of whole repeats of the
    array, so growing by a quarter would keep twice the memory alive.
    """
    out = _empty(size, array.dtype)
    out[: len(array)] = array
    return out


def _insert_sorted(room: np.ndarray, count: int, at: np.ndarray, values: np.ndarray) -> None:
    """``np.insert(room[:count], at, values)`` written into ``room[:count + len(at)]`` (``at`` sorted)."""
    if _native.speedups is not None:
        _native.speedups.insert_sorted(room, count, at, values)
        return
    end = count
    for j in range(len(at) - 1, -1, -1):  # from the back: every move goes right, into moved-out room
        start = int(at[j])
        room[start + j + 1 : end + j + 1] = room[start:end]
        room[start + j] = values[j]
        end = start



def _by_bucket(buckets: np.ndarray) -> np.ndarray:
    """``np.argsort(buckets, kind="stable")`` of bucket numbers (0 <= bucket < 2**31): one sort of bucket and place
    together (unique values, so any sort is stable), several times faster than numpy's stable argsort of int64."""
    if len(buckets) >= 1 << 32:
        return np.argsort(buckets, kind="stable")
    places = np.arange(len(buckets), dtype=np.int64)
    ordered: np.ndarray = np.sort((buckets.astype(np.int64) << np.int64(32)) | places)
    ordered &= np.int64(0xFFFFFFFF)
    return ordered


def _ragged(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For segments [start, start+count): (owner segment of each position, the positions)."""
    total = int(counts.sum())
    owners = np.repeat(np.arange(len(counts)), counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return owners, np.repeat(starts, counts) + offsets


class _Keys:
    """Row -> user key.  A compact array while every key is an int: uint32 (4 bytes a row) while all
    fit in 0..2**32-1 (row numbers, log positions), int64 once one does not; a list otherwise."""

    __slots__ = ("ints", "objects")

    def __init__(self) -> None:
        self.ints: np.ndarray | None = np.zeros(16, dtype=np.uint32)
        self.objects: list[Any] | None = None

    def _to_objects(self, n: int) -> None:
        assert self.ints is not None
        self.objects = self.ints[:n].tolist()
        self.ints = None

    def _widen(self) -> None:
        """uint32 -> int64 (a key below 0 or above 2**32 - 1 arrived)."""
        assert self.ints is not None
        self.ints = _grown(self.ints.astype(np.int64), len(self.ints)) if self.ints.dtype != np.int64 else self.ints

    def reserve(self, size: int) -> None:
        if self.ints is not None and size > len(self.ints):
            self.ints = _grown(self.ints, size)

    def set(self, row: int, key: Any, n: int) -> None:
        if self.ints is not None:
            if type(key) is int and _INT64_MIN <= key <= _INT64_MAX:
                if not 0 <= key <= _UINT32_MAX and self.ints.dtype == np.uint32:
                    self._widen()
                if row >= len(self.ints):
                    self.ints = _grown(self.ints, max(16, len(self.ints) + len(self.ints) // 4))
                self.ints[row] = key
                return
            self._to_objects(n)
        assert self.objects is not None
        self.objects.append(key)

    def extend(self, keys: Sequence[Any] | np.ndarray, n: int) -> None:
        if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu" and keys.ndim == 1:
            if self.ints is not None:
                if keys.dtype == np.uint32 or keys.dtype == self.ints.dtype:  # (fits as it is: no scan)
                    self._store(keys, n)
                    return
                if len(keys) and self.ints.dtype == np.uint32 and (int(keys.min()) < 0 or int(keys.max()) > _UINT32_MAX):
                    self._widen()
                self._store(keys, n)
                return
            keys = keys.tolist()
        if self.ints is not None and all(type(k) is int and _INT64_MIN <= k <= _INT64_MAX for k in keys):
            if self.ints.dtype == np.uint32 and len(keys) and (min(keys) < 0 or max(keys) > _UINT32_MAX):
                self._widen()
            self._store(np.asarray(keys, dtype=self.ints.dtype) if len(keys) else np.zeros(0, self.ints.dtype), n)
            return
        if self.ints is not None:
            self._to_objects(n)
        assert self.objects is not None
        self.objects.extend(keys)

    def _store(self, keys: np.ndarray, n: int) -> None:
        assert self.ints is not None
        needed = n + len(keys)
        if needed > len(self.ints):
            self.ints = _grown(self.ints, max(needed, len(self.ints) + len(self.ints) // 4))
        self.ints[n:needed] = keys

    def get(self, row: int) -> Any:
        if self.ints is not None:
            return int(self.ints[row])
        assert self.objects is not None
        return self.objects[row]

    def take(self, rows: np.ndarray, n: int) -> _Keys:
        kept = _Keys()
        if self.ints is not None:
            kept.ints = self.ints[:n][rows].copy()
        else:
            assert self.objects is not None
            kept.ints = None
            kept.objects = [self.objects[r] for r in rows.tolist()]
        return kept

    def rows_of(self, key: Any, n: int) -> list[int]:
        if self.ints is not None:
            if type(key) is not int or not _INT64_MIN <= key <= _INT64_MAX:
                return []
            if self.ints.dtype == np.uint32 and not 0 <= key <= _UINT32_MAX:
                return []
            rows: list[int] = np.flatnonzero(self.ints[:n] == key).tolist()
            return rows
        assert self.objects is not None
        return [row for row, stored in enumerate(self.objects) if stored == key]

    def nbytes(self) -> int:
        return self.ints.nbytes if self.ints is not None else 8 * len(self.objects or ())

    def saved(self, n: int) -> np.ndarray | list[Any]:
        """The keys of rows [0, n) as ``index_file.write_index`` takes them."""
        if self.ints is not None:
            return self.ints[:n]
        assert self.objects is not None
        return self.objects

    @classmethod
    def restored(cls, keys: np.ndarray | list[Any]) -> _Keys:
        """The keys ``index_file.read_index`` read."""
        made = cls()
        if isinstance(keys, np.ndarray):
            made.ints = np.array(keys, dtype=np.int64)
        else:
            made.ints = None
            made.objects = keys
        return made


class BlockPermutedIndex:
    """Every stored 64-bit fingerprint within Hamming distance ``max_distance`` of a query.

    ``max_distance`` (k) is the largest distance a query reports (default
    ``defaults.MAX_DISTANCE``).  ``blocks`` (B) is the number of blocks the 64 bits
    are split into (default ``defaults.default_blocks(k)``: k + 1, 3 at k = 4).
    With B > k there are C(B, k) tables keyed by B - k blocks: more blocks mean
    longer keys (fewer candidates per query) but more tables (more memory).
    With B <= k there are B tables, each keyed by one block matched within
    floor(k / B) <= 2 bits.

    Keys are any hashable values (URLs, ids); integer keys are stored compactly.
    Keys need not be unique; ``remove(key)`` removes every entry stored under it.
    """

    def __init__(self, max_distance: int = defaults.MAX_DISTANCE, blocks: int | None = defaults.BLOCKS) -> None:
        if not isinstance(max_distance, int) or isinstance(max_distance, bool) or not 0 <= max_distance <= 63:
            raise ValueError(f"max_distance must be an integer from 0 to 63, got {max_distance!r}")
        if blocks is None:
            blocks = default_blocks(max_distance)
        if not isinstance(blocks, int) or isinstance(blocks, bool) or not 1 <= blocks <= 64:
            raise ValueError(f"blocks must be an integer from 1 to 64, got {blocks!r}")
        errors, tables = tables_for(max_distance, blocks)
        self.max_distance = max_distance
        self.blocks = blocks
        self.key_errors = errors
        self.widths = block_widths(blocks)
        self._tables: list[Table] = tables
        self._fps = np.zeros(16, dtype=np.uint64)
        self._keys = _Keys()
        self._n = 0  # rows used (live and removed)
        self._indexed = 0  # rows [0, _indexed) are in the tables, the rest is the tail
        self._alive: np.ndarray | None = None  # None while nothing was removed
        self._removed = 0
        self._specs: tuple[Any, Any] | None = None  # (C module, its prepared tables)

    # ----------------------------------------------------------------- sizes
    def __len__(self) -> int:
        return self._n - self._removed

    @property
    def table_count(self) -> int:
        return len(self._tables)

    def __repr__(self) -> str:
        return f"BlockPermutedIndex(max_distance={self.max_distance}, blocks={self.blocks}, size={len(self)})"

    def nbytes(self) -> int:
        """Bytes held by the index's arrays (keys that are Python objects count 8 bytes each)."""
        total = self._fps.nbytes + self._keys.nbytes()
        for table in self._tables:
            total += table.room.nbytes + table.bounds.nbytes
            if table.filter_room is not None:
                total += table.filter_room.nbytes
        if self._alive is not None:
            total += self._alive.nbytes
        return total

    # ------------------------------------------------------------- building
    def _tail_limit(self) -> int:
        return min(32768, max(2048, self._n >> 9))

    def _reserve(self, extra: int, exact: bool = False) -> None:
        needed = self._n + extra
        if needed > _MAX_ROWS:
            raise ValueError(f"an index holds at most {_MAX_ROWS} fingerprints (row numbers are 32-bit)")
        if needed > len(self._fps):
            # Grow by a quarter, not double: amortised O(1) all the same, and at most
            # 25% slack (the bytes-per-fingerprint budget counts it).
            self._fps = _grown(self._fps, needed if exact else max(needed, len(self._fps) + len(self._fps) // 4, 16))
            if self._alive is not None:
                alive = np.ones(len(self._fps), dtype=bool)
                alive[: self._n] = self._alive[: self._n]
                self._alive = alive

    def _rebuild(self) -> None:
        """Sort every row into the tables afresh (a counting sort by bucket, a chunk of rows at a time).

        By chunks, so that no temporary array is as large as the index: the
        allocator would keep a full-size one as the process's memory.
        """
        self._specs = None
        n = self._n
        chunks = [(start, min(n, start + _REBUILD_CHUNK)) for start in range(0, n, _REBUILD_CHUNK)]
        for table in self._tables:
            table.dir_bits = table.dir_bits_for(n)
            table.entries = table.room = np.zeros(0, dtype=np.uint32)  # the old tables go first
            table.filter = table.filter_room = None
            buckets = 1 << table.dir_bits
            # Row numbers are uint32, so bucket offsets fit in uint32 too (half the directory memory).
            # The counts go straight into the directory (no other array of the directory's size but
            # ``free``): the temporaries of a rebuild stay small beside the tables it makes.
            table.bounds = _empty(buckets + 1, np.uint32)
            table.bounds[:] = 0
            counts = table.bounds[1:]
            for start, end in chunks:
                np.add(counts, np.bincount(table.buckets(self._fps[start:end]), minlength=buckets), out=counts,
                       casting="unsafe")
            np.cumsum(counts, dtype=np.uint32, out=counts)
            free = table.bounds[:-1].copy()  # next free position of each bucket
            rows = _empty(n, np.uint32)
            filter_room = _empty(n + FILTER_PAD, np.uint16) if table.errors else None
            for start, end in chunks:
                chunk_fps = self._fps[start:end]
                keys = table.keys(chunk_fps)
                chunk_buckets = table.buckets_of_keys(keys)
                by_bucket = _by_bucket(chunk_buckets)
                sorted_buckets = chunk_buckets[by_bucket]
                present, run = np.unique(sorted_buckets, return_counts=True)
                # Position: the bucket's next free slot plus the row's rank among this chunk's rows there.
                rank = np.arange(len(by_bucket)) - np.repeat(np.cumsum(run) - run, run)
                positions = free[sorted_buckets] + rank
                free[present] += run.astype(np.uint32)
                rows[positions] = by_bucket + start
                if filter_room is not None:
                    filter_room[positions] = table.filter_values(keys[by_bucket], chunk_fps[by_bucket])
            table.entries = table.room = rows
            if filter_room is not None:
                filter_room[n:] = 0
                table.filter_room, table.filter = filter_room, filter_room[:n]
        self._indexed = n

    def _merge_tail(self) -> None:
        if self._indexed == self._n:
            return
        tail = self._n - self._indexed
        if tail >= self._indexed or any(
            t.dir_bits_for(self._n) != t.dir_bits for t in self._tables
        ):
            self._rebuild()
            return
        self._specs = None
        rows = np.arange(self._indexed, self._n, dtype=np.uint32)
        fps = self._fps[self._indexed : self._n]
        for table in self._tables:
            keys = table.keys(fps)
            buckets = table.buckets_of_keys(keys)
            by_bucket = _by_bucket(buckets)
            buckets = buckets[by_bucket]
            # Insert each new row at the end of its bucket: rows stay in insertion order per bucket.
            at = table.bounds[buckets + 1].astype(np.int64)
            size, more = len(table.entries), len(rows)
            if size + more > len(table.room):
                # Spare room, grown by a quarter (as the fingerprints): merges then write in place
                # instead of allocating a new array each time (which the allocator keeps around).
                table.room = _grown(table.entries, max(size + more, size + size // 4))
            _insert_sorted(table.room, size, at, rows[by_bucket])
            table.entries = table.room[: size + more]
            if table.filter_room is not None:
                assert table.filter is not None
                if size + more + FILTER_PAD > len(table.filter_room):
                    table.filter_room = _grown(table.filter, max(size + more, size + size // 4) + FILTER_PAD)
                _insert_sorted(table.filter_room, size, at, table.filter_values(keys[by_bucket], fps[by_bucket]))
                table.filter_room[size + more :] = 0
                table.filter = table.filter_room[: size + more]
            table.bounds[1:] += np.cumsum(np.bincount(buckets, minlength=len(table.bounds) - 1), dtype=np.uint32)
        self._indexed = self._n

    def add(self, key: Hashable, fingerprint: int) -> None:
        """Store ``fingerprint`` under ``key``."""
        fp = check_fingerprint(fingerprint)
        self._reserve(1)
        self._fps[self._n] = fp
        self._keys.set(self._n, key, self._n)
        self._n += 1
        if self._n - self._indexed > self._tail_limit():
            self._merge_tail()

    def add_many(
        self, keys: Iterable[Hashable] | np.ndarray, fingerprints: Iterable[int] | np.ndarray, *, build: bool = True
    ) -> None:
        """Store many fingerprints at once (much faster than repeated ``add``).

        ``keys`` may be a numpy integer array (no Python objects made).  With
        ``build=False`` the rows wait, unsorted, until ``build()`` (or a later
        ``add``) sorts them into the tables: a bulk load in chunks sorts once
        (queries meanwhile are exact all the same, by brute force over them).
        """
        if not isinstance(keys, np.ndarray):
            keys = list(keys)
        fps = _as_fingerprint_array(fingerprints, "fingerprints")
        if len(keys) != len(fps):
            raise ValueError(f"keys and fingerprints must have the same length ({len(keys)} != {len(fps)})")
        self._reserve(len(fps))
        self._keys.extend(keys, self._n)
        self._fps[self._n : self._n + len(fps)] = fps
        self._n += len(fps)
        if build and self._n - self._indexed > self._tail_limit():
            self._merge_tail()

    def reserve(self, count: int) -> None:
        """Make room for ``count`` more fingerprints now, so that adding them copies nothing.

        Large arrays are anonymous memory maps: room that is never filled costs
        address space, not memory (a bulk load can reserve an upper bound).
        """
        self._reserve(count, exact=True)
        self._keys.reserve(len(self._fps))

    def build(self) -> None:
        """Sort every row added with ``build=False`` into the tables now."""
        self._merge_tail()

    # -------------------------------------------------------------- queries
    def _candidate_rows(self, fp: int) -> np.ndarray:
        parts = []
        if self._indexed:
            for table in self._tables:
                if table.errors:
                    # Every row of every bucket within reach (the popcount below verifies them;
                    # for one query, that is fewer numpy calls than screening by the key filter).
                    masks, _ = table.probes()
                    probed = masks ^ table.bucket(fp)
                    lo = table.bounds[probed].astype(np.int64)
                    counts = table.bounds[probed + 1] - lo
                    ends = np.cumsum(counts)
                    positions = np.repeat(lo - (ends - counts), counts) + np.arange(int(ends[-1]))
                    parts.append(table.order[positions])
                    continue
                b = table.bucket(fp)
                lo, hi = table.bounds[b : b + 2].tolist()
                if hi > lo:
                    parts.append(table.order[lo:hi])
        if self._n > self._indexed:
            parts.append(np.arange(self._indexed, self._n, dtype=np.uint32))
        if not parts:
            return np.zeros(0, dtype=np.uint32)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _probed_positions(self, table: Table, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For a table whose keys may differ in ``errors`` bits: (query index, position in ``order``) of
        every row in a bucket within reach whose key filter is within reach too."""
        keys = table.keys(queries)
        buckets = table.buckets_of_keys(keys)
        masks, spent = table.probes()
        probed = (buckets[:, None] ^ masks[None, :]).ravel()  # query-major: query i's probes together
        budget = np.tile(table.errors - spent, len(queries))
        lo = table.bounds[probed].astype(np.int64)
        counts = table.bounds[probed + 1].astype(np.int64) - lo
        owners, positions = _ragged(lo, counts)
        wanted = table.filter_values(keys, queries)
        assert table.filter is not None  # a table whose keys may differ keeps a filter
        probe_query = np.repeat(np.arange(len(queries)), len(masks))
        differ = table.filter[positions] ^ wanted[probe_query[owners]]
        key_budget = budget[owners]  # errors - spent, so k - spent is k - errors + key_budget
        keep = (np.bitwise_count(differ & np.uint16(table.filter_mask())) <= key_budget) & (
            np.bitwise_count(differ) <= self.max_distance - table.errors + key_budget
        )
        return probe_query[owners[keep]], positions[keep]

    def _table_specs(self) -> Any:
        """The tables as the C query loop reads them, parsed once (kept until the tables change)."""
        speedups = _native.speedups
        if self._specs is None or self._specs[0] is not speedups:
            specs = [
                (t.entries, t.bounds, t.spans, t.key_bits - t.dir_bits, t.errors, t.dir_bits, t.filter_room,
                 t.filter_low_bits(), t.sample[0], t.filter_sample_bits())
                for t in self._tables
            ]
            self._specs = (speedups, speedups.prepare_tables(specs))
        return self._specs[1]

    def _compiled_columns(self, queries: Any) -> tuple[bytes, bytes, bytes]:
        """Tables and tail in one C loop: ``(query_index, row, distance)`` as int64 bytes, sorted by
        query, distance, row.  ``queries``: uint64 values in any buffer (little-endian bytes for one)."""
        return _native.speedups.query_tables(  # type: ignore[no-any-return]
            queries,
            self._fps[: self._n],
            self._alive,
            self._table_specs() if self._indexed else [],
            self.max_distance,
            self._indexed,
        )

    def _compiled_query(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, r, d = self._compiled_columns(np.ascontiguousarray(queries, dtype=np.uint64))
        return np.frombuffer(q, dtype=np.int64), np.frombuffer(r, dtype=np.int64), np.frombuffer(d, dtype=np.int64)

    def _query_rows(self, fp: int) -> tuple[list[int], list[int]]:
        if _native.speedups is not None:
            _, row_bytes, distance_bytes = self._compiled_columns(fp.to_bytes(8, _BYTE_ORDER))
            return memoryview(row_bytes).cast("q").tolist(), memoryview(distance_bytes).cast("q").tolist()
        rows = self._candidate_rows(fp)
        if len(rows) == 0:
            return [], []
        distances = np.bitwise_count(self._fps[rows] ^ np.uint64(fp))
        hits = distances <= self.max_distance
        rows, distances = rows[hits], distances[hits]
        if self._alive is not None:
            alive = self._alive[rows]
            rows, distances = rows[alive], distances[alive]
        if len(rows) > 1:
            # A fingerprint equal in more than B - k blocks is found in several tables.
            rows, first = np.unique(rows, return_index=True)
            distances = distances[first]
            by_distance = np.argsort(distances, kind="stable")
            rows, distances = rows[by_distance], distances[by_distance]
        return rows.tolist(), distances.tolist()

    def query(self, fingerprint: int) -> list[Match]:
        """Every stored fingerprint within ``max_distance``, nearest first (ties: oldest first)."""
        fp = check_fingerprint(fingerprint)
        rows, distances = self._query_rows(fp)
        fps = self._fps
        return [Match(self._keys.get(r), int(fps[r]), d) for r, d in zip(rows, distances)]

    def query_and_add(self, key: Hashable, fingerprint: int) -> list[Match]:
        """``query`` then ``add`` in one step: the matches found before this fingerprint was stored."""
        matches = self.query(fingerprint)
        self.add(key, fingerprint)
        return matches

    def query_many_arrays(self, fingerprints: Iterable[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batch query.  Returns ``(query_index, row, distance)`` arrays, sorted by query, distance, row.

        ``row`` numbers stored entries in insertion order (see ``key_of_row``).
        """
        queries = _as_fingerprint_array(fingerprints, "fingerprints")
        self._merge_tail()
        out_q, out_r, out_d = [], [], []
        for start in range(0, len(queries), _QUERY_CHUNK):
            chunk = queries[start : start + _QUERY_CHUNK]
            q, r, d = self._batch_chunk(chunk)
            out_q.append(q + start)
            out_r.append(r)
            out_d.append(d)
        if not out_q:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), empty.copy()
        return np.concatenate(out_q), np.concatenate(out_r), np.concatenate(out_d)

    def _batch_chunk(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if _native.speedups is not None:
            return self._compiled_query(queries)
        found_q, found_r, found_d = [], [], []
        if self._indexed:
            for table in self._tables:
                if table.errors:
                    owners, positions = self._probed_positions(table, queries)
                    rows = table.order[positions]
                    distances = np.bitwise_count(self._fps[rows] ^ queries[owners])
                    hits = np.flatnonzero(distances <= self.max_distance)
                    found_q.append(owners[hits])
                    found_r.append(rows[hits].astype(np.int64))
                    found_d.append(distances[hits].astype(np.int64))
                    continue
                buckets = table.buckets(queries)
                lo = table.bounds[buckets]
                counts = table.bounds[buckets + 1] - lo
                ends = np.cumsum(counts, dtype=np.int64)
                # Candidate j of query i sits at order[lo[i] + (j - first[i])]: one repeat,
                # one arange, in 32-bit (half the memory traffic); the owner query is
                # recovered only for the (few) hits.
                total = int(ends[-1]) if len(ends) else 0
                positions = np.arange(total, dtype=np.uint32)
                positions += np.repeat((lo - (ends - counts)).astype(np.uint32), counts)
                rows = table.order[positions]
                distances = np.bitwise_count(self._fps[rows] ^ np.repeat(queries, counts))
                hits = np.flatnonzero(distances <= self.max_distance)
                found_q.append(np.searchsorted(ends, hits, side="right"))
                found_r.append(rows[hits].astype(np.int64))
                found_d.append(distances[hits].astype(np.int64))
        return self._finish_pairs(found_q, found_r, found_d)

    def _finish_pairs(
        self, found_q: list[np.ndarray], found_r: list[np.ndarray], found_d: list[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not found_q:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), empty.copy()
        q = np.concatenate(found_q).astype(np.int64)
        r = np.concatenate(found_r)
        d = np.concatenate(found_d)
        if self._alive is not None:
            alive = self._alive[r]
            q, r, d = q[alive], r[alive], d[alive]
        # The same pair can be found in several tables: keep one, sorted by query, distance, row.
        order = np.lexsort((r, d, q))
        q, r, d = q[order], r[order], d[order]
        if len(q):
            _, first = np.unique(q * (self._n + 1) + r, return_index=True)
            keep = np.zeros(len(q), dtype=bool)
            keep[first] = True
            q, r, d = q[keep], r[keep], d[keep]
        return q, r, d

    def query_many(self, fingerprints: Iterable[int] | np.ndarray) -> list[list[Match]]:
        """Batch query: one list of matches (as ``query`` returns) per fingerprint.  With the C helpers, one
        call that reads the unsorted tail as it is (``query_many_arrays`` merges it into the tables first, an
        O(index) step: a batch of a few pages at a time, as the Redis backend's replica asks, would pay it
        every few thousand rows added)."""
        queries = _as_fingerprint_array(fingerprints, "fingerprints")
        results: list[list[Match]] = [[] for _ in range(len(queries))]
        if _native.speedups is not None and len(queries):
            q_bytes, r_bytes, d_bytes = self._compiled_columns(np.ascontiguousarray(queries))
            if not r_bytes:  # (most queries of a big index find nothing)
                return results
            found = zip(*(memoryview(column).cast("q").tolist() for column in (q_bytes, r_bytes, d_bytes)))
        else:
            found = zip(*(column.tolist() for column in self.query_many_arrays(queries)))
        fps, key_of = self._fps, self._keys.get
        for qi, row, dist in found:
            results[qi].append(Match(key_of(row), int(fps[row]), dist))
        return results

    def find_all_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All pairs of stored rows within ``max_distance``: ``(row_a, row_b, distance)``, row_a < row_b."""
        self._merge_tail()
        if self.key_errors:
            return self._find_all_by_queries()
        found_a, found_b, found_d = [], [], []
        fps = self._fps
        for table in self._tables:
            counts: np.ndarray = np.diff(table.bounds.astype(np.int64))
            # For each position p in a bucket [lo, hi): partners at positions p+1 .. hi-1.
            bucket_of_position = np.repeat(np.arange(len(counts)), counts)
            ends = table.bounds[1:][bucket_of_position].astype(np.int64)
            positions = np.arange(len(table.order))
            for start in range(0, len(positions), _QUERY_CHUNK):
                pos = positions[start : start + _QUERY_CHUNK]
                owners, partners = _ragged(pos + 1, ends[pos] - pos - 1)
                a = table.order[pos[owners]].astype(np.int64)
                b = table.order[partners].astype(np.int64)
                distances = np.bitwise_count(fps[a] ^ fps[b])
                hits = distances <= self.max_distance
                a, b = a[hits], b[hits]
                found_a.append(np.minimum(a, b))
                found_b.append(np.maximum(a, b))
                found_d.append(distances[hits].astype(np.int64))
        a, b, d = self._finish_pairs(found_a, found_b, found_d)
        if self._alive is not None:
            alive = self._alive[a]
            a, b, d = a[alive], b[alive], d[alive]
        return a, b, d

    def _find_all_by_queries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``find_all_arrays`` when pairs can sit in different buckets: every stored row queried."""
        found_a, found_b, found_d = [], [], []
        for start in range(0, self._n, _QUERY_CHUNK):
            q, r, d = self._batch_chunk(self._fps[start : min(self._n, start + _QUERY_CHUNK)])
            q = q + start
            later = r > q  # each pair is found from both sides: keep it once
            found_a.append(q[later])
            found_b.append(r[later])
            found_d.append(d[later])
        if not found_a:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), empty.copy()
        a, b, d = np.concatenate(found_a), np.concatenate(found_b), np.concatenate(found_d)
        if self._alive is not None:
            alive = self._alive[a]
            a, b, d = a[alive], b[alive], d[alive]
        return a, b, d  # sorted by row_a, distance, row_b, as the queries' answers are

    def find_all(self) -> list[tuple[Any, Any, int]]:
        """All pairs of stored entries within ``max_distance``: ``(key_a, key_b, distance)``, a stored before b."""
        a, b, d = self.find_all_arrays()
        get = self._keys.get
        return [(get(x), get(y), dist) for x, y, dist in zip(a.tolist(), b.tolist(), d.tolist())]

    def key_of_row(self, row: int) -> Any:
        return self._keys.get(row)

    def fingerprint_of_row(self, row: int) -> int:
        return int(self._fps[row])

    # ------------------------------------------------------ removal, iteration
    def remove(self, key: Hashable) -> int:
        """Remove every entry stored under ``key``; returns how many were removed."""
        rows = self._keys.rows_of(key, self._n)
        if self._alive is None and rows:
            self._alive = np.ones(len(self._fps), dtype=bool)
        removed = 0
        for row in rows:
            assert self._alive is not None
            if self._alive[row]:
                self._alive[row] = False
                removed += 1
        self._removed += removed
        if self._removed > 1024 and self._removed > self._n // 2:
            self._compact()
        return removed

    def _compact(self) -> None:
        assert self._alive is not None
        live = np.flatnonzero(self._alive[: self._n])
        self._keys = self._keys.take(live, self._n)
        self._fps = self._fps[live].copy()
        self._n = len(live)
        self._alive = None
        self._removed = 0
        self._rebuild()

    def rows(self) -> tuple[np.ndarray | list[Any], np.ndarray]:
        """The keys and fingerprints (uint64) of every entry, in insertion order, in bulk (``__iter__``'s)."""
        keys, fps = self._keys.saved(self._n), self._fps[: self._n]
        if self._alive is None:
            return keys, fps.copy()
        live = self._alive[: self._n]
        if isinstance(keys, np.ndarray):
            return keys[live], fps[live]
        return [key for key, keep in zip(keys, live.tolist()) if keep], fps[live]

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        """``(key, fingerprint)`` of every entry, in insertion order."""
        fps = self._fps
        for row in range(self._n):
            if self._alive is None or self._alive[row]:
                yield self._keys.get(row), int(fps[row])

    def __contains__(self, key: object) -> bool:
        return any(self._alive is None or self._alive[r] for r in self._keys.rows_of(key, self._n))

    # ----------------------------------------------------------- persistence
    def save(self, path: str | PathLike[str]) -> None:
        """Write the index to ``path`` (``index_file``: a compact versioned binary file; keys must be int or str)."""
        if self._alive is not None:
            self._compact()
        write_index(path, self.max_distance, self.blocks, self._fps[: self._n], self._keys.saved(self._n))

    @classmethod
    def load(
        cls, path: str | PathLike[str], max_distance: int | None = None, blocks: int | None = None
    ) -> BlockPermutedIndex:
        """Read an index written by ``save``.

        If ``max_distance`` or ``blocks`` are given they must match the file's,
        otherwise ``IndexFormatError`` (a ``ValueError``) says what differs.
        """
        k, b, fps, keys = read_index(path, max_distance, blocks)
        index = cls(max_distance=k, blocks=b)
        index._keys = _Keys.restored(keys)
        index._fps = fps
        index._n = len(fps)
        index._rebuild()
        return index



def _as_fingerprint_array(values: Iterable[int] | np.ndarray, name: str) -> np.ndarray:
    if isinstance(values, np.ndarray):
        if values.dtype == np.uint64:
            return values.ravel()
        if values.dtype.kind in "iu" and (len(values) == 0 or values.min() >= 0):
            return values.astype(np.uint64).ravel()
        raise ValueError(f"{name} must hold integers in 0..2**64-1")
    if type(values) is list and all(type(v) is int for v in values):
        try:  # (plain ints: numpy refuses any out of range itself)
            return np.array(values, dtype=np.uint64)
        except OverflowError:
            pass  # (the error below names the value)
    return np.array([check_fingerprint(v, name) for v in values], dtype=np.uint64)
