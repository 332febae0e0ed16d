"""A worker's copies of the global index's table buckets (``SIMHASH_REDIS_BUCKET_CACHE``, in MB, LRU).

A check reads one bucket per table; at 10 million pages a bucket holds ~1,700 entries (~14 KB) that the same worker
read seconds before, while a few entries were appended since.  A bucket kept here is read again with ``TAIL_LUA``:
its header and only the entries after the ones kept.  Entries are appended in place and only ever move at a
removal (a re-checked page whose content changed), which changes the bucket's mark (``cluster_layout``): a kept
copy with the bucket's mark is a prefix of it, one with another mark (or a bucket made again, or shorter) is read
whole in the same call.  So is one whose last entry is not the bucket's entry there: a node that lost writes (a
failover: Redis replicates after it answers) keeps the mark, and new entries fill the places of those lost.  So a
copy is never stale: each check still sees the bucket as it is at that moment.

The bound is on the memory the copies take: each ``bytearray`` (header and entries, and the spare room it keeps
when it grows), its key and its LRU entry (``copy_cost``: a bucket of one entry costs ~15 times its bytes); the
least recently read bucket goes first.  The counts (``bucket_hits``: the new entries only; ``bucket_misses``: read whole,
not kept; ``bucket_moved``: read whole, kept but moved) are the worker's stats ``simhash/redis/global/bucket_*``.
"""

from __future__ import annotations

from collections import OrderedDict

from .cluster_layout import BUCKET_HEAD, mark_of, used_of

__all__ = ["TAIL_LUA", "BucketCache", "copy_cost", "tail_args"]

#: What a copy costs beside its ``bytearray`` and its key's characters: the key's ``str`` object and the copy's
#: entry in the ``OrderedDict`` (~49 bytes, and ~90-130 with the table's spare room, on CPython 3.11: ``tracemalloc``).
_PER_COPY = 180

#: ``KEYS[1]``: a bucket; ``ARGV``: the entries' bytes kept, the kept copy's mark and its last entry (``tail_args``).
#: Returns the header and the entries after those kept when the mark is the bucket's, it has at least as many and
#: the same entry where the copy ends, else the header and every entry (the bucket read whole); nil when there is
#: no bucket.
TAIL_LUA = """
local head = redis.call('GETRANGE', KEYS[1], 0, 7)
if #head < 8 then return false end
local used = struct.unpack('>I4', head)
local had = tonumber(ARGV[1])
if string.sub(head, 5, 8) == ARGV[2] and used >= had
    and (had == 0 or redis.call('GETRANGE', KEYS[1], had, had + 7) == ARGV[3]) then
  return head .. redis.call('GETRANGE', KEYS[1], 8 + had, 7 + used)
end
return redis.call('GETRANGE', KEYS[1], 0, 7 + used)
"""


def tail_args(data: bytearray) -> tuple[int, bytes, bytes]:
    """``TAIL_LUA``'s arguments for the copy ``data``: its entries' bytes, its mark, its last entry (none: empty)."""
    used = used_of(data)
    return used, mark_of(data), bytes(data[used : BUCKET_HEAD + used])


def copy_cost(key: str, data: bytearray) -> int:
    """The bytes a copy holds: its ``bytearray`` (object, bytes and spare room), its key and its LRU entry."""
    return data.__sizeof__() + len(key) + _PER_COPY


class BucketCache:
    """Copies of table buckets (header and entries) within ``budget`` bytes (``copy_cost``); ``counts`` gets the hits
    and misses."""

    def __init__(self, budget: int, counts: dict[str, int]) -> None:
        self.budget = budget
        self.size = 0  # bytes the copies kept hold (``copy_cost``)
        self.counts = counts
        for name in ("bucket_hits", "bucket_misses", "bucket_moved"):
            counts.setdefault(name, 0)
        self._kept: OrderedDict[str, bytearray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()
        self.size = 0

    def kept(self, key: str) -> bytearray | None:
        """The copy of ``key`` to read against (``TAIL_LUA``'s arguments: ``tail_args`` of it), if any."""
        data = self._kept.get(key)
        if data is not None:
            self._kept.move_to_end(key)
        return data

    def take(self, key: str, had: bytearray | None, reply: bytes | None) -> bytes | bytearray | None:
        """The bucket ``key`` as the reply read it: ``reply`` is a ``GET``'s when ``had`` is None, else
        ``TAIL_LUA``'s against the copy ``had``; keeps it within the budget."""
        if had is None:
            self.counts["bucket_misses"] += 1
            if reply is None:
                return None
            return self._keep(key, reply)
        if reply is None:  # (the bucket is gone: flushed)
            self._drop(key)
            return None
        used, size, had_used = used_of(reply), len(reply) - BUCKET_HEAD, used_of(had)
        # (the new entries; a reply with every entry, from a copy with some, is the bucket read whole)
        if reply[4:BUCKET_HEAD] == had[4:BUCKET_HEAD] and used >= had_used and (size != used or not had_used):
            if size != used - had_used:  # (a bucket shorter than its header says: damaged)
                self._drop(key)  # (read whole next time; this time, the entries that came)
                entries = had[BUCKET_HEAD:] + reply[BUCKET_HEAD:]
                return len(entries).to_bytes(4, "big") + reply[4:BUCKET_HEAD] + entries
            self.counts["bucket_hits"] += 1
            if len(reply) > BUCKET_HEAD:
                before = had.__sizeof__()
                had += memoryview(reply)[BUCKET_HEAD:]
                had[:4] = reply[:4]
                if self._kept.get(key) is had:  # (not let go since it was read: by a bucket of the same batch)
                    self.size += had.__sizeof__() - before
                    self._trim()
            return had
        self.counts["bucket_moved"] += 1
        self._drop(key)
        return self._keep(key, reply)

    def _keep(self, key: str, reply: bytes) -> bytes | bytearray:
        if self.budget <= 0:
            return reply
        data = bytearray(memoryview(reply)[: BUCKET_HEAD + used_of(reply)])
        self._drop(key)
        self._kept[key] = data
        self.size += copy_cost(key, data)
        self._trim()
        return data

    def _drop(self, key: str) -> None:
        data = self._kept.pop(key, None)
        if data is not None:
            self.size -= copy_cost(key, data)

    def _trim(self) -> None:
        while self.size > self.budget and self._kept:
            key, data = self._kept.popitem(last=False)
            self.size -= copy_cost(key, data)
