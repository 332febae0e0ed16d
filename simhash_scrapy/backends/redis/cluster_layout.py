"""Key layout and binary formats of the global scope sharded over a Redis Cluster (``SIMHASH_BACKEND = "redis-global"``).

Manku, Jain and Das Sarma's distributed design: the block-permuted tables of
``core.index.index_layout`` (``tables_for(k, SIMHASH_REDIS_TABLE_BLOCKS)``)
live in Redis, one STRING per (table, key prefix), each in a hash slot of its
own (the whole key is the hash tag), so the buckets spread evenly over the
nodes.  A check reads one bucket per table: at most ``tables`` nodes, one GET
each; the worker filters the entries (no copy of the index in any worker).

An entry keeps the fingerprint folded to 32 bits: the distance between two
folds is never more than between the fingerprints (a bit of the fold's XOR
is 1 only if one of the two bits it folds differs), so the entries within k
of a page's fold are all its candidates, and a few more (a random entry: 1 in
~100,000 at k = 4); the worker reads their records (the directory, then the
record: the fingerprint in the index) and keeps those within k.  8 bytes an
entry instead of 12: a third of the tables' memory.

``P`` is the key prefix (``SIMHASH_REDIS_KEY``), ``sid`` 12 hex digits of the
scope's BLAKE2b hash::

    P:{sid.m}            HASH    layout, seq (INCRBY once per batch: first-check order),
                                 canonicals (count), zdict (the scope's payload dictionary:
                                 the first worker's 32 sampled payloads, HSETNX)
    P:{sid.t<t>.<b>}     STRING  table t, bucket b (the table key's top ``bucket_bits`` bits,
                                 hex): a header (>I4: the entries' bytes; >I4: the mark, random
                                 when the bucket is made, one more at each removal), then
                                 ENTRY-byte entries, appended: the fingerprint folded (>I4: its
                                 two halves XORed, ``fold``), seq (>I4: ties go to the lowest);
                                 then spare room (zeros: ``room``), where an append writes
                                 in place (SETRANGE) until it is full, and only then copies
                                 the string (``pack_bucket``: what appends leave).  Entries
                                 only ever move at a removal, which changes the mark: a
                                 worker's copy of a bucket with the same mark is a prefix of
                                 it (``bucket_cache``: only the new entries are read; its last
                                 entry is checked too: a failover may lose the last writes)
    P:{sid.x.<b>}        HASH    short pages (exact digest): digest (8 bytes) -> seq (4) +
                                 directory slot; HSETNX: the first writer wins
    P:{sid.d.<n>}        STRING  the directory: seq -> identity (DIR bytes at (seq % DIR_SPAN) * DIR:
                                 SETRANGE; made at its full size, zeros, when new), for
                                 canonical pages only: where a verdict finds
                                 its canonical page's record
    P:{s}                SET     the scopes' names (each worker adds a scope before its first check
                                 of it): what the report and the identity replay at open read
    P:{e.<h>}            STRING  a named blob (``save_extra``: the requests a page yielded, for its
                                 304); h: 12 hex digits of the name's BLAKE2b hash
    P:{sid.r.<b>}        HASH    one record per identity (field: 8 bytes of the identity's
                                 hash, ``layout.identity_slot``; b: its first ``record_bits``
                                 bits, hex)

Record: seq (>I4), fingerprint (8), flags (1: exact 1, indexed 2, member 4, moved 8, last seen 16,
outcome << 5), distance (1), [canonical seq (>I4) if member], [the fingerprint in the index (8) if
moved: indexed, and re-checked within k since], first seen (>d), [last seen (>d) if it differs],
payload (``layout.Codec``: the scope's dictionary once made, the preset one before).  Records of ~70-90 bytes: run the nodes with
``hash-max-listpack-value 128`` to keep them in Redis' compact encoding.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ...core import _native
from ...core.cluster.clustering import RECORDED_OUTCOMES
from ...core.index.index_layout import Table, tables_for

__all__ = [
    "GlobalKeys", "GlobalRecord", "pack_record", "parse_record", "ENTRY", "DIR", "DIR_SPAN", "entries_of", "fold",
    "near_entries", "near_entries_many", "pack_bucket", "room", "used_of", "mark_of", "BUCKET_HEAD", "scopes_key", "records_pattern",
    "sid_of", "extra_key", "scope_id", "meta_key",
]

#: 2: the scope's payload dictionary (meta zdict), directory strings made at full size, folded entries;
#: 3: table buckets with a header and spare room (appends in place); 4: a mark in the header (workers' bucket caches)
LAYOUT_VERSION = 4
#: A table entry: the fingerprint folded (4), seq (4).
ENTRY = 8
ENTRY_DTYPE = np.dtype([("fold", ">u4"), ("seq", ">u4")])
#: A table bucket's header: the bytes of its entries (>I4), its mark (>I4: made at random, +1 a removal).
BUCKET_HEAD = 8
#: Spare room a bucket gets when an append finds it full: 1/ROOM_SHARE of its entries' bytes, plus ROOM_MIN bytes.
ROOM_SHARE, ROOM_MIN = 16, 64
#: A directory slot: the identity's record bucket (3 bytes) and field (8 bytes).
DIR = 11
#: Directory slots per STRING key (one key per 4096 seq numbers).
DIR_SPAN = 4096
#: The most bucket names a scope's keys keep (``GlobalKeys.buckets``): ~80 bytes each.
_NAMES = 1 << 17
F_EXACT, F_INDEXED, F_MEMBER, F_MOVED, F_LAST = 1, 2, 4, 8, 16
OUTCOME_SHIFT = 5
_HEAD = struct.Struct(">I8sBB")
_MEMBER = struct.Struct(">I")
_SEEN = struct.Struct(">d")


class GlobalKeys:
    """Key names and the table layout of one scope."""

    #: Bucket names kept by every scope's keys in this process (at most ``_NAMES``).
    kept_names = 0

    def __init__(self, prefix: str, scope: str, max_distance: int, blocks: int, bucket_bits: int,
                 record_bits: int) -> None:
        self.scope = scope
        self.sid = scope_id(scope)
        self.base = f"{prefix}:{{{self.sid}"
        _, self.tables = tables_for(max_distance, blocks)
        if any(table.errors for table in self.tables):
            raise ValueError(
                f"SIMHASH_REDIS_TABLE_BLOCKS={blocks} must be more than SIMHASH_MAX_DISTANCE={max_distance} "
                f"(a table key must match exactly)"
            )
        self.bucket_bits = min(bucket_bits, min(table.key_bits for table in self.tables))
        self.record_bits = record_bits
        self.meta = meta_key(prefix, self.sid)
        #: (shift, mask) of each table's bucket bits, when they all lie in the first span of its key, else None
        self._fast: list[tuple[int, int]] | None = None
        if all(t.spans[0][2] >= self.bucket_bits for t in self.tables) and len(self.tables) << self.bucket_bits <= _NAMES:
            self._fast = [(t.spans[0][0] + t.spans[0][2] - self.bucket_bits, (1 << self.bucket_bits) - 1)
                          for t in self.tables]
        self._names: list[dict[int, str]] = [{} for _ in self.tables]
        self.pattern = f"{prefix}:{{{self.sid}.*"

    def buckets(self, fp: int) -> list[str]:
        """The bucket key of ``fp`` in every table (names kept when the bucket bits come from each table key's first
        span and there are at most ``_NAMES`` buckets in all, and at most ``_NAMES`` names kept in this process, every
        scope together: no formatting a check, a bounded memory with thousands of identity scopes)."""
        if self._fast is None:
            return [self.bucket(t, table, fp) for t, table in enumerate(self.tables)]
        out: list[str] = []
        for names, (shift, mask) in zip(self._names, self._fast):
            b = (fp >> shift) & mask
            name = names.get(b)
            if name is None:
                name = f"{self.base}.t{len(out)}.{b:x}}}"
                if GlobalKeys.kept_names < _NAMES:
                    GlobalKeys.kept_names += 1
                    names[b] = name
            out.append(name)
        return out

    def buckets_many(self, fps: list[int]) -> list[str]:
        """``buckets`` of each fingerprint of ``fps``, one after the other (``len(self.tables)`` keys each): one C call
        (``_speedups.bucket_names``, new names each time) when built and the bucket bits come from each table key's
        first span, else ``buckets`` each."""
        if self._fast is not None and _native.speedups is not None:
            names: list[str] = _native.speedups.bucket_names(self.base, self._fast, fps)
            return names
        out: list[str] = []
        for fp in fps:
            out += self.buckets(fp)
        return out

    def release(self) -> None:
        """Gives the bucket names this scope kept back to the process's budget (a worker forgets the scope)."""
        GlobalKeys.kept_names -= sum(map(len, self._names))
        self._names = [{} for _ in self.tables]

    def bucket(self, t: int, table: Table, fp: int) -> str:
        return f"{self.base}.t{t}.{table.key(fp) >> (table.key_bits - self.bucket_bits):x}}}"

    def exact(self, digest: int) -> str:
        return f"{self.base}.x.{digest >> 48:x}}}"

    def directory(self, seq: int) -> tuple[str, int]:
        """``(key, byte offset)`` of ``seq``'s directory slot."""
        return f"{self.base}.d.{seq // DIR_SPAN:x}}}", (seq % DIR_SPAN) * DIR

    def record(self, bucket: int) -> str:
        return f"{self.base}.r.{bucket:x}}}"


def scope_id(scope: str) -> str:
    """The scope's id in its keys: 12 hex digits of its BLAKE2b hash."""
    return hashlib.blake2b(scope.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def meta_key(prefix: str, sid: str) -> str:
    """The meta HASH of the scope ``sid`` (layout, seq, canonicals, zdict)."""
    return f"{prefix}:{{{sid}.m}}"


def scopes_key(prefix: str) -> str:
    """The SET of the scopes' names under ``prefix`` (a hash slot of its own: ``{s}``, never a scope's 12 hex digits)."""
    return f"{prefix}:{{s}}"


def extra_key(prefix: str, name: str) -> str:
    """The key of the named blob ``name`` (its own hash slot: the blobs spread over the nodes)."""
    return f"{prefix}:{{e.{hashlib.blake2b(name.encode('utf-8', 'surrogatepass'), digest_size=6).hexdigest()}}}"


def records_pattern(prefix: str) -> str:
    """A SCAN pattern of the record hashes of every scope under ``prefix`` (one SCAN for them all)."""
    escaped = "".join("\\" + c if c in "*?[]\\" else c for c in prefix)
    return f"{escaped}:{{*.r.*"


def sid_of(key: bytes, prefix: str) -> str:
    """The scope id (12 hex digits) of a key under ``prefix`` (``P:{sid...``)."""
    start = len(prefix.encode("utf-8", "surrogatepass")) + 2
    return key[start : start + 12].decode("ascii", "replace")


def used_of(data: bytes | bytearray | None) -> int:
    """The bytes of a bucket's entries (its header; 0 for a bucket not made yet)."""
    return int.from_bytes(data[:4], "big") if data else 0


def entries_of(data: bytes | None) -> np.ndarray:
    """A bucket's entries (``ENTRY_DTYPE``): the bytes its header counts, not its spare room."""
    if not data:
        return np.zeros(0, dtype=ENTRY_DTYPE)
    count = min(used_of(data), len(data) - BUCKET_HEAD) // ENTRY
    return np.frombuffer(data, dtype=ENTRY_DTYPE, count=count, offset=BUCKET_HEAD)


def room(used: int) -> int:
    """The spare bytes an append leaves after the ``used`` bytes of entries when it has to grow the bucket (the
    rule of ``cluster_backend.APPEND_LUA``)."""
    return used // ROOM_SHARE + ROOM_MIN


def mark_of(data: bytes | bytearray) -> bytes:
    """A bucket's mark (4 bytes of its header): another one when its entries may have moved (made again, a removal)."""
    return bytes(data[4:BUCKET_HEAD])


def pack_bucket(entries: bytes, mark: bytes = bytes(4)) -> bytes:
    """The string that appending ``entries`` one ``ENTRY`` at a time to a new bucket marked ``mark`` leaves: header,
    entries, room (none at all without entries: no key)."""
    if not entries:
        return b""
    size = used = 0  # the string's length (0: no key yet), the entries' bytes
    while used < len(entries):
        used += ENTRY
        if BUCKET_HEAD + used > size:
            size = BUCKET_HEAD + used + room(used)
            used = min(len(entries), (size - BUCKET_HEAD) // ENTRY * ENTRY)  # the appends that fit, in place
    return len(entries).to_bytes(4, "big") + mark + entries + bytes(size - BUCKET_HEAD - len(entries))


def fold(fp: int) -> int:
    """A fingerprint's two halves XORed: ``popcount(fold(a) ^ fold(b)) <= popcount(a ^ b)``."""
    return (fp >> 32) ^ (fp & 0xFFFFFFFF)


def near_entries(entries: np.ndarray, fp: int, k: int) -> np.ndarray:
    """The seq numbers of the entries whose fold is within k of ``fp``'s: every entry within k, and a few more."""
    return entries["seq"][np.bitwise_count(entries["fold"] ^ np.uint32(fold(fp))) <= k]


def near_entries_many(buckets: Sequence[bytes | bytearray | None], fps: list[int], k: int) -> list[list[int]]:
    """``near_entries`` of every (bucket, fingerprint) pair at once: the compiled loop (``_speedups.near_folds``:
    no copy of the buckets, 12,000 entries a check at 10 million pages), else one numpy pass over a batch's
    buckets (one per bucket cost ~10 µs of call overhead, a batch reads tables x pages of them)."""
    if _native.speedups is not None:
        return _native.speedups.near_folds(buckets, fps, k)
    counts = [max(0, min(used_of(data), len(data) - BUCKET_HEAD)) // ENTRY if data else 0 for data in buckets]
    joined = b"".join([data[BUCKET_HEAD : BUCKET_HEAD + n * ENTRY] for data, n in zip(buckets, counts) if data])
    entries = np.frombuffer(joined, dtype=ENTRY_DTYPE)
    folds = np.repeat(np.array([fold(fp) for fp in fps], dtype=np.uint32), counts)
    hits = np.flatnonzero(np.bitwise_count(entries["fold"] ^ folds) <= k)
    out: list[list[int]] = [[] for _ in buckets]
    owners = np.searchsorted(np.cumsum(counts), hits, side="right")
    for owner, seq in zip(owners.tolist(), entries["seq"][hits].tolist()):
        out[owner].append(seq)
    return out


def pack_entry(fp: int, seq: int) -> bytes:
    return fold(fp).to_bytes(4, "big") + seq.to_bytes(4, "big")


class GlobalRecord(NamedTuple):
    seq: int
    fingerprint: int
    exact: bool
    indexed: bool
    outcome: int  # code in RECORDED_OUTCOMES
    distance: int
    canonical_seq: int | None
    first_seen: float
    last_seen: float
    payload: bytes
    indexed_fp: int | None = None  # the fingerprint in the tables (indexed pages)

    @property
    def outcome_name(self) -> str:
        return RECORDED_OUTCOMES[self.outcome].value


def pack_record(r: GlobalRecord) -> bytes:
    if _native.speedups is not None:  # (one C call: the lines below are its twin)
        packed: bytes = _native.speedups.pack_global_record(r)
        if packed is not NotImplemented:
            return packed
    flags = r.outcome << OUTCOME_SHIFT | (F_EXACT if r.exact else 0) | (F_INDEXED if r.indexed else 0)
    member = b""
    if r.canonical_seq is not None:
        flags |= F_MEMBER
        member = _MEMBER.pack(r.canonical_seq)
    moved = b""
    if r.indexed and r.indexed_fp is not None and r.indexed_fp != r.fingerprint:
        flags |= F_MOVED
        moved = r.indexed_fp.to_bytes(8, "big")
    seen = _SEEN.pack(r.first_seen)
    if _SEEN.pack(r.last_seen) != seen:
        flags |= F_LAST
        seen += _SEEN.pack(r.last_seen)
    head = _HEAD.pack(r.seq, r.fingerprint.to_bytes(8, "big"), flags, max(r.distance, 0))
    return b"".join((head, member, moved, seen, r.payload))


def parse_record(value: bytes) -> GlobalRecord:
    if _native.speedups is not None:  # (one C call: the lines below are its twin)
        parsed: GlobalRecord = _native.speedups.parse_global_record(value, GlobalRecord)
        if parsed is not NotImplemented:
            return parsed
    seq, fp, flags, distance = _HEAD.unpack_from(value)
    p = _HEAD.size
    canonical_seq = None
    if flags & F_MEMBER:
        (canonical_seq,) = _MEMBER.unpack_from(value, p)
        p += _MEMBER.size
    fingerprint = int.from_bytes(fp, "big")
    indexed_fp = fingerprint if flags & F_INDEXED else None
    if flags & F_MOVED:
        indexed_fp = int.from_bytes(value[p : p + 8], "big")
        p += 8
    (first,) = _SEEN.unpack_from(value, p)
    last = first
    p += _SEEN.size
    if flags & F_LAST:
        (last,) = _SEEN.unpack_from(value, p)
        p += _SEEN.size
    return GlobalRecord(
        seq, fingerprint, bool(flags & F_EXACT), bool(flags & F_INDEXED), flags >> OUTCOME_SHIFT,
        distance if flags & F_MEMBER else -1, canonical_seq, first, last, value[p:], indexed_fp,
    )
