"""Identity records in shards (``SIMHASH_REDIS_SHARDS`` > 1): claims, write-backs, lost shards.

With shards, an identity's record lives in a bucket hash on its shard's node, not beside the
scope's log, so the check script cannot read or write it: ``RedisBackend`` claims each identity
of a batch and reads its old record first (``claim.lua``), runs the check with those records, then
writes the new records back, releasing the claims, and reads the record of each canonical page
the verdicts name for its payload (``write.lua``).  Each shard keeps a marker (``#epoch`` in its
claims hash): a shard known to hold the scope's records that shows another marker restarted
empty, and the whole scope is made anew (``drop.lua``).

Typed rows: a ``Slot`` says where an identity's record is (``layout.identity_slot``); the check's
answer per page is a ``protocol.Row``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .layout import ENTRY, ScopeKeys, identity_slot, parse_record
from .protocol import Row

if TYPE_CHECKING:
    from ..base import PageRecord
    from .replica import Replica

__all__ = ["Slot", "slot_of", "first_repeat", "Claimed", "Shards", "CLAIM_MS", "TRIES", "PAUSE"]

#: How long a claim on an identity holds (a worker that died mid-check frees it then).
CLAIM_MS = 30_000
#: Tries (and the pause between) for an identity another worker is checking, and for the
#: record of a canonical page whose worker has not written it back yet.
TRIES, PAUSE = 40, 0.025


class Slot(NamedTuple):
    """Where an identity's record is kept in its scope (``layout.identity_slot``)."""

    bucket: int
    field: bytes  # 8 bytes, the record's field in its bucket
    kept: bytes  # identity bytes the bucket and field do not hold (kept in the payload)

    def claim_field(self) -> bytes:
        """The identity's field in its shard's claims: its bucket (3 bytes) and its 8-byte field."""
        return self.bucket.to_bytes(3, "big") + self.field


def slot_of(scope: str, identity: str, bucket_bits: int) -> Slot:
    return Slot(*identity_slot(scope, identity, bucket_bits))


def first_repeat(records: Sequence[PageRecord]) -> int | None:
    """Where to cut a batch: the position of the first page whose identity came before in it, or None.

    With shards an identity's record is read before the script runs, so an identity's second page
    goes in the next call (in order), after the first one's record is written back.
    """
    seen: set[str] = set()
    for n, record in enumerate(records):
        identity = record.identity or record.url
        if identity in seen:
            return n
        seen.add(identity)
    return None


class Claimed(NamedTuple):
    """What ``Shards.claim`` read."""

    #: Per slot: b"" (no record yet), the record, or None when another worker is checking that
    #: identity (its claim has not expired).
    olds: list[bytes | None]
    #: Each shard's marker (the epoch of the scope incarnation whose records it holds).
    markers: dict[int, str]


class Shards:
    """The shard side of one worker's checks: ``client`` and ``scripts`` are the backend's (connected)."""

    def __init__(self, client: Any, scripts: Mapping[str, Any], worker_id: str, ttl_ms: int) -> None:
        self.client = client
        self.scripts = scripts
        self.worker_id = worker_id
        self.ttl_ms = ttl_ms

    async def claim(self, sk: ScopeKeys, slots: list[Slot]) -> Claimed:
        """Claim each identity on its shard and read its record (one ``claim.lua`` call per shard)."""
        olds: list[bytes | None] = [None] * len(slots)
        markers: dict[int, str] = {}
        by_shard: dict[int, list[int]] = {}
        for n, slot in enumerate(slots):
            by_shard.setdefault(sk.shard_of(slot.bucket), []).append(n)

        async def claim(shard: int, members: list[int]) -> list[bytes]:
            keys = [sk.claims(shard), *(sk.bucket(slots[n].bucket) for n in members)]
            args: list[Any] = [self.worker_id, CLAIM_MS]
            for n in members:
                args += [slots[n].claim_field(), slots[n].field]
            return list(await self.scripts["claim"](keys=keys, args=args))

        groups = list(by_shard.items())
        for (shard, members), replies in zip(groups, await asyncio.gather(*(claim(s, m) for s, m in groups))):
            markers[shard] = bytes(replies[0]).decode("ascii", "replace")
            for n, reply in zip(members, replies[1:]):
                if reply != b"B":
                    olds[n] = reply[1:] if reply[:1] == b"R" else b""
        return Claimed(olds, markers)

    async def lost(self, sk: ScopeKeys, replica: Replica, markers: dict[int, str], every: float) -> bool:
        """Whether a shard known to hold the replica's scope shows another marker (it restarted empty).

        ``markers`` are the batch's shards' (``claim``); once every ``every`` seconds the markers of
        all the shards known to hold the scope's records are read too, so a lost shard is found
        within a heartbeat.  Shards showing the scope's epoch are noted as holding its records.
        """
        epoch = replica.epoch[1:]
        if time.monotonic() - replica.swept >= every:
            replica.swept = time.monotonic()
            others = sorted(replica.shards - set(markers))
            values = await asyncio.gather(*(self.client.hget(sk.claims(n), "#epoch") for n in others))
            markers.update((n, (v or b"").decode("ascii", "replace")) for n, v in zip(others, values))
        found = False
        for shard, marker in markers.items():
            if epoch and marker == epoch:
                replica.shards.add(shard)
            elif shard in replica.shards:
                found = True
        return found

    async def drop_scope(self, sk: ScopeKeys, epoch: str) -> bool:
        """Drop the scope whose shard was lost (``drop.lua``); False when it was made anew already
        (another worker found the loss first, or the scope's own node restarted empty too)."""
        return bool(await self.scripts["drop"](keys=[sk.meta, sk.log, sk.positions, sk.extras], args=[epoch]))

    async def write_back(
        self, sk: ScopeKeys, slots: list[Slot], olds: list[bytes | None], rows: list[Row], replica: Replica
    ) -> list[Row]:
        """Write the checked identities' records to their shards (releasing the claims) and read, in
        the same calls, the record of each canonical page the verdicts name (for its payload)."""
        # A canonical page checked in this batch too: its record as it was at each row (the one read
        # before the batch, then each row's), as the script reads it between rows without shards.
        state: dict[tuple[int, bytes], bytes | None] = {
            (slot.bucket, slot.field): old or None for slot, old in zip(slots, olds)
        }
        known: list[bytes | None] = []  # per row: the canonical's record, None (none wanted or none there), b"" (read it)
        for slot, row in zip(slots, rows):
            at = row.canonical_at
            wanted = row.canonical_fingerprint is not None and row.canonical_payload is None and at is not None
            known.append(state.get((at.bucket, row.canonical_field), b"") if wanted and at is not None else None)
            state[(slot.bucket, slot.field)] = row.record
        writes: dict[int, list[tuple[Slot, bytes | None]]] = {}
        reads: dict[int, list[tuple[int, int, bytes]]] = {}  # per shard: (row, canonical's bucket, its field)
        for slot, row in zip(slots, rows):
            writes.setdefault(sk.shard_of(slot.bucket), []).append((slot, row.record))
        for n, (row, value) in enumerate(zip(rows, known)):
            if value == b"" and row.canonical_at is not None:
                bucket = row.canonical_at.bucket
                reads.setdefault(sk.shard_of(bucket), []).append((n, bucket, row.canonical_field))

        async def write(shard: int) -> list[bytes]:
            items, wanted = writes.get(shard, []), reads.get(shard, [])
            args: list[Any] = [self.worker_id, self.ttl_ms, len(items), replica.epoch[1:]]
            for slot, record in items:
                args += [slot.claim_field(), slot.field, record]
            args += [field for _, _, field in wanted]
            keys = [sk.claims(shard), *(sk.bucket(slot.bucket) for slot, _ in items),
                    *(sk.bucket(bucket) for _, bucket, _ in wanted)]  # fmt: skip
            return list(await self.scripts["write"](keys=keys, args=args))

        shards = sorted(set(writes) | set(reads))
        if replica.epoch[1:]:
            replica.shards.update(writes)  # they hold the marker now
        for shard, values in zip(shards, await asyncio.gather(*(write(shard) for shard in shards))):
            for (n, bucket, field), value in zip(reads.get(shard, []), values):
                # Empty: the canonical page's worker has decided but not written its record back yet.
                known[n] = bytes(value) if value else await self.canonical_record(sk, bucket, field)
        out = []
        for row, value in zip(rows, known):
            if value is None or row.canonical_at is None:
                out.append(row)
                continue
            record = parse_record(value)
            fingerprint: bytes | None
            # As check.lua's canonical_of: the fingerprint the page is indexed with now (its own log
            # entry's: the verdict's entry, or a later one if it changed since), else its latest.
            if record.own is None:
                fingerprint = record.fingerprint.to_bytes(8, "big")
            elif record.own == row.canonical_at.position:
                fingerprint = row.canonical_fingerprint
            else:
                fingerprint = await self.client.getrange(sk.log, record.own * ENTRY + 1, record.own * ENTRY + 8)
            out.append(row._replace(canonical_fingerprint=fingerprint, canonical_payload=record.payload))
        return out

    async def canonical_record(self, sk: ScopeKeys, bucket: int, field: bytes) -> bytes | None:
        """A canonical page's record, read from its shard (None if its worker never writes it back)."""
        for _ in range(TRIES):
            value = await self.client.hget(sk.bucket(bucket), field)
            if value is not None:
                return bytes(value)
            # The canonical page's worker has decided but not written its record back yet.
            await asyncio.sleep(PAUSE)
        return None
