"""A dedup backend in Redis, shared by every crawler process of a distributed crawl.

``SIMHASH_BACKEND = "redis"``.  It reads the connection settings of
scrapy-redis (``REDIS_URL``, ``REDIS_HOST``/``REDIS_PORT``, ``REDIS_PARAMS``),
so a scrapy-redis project configures nothing new; ``SIMHASH_REDIS_URL``
overrides them.  See ``docs/readme/distributed.md``.

Key layout (``P`` is ``SIMHASH_REDIS_KEY`` with ``%(spider)s`` expanded,
``myspider:simhash`` by default)::

    P:meta            HASH  layout (k, blocks, features, text mode: checked by
                            every worker), canonicals (count), created
    P:pages           LIST  one entry per checked page, in check order; the
                            position is the page number.  Entry:
                            "<canonical page number or -1>,<distance or -1>,
                            <1 if canonical>,<fingerprint hex>,<JSON
                            [url, scope, referer, depth, text]>"
    P:canon           HASH  page number -> URL, for canonical pages
    P:scopes          SET   scopes that have an index
    P:index:<scope>   HASH  the canonical pages of one scope, bucketed: field =
                            table number (1 byte) + the top 16 bits of that
                            table's key (2 bytes); value = 12 bytes per
                            canonical page: fingerprint (two big-endian 32-bit
                            halves) + page number (big-endian 32-bit)
    P:workers         ZSET  worker id -> last heartbeat (server time, seconds)

The block-permuted tables of the in-process index (Manku et al.) become hash
fields: two fingerprints within k share the full key of at least one table,
so they share its bucket field, and the script verifies every candidate of the
query's C(B, k) fields with a popcount.  Lua numbers are doubles and its bit
operations are 32-bit, so a fingerprint travels as 8 raw bytes and is
compared as two 32-bit halves; page numbers fit in 32 bits.

``check`` is one Lua script (EVALSHA): query, pick the nearest canonical page
(ties: the lowest page number, i.e. checked first), record the page and, if it
is unique, index it, all in one atomic step on the server.  So when two
workers check near-duplicate pages at the same moment, exactly one becomes
the canonical page.  Decisions are the same as the in-process backend's on the
same sequence of pages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
import time
import uuid
from collections.abc import Mapping
from itertools import combinations
from typing import TYPE_CHECKING, Any

from ..core.index import block_widths
from .base import UNCHECKED, BackendError, ClusterMember, DedupBackend, Outcome, PageRecord, Verdict

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from ..config import RedisConfig, SimhashConfig

__all__ = ["RedisBackend", "RedisSettings", "bucket_fields", "layout_string", "read_members"]

logger = logging.getLogger(__name__)

#: Version of the key layout (part of ``P:meta`` ``layout``).
LAYOUT_VERSION = 1
#: Bits of a table key used to name its bucket field.
BUCKET_BITS = 16
_ENTRY = 12  # bytes per canonical page in a bucket
_EXPORT_CHUNK = 5000
_HEARTBEAT = 10.0  # seconds between worker heartbeats
_STALE = 60  # a worker silent for this long is considered gone
_SETTING_OF = {
    "k": "SIMHASH_MAX_DISTANCE",
    "blocks": "SIMHASH_BLOCKS",
    "features": "SIMHASH_WORD_NGRAM / SIMHASH_CHAR_NGRAM / SIMHASH_WEIGHTING / SIMHASH_CJK_NGRAM",
    "text": "SIMHASH_TEXT_MODE",
    "v": "the simhash-scrapy version (key layout)",
}

# Shared Lua helpers.  bit.* work on 32-bit integers; numbers are doubles.
_LUA_POPCOUNT = """
local band, bxor, rshift = bit.band, bit.bxor, bit.rshift
local function pop(x)
  x = x - band(rshift(x, 1), 0x55555555)
  x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
  x = band(x + rshift(x, 4), 0x0F0F0F0F)
  x = x + rshift(x, 8)
  x = x + rshift(x, 16)
  return band(x, 0x3F)
end
"""

# KEYS: meta, pages, canon, scopes, index(scope)
# ARGV: layout, scope, fingerprint (8 bytes), k, index ("1"/"0"), entry tail, url, ttl ms, fields...
_CHECK_LUA = (
    _LUA_POPCOUNT
    + """
local layout = redis.call('HGET', KEYS[1], 'layout')
if not layout then
  redis.call('HSET', KEYS[1], 'layout', ARGV[1], 'canonicals', 0, 'created', redis.call('TIME')[1])
elseif layout ~= ARGV[1] then
  return redis.error_reply('SIMHASH_LAYOUT ' .. layout)
end
local qhi, qlo = struct.unpack('>I4I4', ARGV[3])
local k = tonumber(ARGV[4])
local best_d, best_seq, best_at, best_v = 65, -1, 0, nil
local values = {}
for i = 9, #ARGV do
  local v = redis.call('HGET', KEYS[5], ARGV[i])
  values[i] = v
  if v then
    local p = 1
    local n = #v
    while p < n do
      local hi, lo, seq = struct.unpack('>I4I4I4', v, p)
      local d = pop(bxor(hi, qhi))
      if d <= k then
        d = d + pop(bxor(lo, qlo))
        if d <= k and (d < best_d or (d == best_d and seq < best_seq)) then
          best_d, best_seq, best_at, best_v = d, seq, p, v
        end
      end
      p = p + 12
    end
  end
end
local seq = redis.call('LLEN', KEYS[2])
local ttl = tonumber(ARGV[8])
if best_v then
  redis.call('RPUSH', KEYS[2], best_seq .. ',' .. best_d .. ',0,' .. ARGV[6])
  local url = redis.call('HGET', KEYS[3], best_seq)
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl); redis.call('PEXPIRE', KEYS[2], ttl); redis.call('PEXPIRE', KEYS[3], ttl)
  end
  return {seq, best_seq, best_d, string.sub(best_v, best_at, best_at + 7), url or false}
end
if ARGV[5] == '1' then
  redis.call('RPUSH', KEYS[2], '-1,-1,1,' .. ARGV[6])
  local entry = ARGV[3] .. struct.pack('>I4', seq)
  for i = 9, #ARGV do
    redis.call('HSET', KEYS[5], ARGV[i], (values[i] or '') .. entry)
  end
  redis.call('HSET', KEYS[3], seq, ARGV[7])
  redis.call('HINCRBY', KEYS[1], 'canonicals', 1)
  redis.call('SADD', KEYS[4], ARGV[2])
else
  redis.call('RPUSH', KEYS[2], '-1,-1,0,' .. ARGV[6])
end
if ttl > 0 then
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {seq, -1, -1, false, false}
"""
)

# Deletes every key of the layout.  KEYS: meta, pages, canon, scopes, workers; ARGV: index key prefix
_LUA_DELETE_ALL = """
local function delete_all(prefix)
  for _, scope in ipairs(redis.call('SMEMBERS', KEYS[4])) do
    redis.call('DEL', prefix .. scope)
  end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
end
"""

# KEYS: meta, pages, canon, scopes, workers
# ARGV: index prefix, worker id, flush on start ("1"/"0"), stale seconds, layout, ttl ms
_OPEN_LUA = (
    _LUA_DELETE_ALL
    + """
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[4]))
local others = redis.call('ZCARD', KEYS[5])
local flushed = 0
if ARGV[3] == '1' and others == 0 then
  delete_all(ARGV[1])
  flushed = 1
end
local layout = redis.call('HGET', KEYS[1], 'layout')
if layout and layout ~= ARGV[5] then
  return redis.error_reply('SIMHASH_LAYOUT ' .. layout)
end
if not layout then
  redis.call('HSET', KEYS[1], 'layout', ARGV[5], 'canonicals', 0, 'created', now)
end
redis.call('ZADD', KEYS[5], now, ARGV[2])
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl); redis.call('PEXPIRE', KEYS[5], ttl)
end
return {others, flushed, redis.call('LLEN', KEYS[2])}
"""
)

# KEYS: meta, pages, canon, scopes, workers; ARGV: index prefix, worker id, persist, stale seconds
_CLOSE_LUA = (
    _LUA_DELETE_ALL
    + """
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREM', KEYS[5], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[4]))
local others = redis.call('ZCARD', KEYS[5])
local deleted = 0
if ARGV[3] ~= '1' and others == 0 then
  delete_all(ARGV[1])
  redis.call('DEL', KEYS[5])
  deleted = 1
end
return {others, deleted}
"""
)

# KEYS: workers, meta; ARGV: worker id, ttl ms
_HEARTBEAT_LUA = """
redis.call('ZADD', KEYS[1], redis.call('TIME')[1], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
"""


# ---------------------------------------------------------------- layout
def _table_spans(blocks: int, max_distance: int) -> list[tuple[list[tuple[int, int]], int]]:
    """For each table (same order as ``BlockPermutedIndex``): ``[(shift, width)...]`` high to low, key bits."""
    widths = block_widths(blocks)
    lows = []
    low = 64
    for width in widths:
        low -= width
        lows.append(low)
    tables = []
    for chosen in combinations(range(blocks), blocks - max_distance):
        tables.append(([(lows[b], widths[b]) for b in chosen], sum(widths[b] for b in chosen)))
    return tables


class BucketFields:
    """Computes the bucket fields of a fingerprint (one per table)."""

    def __init__(self, max_distance: int, blocks: int) -> None:
        tables = _table_spans(blocks, max_distance)
        if len(tables) > 255:
            raise ValueError(
                f"the Redis backend supports at most 255 tables, SIMHASH_BLOCKS={blocks} with "
                f"SIMHASH_MAX_DISTANCE={max_distance} needs {len(tables)}; use fewer blocks"
            )
        self._tables = []
        for number, (spans, key_bits) in enumerate(tables):
            bits = min(BUCKET_BITS, key_bits)
            self._tables.append((bytes([number]), [(s, (1 << w) - 1, w) for s, w in spans], key_bits - bits))

    def __call__(self, fp: int) -> list[bytes]:
        fields = []
        for prefix, spans, drop in self._tables:
            key = 0
            for shift, mask, width in spans:
                key = (key << width) | ((fp >> shift) & mask)
            fields.append(prefix + (key >> drop).to_bytes(2, "big"))
        return fields


def bucket_fields(fp: int, max_distance: int = 3, blocks: int | None = None) -> list[bytes]:
    """The bucket fields of ``fp`` (see the key layout in the module docstring)."""
    return BucketFields(max_distance, blocks or max_distance + 1)(fp)


def layout_string(config: SimhashConfig) -> str:
    """What every worker sharing a key must agree on."""
    blocks = config.blocks or config.max_distance + 1
    return (
        f"v={LAYOUT_VERSION} k={config.max_distance} blocks={blocks} "
        f"features={config.features.signature()} text={config.text_mode} bucket_bits={BUCKET_BITS}"
    )


def _layout_mismatch(found: str, wanted: str, key: str) -> str:
    def parts(text: str) -> dict[str, str]:
        return dict(item.split("=", 1) for item in text.split() if "=" in item)

    have, want = parts(found), parts(wanted)
    for name in ("v", "k", "blocks", "features", "text", "bucket_bits"):
        if have.get(name) != want.get(name):
            setting = _SETTING_OF.get(name, "the simhash-scrapy version (key layout)")
            return (
                f"Redis key {key!r} holds fingerprints made with {name}={have.get(name)} ({setting}), but this "
                f"crawl uses {name}={want.get(name)}. Fingerprints made with different settings cannot be "
                f"compared, so they are never mixed: use the same settings on every worker, or another "
                f"SIMHASH_REDIS_KEY, or start afresh with SIMHASH_REDIS_FLUSH_ON_START = True."
            )
    return f"Redis key {key!r} layout {found!r} differs from this crawl's {wanted!r}"


# --------------------------------------------------------------- settings
class RedisSettings:
    """The Redis backend's settings (parsed by ``config.RedisConfig``) and the client they describe."""

    def __init__(self, settings: RedisConfig | BaseSettings | Mapping[str, Any]) -> None:
        from ..config import RedisConfig

        config = settings if isinstance(settings, RedisConfig) else RedisConfig.from_settings(settings)
        self.url = config.url
        self.host = config.host
        self.port = config.port
        self.params: dict[str, Any] = dict(config.params)
        self.key_template = config.key_template
        self.persist = config.persist
        self.flush_on_start = config.flush_on_start
        self.ttl = config.ttl
        self.fail_open = config.fail_open
        self.cluster = config.cluster

    def key(self, spider_name: str) -> str:
        return self.key_template % {"spider": spider_name, "name": spider_name}

    def describe(self) -> str:
        if self.url:
            return _redact(self.url)
        return f"redis://{self.host}:{self.port}"

    def client(self) -> Any:
        """A ``redis.asyncio`` client (not connected yet)."""
        try:
            from redis.asyncio import Redis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise BackendError(
                "SIMHASH_BACKEND='redis' needs the redis package: pip install 'simhash-scrapy[redis]'"
            ) from exc
        params: dict[str, Any] = {"socket_timeout": 10, "socket_connect_timeout": 5}
        params.update(self.params)
        # scrapy-redis' defaults include retry_on_timeout, deprecated (and warned about) by redis-py 6+.
        params.pop("retry_on_timeout", None)
        # A sync client class from scrapy-redis cannot serve the asyncio event loop.
        params.pop("redis_cls", None)
        # Our replies are binary; a check script is not idempotent, so it is never retried
        # (a retried check would find its own page and call it a duplicate).
        params["decode_responses"] = False
        params["retry"] = Retry(NoBackoff(), 0)
        if self.cluster:
            from redis.asyncio.cluster import RedisCluster

            params.pop("db", None)
            if self.url:
                return RedisCluster.from_url(self.url, **params)
            return RedisCluster(host=self.host, port=self.port, **params)
        if self.url:
            return Redis.from_url(self.url, **params)
        return Redis(host=self.host, port=self.port, **params)


def _on_asyncio(coro: Any) -> Any:
    """Await ``coro`` (which uses redis.asyncio) from an asyncio task or a Twisted-driven coroutine.

    Scrapy runs component coroutines as asyncio tasks under the asyncio reactor;
    a coroutine driven by Twisted (``Deferred.fromCoroutine``) can only await
    Deferreds, so there the work becomes an asyncio task wrapped in a Deferred.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        coro.close()
        raise BackendError(
            "the Redis backend needs an asyncio event loop: use Scrapy's asyncio reactor (TWISTED_REACTOR = "
            "'twisted.internet.asyncioreactor.AsyncioSelectorReactor', the default since Scrapy 2.13)"
        ) from None
    if asyncio.current_task() is not None:
        return coro
    from twisted.internet.defer import Deferred

    return Deferred.fromFuture(asyncio.ensure_future(coro))


def _redact(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def _has_hash_tag(key: str) -> bool:
    start = key.find("{")
    return start >= 0 and key.find("}", start + 2) > start


# ---------------------------------------------------------------- backend
class RedisBackend(DedupBackend):
    """Canonical pages and the cluster record of a spider, in Redis (``SIMHASH_BACKEND = "redis"``)."""

    def __init__(
        self, config: SimhashConfig, settings: RedisSettings, stats: Any = None, crawler: Crawler | None = None
    ) -> None:
        super().__init__(config)
        self.settings = settings
        self.stats = stats
        self.crawler = crawler
        self._closing = False
        self.blocks = config.blocks or config.max_distance + 1
        self._fields = BucketFields(config.max_distance, self.blocks)
        self.layout = layout_string(config)
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.client: Any = None
        self.prefix = ""
        self._keys: list[str] = []
        self._index_keys: dict[str, str] = {}
        self._check_script: Any = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._registered = False
        self._down_until = 0.0
        self._down_delay = 0.0
        self._errors = 0
        self._last_error_log = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> RedisBackend:
        return cls(config, RedisSettings(config.redis), crawler.stats, crawler)

    # ------------------------------------------------------------- keys
    def _use_key(self, spider_name: str) -> None:
        self.prefix = self.settings.key(spider_name)
        if self.settings.cluster and not _has_hash_tag(self.prefix):
            raise BackendError(
                f"SIMHASH_REDIS_KEY={self.settings.key_template!r} gives the key {self.prefix!r}, which has no "
                f"hash tag: in a Redis Cluster all simhash keys of a spider must be in one slot. Use e.g. "
                f"SIMHASH_REDIS_KEY = '{{%(spider)s}}:simhash'."
            )
        p = self.prefix
        self._keys = [f"{p}:meta", f"{p}:pages", f"{p}:canon", f"{p}:scopes", f"{p}:workers"]

    def _index_key(self, scope: str) -> str:
        key = self._index_keys.get(scope)
        if key is None:
            if len(self._index_keys) > 100_000:
                self._index_keys.clear()
            key = self._index_keys[scope] = f"{self.prefix}:index:{scope}"
        return key

    async def _connect(self, spider_name: str) -> None:
        self._use_key(spider_name)
        self.client = self.settings.client()
        try:
            await self.client.ping()
        except Exception as exc:
            await self._disconnect()
            raise BackendError(
                f"Cannot reach Redis at {self.settings.describe()} ({type(exc).__name__}: {exc}). "
                f"simhash-scrapy's Redis backend (SIMHASH_BACKEND='redis') needs it from the start: start Redis, "
                f"or fix SIMHASH_REDIS_URL / REDIS_URL / REDIS_HOST / REDIS_PORT / REDIS_PARAMS."
            ) from exc
        self._check_script = self.client.register_script(_CHECK_LUA)

    async def _disconnect(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            try:
                await client.aclose()
            except Exception:  # noqa: BLE001 - closing a broken connection
                logger.debug("Error while closing the Redis connection", exc_info=True)

    # -------------------------------------------------------- lifecycle
    async def open(self, spider_name: str) -> None:
        return await _on_asyncio(self._open(spider_name))

    async def _open(self, spider_name: str) -> None:
        await self._connect(spider_name)
        from redis.exceptions import ResponseError

        try:
            others, flushed, pages = await self.client.register_script(_OPEN_LUA)(
                keys=self._keys,
                args=[
                    f"{self.prefix}:index:",
                    self.worker_id,
                    "1" if self.settings.flush_on_start else "0",
                    _STALE,
                    self.layout,
                    int(self.settings.ttl * 1000),
                ],
            )
        except ResponseError as exc:
            await self._disconnect()
            message = str(exc)
            if message.startswith("SIMHASH_LAYOUT "):
                raise BackendError(_layout_mismatch(message[len("SIMHASH_LAYOUT ") :], self.layout, self.prefix)) from None
            raise BackendError(f"Redis at {self.settings.describe()} refused the simhash scripts: {exc}") from exc
        except Exception as exc:
            await self._disconnect()
            raise BackendError(f"Redis at {self.settings.describe()} failed at start: {type(exc).__name__}: {exc}") from exc
        self._registered = True
        self.initial = int(pages)
        if flushed:
            logger.info("simhash: flushed the Redis key %r on start (SIMHASH_REDIS_FLUSH_ON_START)", self.prefix)
        elif self.settings.flush_on_start:
            logger.warning(
                "simhash: SIMHASH_REDIS_FLUSH_ON_START is set but %d other worker(s) are using %r: not flushed",
                others,
                self.prefix,
            )
        logger.info(
            "simhash: Redis backend at %s, key %r: %d pages recorded before, %d other worker(s) running",
            self.settings.describe(),
            self.prefix,
            self.initial,
            others,
        )
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def attach(self, spider_name: str) -> None:
        return await _on_asyncio(self._attach(spider_name))

    async def _attach(self, spider_name: str) -> None:
        """Connect for reading only (exports): no worker registration, no flush."""
        await self._connect(spider_name)

    async def _beat(self) -> None:
        script = self.client.register_script(_HEARTBEAT_LUA)
        while True:
            await asyncio.sleep(_HEARTBEAT)
            try:
                await script(keys=[self._keys[4], self._keys[0]], args=[self.worker_id, int(self.settings.ttl * 1000)])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - counted by the checks that fail
                logger.debug("simhash: Redis heartbeat failed: %s", exc)

    async def close(self) -> None:
        return await _on_asyncio(self._close())

    async def _close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            try:
                await self._heartbeat
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._heartbeat = None
        if self.client is not None and self._registered:
            try:
                others, deleted = await self.client.register_script(_CLOSE_LUA)(
                    keys=self._keys,
                    args=[f"{self.prefix}:index:", self.worker_id, "1" if self.settings.persist else "0", _STALE],
                )
                if deleted:
                    logger.info(
                        "simhash: deleted the Redis key %r (set SIMHASH_REDIS_PERSIST or SCHEDULER_PERSIST "
                        "to keep it)",
                        self.prefix,
                    )
                elif not self.settings.persist:
                    logger.info("simhash: %d other worker(s) still use %r: kept", others, self.prefix)
            except Exception as exc:  # noqa: BLE001 - closing must not fail the crawl
                logger.warning("simhash: could not deregister from Redis at close: %s", exc)
            self._registered = False
        await self._disconnect()

    # ------------------------------------------------------------ checks
    def _error(self, exc: BaseException) -> None:
        self._errors += 1
        if self.stats is not None:
            self.stats.inc_value("simhash/backend_errors")
        now = time.monotonic()
        if self._errors == 1 or now - self._last_error_log >= 10:
            self._last_error_log = now
            logger.error(
                "simhash: Redis error (%s: %s); %d error(s) so far. %s",
                type(exc).__name__,
                exc,
                self._errors,
                "Pages go through unchecked (fail-open; SIMHASH_REDIS_FAIL_OPEN = False stops the crawl instead)."
                if self.settings.fail_open
                else "Closing the spider (fail-closed: SIMHASH_REDIS_FAIL_OPEN = False).",
            )

    async def check(self, record: PageRecord, index: bool = True) -> Verdict:
        return await _on_asyncio(self._check(record, index))

    async def _check(self, record: PageRecord, index: bool = True) -> Verdict:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import RedisError, ResponseError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        now = time.monotonic()
        if now < self._down_until:
            return self._failed(ConnectionError(f"Redis at {self.settings.describe()} is down; retrying shortly"))
        fp = record.fingerprint
        # Encoded here, "surrogatepass" like the store: a lone surrogate in a page text must not fail the check.
        tail = (
            f"{fp:016x},"
            + json.dumps([record.url, record.scope, record.referer, record.depth, record.text], ensure_ascii=False)
        ).encode("utf-8", "surrogatepass")
        try:
            seq, canon_seq, distance, canon_fp, canon_url = await self._check_script(
                keys=[*self._keys[:4], self._index_key(record.scope)],
                args=[
                    self.layout,
                    record.scope,
                    fp.to_bytes(8, "big"),
                    self.config.max_distance,
                    "1" if index else "0",
                    tail,
                    record.url.encode("utf-8", "surrogatepass"),
                    int(self.settings.ttl * 1000),
                    *self._fields(fp),
                ],
            )
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            # Do not hammer a server that is down: fail fast for a short, growing while.
            self._down_delay = min(5.0, max(0.25, self._down_delay * 2))
            self._down_until = time.monotonic() + self._down_delay
            return self._failed(exc)
        except ResponseError as exc:
            message = str(exc)
            if message.startswith("SIMHASH_LAYOUT "):
                exc = BackendError(_layout_mismatch(message[len("SIMHASH_LAYOUT ") :], self.layout, self.prefix))
            return self._failed(exc)
        except RedisError as exc:
            return self._failed(exc)
        if self._down_delay:
            logger.warning("simhash: Redis at %s answers again", self.settings.describe())
            self._down_delay = 0.0
        if canon_seq < 0:
            return Verdict(Outcome.UNIQUE)
        canonical_url = canon_url.decode("utf-8", "surrogatepass") if canon_url else ""
        return Verdict(
            Outcome.NEAR_DUPLICATE,
            canonical_url=canonical_url,
            distance=int(distance),
            canonical_fingerprint=int.from_bytes(canon_fp, "big"),
            # Interim: records are keyed by URL here (identity-first checks come with the Redis rework).
            canonical_identity=canonical_url,
        )

    def _failed(self, exc: BaseException) -> Verdict:
        self._error(exc)
        if self.settings.fail_open:
            return UNCHECKED
        self._stop_crawl()
        raise BackendError(f"simhash: Redis error, page not checked (fail-closed): {exc}") from None

    def _stop_crawl(self) -> None:
        """Fail-closed: close the spider rather than go on with pages nobody checked."""
        if self._closing or self.crawler is None or getattr(self.crawler, "spider", None) is None:
            return
        self._closing = True
        from .. import _compat

        _compat.close_spider_soon(self.crawler, self.crawler.spider, "simhash_backend_error")

    # ----------------------------------------------------------- exports
    async def members(self) -> list[ClusterMember]:
        return await _on_asyncio(self._members())

    async def _members(self) -> list[ClusterMember]:
        """Every page recorded under the key (by every worker), in check order."""
        from redis.exceptions import RedisError

        members: list[ClusterMember] = []
        pages_key = self._keys[1]
        start = 0
        try:
            while True:
                chunk = await self.client.lrange(pages_key, start, start + _EXPORT_CHUNK - 1)
                for raw in chunk:
                    members.append(_parse_entry(raw, members))
                if len(chunk) < _EXPORT_CHUNK:
                    break
                start += len(chunk)
        except (RedisError, OSError) as exc:
            raise BackendError(
                f"cannot read the cluster record {pages_key!r} from Redis at {self.settings.describe()}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        return members

    async def index_size(self) -> int:
        return await _on_asyncio(self._index_size())

    async def _index_size(self) -> int:
        from redis.exceptions import RedisError

        try:
            value = await self.client.hget(self._keys[0], "canonicals")
        except (RedisError, OSError) as exc:
            raise BackendError(
                f"cannot read the index size from Redis at {self.settings.describe()}: {type(exc).__name__}: {exc}"
            ) from None
        return int(value or 0)


async def read_members(settings: BaseSettings | Mapping[str, Any], spider_name: str) -> list[ClusterMember]:
    """Every page recorded under a spider's Redis key (for ``scrapy simhash report`` and scripts).

    Reads only: it neither registers as a worker nor flushes anything.
    """
    from ..config import SimhashConfig

    backend = RedisBackend(SimhashConfig(), RedisSettings(settings))
    await backend.attach(spider_name)
    try:
        return await backend.members()
    finally:
        await backend.close()


def _parse_entry(raw: bytes, earlier: list[ClusterMember]) -> ClusterMember:
    canon, distance, indexed, fp_hex, payload = raw.decode("utf-8", "surrogatepass").split(",", 4)
    url, scope, referer, depth, text = json.loads(payload)
    canon_seq = int(canon)
    canonical_url = earlier[canon_seq].url if 0 <= canon_seq < len(earlier) else None
    return ClusterMember(
        url=url,
        fingerprint=int(fp_hex, 16),
        scope=scope,
        canonical_url=canonical_url,
        distance=int(distance) if canon_seq >= 0 else None,
        referer=referer,
        depth=depth,
        text=text,
        indexed=indexed == "1",
        outcome=Outcome.NEAR_DUPLICATE if canonical_url is not None else Outcome.UNIQUE,
    )


# Struct layout of a bucket entry (documented above, used by tests).
ENTRY = struct.Struct(">III")
