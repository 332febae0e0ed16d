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
from .layout import ENTRY, Codec, Keys, bucket_bits_for, identity_slot, layout_mismatch, layout_string
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
        self.layout = layout_string(config)
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
        self.keys = Keys(self.prefix, self.settings.cluster)

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
        for name in ("check", "open", "close", "heartbeat"):
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
        return await connection.on_asyncio(self._connect(spider_name))

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

    async def _send(self, scope: str, batch: list[tuple[PageRecord, bool, asyncio.Future[Verdict]]]) -> list[Verdict]:
        try:
            replica = await self._replica(scope)
            sk = self.keys.scope(scope)
            codec = self._codecs[scope]
            if codec.zdict is None and codec.proposed_dict() is not None:
                await self.client.hsetnx(sk.meta, "zdict", codec.proposed_dict())
                codec.zdict = await self.client.hget(sk.meta, "zdict")
            simhash = [r.fingerprint for r, _, _ in batch if not r.exact]
            found = iter(replica.candidates_many(simhash))
            seq_key = self.keys.meta if self.keys.global_seq else sk.meta
            keys = [seq_key, sk.meta, sk.log]
            args: list[Any] = [self.layout, self.config.max_distance, replica.sync, sk.bucket_prefix, self._ttl, scope]
            for record, index, _ in batch:
                bucket, field, kept = identity_slot(scope, record.identity or record.url, self.bucket_bits)
                keys.append(sk.bucket(bucket))
                local = replica.candidates(record.fingerprint, True) if record.exact else next(found)
                payload = codec.encode(record.url, record.identity, kept, record.referer, record.depth, record.text)
                args.append(pack_page(field, record.fingerprint, index, record.exact, record.seen, local, payload))
            sync = replica.sync
            reply = await self._scripts["check"](keys=keys, args=args)
        except _DOWN_ERRORS as exc:
            self._mark_down(exc)
            raise
        except ResponseError as exc:
            message = str(exc)
            if message.startswith("SIMHASH_LAYOUT "):
                raise BackendError(layout_mismatch(message[len("SIMHASH_LAYOUT ") :], self.layout, self.prefix)) from None
            raise
        replica.apply(reply[0], sync)
        rows = parse_verdicts(reply[1], len(batch))
        if codec.zdict is None and any(Codec.needs_dict(row[4]) for row in rows if row[4]):
            codec.zdict = await self.client.hget(sk.meta, "zdict")
        return [verdict(codec, *row) for row in rows]

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

    async def load_extra(self, name: str) -> bytes | None:
        return await connection.on_asyncio(self._read(lambda: self.client.get(self.keys.extra(name))))

    async def save_extra(self, name: str, data: bytes) -> None:
        return await connection.on_asyncio(self._save_extra(name, data))

    async def _save_extra(self, name: str, data: bytes) -> None:
        await self.client.set(self.keys.extra(name), data, px=self._ttl or None)
