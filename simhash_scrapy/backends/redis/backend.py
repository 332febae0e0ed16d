"""``RedisBackend``: the dedup backend shared by every worker of a distributed crawl.

(Failures: ``outages.py``; the script's wire format: ``protocol.py``; keys: ``layout.py``;
identity records in shards: ``shards.py``.)

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
import threading
import time
import uuid
from dataclasses import replace
from importlib import resources
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...core.cluster.viewidentity import MAX_ADDRESSES
from ...core.cluster.views import host_and_address
from ...core.redact import redact
from ...core.wording import plural
from ..base import BackendError, ClusterMember, DedupBackend, Outcome, PageRecord, Verdict
from . import connection, export, shards
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
    lua_constants,
    parse_record,
)
from .mirror import Mirror, first_related, has_extras, record_of
from .outages import Outages, ignore
from .protocol import Row, pack_page, parse_verdicts, verdict
from .replica import LOAD_CHUNK, Replica
from .script_link import ScriptLink

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ...core.settings.config import RedisConfig, SimhashConfig

__all__ = ["RedisBackend"]

logger = logging.getLogger("simhash_scrapy.backends.redis")

_STALE = 60  # a worker silent for this long is considered gone
_MAX_BATCH = 256
# (asyncio.TimeoutError: the lean script link's timeout, not an OSError before Python 3.11)
_DOWN_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)
#: Times a batch is checked again after Redis answered that its scope was lost (then: a backend error).
_MAX_RESETS = 3
#: The lengths of a scope's log and extras and its epoch, read in one atomic step (``_load_mirror``).
_LENGTHS = ("return {redis.call('STRLEN', KEYS[1]), redis.call('STRLEN', KEYS[2]), "
            "redis.call('HGET', KEYS[3], 'epoch') or ''}")
#: Bytes of a scope's extras read at a time when a worker's mirror loads it (``_load_mirror``).
MIRROR_CHUNK = 1 << 22
#: One ERROR line per loss of data: further scopes lost within this many seconds are counted, not logged.
_LOSS_LOG_INTERVAL = 60.0


def lua(name: str) -> str:
    """The script ``name``.lua, after the constants it shares with ``layout`` (``layout.lua_constants``)."""
    return lua_constants() + resources.files(__package__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


class RedisBackend(Outages, DedupBackend):
    """Canonical pages and one record per identity, in Redis (``SIMHASH_BACKEND = "redis"``)."""

    #: Steps 5-7 too: each worker's mirror of the shared index gives the script its hints (``mirror.py``).
    extra_queries = True

    def __init__(
        self, config: SimhashConfig, settings: RedisConfig, stats: Any = None, crawler: Crawler | None = None
    ) -> None:
        super().__init__(config)
        self.settings = settings
        self.stats = stats
        self.crawler = crawler
        self.layout = layout_string(config, settings.shards)
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.client: Any = None
        #: ``check.lua``'s calls on a connection of their own, without redis-py (``script_link.py``), when it can.
        self._link: ScriptLink | None = None
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
        self.stored_layout: str | None = None  # read by attach()
        self._last_loss_log = -_LOSS_LOG_INTERVAL
        self._last_relist = -float("inf")  # when _scope_lost last listed this worker's scopes again
        #: Steps 5-7 (``mirror.py``), when one of them is on.
        self._mirror = Mirror(config) if config.templates or config.second_simhash or config.containment else None
        self._learning = asyncio.Lock()
        #: Held while the mirror changes or answers: a scope's mirror loads in a thread (a big log takes seconds).
        self._mirror_lock = threading.Lock()
        #: Scopes whose mirror is being loaded (in chunks, over several awaits): their checks wait for it.
        self._mirror_loads: dict[str, asyncio.Event] = {}
        self._init_outages()
        #: ``(url, scope)`` of the pages earlier crawls recorded in an identity's scope (``restored_pages``).
        self._restored: list[tuple[str, str]] = []

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> RedisBackend:
        return cls(config, config.redis, crawler.stats, crawler)

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
            # the client's error may hold the password: only its masked text goes on
            raise BackendError(self._connect_error(exc)) from None
        for name in ("check", "open", "close", "heartbeat", "claim", "write", "drop", "position"):
            self._scripts[name] = self.client.register_script(lua(name))
        self._link = None if self.settings.cluster else ScriptLink.for_client(self.client)

    def _connect_error(self, exc: Exception) -> str:
        """What the first ping's failure means for the user: a refused login, or no Redis to talk to."""
        error = redact(str(exc), self.settings.secrets)
        found = f"({type(exc).__name__}: {error})"
        if _is_auth_failure(exc):
            return (
                f"Redis at {self.settings.describe()} refused the login: authentication failed {found}. "
                f"Redis is running; check the password (and user name) in SIMHASH_REDIS_URL or REDIS_URL, "
                f"or the password in REDIS_PARAMS."
            )
        return (
            f"Cannot reach Redis at {self.settings.describe()} {found}. "
            f"simhash-scrapy's Redis backend (SIMHASH_BACKEND='redis') needs it from the start: start Redis, "
            f"or fix SIMHASH_REDIS_URL / REDIS_URL / REDIS_HOST / REDIS_PORT / REDIS_PARAMS."
        )

    async def _disconnect(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            link.close()
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
                others, flush = await self._register(not flushed and self.settings.flush_on_start)
                if not flush:
                    break
                await export.delete_all(self.client, self.keys)
                flushed = True
            self.initial = await export.identities(self.client, self.keys)
            earlier = await self._records_at_start(others)
        except ResponseError as exc:
            await self._disconnect()
            message = str(exc)
            if message.startswith("SIMHASH_LAYOUT "):
                raise BackendError(layout_mismatch(message[len("SIMHASH_LAYOUT ") :], self.layout, self.prefix)) from None
            error = redact(message, self.settings.secrets)
            raise BackendError(f"Redis at {self.settings.describe()} refused the simhash scripts: {error}") from None
        except Exception as exc:
            await self._disconnect()
            error = redact(str(exc), self.settings.secrets)
            raise BackendError(f"Redis at {self.settings.describe()} failed at start: {type(exc).__name__}: {error}") from None
        self._registered = True
        if flushed:
            logger.info("simhash: flushed the Redis key %r on start (SIMHASH_REDIS_FLUSH_ON_START)", self.prefix)
        elif self.settings.flush_on_start and others:
            logger.warning(
                "simhash: SIMHASH_REDIS_FLUSH_ON_START is set but %d other worker(s) are using %r: not flushed",
                others, self.prefix,
            )
        if not others:
            recorded = f"{plural(self.initial, 'page')} recorded by earlier crawls, no other worker running"
        elif earlier is not None:
            recorded = (
                f"{plural(self.initial, 'page')} recorded: {earlier} by earlier crawls, {self.initial - earlier} by "
                f"the {plural(others, 'other worker')} running now"
            )
        else:
            recorded = (
                f"{plural(self.initial, 'page')} recorded by earlier crawls or by the {plural(others, 'other worker')} "
                "running now"
            )
        logger.info("simhash: Redis backend at %s, key %r: %s", self.settings.describe(), self.prefix, recorded)
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())
        await self._read_identities()  # (a long read: the heartbeat says meanwhile that this worker is alive)

    async def _read_identities(self) -> None:
        """With ``SIMHASH_IDENTITY_SIGNALS`` (and no ``SIMHASH_DISTINCT_SELECTORS``, whose digest is mixed into
        the scope), the pages recorded in an identity's scope (``plain#digest``), for ``restored_pages``: the
        crawl replays the identity each address declared (``core.cluster.viewidentity``), so the first page
        of an address gets its record's validators, as with a store.  One read of those scopes' records (as
        ``scrapy simhash report`` reads them), stopped at ``viewidentity.MAX_ADDRESSES`` pages (what the replay
        keeps); a failed read is a warning (the pages are downloaded)."""
        if not self.initial or not self.config.identity_signals or self.config.distinct is not None:
            return
        try:
            members = await self._read(
                lambda: export.read_members(self.client, self.keys, export.declares_identity, limit=MAX_ADDRESSES)
            )
        except Exception as exc:  # noqa: BLE001 - the crawl goes on without them
            export.identities_unread(exc, self.settings.secrets)
            return
        self._restored = [(member.url, member.scope) for member in members]
        export.identities_read(len(members))

    def restored_pages(self) -> list[tuple[str, str]]:
        return self._restored

    async def _records_at_start(self, others: int) -> int | None:
        """Pages recorded before the workers running now started (``self.initial`` counts theirs too).

        The first worker of a crawl (no other one running) writes its count into the key's meta;
        open.lua deletes that field when such a worker registers, so a worker joining a running
        crawl reads its own crawl's count, or nothing (then the log line says it cannot tell).
        """
        if not others:
            await self.client.hset(self.keys.meta, "records_at_start", self.initial)
            return self.initial
        value = await self.client.hget(self.keys.meta, "records_at_start")
        return None if value is None else min(int(value), self.initial)

    async def _register(self, flush: bool = False) -> tuple[int, bool]:
        """Register this worker (open.lua: makes the global meta when it is missing); ``(other workers,
        whether the caller must flush first)``."""
        others, must_flush, bits = await self._scripts["open"](
            keys=[self.keys.meta, self.keys.workers],
            args=[self.worker_id, "1" if flush else "0", _STALE, self.layout, self._ttl, self.bucket_bits],
        )
        if not must_flush:
            self.bucket_bits = int(bits)
        return int(others), bool(must_flush)

    async def attach(self, spider_name: str) -> None:
        """Connect for reading only (exports): no worker registration, no flush."""
        return await connection.on_asyncio(self._attach(spider_name))

    async def _attach(self, spider_name: str) -> None:
        await self._connect(spider_name)
        # Read where the crawl put the identity records (its SIMHASH_REDIS_SHARDS), whatever this one says.
        stored = await self.client.hget(self.keys.meta, "layout")
        #: The key's layout as the crawls that wrote it recorded it ("v=.. k=4 features=.. text=.."), if any.
        self.stored_layout = stored.decode("utf-8", "replace") if stored else None
        count = layout_shards(self.stored_layout) if self.stored_layout else self.settings.shards
        if count != self.keys.shards:
            self.keys = Keys(self.prefix, self.settings.cluster, count)

    @property
    def _ttl(self) -> int:
        return int(self.settings.ttl * 1000)

    @property
    def _shards(self) -> shards.Shards:
        """The identity records in shards, through this worker's connection (``SIMHASH_REDIS_SHARDS`` > 1)."""
        return shards.Shards(self.client, self._scripts, self.worker_id, self._ttl)

    async def _beat(self) -> None:
        # Not ``while True``: ``close`` cancels this task and waits for it, and the cancellation can be lost.
        # redis-py sends a command through ``asyncio.wait_for``, which before Python 3.12 returns the result
        # instead of raising CancelledError when the send finished just as the task was cancelled; the
        # heartbeat then went on beating and ``close`` (the spider's close) waited for it for ever.
        while not self._closing_backend:
            await asyncio.sleep(self.settings.heartbeat)
            if self._down_since is not None:
                continue
            try:
                alive = await self._scripts["heartbeat"](
                    keys=[self.keys.workers, self.keys.meta, self.keys.scopes], args=[self.worker_id, self._ttl]
                )
                if not alive:
                    await self._global_keys_lost()
            except asyncio.CancelledError:
                raise
            except _DOWN_ERRORS as exc:
                self._mark_down(exc)
            except Exception as exc:  # noqa: BLE001 - counted by the checks that fail
                logger.debug("simhash: Redis heartbeat failed: %s", redact(str(exc), self.settings.secrets))

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
        if self._mirror is not None and record.source is not None:
            record = replace(record)  # this backend's copy: step 5 gives it its template-free simhash (_send)
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(record.scope, []).append((record, index, future))
        self._ensure_drain(record.scope)
        return await future

    async def previous(self, scope: str, identity: str) -> ClusterMember | None:
        return await connection.on_asyncio(self._previous(scope, identity))

    async def _previous(self, scope: str, identity: str) -> ClusterMember | None:
        """The identity's record (validators, digest) from its bucket; ``None`` if unknown or Redis is down
        (the page is then downloaded as usual)."""
        if self.client is None or self._down_since is not None:
            return None
        sk = self.keys.scope(scope)
        bucket, field, _ = identity_slot(scope, identity, self.bucket_bits)
        try:
            value = await self.client.hget(sk.bucket(bucket), field)
            if value is None:
                return None
            record = parse_record(bytes(value))
            codec = self._codecs.get(scope)
            if codec is None or (codec.zdict is None and Codec.needs_dict(record.payload)):
                codec = Codec(await self.client.hget(sk.meta, "zdict"))
        except _DOWN_ERRORS:
            return None
        return export.record_member(codec, record, field, scope, None)

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
        """Load this worker's replica of ``scope``'s canonical log (and its mirror of steps 5-7, when one of them
        is on) now rather than at its first check."""
        return await connection.on_asyncio(self._preload(scope))

    async def _preload(self, scope: str) -> None:
        # With a mirror, the replica's simhash index is never sorted: the mirror's serves (``Replica.delegate``).
        await self._replica(scope, settle=self._mirror is None)
        if self._mirror is not None:
            await self._load_mirror(scope, self.keys.scope(scope))

    async def _replica(self, scope: str, settle: bool = True) -> Replica:
        replica = self._replicas.get(scope)
        if replica is None:
            sk = self.keys.scope(scope)
            await self.client.sadd(self.keys.scopes, scope)
            if self._ttl:
                await self.client.pexpire(self.keys.scopes, self._ttl)
            fields = ["layout", "epoch", "zdict", "records"]
            while True:
                # The scope's meta before and after its log: the replica is built from one incarnation of
                # the scope (a scope lost and made anew meanwhile has another epoch: load again).
                before = await self.client.hmget(sk.meta, fields)
                replica = Replica(self.config.max_distance)
                replica.reserve(int(await self.client.strlen(sk.log)) // ENTRY)
                while True:
                    start = replica.sync
                    data = await self.client.getrange(sk.log, start * ENTRY, (start + LOAD_CHUNK) * ENTRY - 1)
                    # Building the index of a big log takes seconds: not on the event loop (heartbeats, other scopes).
                    await asyncio.get_running_loop().run_in_executor(None, replica.apply, data, start)
                    if len(data) < LOAD_CHUNK * ENTRY:
                        break
                if settle:
                    await asyncio.get_running_loop().run_in_executor(None, replica.settle)
                after = await self.client.hmget(sk.meta, fields)
                if after[:2] == before[:2]:
                    break
            if after[0] is not None:
                replica.epoch = "=" + (after[1] or b"").decode("ascii", "replace")
                replica.records = int(after[3] or 0)
            self._codecs[scope] = Codec(after[2])
            self._replicas[scope] = replica
        return replica

    async def _scope_lost(self, scope: str, reply: str, reason: str = "") -> None:
        """Redis no longer holds the scope this worker's replica was built from (restarted empty, flushed,
        keys expired, or a log that lost its tail): drop the replica, count the pages lost, log it (one
        ERROR line per loss), and register again; the next check loads the scope as it is now."""
        same, records = reply.split()[1:3]
        replica = self._replicas.pop(scope, None)
        self._codecs.pop(scope, None)
        if self._mirror is not None:
            with self._mirror_lock:
                self._mirror.drop(scope)
        known = replica.records if replica is not None else 0
        lost = max(0, known - int(records)) if same == "1" else known
        if self.stats is not None:
            self.stats.inc_value("simhash/redis/lost_pages", lost)
            self.stats.inc_value("simhash/redis/lost_scopes")
        now = time.monotonic()
        if now - self._last_loss_log >= _LOSS_LOG_INTERVAL:
            self._last_loss_log = now
            logger.error(
                "simhash: Redis at %s no longer holds the simhash data of scope %r (key %r): %s. %d page(s) "
                "recorded in it before are lost (counted in simhash/redis/lost_pages); the scope is made anew "
                "and checking goes on, against the pages recorded from now on (appendonly yes keeps the data "
                "over a restart).",
                self.settings.describe(), scope, self.prefix,
                reason or ("its log lost its last entries" if same == "1"
                           else "Redis restarted empty, or the keys were flushed or expired (SIMHASH_REDIS_TTL)"),
                lost,
            )
        else:
            logger.debug("simhash: Redis lost the scope %r too: %d page(s) lost", scope, lost)
        sk = self.keys.scope(scope)
        if sk.shard_bases and same != "1" and not await self.client.hexists(sk.meta, "layout"):
            # Records left in shards that kept them name positions of the lost log: delete them before
            # the scope is made anew (check.lua also takes such a record for stale).
            await export.delete_records(self.client, sk)
        if now - self._last_relist >= self.settings.heartbeat or not await self.client.hexists(self.keys.meta, "layout"):
            # Register again and list this worker's scopes again: once per loss (and heartbeat), not for
            # every scope found lost (a scope per page, with SIMHASH_DISTINCT_SELECTORS, would list every
            # scope again for each one); again at once if the global keys are gone meanwhile.
            self._last_relist = now
            await self._register()
            await self._relist_scopes()

    async def _global_keys_lost(self) -> None:
        """The global meta is gone (the heartbeat saw it): register again and list this worker's scopes."""
        await self._register()
        await self._relist_scopes()
        logger.info("simhash: Redis at %s had lost the global keys of %r: registered again",
                    self.settings.describe(), self.prefix)

    async def _relist_scopes(self) -> None:
        if self._replicas:
            await self.client.sadd(self.keys.scopes, *self._replicas)
            if self._ttl:
                await self.client.pexpire(self.keys.scopes, self._ttl)

    async def _send(
        self, scope: str, batch: list[tuple[PageRecord, bool, asyncio.Future[Verdict]]], attempt: int = 0,
        resets: int = 0,
    ) -> list[Verdict]:
        """Check ``batch`` (pages of ``scope``) in one script call; a verdict per page, in order."""
        if self.keys.shards > 1:
            cut = shards.first_repeat([record for record, _, _ in batch])
            if cut is not None:
                return [*await self._send(scope, batch[:cut], attempt), *await self._send(scope, batch[cut:], attempt)]
        if self._mirror is not None and any(record.source is not None for record, _, _ in batch):
            try:
                await self._learn_templates([record for record, _, _ in batch])
            except _DOWN_ERRORS as exc:
                self._mark_down(exc)
                raise
        cut = self._first_related(batch) if self._mirror is not None and len(batch) > 1 else None
        if cut is not None:
            return await self._send_in_parts(scope, batch, attempt, cut)
        try:
            exchanged = await self._exchange(scope, batch, resets)
            if exchanged is None:  # a shard lost the scope's records: the scope was made anew
                return await self._send(scope, batch, attempt, resets + 1)
        except _DOWN_ERRORS as exc:
            self._mark_down(exc)
            raise
        except ResponseError as exc:
            if not await self._scope_reset(scope, exc, resets):
                raise
            return await self._send(scope, batch, attempt, resets + 1)
        return await self._answer(scope, batch, attempt, *exchanged)

    def _first_related(self, batch: list[tuple[PageRecord, bool, asyncio.Future[Verdict]]]) -> int | None:
        return first_related([record for record, _, _ in batch], self.config.max_distance)

    async def _send_in_parts(
        self, scope: str, batch: list[tuple[PageRecord, bool, asyncio.Future[Verdict]]], attempt: int,
        cut: int | None,
    ) -> list[Verdict]:
        """Steps 5-7: a page that may depend on an earlier one of the batch waits for its answer (``mirror.py``):
        the batch is sent in parts, each cut before such a page (the first cut: ``cut``)."""
        out: list[Verdict] = []
        while cut is not None:
            out += await self._send(scope, batch[:cut], attempt)
            batch = batch[cut:]
            cut = self._first_related(batch) if len(batch) > 1 else None
        return [*out, *await self._send(scope, batch, attempt)]

    async def _exchange(
        self, scope: str, batch: list[tuple[PageRecord, bool, asyncio.Future[Verdict]]], resets: int,
    ) -> tuple[ScopeKeys, Codec, list[int], list[Row]] | None:
        """``_send``'s script call: claim the identities' shards (when sharded), run ``check.lua`` for the
        pages not busy elsewhere and write the shards back; None when a shard had lost the scope's
        records (the scope is then made anew, and the batch is to be sent again)."""
        replica = await self._replica(scope)
        sk = self.keys.scope(scope)
        codec = await self._codec(scope, sk)
        slots = [shards.slot_of(scope, r.identity or r.url, self.bucket_bits) for r, _, _ in batch]
        olds = None
        if sk.shard_bases:
            olds, markers = await self._shards.claim(sk, slots)
            if await self._shards.lost(sk, replica, markers, self.settings.heartbeat) and resets < _MAX_RESETS:
                # A shard that held this scope's records lost them: the whole scope is made anew.
                dropped = await self._shards.drop_scope(sk, replica.epoch[1:])
                await self._scope_lost(scope, "SIMHASH_RESET 0 0", "a Redis node holding a shard of its "
                                       "identity records (SIMHASH_REDIS_SHARDS) restarted empty" if dropped else "")
                return None
        # the batch's positions in the script call (identities busy elsewhere are not sent)
        sent = [n for n in range(len(batch)) if olds is None or olds[n] is not None]
        rows: list[Row] = []
        if sent:
            rows = await self._run_check(scope, sk, replica, codec, batch, slots, olds, sent)
        if olds is not None and sent:
            rows = await self._shards.write_back(sk, [slots[n] for n in sent], [olds[n] for n in sent], rows, replica)
        return sk, codec, sent, rows

    async def _scope_reset(self, scope: str, exc: ResponseError, resets: int) -> bool:
        """``_send``: whether the script's error asks for the batch again (the scope was reset: it changed
        nothing); ``BackendError`` for a layout mismatch; False for any other error (raised as it is)."""
        message = str(exc)
        if message.startswith("SIMHASH_LAYOUT "):
            raise BackendError(layout_mismatch(message[len("SIMHASH_LAYOUT ") :], self.layout, self.prefix)) from None
        if message.startswith("SIMHASH_RESET ") and resets < _MAX_RESETS:
            # The script changed nothing: the batch is checked again against the scope as it is now.
            try:
                await self._scope_lost(scope, message)
            except _DOWN_ERRORS as down:  # raised here, the clause above does not see it: Redis is down
                self._mark_down(down)
                raise
            return True
        return False

    async def _answer(
        self, scope: str, batch: list[tuple[PageRecord, bool, asyncio.Future[Verdict]]], attempt: int,
        sk: ScopeKeys, codec: Codec, sent: list[int], rows: list[Row],
    ) -> list[Verdict]:
        """``_send``'s verdicts: the script's rows decoded, and the pages another worker was checking sent
        again once it is done (a few tries, then ``unchecked``)."""
        if codec.zdict is None and any(Codec.needs_dict(row.canonical_payload) for row in rows if row.canonical_payload):
            codec.zdict = await self.client.hget(sk.meta, "zdict")
        verdicts = [Verdict(Outcome.UNCHECKED)] * len(batch)
        for n, row in zip(sent, rows):
            verdicts[n] = verdict(codec, self.config.max_distance, row.outcome, row.distance, row.canonical_fingerprint,
                                  row.canonical_field, row.canonical_payload, row.previous)
            if row.via is not None:  # the page's hint (steps 5-7, mirror.py) matched it
                verdicts[n] = replace(verdicts[n], via=row.via, one_edit=False)
            if batch[n][0].also is not None:
                verdicts[n] = replace(verdicts[n], also=batch[n][0].also)
        busy = sorted(set(range(len(batch))) - set(sent))
        if busy and attempt < shards.TRIES:
            # Identities another worker is checking right now: again once its check is written back
            # (this batch's claims are released by then, so two workers never wait on each other).
            await asyncio.sleep(shards.PAUSE * (attempt + 1))
            for n, again in zip(busy, await self._send(scope, [batch[n] for n in busy], attempt + 1)):
                verdicts[n] = again
        elif busy and self.stats is not None:
            self.stats.inc_value("simhash/redis/claimed_elsewhere", len(busy))
        return verdicts

    async def _codec(self, scope: str, sk: ScopeKeys) -> Codec:
        """The scope's payload codec; its compression dictionary agreed in Redis once one is proposed."""
        codec = self._codecs[scope]
        if codec.zdict is None and codec.proposed_dict() is not None:
            await self.client.hsetnx(sk.meta, "zdict", codec.proposed_dict())
            codec.zdict = await self.client.hget(sk.meta, "zdict")
        return codec

    @staticmethod
    def _local_candidates(replica: Replica, records: list[PageRecord]) -> list[bytes]:
        """Per page, the candidates this worker's replica finds (``pack_page``'s local candidates; of a replica
        that delegated its simhash index, only exact and one-edit ones: ``_run_check`` adds the mirror's)."""
        simhash = [] if replica.delegated else [r.fingerprint for r in records if not r.exact]
        found = iter(replica.candidates_many(simhash) if simhash else ())
        local = []
        for record in records:
            if record.exact:
                candidates = replica.candidates(record.fingerprint, True)
            else:
                candidates = b"" if replica.delegated else next(found)
            if not record.exact and record.edit_keys:
                candidates += replica.edit_candidates(record.edit_keys)
            local.append(candidates)
        return local

    async def _run_check(
        self, scope: str, sk: ScopeKeys, replica: Replica, codec: Codec,
        batch: list[tuple[PageRecord, bool, asyncio.Future[Verdict]]], slots: list[shards.Slot],
        olds: list[bytes | None] | None, sent: list[int],
    ) -> list[Row]:
        """One ``check.lua`` call for the pages at ``sent``; the replica takes the log entries it returns."""
        seq_key = self.keys.meta if self.keys.global_seq else sk.meta
        keys = [seq_key, sk.meta, sk.log, sk.extras]
        records = [batch[n][0] for n in sent]
        # (read together: a mirror loaded meanwhile delegates the replica's index, never the other way round)
        delegated, local = replica.delegated, self._local_candidates(replica, records)
        mirror = self._mirror if await self._mirrored(scope, sk, records, delegated) else None
        xsync = mirror.scopes[scope].xsync if mirror is not None else -1
        args: list[Any] = [self.layout, self.config.max_distance, replica.sync, sk.bucket_prefix, self._ttl, scope,
                           "0" if olds is None else "1", replica.epoch, uuid.uuid4().hex, xsync]
        extras = None
        if mirror is not None:
            mirrored: dict[int, bytes] = {}  # (a delegated replica) the mirror's simhash candidates, by place
            extras = self._hints(scope, mirror, records, (replica.sync, mirrored) if delegated else None)
            for at, found in mirrored.items():
                local[at] = found + local[at]
        for at, n in enumerate(sent):
            (record, index, _), slot = batch[n], slots[n]
            edit_keys = () if record.exact else record.edit_keys
            payload = codec.encode(record.url, record.identity, slot.kept, record.referer, record.depth, record.text,
                                   record.digest if not record.exact else None, record.etag, record.last_modified,
                                   record.canonical_link)
            if olds is None:
                keys.append(sk.bucket(slot.bucket))
            shard_record = None if olds is None else (slot.bucket, olds[n] or b"")
            extra = extras[at][0] if extras is not None else None
            args.append(pack_page(slot.field, record.fingerprint, index, record.exact, record.seen, local[at], payload,
                                  shard_record, edit_keys, extra))
        sync = replica.sync
        reply = await self._call_check(keys, args)
        replica.apply(reply[0], sync)
        if mirror is not None:
            with self._mirror_lock:
                mirror.apply(scope, reply[0], sync, reply[4], xsync)
        elif self._mirror is not None:
            await self._mirror_follows(scope, reply[0], sync)
        replica.epoch, replica.records = reply[2].decode("ascii", "replace"), int(reply[3])
        rows = parse_verdicts(reply[1], len(sent))
        if extras is None:
            return rows
        assert mirror is not None
        with self._mirror_lock:  # a page step 7 joined further than k: a row of its canonical page, as in process
            for at, (row, extra) in enumerate(zip(rows, extras)):
                hint = extra[0][0] if extra[0] is not None else None
                if row.hinted and extra[1] == "containment" and hint is not None:
                    mirror.joined(scope, hint.position, batch[sent[at]][0].fingerprint)
        return [row._replace(via=extra[1]) if row.hinted else row for row, extra in zip(rows, extras)]

    async def _call_check(self, keys: list[Any], args: list[Any]) -> Any:
        """``check.lua``'s reply: on the lean link when there is one (``script_link.py``), else through redis-py."""
        script = self._scripts["check"]
        if self._link is not None:
            return await self._link.evalsha(script.sha, script.script, keys, args)
        return await script(keys=keys, args=args)

    async def _mirror_follows(self, scope: str, log: bytes, sync: int) -> None:
        """A mirror of ``scope`` loaded while a check without it was in flight (``preload``) holds the log from
        before that check (its length read after the check began) but maybe not the pages it recorded: it
        takes the check's log tail (from ``sync``) too, or a replica that delegated its index to it would
        never find them.  (A mirror behind ``sync``, never expected, is dropped: the next check loads it again.)"""
        mirror = self._mirror
        assert mirror is not None
        loading = self._mirror_loads.get(scope)
        if loading is not None:
            await loading.wait()
        state = mirror.scopes.get(scope)
        if state is None:
            return
        with self._mirror_lock:
            if state.sync >= sync:
                mirror.apply(scope, log, sync, b"", state.xsync)
            else:
                mirror.drop(scope)

    def _hints(
        self, scope: str, mirror: Mirror, records: list[PageRecord], local: tuple[int, dict[int, bytes]] | None = None
    ) -> list[tuple[Any, str | None]]:
        """Per page, what ``pack_page`` sends for steps 5-7 (its hint and extras record, ``None`` for a short
        page) and the step its hint matched by (``mirror.py``); ``local``: as ``Mirror.hints`` takes it."""
        pages = [(record, None, None) if record.exact else (record, *host_and_address(record.url, record.sketch))
                 for record in records]  # fmt: skip
        with self._mirror_lock:
            hints = mirror.hints(scope, pages, local)
        out: list[tuple[Any, str | None]] = []
        for (record, host, address), found in zip(pages, hints):
            if record.exact:
                out.append((None, None))
                continue
            extra = (None if found is None else found[0],
                     record_of(record, host, address) if has_extras(record) else b"")  # fmt: skip
            out.append((extra, None if found is None else found[1]))
        return out

    async def _learn_templates(self, records: list[PageRecord]) -> None:
        """Step 5: the other workers' learner inputs replayed, then these pages learned from, in this order
        (each given its template-free simhash), and their inputs appended for the others (``mirror.py``)."""
        mirror = self._mirror
        assert mirror is not None
        key = self.keys.extra("templates")
        async with self._learning:  # one batch at a time: each input is replayed once, in order
            if mirror.learned and int(await self.client.strlen(key)) < mirror.learned:
                mirror.forget_templates()  # the string was made anew (flushed, expired): learn afresh
            start = mirror.learned
            mirror.replay_templates(bytes(await self.client.getrange(key, start, -1) or b""), start)
            data = mirror.learn_templates(records)
            if data:
                mirror.appended(int(await self.client.append(key, data)), len(data))
                if self._ttl:
                    await self.client.pexpire(key, self._ttl)

    async def _mirrored(self, scope: str, sk: ScopeKeys, records: list[PageRecord], needed: bool = False) -> bool:
        """Whether this worker's mirror of steps 5-7 holds ``scope`` (``mirror.py``): loaded (its log and extras,
        read together) at the scope's first page with steps 5-7 data, or when ``needed`` (the replica
        delegated its index to it, and a failed load dropped the scope)."""
        mirror = self._mirror
        if mirror is None:
            return False
        loading = self._mirror_loads.get(scope)
        if loading is not None:
            await loading.wait()
        if scope in mirror.scopes:
            return True
        if not needed and not any(has_extras(record) for record in records):
            return False
        await self._load_mirror(scope, sk)
        return True

    async def _load_mirror(self, scope: str, sk: ScopeKeys) -> None:
        """Load the mirror of ``scope`` (``_read_mirror``), once at a time: a check of the scope meanwhile waits
        for it; a load that fails leaves no part of the scope behind."""
        loading = self._mirror_loads.get(scope)
        if loading is not None:
            await loading.wait()
            return
        loading = self._mirror_loads[scope] = asyncio.Event()
        try:
            await self._read_mirror(scope, sk)
        except BaseException:
            with self._mirror_lock:
                assert self._mirror is not None
                self._mirror.drop(scope)
            raise
        else:
            # One first-simhash index serves both: the mirror's answers the replica's candidates too.
            replica = self._replicas.get(scope)
            if replica is not None and not replica.delegated:
                replica.delegate()  # (on the event loop: a check reads the replica there)
        finally:
            del self._mirror_loads[scope]
            loading.set()

    async def _read_mirror(self, scope: str, sk: ScopeKeys) -> None:
        """The mirror of ``scope`` (``mirror.py``): its log and extras as of one moment (their lengths and the
        scope's epoch, read together; both strings only grow), read in chunks of ``MIRROR_CHUNK`` bytes of
        extras and the log entries they need, so no reply holds a whole big scope; again if the scope was made
        anew meanwhile."""
        mirror = self._mirror
        assert mirror is not None
        if "lengths" not in self._scripts:
            self._scripts["lengths"] = self.client.register_script(_LENGTHS)
        loop = asyncio.get_running_loop()
        while True:
            loglen, xlen, epoch = await self._scripts["lengths"](keys=[sk.log, sk.extras, sk.meta])
            entries = int(loglen) // ENTRY
            with self._mirror_lock:
                mirror.load(scope, b"", b"")
            state, whole = mirror.scopes[scope], True
            while whole and state.xsync < int(xlen):
                start, end = state.xsync, min(int(xlen), state.xsync + MIRROR_CHUNK)
                data = bytes(await self.client.getrange(sk.extras, start, end - 1))
                # A big scope takes seconds to load: not on the event loop (heartbeats, other scopes' checks).
                needed = await loop.run_in_executor(None, self._mirror_stage, scope, data, start)
                # (a string shorter than its length was: the scope was made anew meanwhile; load again)
                whole = len(data) == end - start and await self._mirror_log(scope, sk, min(needed, entries))
            whole = whole and await self._mirror_log(scope, sk, entries)
            if whole and await self.client.hget(sk.meta, "epoch") == (epoch or None):
                return

    def _mirror_stage(self, scope: str, data: bytes, start: int) -> int:
        assert self._mirror is not None
        with self._mirror_lock:
            return self._mirror.stage(scope, data, start)

    async def _mirror_log(self, scope: str, sk: ScopeKeys, upto: int) -> bool:
        """``_load_mirror``: the scope's log entries up to position ``upto``, ``LOAD_CHUNK`` at a time; False
        when the log is shorter (the scope was made anew meanwhile)."""
        mirror = self._mirror
        assert mirror is not None
        state = mirror.scopes[scope]
        while state.sync < upto:
            start = state.sync
            data = await self.client.getrange(sk.log, start * ENTRY, min(upto, start + LOAD_CHUNK) * ENTRY - 1)
            if len(data) != (min(upto, start + LOAD_CHUNK) - start) * ENTRY:
                return False

            def apply(data: bytes = bytes(data), start: int = start) -> None:
                with self._mirror_lock:
                    mirror.apply(scope, data, start, b"", state.xsync)

            await asyncio.get_running_loop().run_in_executor(None, apply)
        return True

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
        """Every recorded identity (latest version, by every worker), in first-check order; none when the read
        fails (``simhash/redis/unread/members``, logged once: the crawl closes normally)."""
        try:
            return await self._read_members()
        except Exception as exc:  # noqa: BLE001 - reported once, the crawl closes normally
            self._log_close_failure("members", exc)
            return []

    async def read_members(self) -> list[ClusterMember]:
        """``members()``, but a failed read (Redis gone, a damaged record) raises (``scrapy simhash report``: an
        error, not a report that says the key holds no pages)."""
        return await connection.on_asyncio(self._read_members())

    async def _read_members(self) -> list[ClusterMember]:
        return await self._read(lambda: export.read_members(self.client, self.keys))

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


#: What Redis (and redis-py) say when a login fails: a wrong password or user, or none given to a server that
#: wants one.  redis-py raises ``AuthenticationError`` on TCP, but a ``ConnectionError`` on a unix socket.
_AUTH_FAILURES = ("wrongpass", "invalid username-password pair", "noauth", "authentication required",
                  "invalid password", "auth failed", "authentication failed")


def _is_auth_failure(exc: Exception) -> bool:
    """Whether a failed first ping was a refused login (not an unreachable server)."""
    if "Authentication" in type(exc).__name__:
        return True
    text = str(exc).lower()
    return any(marker in text for marker in _AUTH_FAILURES)
