"""A worker's local replica of one scope's canonical log (see ``layout.py``).

The replica holds every canonical page of the scope up to ``sync`` log
entries: simhash fingerprints in a ``BlockPermutedIndex`` keyed by log
position, exact digests and one-edit keys (each to its add entry's position)
in dicts.  A check queries the replica here and
sends the candidates with the page; the script on the server adds what was
appended after ``sync`` and drops what was removed, so together they see the
whole index while Redis only scans the new entries.

The replica's block layout is the worker's own choice (it never reaches
Redis): the in-process default (``default_blocks``: 3 tables at k = 4, each
keyed by one block matched within one bit, with a 16-bit filter a row), so a
canonical page costs ~40 bytes: its fingerprint (8), its log position as the
index key (4, uint32), 3 tables x (4 + 2), the tables' bucket directories
(~4) and the seq of its log entry (4).  ``k + 2`` blocks (15 tables at k = 4)
read fewer rows a query but cost ~100 bytes a page, and a worker's replica is
copied in every worker process.

The bulk load (``reserve``, ``apply`` of ``LOAD_CHUNK`` entries at a time,
``settle``) writes the add entries straight into the index's preallocated
arrays (numpy, no Python objects a page) and sorts them into the tables once,
at ``settle``: memory during the load stays close to the memory after it.
Entries arriving after the bulk load go to a small ``recent`` index that is
merged into the big one every ``RECENT`` entries: adding to the big index one
batch at a time would copy its tables for every few thousand entries.

The replica answers as the log says, whatever the order of its entries: every
add entry not removed (yet) is live, as ``check.lua`` sees the entries it
scans.  A digest or one-edit key held by several live entries (``check.lua``
itself never indexes a page that finds a holder, so this is rare) keeps every
holder: one in ``exact``/``edits``, the others in ``exact_more``/``edits_more``
(empty dicts otherwise).  When a holder is removed another one takes its
place, so a chunk's removals and additions may be applied in any order.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import struct
from typing import Any

import numpy as np

from ...core.index.index import BlockPermutedIndex, default_blocks
from ...core.index.keytable import KeyTable, pack_keys, unpack_keys
from .layout import EDIT_MATCH, ENTRY, OP_ADD, OP_EDIT_KEY, OP_EXACT, OP_REMOVE

_CANDIDATE = struct.Struct(">IIB")
#: Entries kept in the small index before they are merged into the big one.
RECENT = 1 << 18
#: Log entries per GETRANGE when a replica is loaded (24 bytes each: 1.5 MB a reply, small beside the replica).
LOAD_CHUNK = 1 << 15
#: Seqs are kept in pages of this many log entries (growing never copies the ones already kept).
_SEQ_PAGE = 1 << 16
# "owner": the add entry of a one-edit key entry (other entries: bucket and field bytes there).
_LOG_DTYPE = np.dtype([("op", "u1"), ("fp", ">u8"), ("seq", ">u4"), ("owner", ">u4"), ("rest", "V7")])


def replica_blocks(k: int) -> int:
    """The replica index's blocks: the in-process default (fewest bytes a page; see the module's text)."""
    return default_blocks(k)


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere nothing).

    A load's temporaries (replies of ``LOAD_CHUNK`` entries, the sort's chunks) are
    freed into the heap, which keeps them resident: ~15 bytes a page at 1M pages,
    a third of the replica.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


class _Seqs:
    """The seq of each log entry, uint32, in pages of ``_SEQ_PAGE`` (appending never copies)."""

    __slots__ = ("pages",)

    def __init__(self) -> None:
        self.pages: list[np.ndarray] = []

    def put(self, first: int, values: np.ndarray) -> None:
        """``values`` are the seqs of log entries ``first``, ``first + 1``, ..."""
        end = first + len(values)
        while len(self.pages) * _SEQ_PAGE < end:
            # A memory map each: pages kept between a load's temporaries would pin the heap's top.
            self.pages.append(np.frombuffer(mmap.mmap(-1, 4 * _SEQ_PAGE), dtype=np.uint32))
        done = 0
        while done < len(values):
            page, offset = divmod(first + done, _SEQ_PAGE)
            take = min(_SEQ_PAGE - offset, len(values) - done)
            self.pages[page][offset : offset + take] = values[done : done + take]
            done += take

    def __getitem__(self, pos: int) -> int:
        return int(self.pages[pos // _SEQ_PAGE][pos % _SEQ_PAGE])

    def nbytes(self) -> int:
        return sum(page.nbytes for page in self.pages)


class Replica:
    """Canonical pages of one scope, as of log entry ``sync``."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.index = BlockPermutedIndex(k, replica_blocks(k))
        self.recent = BlockPermutedIndex(k, replica_blocks(k))
        #: digest -> the live exact entry holding it with the lowest (seq, position): ``check.lua``'s choice
        self.exact: dict[int, int] = {}
        self.exact_of: dict[int, int] = {}
        self.exact_more: dict[int, list[int]] = {}  # digest -> the other live entries holding it (rare)
        self.edits = KeyTable()  # one-edit key -> position of its add entry
        self.edits_of: dict[int, bytes] = {}  # position of an add entry -> its one-edit keys (pack_keys)
        self.edits_more: dict[int, list[int]] = {}  # one-edit key -> the other live entries holding it (rare)
        #: seq of the identity of each log entry (ties go to the lowest seq)
        self.seq = _Seqs()
        #: Add entries are in ``index`` but not yet sorted into its tables (a bulk load: see ``settle``).
        self.pending = False
        self.sync = 0
        #: The incarnation of the scope this replica was built from (``check.lua``'s ARGV[8]): "-" none
        #: (the replica holds nothing), "=" + the epoch of the scope's meta.  A replica never outlives its
        #: scope: when Redis answers that the scope is another one, the backend drops the replica.
        self.epoch = "-"
        #: Identities the scope recorded as of this worker's last check (the pages lost if the scope is lost).
        self.records = 0
        #: With shards: the shards seen holding records of this incarnation (their marker is its epoch);
        #: one of them found without the marker lost its records.
        self.shards: set[int] = set()
        #: When (time.monotonic) the markers of all those shards were last read.
        self.swept = 0.0
        #: The worker's mirror of steps 5-7 holds the scope and answers the simhash candidates from its own
        #: first-simhash index (``Mirror.candidates``): this replica then keeps no simhash index (``delegate``).
        self.delegated = False

    def delegate(self) -> None:
        """From now on the mirror's index answers the simhash candidates (``Mirror.candidates``, the same
        ones): this replica's own index is dropped and its simhash add and remove entries are no longer
        indexed (exact digests, one-edit keys and seqs are kept as before)."""
        self.delegated = True
        self.pending = False
        self.index = BlockPermutedIndex(self.k, replica_blocks(self.k))
        self.recent = BlockPermutedIndex(self.k, replica_blocks(self.k))
        release_free_memory()

    def reserve(self, entries: int) -> None:
        """Room for a log of ``entries`` entries (an upper bound of its add entries): the bulk load then
        writes into the index's arrays without ever copying them (room left empty costs no memory)."""
        self.index.reserve(max(0, entries - self.sync))

    def settle(self) -> None:
        """Sort the add entries of the bulk load into the index's tables (once, at the end of the load)."""
        if self.pending:
            release_free_memory()  # the load's temporaries, before the tables are made
            self.index.build()
            self.pending = False
            release_free_memory()  # the sort's temporaries

    def nbytes(self) -> int:
        """Bytes of the replica's arrays (the index's, with room, and the seqs; not the dicts)."""
        return self.index.nbytes() + self.recent.nbytes() + self.seq.nbytes() + self.edits.nbytes()

    def apply(self, data: bytes, start: int) -> None:
        """Apply log entries ``data`` that begin at position ``start`` (entries already applied are skipped)."""
        if start > self.sync:
            raise ValueError(f"log gap: replica at {self.sync}, entries from {start}")
        skip = (self.sync - start) * ENTRY
        if skip >= len(data):
            return
        entries = np.frombuffer(data, dtype=_LOG_DTYPE, offset=skip, count=(len(data) - skip) // ENTRY)
        first = self.sync
        self.seq.put(first, entries["seq"])
        positions = np.arange(first, first + len(entries), dtype=np.int64)
        ops = entries["op"]
        removes = np.flatnonzero(ops == OP_REMOVE)
        removed: set[int] = set()
        if len(removes):
            raw = entries["fp"][removes].astype(np.uint64)
            removed = set((raw >> np.uint64(32)).astype(np.int64).tolist())
        # Every holder of a digest or key is kept (see the module's text), so the order does not matter.
        for pos in removed:
            if pos < first:  # entries added and removed within this chunk were never applied
                self._remove(pos)
        adds = np.flatnonzero(ops == OP_ADD) if not self.delegated else np.zeros(0, dtype=np.int64)
        if removed and len(adds):
            adds = adds[~np.isin(positions[adds], np.fromiter(removed, dtype=np.int64))]
        if len(adds):
            self._apply_adds(positions[adds], entries["fp"][adds].astype(np.uint64))
        for i in np.flatnonzero(ops == OP_EXACT).tolist():
            pos = first + i
            if pos not in removed:
                self._hold_exact(int(entries["fp"][i]), pos)
        keyed = np.flatnonzero(ops == OP_EDIT_KEY)
        if len(keyed):
            self._apply_edit_keys(entries["fp"][keyed].tolist(), entries["owner"][keyed].tolist(), removed)
        self.sync = first + len(entries)

    def _apply_adds(self, positions: np.ndarray, fps: np.ndarray) -> None:
        """``apply``: the log's added fingerprints (``positions``: their entries), into the index or its recent part."""
        if self.pending or len(positions) >= RECENT or not len(self.index):
            # The bulk load (or a big catch-up): into the index's arrays now, into its tables at settle.
            self.index.add_many(positions.astype(np.uint32), fps, build=False)
            self.pending = True
        else:
            self.recent.add_many(positions.tolist(), fps)
        if len(self.recent) >= RECENT:
            keys, recent_fps = zip(*self.recent)
            self.index.add_many(keys, recent_fps)
            self.recent = BlockPermutedIndex(self.k, replica_blocks(self.k))

    def _apply_edit_keys(self, keys: list[int], owners: list[int], removed: set[int]) -> None:
        """``apply``: the log's one-edit keys, by the entry that owns them (none of a removed entry)."""
        by_owner: dict[int, list[int]] = {}
        for key, owner in zip(keys, owners):
            if owner not in removed:
                by_owner.setdefault(owner, []).append(key)
        for owner, owner_keys in by_owner.items():
            for held in self.edits.add(owner, owner_keys):  # keys another live entry holds too
                self.edits_more.setdefault(held, []).append(owner)
            # A chunk of the log can end between an add entry's keys: they are kept together.
            self.edits_of[owner] = self.edits_of.get(owner, b"") + pack_keys(owner_keys)

    def _hold_exact(self, digest: int, pos: int) -> None:
        self.exact_of[pos] = digest
        held = self.exact.get(digest)
        if held is None:
            self.exact[digest] = pos
            return
        if (self.seq[pos], pos) < (self.seq[held], held):
            self.exact[digest], pos = pos, held
        self.exact_more.setdefault(digest, []).append(pos)

    def _remove(self, pos: int) -> None:
        packed = self.edits_of.pop(pos, b"")
        if packed:
            keys = unpack_keys(packed)
            self.edits.remove(pos, keys)
            for key in [key for key in keys if key in self.edits_more] if self.edits_more else ():
                others = self.edits_more[key]
                if pos in others:
                    others.remove(pos)
                else:  # the table's owner is gone: another live holder takes the key
                    self.edits.add(others.pop(), (key,))
                if not others:
                    del self.edits_more[key]
        digest = self.exact_of.pop(pos, None)
        if digest is not None:
            holders = self.exact_more.get(digest)
            if self.exact.get(digest) == pos:
                if holders:
                    best = min(holders, key=lambda p: (self.seq[p], p))
                    holders.remove(best)
                    self.exact[digest] = best
                else:
                    del self.exact[digest]
            elif holders:
                holders.remove(pos)
            if holders is not None and not holders:
                del self.exact_more[digest]
            return
        if not self.delegated and not self.recent.remove(pos):
            self.index.remove(pos)

    def candidates(self, fp: int, exact: bool) -> bytes:
        """Packed ``(log position, seq, distance)`` of the canonical pages within k."""
        self.settle()
        seq = self.seq
        if exact:
            pos = self.exact.get(fp)
            return b"" if pos is None else _CANDIDATE.pack(pos, seq[pos], 0)
        return self._packed(self.index.query(fp), self.recent.query(fp))

    def _packed(self, found: list[Any], more: list[Any]) -> bytes:
        seq = self.seq
        return b"".join(_CANDIDATE.pack(m.key, seq[m.key], m.distance) for m in (*found, *more))

    def edit_candidates(self, keys: tuple[int, ...]) -> bytes:
        """Packed ``(log position, seq, EDIT_MATCH)`` of the canonical pages sharing a one-edit key."""
        owners = self.edits.owners(keys)
        if self.edits_more:
            owners.update(pos for key in keys for pos in self.edits_more.get(key, ()))
        return b"".join(_CANDIDATE.pack(pos, self.seq[pos], EDIT_MATCH) for pos in sorted(owners))

    def candidates_many(self, fps: list[int]) -> list[bytes]:
        """``candidates`` of many simhash fingerprints (``BlockPermutedIndex.query_many``: one call an index;
        ``query_many_arrays`` would first merge the index's unsorted tail into its tables, an O(index) step)."""
        self.settle()
        return [self._packed(found, more) for found, more in zip(self.index.query_many(fps), self.recent.query_many(fps))]
