"""Reading and deleting a spider's whole Redis state (members for the report, counts, flush)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from ...core.cluster.distinct import split_scope_key
from ...core.cluster.viewidentity import MAX_ADDRESSES
from ...core.redact import redact
from ..base import ClusterMember, Outcome
from .layout import OP_ADD, OP_EXACT, Codec, Keys, Record, ScopeKeys, parse_log, parse_record

logger = logging.getLogger("simhash_scrapy.backends.redis")


def declares_identity(scope: str) -> bool:
    """Whether ``scope`` is an identity's (``plain#digest``: ``core.cluster.distinct.scope_key``)."""
    return split_scope_key(scope) is not None


def identities_unread(exc: Exception, secrets: Iterable[str]) -> None:
    """What either Redis backend says when the identities earlier crawls recorded cannot be read at open."""
    logger.warning(
        "simhash: cannot read the identities earlier crawls recorded in Redis (%s: %s); the first page of "
        "each address is downloaded without validators", type(exc).__name__, redact(str(exc), secrets),
    )  # fmt: skip


def identities_read(count: int) -> None:
    """What either Redis backend says when it read as many identity pages as the replay keeps."""
    if count >= MAX_ADDRESSES:
        logger.info("simhash: read the first %d identity pages earlier crawls recorded (the most the replay keeps)",
                    MAX_ADDRESSES)

__all__ = ["scopes", "delete_all", "identities", "canonicals", "read_members", "delete_records"]

_PIPELINE = 1000


def record_member(codec: Codec, record: Record, field: bytes, scope: str, canonical_url: str | None) -> ClusterMember:
    """The ``ClusterMember`` of an identity record (``canonical_url``: its canonical page's URL, if a member)."""
    url, identity, referer, depth, text, digest, etag, last_modified, link = codec.decode_all(record.payload, field)
    return ClusterMember(
        url=url,
        fingerprint=record.fingerprint,
        scope=scope,
        identity=identity,
        exact=record.exact,
        canonical_url=canonical_url,
        distance=record.distance if record.canonical is not None else None,
        referer=referer,
        depth=depth,
        text=text,
        indexed=record.own is not None,
        outcome=Outcome(record.outcome),
        previous_fingerprint=record.previous,
        first_seen=record.first_seen,
        last_seen=record.last_seen,
        digest=record.fingerprint if record.exact else digest,
        etag=etag,
        last_modified=last_modified,
        canonical_link=link,
        via="containment" if record.containment else None,
    )


async def scopes(client: Any, keys: Keys) -> list[str]:
    return sorted(s.decode("utf-8", "surrogatepass") for s in await client.smembers(keys.scopes))


async def _scan(client: Any, pattern: str) -> list[bytes]:
    return [key async for key in client.scan_iter(match=pattern, count=10_000)]


async def delete_all(client: Any, keys: Keys) -> None:
    """Delete every key of the prefix (all scopes, the global keys; workers stay registered)."""
    for scope in await scopes(client, keys):
        sk = keys.scope(scope)
        await delete_records(client, sk)
        await client.unlink(sk.meta, sk.log, sk.positions, sk.extras)
    extras = await _scan(client, _glob_escape(keys.extra("")) + "*")
    await client.unlink(keys.meta, keys.scopes, *extras)


async def delete_records(client: Any, sk: ScopeKeys) -> None:
    """Delete a scope's identity records (every shard) and claims."""
    for prefix in sk.bucket_prefixes():
        buckets = await _scan(client, _glob_escape(prefix) + "*")
        for start in range(0, len(buckets), _PIPELINE):
            await client.unlink(*buckets[start : start + _PIPELINE])
    for shard in range(len(sk.shard_bases)):
        await client.unlink(sk.claims(shard))


async def _hgetall(client: Any, keys: list[bytes]) -> list[Any]:
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hgetall(key)
        return list(await pipe.execute())


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


async def _sum_field(client: Any, keys: Keys, field: str) -> int:
    total = 0
    for scope in await scopes(client, keys):
        total += int(await client.hget(keys.scope(scope).meta, field) or 0)
    return total


async def identities(client: Any, keys: Keys) -> int:
    """Identities recorded in all scopes."""
    return await _sum_field(client, keys, "records")


async def canonicals(client: Any, keys: Keys) -> int:
    """Canonical pages in all scopes."""
    return await _sum_field(client, keys, "canonicals")


async def _bucket_keys(client: Any, keys: Keys, chosen: list[str]) -> dict[bytes, list[bytes]]:
    """The identity bucket keys of the scopes ``chosen``, by bucket prefix (``ScopeKeys.bucket_prefixes``): one
    SCAN for them all (a SCAN a scope reads every key of the prefix once a scope: hours at open for the
    100,000 identity scopes of a shop, ``RedisBackend._read_identities``)."""
    found: dict[bytes, list[bytes]] = {
        prefix.encode("utf-8", "surrogatepass"): [] for scope in chosen for prefix in keys.scope(scope).bucket_prefixes()
    }
    if len(found) == 1:
        pattern = _glob_escape(next(iter(found)).decode("utf-8", "surrogatepass")) + "*"
    else:
        pattern = _glob_escape(keys.prefix) + ":*:i:*"  # (``Keys.scope``: every bucket key is "<prefix>:...:i:<n>")
    for key in await _scan(client, pattern) if found else ():
        head, sep, _ = key.rpartition(b":i:")
        bucket = found.get(head + sep)
        if bucket is not None:
            bucket.append(key)
    return found


async def read_members(client: Any, keys: Keys, wanted: Callable[[str], bool] | None = None,
                       limit: int | None = None) -> list[ClusterMember]:
    """Every recorded identity (of the scopes ``wanted`` says, else of all), latest version, in first-check order.

    With ``limit``, scopes are read (in the registry's order) only until that many members are decoded, and at
    most ``limit`` are returned: a bounded read for the identity replay, which keeps no more (not the earliest
    ``limit`` of all scopes, then)."""
    rows: list[tuple[tuple[Any, ...], ClusterMember]] = []
    chosen = [scope for scope in await scopes(client, keys) if wanted is None or wanted(scope)]
    buckets_of = await _bucket_keys(client, keys, chosen)
    for scope in chosen:
        if limit is not None and len(rows) >= limit:
            break
        sk = keys.scope(scope)
        log = parse_log(await client.get(sk.log) or b"", 0)
        slot_of = {pos: (bucket, field) for pos, op, _fp, bucket, field in log if op in (OP_ADD, OP_EXACT)}
        codec = Codec(await client.hget(sk.meta, "zdict"))
        records: dict[tuple[int, bytes], Record] = {}
        for prefix in sk.bucket_prefixes():
            buckets = buckets_of[prefix.encode("utf-8", "surrogatepass")]
            prefix_length = len(prefix.encode("utf-8", "surrogatepass"))
            for start in range(0, len(buckets), _PIPELINE):
                chunk = buckets[start : start + _PIPELINE]
                values = await _hgetall(client, chunk)  # one shard's keys: one slot
                for key, fields in zip(chunk, values):
                    number = int(key[prefix_length:], 16)
                    for field, value in fields.items():
                        records[(number, field)] = parse_record(value)
        for (_, field), record in records.items():
            canonical_url = None
            if record.canonical is not None:
                slot = slot_of.get(record.canonical, (-1, b""))
                canon = records.get(slot)
                canonical_url = codec.decode(canon.payload, slot[1])[0] if canon is not None else ""
            member = record_member(codec, record, field, scope, canonical_url)
            order = (record.seq,) if keys.global_seq else (record.first_seen, scope, record.seq)
            rows.append((order, member))
    rows.sort(key=lambda row: row[0])
    return [member for _, member in rows[:limit]]
