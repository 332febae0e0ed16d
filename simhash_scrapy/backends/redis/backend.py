"""``RedisBackend``: the dedup backend shared by every worker of a distributed crawl.

(Failures: ``outages.py``; the script's wire format: ``protocol.py``; keys: ``layout.py``.)

Checks of one scope are batched: while one script call of a scope is in
flight, the checks that arrive queue up and go together in the next call (one
``EVALSHA``, processed in order, atomically).  Each worker keeps a replica of
the scope's canonical log (``replica.py``); the script checks the replica's
candidates plus the log entries appended since the replica's last sync, then
records the pages and returns the new log entries.  So Redis' work per check
does not grow with the index, and the worker's is one in-process query.

Outages: a failed call marks Redis as down; checks then fail fast (fail-open:
``UNCHECKED``; fail-closed: the spider closes) while a probe pings Redis with
redis-py's ``Retry``/``ExponentialWithJitterBackoff`` (capped at one
heartbeat), and checks resume as soon as the probe gets an answer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from importlib import resources
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..base import BackendError, ClusterMember, DedupBackend, Outcome, PageRecord, Verdict
from . import connection, export
from .layout import (
    ENTRY,
    Codec,
    Keys,
    ScopeKeys,
    bucket_bits_for,
    identity_slot,
    layout_mismatch,
    layout_shards,
    layout_string,
    parse_record,
)
from .outages import Outages, ignore
from .protocol import pack_page, parse_verdicts, verdict
from .replica import Replica
from .settings import RedisSettings

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ...config import SimhashConfig

__all__ = ["RedisBackend"]

logger = logging.getLogger("simhash_scrapy.backends.redis")

_STALE = 60  # a worker silent for this long is considered gone
_MAX_BATCH = 256
_SYNC_CHUNK = 1 << 20  # log entries per GETRANGE when a replica is loaded
_DOWN_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)
#: Shards: how long a claim on an identity holds (a worker that died mid-check frees it then).
_CLAIM_MS = 30_000
#: Shards: tries (and the pause between) for an identity another worker is checking, and for the
#: record of a canonical page whose worker has not written it back yet.
_SHARD_TRIES, _SHARD_PAUSE = 40, 0.025


def _claim_field(slot: tuple[int, bytes, bytes]) -> bytes:
    """An identity's field in its shard's claims: its bucket (3 bytes) and its 8-byte field."""
    return slot[0].to_bytes(3, "big") + slot[1]



def lua(name: str) -> str:
    return resources.files(__package__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


class RedisBackend(Outages, DedupBackend):
    """Canonical pages and one record per identity, in Redis (``SIMHASH_BACKEND = "redis"``)."""

    def __init__(
        self, config: SimhashConfig, settings: RedisSettings, stats: Any = None, crawler: Crawler | None = None
    ) -> None:
        super().__init__(config)
        self.settings = settings
        self.stats = stats
        self.crawler = crawler
        self.layout = layout_string(config, settings.shards)
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.client: Any = None
        self.keys = Keys("")
        self.prefix = ""
        self.bucket_bits = bucket_bits_for(settings.capacity)
        self._scripts: dict[str, Any] = {}
        self._replicas: dict[str, Replica] = {}
        self._codecs: dict[str, Codec] = {}
        self._queues: dict[str, list[tuple[PageRecord, bool, asyncio.Future[Verdict]]]] = {}
        self._drains: dict[str, asyncio.Task[None]] = {}
        self._closing_backend = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._registered = False
        self._init_outages()

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> RedisBackend:
        return cls(config, RedisSettings(crawler.settings), crawler.stats, crawler)

    # ----------------------------------------------------------- connect
    def _use_key(self, spider_name: str) -> None:
        self.prefix = self.settings.key(spider_name)
        self.keys = Keys(self.prefix, self.settings.cluster, self.settings.shards)

    async def _connect(self, spider_name: str) -> None:
        self._use_key(spider_name)
        self.client = connection.get_client(self.settings)
        try:
            await self.client.ping()
        except Exception as exc:
            await self._disconnect()
            raise BackendError(
                f"Cannot reach Redis at {self.settings.describe()} ({type(exc).__name__}: {exc}). "
                f"simhash-scrapy's Redis backend (SIMHASH_BACKEND='redis') needs it from the start: start Redis, "
                f"or fix SIMHASH_REDIS_URL / REDIS_URL / REDIS_HOST / REDIS_PORT / REDIS_PARAMS."
            ) from exc
        for name in ("check", "open", "close", "heartbeat", "claim", "write", "position"):
            self._scripts[name] = self.client.register_script(lua(name))

    async def _disconnect(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            try:
                await client.aclose()
            except Exception:  # noqa: BLE001 - closing a broken connection
                logger.debug("Error while closing the Redis connection", exc_info=True)

    # --------------------------------------------------------- lifecycle
    async def open(self, spider_name: str) -> None:
        return await connection.on_asyncio(self._open(spider_name))

    async def _open(self, spider_name: str) -> None:
        await self._connect(spider_name)
        flushed = False
        try:
            while True:
                others, flush, bits = await self._scripts["open"](
                    keys=[self.keys.meta, self.keys.workers],
                    args=[self.worker_id, "0" if flushed else "1" if self.settings.flush_on_start else "0", _STALE,
                          self.layout, self._ttl, self.bucket_bits],
                )
                if not flush:
                    break
                await export.delete_all(self.client, self.keys)
                flushed = True
            self.bucket_bits = int(bits)
            self.initial = await export.identities(self.client, self.keys)
        except ResponseError as exc:
            await self._disconnect()
            message = str(exc)
            if message.startswith("SIMHASH_LAYOUT "):
                raise BackendError(layout_mismatch(message[len("SIMHASH_LAYOUT ") :], self.layout, self.prefix)) from None
            raise BackendError(f"Redis at {self.settings.describe()} refused the simhash scripts: {exc}") from exc
        except Exception as exc:
            await self._disconnect()
            raise BackendError(f"Redis at {self.settings.describe()} failed at start: {type(exc).__name__}: {exc}") from exc
        self._registered = True
        if flushed:
            logger.info("simhash: flushed the Redis key %r on start (SIMHASH_REDIS_FLUSH_ON_START)", self.prefix)
        elif self.settings.flush_on_start and others:
            logger.warning(
                "simhash: SIMHASH_REDIS_FLUSH_ON_START is set but %d other worker(s) are using %r: not flushed",
                others, self.prefix,
            )
        logger.info(
            "simhash: Redis backend at %s, key %r: %d pages recorded before, %d other worker(s) running",
            self.settings.describe(), self.prefix, self.initial, others,
        )
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def attach(self, spider_name: str) -> None:
        """Connect for reading only (exports): no worker registration, no flush."""
        return await connection.on_asyncio(self._attach(spider_name))

    async def _attach(self, spider_name: str) -> None:
        await self._connect(spider_name)
        # Read where the crawl put the identity records (its SIMHASH_REDIS_SHARDS), whatever this one says.
        stored = await self.client.hget(self.keys.meta, "layout")
        shards = layout_shards(stored.decode("utf-8", "replace")) if stored else self.settings.shards
        if shards != self.keys.shards:
            self.keys = Keys(self.prefix, self.settings.cluster, shards)

    @property
    def _ttl(self) -> int:
        return int(self.settings.ttl * 1000)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat)
            if self._down_since is not None:
                continue
            try:
                await self._scripts["heartbeat"](
                    keys=[self.keys.workers, self.keys.meta, self.keys.scopes], args=[self.worker_id, self._ttl]
                )
            except asyncio.CancelledError:
                raise
            except _DOWN_ERRORS as exc:
                self._mark_down(exc)
            except Exception as exc:  # noqa: BLE001 - counted by the checks that fail
                logger.debug("simhash: Redis heartbeat failed: %s", exc)

    async def close(self) -> None:
        return await connection.on_asyncio(self._close())

    async def _close(self) -> None:
        self._closing_backend = True
        for _, _, future in (entry for queue in self._queues.values() for entry in queue):
            if not future.done():
                future.set_result(Verdict(Outcome.UNCHECKED))
        self._queues.clear()
        for task in (self._heartbeat, self._probe, *self._tasks):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):  # noqa: BLE001
                    pass
        self._heartbeat = self._probe = None
        if self.client is not None and self._registered:
            try:
                others = await self._scripts["close"](keys=[self.keys.workers], args=[self.worker_id, _STALE])
                if not self.settings.persist and not others:
                    await export.delete_all(self.client, self.keys)
                    logger.info(
                        "simhash: deleted the Redis key %r (set SIMHASH_REDIS_PERSIST or SCHEDULER_PERSIST to keep it)",
                        self.prefix,
                    )
                elif not self.settings.persist:
                    logger.info("simhash: %d other worker(s) still use %r: kept", others, self.prefix)
            except Exception as exc:  # noqa: BLE001 - closing must not fail the crawl
                self._log_close_failure("deregister", exc)
            self._registered = False
        await self._disconnect()

    # ------------------------------------------------------------ checks
    async def check(self, record: PageRecord, index: bool = True) -> Verdict:
        return await connection.on_asyncio(self._check(record, index))

    async def _check(self, record: PageRecord, index: bool = True) -> Verdict:
        if self._down_since is not None:
            return self._failed(ConnectionError(f"Redis at {self.settings.describe()} is down; waiting for it"))
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(record.scope, []).append((record, index, future))
        self._ensure_drain(record.scope)
        return await future

    def _ensure_drain(self, scope: str) -> None:
        """Make sure a task sends the queued checks of ``scope`` (one task per scope at a time)."""
        task = self._drains.get(scope)
        if task is None or task.done():
            task = self._drains[scope] = asyncio.get_running_loop().create_task(self._drain(scope))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _drain(self, scope: str) -> None:
        """Send the queued checks of ``scope`` in batches until none is left; every check gets an answer."""
        try:
            while self._queues.get(scope):
                queue = self._queues[scope]
                batch, self._queues[scope] = queue[:_MAX_BATCH], queue[_MAX_BATCH:]
                try:
                    verdicts = await self._send(scope, batch)
                except BaseException as exc:  # noqa: BLE001 - a cancellation from inside the client counts too
                    for _, _, future in batch:
                        if not future.done():
                            try:
                                future.set_result(self._failed(exc))
                            except BackendError as closed:
                                future.set_exception(closed)
                    if isinstance(exc, asyncio.CancelledError) and self._closing_backend:
                        raise
                    continue
                for (_, _, future), verdict in zip(batch, verdicts):
                    if not future.done():
                        future.set_result(verdict)
        finally:
            if self._drains.get(scope) is asyncio.current_task():
                del self._drains[scope]
            if self._queues.get(scope) and not self._closing_backend:
                self._ensure_drain(scope)  # never leave a queued check without a task to send it
            elif not self._queues.get(scope):
                self._queues.pop(scope, None)

    async def preload(self, scope: str) -> None:
        """Load this worker's replica of ``scope``'s canonical log now rather than at its first check."""
        return await connection.on_asyncio(self._replica(scope))

    async def _replica(self, scope: str) -> Replica:
        replica = self._replicas.get(scope)
        if replica is None:
            sk = self.keys.scope(scope)
            await self.client.sadd(self.keys.scopes, scope)
            if self._ttl:
                await self.client.pexpire(self.keys.scopes, self._ttl)
            replica = Replica(self.config.max_distance)
            self._codecs[scope] = Codec(await self.client.hget(sk.meta, "zdict"))
            while True:
                start = replica.sync
                data = await self.client.getrange(sk.log, start * ENTRY, (start + _SYNC_CHUNK) * ENTRY - 1)
                # Building the index of a big log takes seconds: not on the event loop (heartbeats, other scopes).
                await asyncio.get_running_loop().run_in_executor(None, replica.apply, data, start)
                if len(data) < _SYNC_CHUNK * ENTRY:
                    break
            self._replicas[scope] = replica
        return replica

    async def _send(
        self, scope: str, batch: list[tuple[PageRecord, bool, asyncio.Future[Verdict]]], attempt: int = 0
    ) -> list[Verdict]:
        if self.keys.shards > 1:
            # With shards an identity's record is read before the script runs: the batch is cut before
            # an identity's second page, which goes in the next call (in order) after the first
            # one's record is written back.
            seen: set[str] = set()
            for n, (record, _, _) in enumerate(batch):
                identity = record.identity or record.url
                if identity in seen:
                    return [*await self._send(scope, batch[:n], attempt), *await self._send(scope, batch[n:], attempt)]
                seen.add(identity)
        try:
            replica = await self._replica(scope)
            sk = self.keys.scope(scope)
            codec = self._codecs[scope]
            if codec.zdict is None and codec.proposed_dict() is not None:
                await self.client.hsetnx(sk.meta, "zdict", codec.proposed_dict())
                codec.zdict = await self.client.hget(sk.meta, "zdict")
            simhash = [r.fingerprint for r, _, _ in batch if not r.exact]
            found = iter(replica.candidates_many(simhash))
            slots = [identity_slot(scope, r.identity or r.url, self.bucket_bits) for r, _, _ in batch]
            olds = await self._claim(sk, slots) if sk.shard_bases else None
            seq_key = self.keys.meta if self.keys.global_seq else sk.meta
            keys = [seq_key, sk.meta, sk.log]
            args: list[Any] = [self.layout, self.config.max_distance, replica.sync, sk.bucket_prefix, self._ttl, scope,
                               "0" if olds is None else "1"]
            sent = []  # the batch's positions in the script call (identities busy elsewhere are not sent)
            for n, ((record, index, _), (bucket, field, kept)) in enumerate(zip(batch, slots)):
                local = replica.candidates(record.fingerprint, True) if record.exact else next(found)
                edit_keys = () if record.exact else record.edit_keys
                if edit_keys:
                    local += replica.edit_candidates(edit_keys)
                if olds is not None and olds[n] is None:
                    continue
                payload = codec.encode(record.url, record.identity, kept, record.referer, record.depth, record.text,
                                       record.canonical_link)
                if olds is None:
                    keys.append(sk.bucket(bucket))
                shard_record = None if olds is None else (bucket, olds[n] or b"")
                args.append(pack_page(field, record.fingerprint, index, record.exact, record.seen, local, payload,
                                      shard_record, edit_keys))
                sent.append(n)
            sync = replica.sync
            rows = []
            if sent:
                reply = await self._scripts["check"](keys=keys, args=args)
                replica.apply(reply[0], sync)
                rows = parse_verdicts(reply[1], len(sent))
            if olds is not None and sent:
                rows = await self._write_back(sk, [slots[n] for n in sent], [olds[n] for n in sent], rows)
        except _DOWN_ERRORS as exc:
            self._mark_down(exc)
            raise
        except ResponseError as exc:
            message = str(exc)
            if message.startswith("SIMHASH_LAYOUT "):
                raise BackendError(layout_mismatch(message[len("SIMHASH_LAYOUT ") :], self.layout, self.prefix)) from None
            raise
        if codec.zdict is None and any(Codec.needs_dict(row[4]) for row in rows if row[4]):
            codec.zdict = await self.client.hget(sk.meta, "zdict")
        verdicts = [Verdict(Outcome.UNCHECKED)] * len(batch)
        for n, row in zip(sent, rows):
            verdicts[n] = verdict(codec, self.config.max_distance, *row[:6])
        busy = sorted(set(range(len(batch))) - set(sent))
        if busy and attempt < _SHARD_TRIES:
            # Identities another worker is checking right now: again once its check is written back
            # (this batch's claims are released by then, so two workers never wait on each other).
            await asyncio.sleep(_SHARD_PAUSE * (attempt + 1))
            for n, again in zip(busy, await self._send(scope, [batch[n] for n in busy], attempt + 1)):
                verdicts[n] = again
        elif busy and self.stats is not None:
            self.stats.inc_value("simhash/redis/claimed_elsewhere", len(busy))
        return verdicts

    # ------------------------------------------------------------ shards
    async def _claim(self, sk: ScopeKeys, slots: list[tuple[int, bytes, bytes]]) -> list[bytes | None]:
        """Claim each identity on its shard and read its record: b"" (none), the record, or None when
        another worker is checking that identity (its claim has not expired)."""
        olds: list[bytes | None] = [None] * len(slots)
        by_shard: dict[int, list[int]] = {}
        for n, slot in enumerate(slots):
            by_shard.setdefault(sk.shard_of(slot[0]), []).append(n)

        async def claim(shard: int, members: list[int]) -> list[bytes]:
            keys = [sk.claims(shard), *(sk.bucket(slots[n][0]) for n in members)]
            args: list[Any] = [self.worker_id, _CLAIM_MS]
            for n in members:
                args += [_claim_field(slots[n]), slots[n][1]]
            return list(await self._scripts["claim"](keys=keys, args=args))

        groups = list(by_shard.items())
        for (_, members), replies in zip(groups, await asyncio.gather(*(claim(s, m) for s, m in groups))):
            for n, reply in zip(members, replies):
                if reply != b"B":
                    olds[n] = reply[1:] if reply[:1] == b"R" else b""
        return olds

    async def _write_back(
        self, sk: ScopeKeys, slots: list[tuple[int, bytes, bytes]], olds: list[bytes | None], rows: list[Any]
    ) -> list[Any]:
        """Write the checked identities' records to their shards (releasing the claims) and read, in
        the same calls, the record of each canonical page the verdicts name (for its payload)."""
        # A canonical page checked in this batch too: its record as it was at each row (the one read
        # before the batch, then each row's), as the script reads it between rows without shards.
        state: dict[tuple[int, bytes], bytes | None] = {(slot[0], slot[1]): old or None for slot, old in zip(slots, olds)}
        known: list[Any] = []  # per row: the canonical's record, None (none wanted or none there), b"" (read it)
        for slot, row in zip(slots, rows):
            wanted = row[2] is not None and row[4] is None and row[7] is not None
            known.append(state.get((row[7][0], row[3]), b"") if wanted else None)
            state[(slot[0], slot[1])] = row[6]
        writes: dict[int, list[Any]] = {}
        reads: dict[int, list[tuple[int, int, bytes]]] = {}
        for slot, row in zip(slots, rows):
            writes.setdefault(sk.shard_of(slot[0]), []).append((slot, row[6]))
        for n, (row, value) in enumerate(zip(rows, known)):
            if value == b"":
                reads.setdefault(sk.shard_of(row[7][0]), []).append((n, row[7][0], row[3]))

        async def write(shard: int) -> list[bytes]:
            items, wanted = writes.get(shard, []), reads.get(shard, [])
            args: list[Any] = [self.worker_id, self._ttl, len(items)]
            for slot, record in items:
                args += [_claim_field(slot), slot[1], record]
            args += [field for _, _, field in wanted]
            keys = [sk.claims(shard), *(sk.bucket(slot[0]) for slot, _ in items),
                    *(sk.bucket(bucket) for _, bucket, _ in wanted)]
            return list(await self._scripts["write"](keys=keys, args=args))

        shards = sorted(set(writes) | set(reads))
        for shard, values in zip(shards, await asyncio.gather(*(write(shard) for shard in shards))):
            for (n, bucket, field), value in zip(reads.get(shard, []), values):
                # Empty: the canonical page's worker has decided but not written its record back yet.
                known[n] = bytes(value) if value else await self._canonical_record(sk, bucket, field)
        out = []
        for row, value in zip(rows, known):
            if value is None:
                out.append(row)
                continue
            record = parse_record(value)
            # As check.lua's canonical_of: the fingerprint the page is indexed with now (its own log
            # entry's: the verdict's entry, or a later one if it changed since), else its latest.
            if record.own is None:
                fingerprint = record.fingerprint.to_bytes(8, "big")
            elif record.own == row[7][1]:
                fingerprint = row[2]
            else:
                fingerprint = await self.client.getrange(sk.log, record.own * ENTRY + 1, record.own * ENTRY + 8)
            out.append((row[0], row[1], fingerprint, row[3], record.payload, *row[5:]))
        return out

    async def _canonical_record(self, sk: ScopeKeys, bucket: int, field: bytes) -> bytes | None:
        """A canonical page's record, read from its shard (None if its worker never writes it back)."""
        for _ in range(_SHARD_TRIES):
            value = await self.client.hget(sk.bucket(bucket), field)
            if value is not None:
                return bytes(value)
            # The canonical page's worker has decided but not written its record back yet.
            await asyncio.sleep(_SHARD_PAUSE)
        return None

    # ----------------------------------------------------------- exports
    async def members(self) -> list[ClusterMember]:
        return await connection.on_asyncio(self._members())

    async def _read(self, read: Any) -> Any:
        """A read, retried with back-off unless Redis is known to be down."""
        if self.client is None:
            raise BackendError("not connected to Redis")
        if self.redis_down:
            return await read()
        return await connection.read_retry().call_with_retry(read, ignore)

    async def _members(self) -> list[ClusterMember]:
        """Every recorded identity (latest version, by every worker), in first-check order."""
        try:
            return await self._read(lambda: export.read_members(self.client, self.keys))
        except Exception as exc:  # noqa: BLE001 - reported once, the crawl closes normally
            self._log_close_failure("members", exc)
            return []

    async def has_data(self) -> bool:
        """Whether Redis holds simhash data under this key prefix (for ``scrapy simhash report``)."""
        return bool(await connection.on_asyncio(self._read(lambda: self.client.exists(self.keys.meta))))

    async def index_size(self) -> int:
        return await connection.on_asyncio(self._index_size())

    async def _index_size(self) -> int:
        try:
            return await self._read(lambda: export.canonicals(self.client, self.keys))
        except Exception as exc:  # noqa: BLE001 - reported once, the crawl closes normally
            self._log_close_failure("index_size", exc)
            return 0

    async def position(self, scope: str, anchor: str, identity: str) -> int | None:
        """The position of near-duplicate ``identity`` in the cluster anchored at ``anchor``, counted by every
        worker (``position.lua``); ``None`` when Redis did not answer (counted as ``simhash/backend_errors``:
        the crawl then counts this worker's own pages)."""
        return await connection.on_asyncio(self._position(scope, anchor, identity))

    async def _position(self, scope: str, anchor: str, identity: str) -> int | None:
        try:
            found = await self._scripts["position"](
                keys=[self.keys.scope(scope).positions], args=[anchor, identity, self._ttl]
            )
        except Exception as exc:  # noqa: BLE001 - the page is decided with this worker's count
            if self.stats is not None:
                self.stats.inc_value("simhash/backend_errors")
            logger.warning("simhash: Redis did not give a cluster position (%s: %s)", type(exc).__name__, exc)
            return None
        return int(found)

    async def load_extra(self, name: str) -> bytes | None:
        return await connection.on_asyncio(self._read(lambda: self.client.get(self.keys.extra(name))))

    async def save_extra(self, name: str, data: bytes) -> None:
        return await connection.on_asyncio(self._save_extra(name, data))

    async def _save_extra(self, name: str, data: bytes) -> None:
        await self.client.set(self.keys.extra(name), data, px=self._ttl or None)
