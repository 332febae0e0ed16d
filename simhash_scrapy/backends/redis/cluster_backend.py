"""One global index sharded over a Redis Cluster (``SIMHASH_BACKEND = "redis-global"``): no replica in any worker.

Layout: ``cluster_layout``.  A batch of checks (the checks that arrive while a
call is in flight go together) takes these steps, each one round trip whose
commands ``node_link`` sends to every node at once (one connection per primary):

1. **Read**: one ``HINCRBY seq`` per scope (first-check order), the identity
   records of the batch and, per page, its bucket in every table (a GET each,
   once a batch; a bucket this worker keeps a copy of, ``bucket_cache``: its
   new entries only; where every node has the ``simhash`` module,
   ``SIMHASH.NEAR``: the node scans the bucket and replies with its length and
   the entries near the page's fold) or its short-page digest (an HGET).
2. **Decide** in the worker: the candidates within k of the bucket entries,
   the pages' own records and the canonical pages they name go into a
   ``core.cluster.clustering.Clusterer`` (in seq order: ties go to the page
   checked first), which checks the batch's pages in order.  The rule is the
   core's: this module only moves its inputs and outputs.
3. **Read the canonical pages** the verdicts name: their directory slots
   (cached, up to ``SIMHASH_REDIS_GLOBAL_CACHE`` entries) and their records.
4. **Write**, in one round trip: the records, new canonical pages' entries
   (appended to every table bucket: ``APPEND_LUA``, or ``SIMHASH.APPEND`` with
   the module; SETRANGE of the directory (a script the
   first time this worker writes a directory key: it makes the string at its
   full size), HSETNX of a short
   page's digest), removed entries of pages whose content changed (a Lua script
   per bucket).

Atomicity: each command is atomic on its node, a check is not.  Two workers
checking near-duplicates at the same moment may both read the buckets before
either appends: both pages become canonical (a duplicate kept twice).  A page
is only ever a near-duplicate of an entry that is in the tables, written by a
check that made it canonical: a race never drops a distinct page.  A race is
seen after the fact (an append that returns a longer bucket than read plus
this worker's own entries, an HSETNX that finds the digest taken): the worker
reads what came in between and counts ``simhash/redis/global/races`` when one
of those entries is within k.  The records, directory slots and table entries
of a batch go in one round trip, to different nodes: another worker may read
an entry before its page's directory slot or record is there; it leaves that
entry out (``simhash/redis/global/unnamed``): at worst a duplicate kept twice.

Fail-open (``SIMHASH_REDIS_FAIL_OPEN``, the default): a batch that cannot reach
a node (or gets an error reply) lets its pages through ``UNCHECKED``, never
dropped, counted in ``simhash/redis/global/unreachable``; the next batch
connects again.  Writes cut short by a node that went down may leave some of a
page's entries written: that page went through, so a later page near it is
its near-duplicate, as if it had been checked.  Fail-closed: ``BackendError``.

Not done (yet): steps 4-7 of the rule (one-edit keys, template-free text,
second simhash, containment); lifecycle (the keys are kept until
``SIMHASH_REDIS_FLUSH_ON_START``: no worker registry, no TTL).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import compress
from operator import ne
from typing import TYPE_CHECKING, Any, NamedTuple

from redis.exceptions import RedisError

from ...core.cluster.clustering import RECORDED_OUTCOMES, Clusterer, Decision, is_one_edit
from ...core import _native
from ...core.cluster.viewidentity import MAX_ADDRESSES
from ...core.index.scan import ScanIndex
from ...core.redact import redact
from ..base import BackendError, ClusterMember, DedupBackend, Outcome, PageRecord, Verdict
from . import connection
from .export import declares_identity, identities_read, identities_unread
from .cluster_layout import (
    DIR, DIR_SPAN, ENTRY, LAYOUT_VERSION, ROOM_MIN, ROOM_SHARE, GlobalKeys, GlobalRecord, fold, near_entries_many,
    extra_key, meta_key, pack_entry, pack_record, parse_record, records_pattern, scope_id, scopes_key, sid_of, used_of,
)
from .bucket_cache import TAIL_LUA, BucketCache, tail_args
from .layout import Codec, bucket_bits_for, identity_slot
from .node_link import NodeLink, ReplyError, packed_calls
from .node_link import pack as pack_command
from .outages import close_failure

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ...core.settings.config import RedisConfig, SimhashConfig

__all__ = ["GlobalRedisBackend", "MODULE_COMMANDS"]

#: The commands of the ``simhash`` Redis module (``backends/redis/module``) the checks use where every node has them.
MODULE_COMMANDS = ("SIMHASH.NEAR", "SIMHASH.APPEND")
#: The module's version (``MODULE LIST``) from which ``SIMHASH.APPEND`` takes ``k expected`` and, for a bucket that
#: changed since the worker read it, replies its entries near the appended fold: the race look-again (``_races``)
#: in the same round trip.  Workers use it when every primary has it; an older module is used as before.
APPEND_NEAR_VERSION = 2


def module_version(reply: Any, name: bytes) -> int:
    """The version of the module called ``name`` in a ``MODULE LIST`` reply (each module a flat list of field,
    value), 0 when it is not there or the reply is an error (a user not allowed ``MODULE LIST``)."""
    if not isinstance(reply, list):
        return 0
    for module in reply:
        fields = dict(zip(module[::2], module[1::2])) if isinstance(module, list) else {}
        if fields.get(b"name") == name and isinstance(fields.get(b"ver"), int):
            return int(fields[b"ver"])
    return 0

logger = logging.getLogger("simhash_scrapy.backends.redis")

#: Removes the entry of a seq (4 bytes, ARGV[1]) from a table bucket (KEYS[1]); returns 1 if found.  The entries
#: after it move up, the string keeps its length (its spare room grows by an entry), and the bucket's mark changes
#: (one more): the workers' copies of it (``bucket_cache``) are read whole again.  The seq is looked for with
#: ``string.find`` (plain: C's search), a find inside a fold or across two entries skipped, not by a loop over the
#: entries in Lua: 0.55x the Redis CPU a removal from a bucket of 10 KB (1,250 entries: 10 million pages; a
#: canonical page whose content changed leaves every table), the rest mostly the bucket's copy into Lua and back
#: (``benchmarks/redis_append_cost.py``).
_REMOVE = """
local data = redis.call('GET', KEYS[1])
if not data then return 0 end
local used, mark = struct.unpack('>I4I4', data)
local at = 13
while true do
  at = string.find(data, ARGV[1], at, true)
  if not at or at + 3 > 8 + used then return 0 end
  if (at - 13) % 8 == 0 then
    redis.call('SET', KEYS[1], struct.pack('>I4I4', used - 8, (mark + 1) % 4294967296) .. string.sub(data, 9, at - 5)
      .. string.sub(data, at + 4) .. string.rep('\\0', 8))
    return 1
  end
  at = at + 1
end
"""
#: Deletes a short page's digest (KEYS[1], field ARGV[1]) if it still names seq ARGV[2].
_UNSET_EXACT = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""
#: Appends an entry (ARGV[1]) to a table bucket (KEYS[1]) and returns the bytes of its entries now; a new bucket is
#: marked ARGV[2] (4 random bytes).  In place
#: (SETRANGE of the entry and of the header) while the bucket has spare room; when it is full, the string is made
#: again at its entries' size plus ``cluster_layout.room`` (SETRANGE or APPEND alone would let Redis keep up to as
#: much again spare).  Measured by redis_append_cost.py: 4-7 µs of Redis CPU an append to buckets of 1.4-14 KB,
#: against 6-39 µs for a script that copied the whole bucket each time (layout 2).
APPEND_LUA = """
local used = 0
local head = redis.call('GETRANGE', KEYS[1], 0, 3)
if #head == 4 then used = struct.unpack('>I4', head) end
local now = used + #ARGV[1]
if 8 + now > redis.call('STRLEN', KEYS[1]) then
  local keep = redis.call('GETRANGE', KEYS[1], 0, used + 7)
  if #keep < 8 then keep = '\\0\\0\\0\\0' .. ARGV[2] end
  redis.call('SET', KEYS[1], keep .. string.rep('\\0', #ARGV[1] + math.floor(now / %d) + %d))
end
redis.call('SETRANGE', KEYS[1], used + 8, ARGV[1])
redis.call('SETRANGE', KEYS[1], 0, struct.pack('>I4', now))
return now
""" % (ROOM_SHARE, ROOM_MIN)
#: Writes a directory slot: SETRANGE of KEYS[1] at ARGV[1] with ARGV[2], on a string made at its full size (ARGV[3]
#: bytes) when the key is new: SETRANGE alone grows a string to up to twice what it needs (measured at 1M pages: 14 bytes
#: of directory per page, 12 at full size, 11 a seq number; redis_cluster_scale.py).
DIRECTORY_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], string.rep('\\0', tonumber(ARGV[3]))) end
return redis.call('SETRANGE', KEYS[1], ARGV[1], ARGV[2])
"""
#: The most pages a batch takes: its 4-5 round trips cost about the same however many pages share them, so a worker
#: with more checks in flight (Scrapy's broad crawls: ``CONCURRENT_REQUESTS = 100``) shares them among more pages
#: (100 in flight, 1 million pages: 0.88x the worker's and 0.89x Redis' CPU a check of batches of up to 64;
#: ``benchmarks/redis_global_ab.py --module --in-flight 100``).  With 64 or fewer in flight nothing changes.
_MAX_BATCH = 128
#: The most scopes whose state (``_Scope``) a worker keeps, the least recently checked forgotten first: with
#: ``SIMHASH_IDENTITY_SIGNALS`` every product is a scope of its own.  A forgotten scope checked again costs its
#: layout check again (one round trip: its meta and the registry); never another verdict
#: (``benchmarks/redis_global_scopes.py``).
MAX_SCOPES = 4096
#: The verdict of each outcome with nothing else to say (a frozen ``Verdict``: one for every page that has it).
_PLAIN = {outcome: Verdict(outcome) for outcome in Outcome}
#: Commands per round trip when reading every scope's meta at close (``members``, ``index_size``).
_META_BATCH = 10_000


@dataclass
class _Scope:
    """What a worker keeps of a scope it checks: its key names, its payload codec (the meta hash's zdict once
    read), its layout check (once), and its number in the directory cache's keys (seq numbers are per scope)."""

    keys: GlobalKeys
    codec: Codec
    number: int  # from a counter never reset: a forgotten scope's cache entries never match another scope's
    ready: asyncio.Future[None] | None = None


class _Page(NamedTuple):
    """One check waiting for its batch (a tuple: one made a check, at a tuple's cost)."""

    record: PageRecord
    index_it: bool  # (``check``'s ``index``: a unique page is made canonical)
    future: asyncio.Future[Verdict]
    scope: _Scope  # (held by the page: a scope forgotten while its pages wait is still whole for their batch)
    bucket: int = 0
    fieldname: bytes = b""
    keep: bytes = b""

    @property
    def keys(self) -> GlobalKeys:
        return self.scope.keys


@dataclass
class _Batch:
    """What one batch read and decided (entry numbers are the batch's ``Clusterer``'s)."""

    pages: list[_Page]
    clusterer: Clusterer
    codec: Codec  # the scope's payload codec
    seq_of: list[int] = field(default_factory=list)  # entry -> seq
    stored: dict[int, GlobalRecord] = field(default_factory=dict)  # seq -> the record read (batch identities)
    slot_of: dict[int, tuple[int, bytes]] = field(default_factory=dict)  # seq -> (bucket, field) when known
    lengths: dict[str, int] = field(default_factory=dict)  # bucket key -> length read
    first_exact: dict[int, bool | None] = field(default_factory=dict)  # seq -> exact as read (None: new)
    placeholders: set[int] = field(default_factory=set)  # seqs known only as a member's canonical page
    #: per decision: the canonical entry's (indexed fingerprint, fingerprint) at that moment
    snapshots: list[tuple[int | None, int] | None] = field(default_factory=list)
    initial: dict[int, int | None] = field(default_factory=dict)  # seq -> indexed fingerprint read (batch identities)
    fetched: dict[int, GlobalRecord] = field(default_factory=dict)  # seq -> the record read (other canonical pages)
    mark: bytes = field(default_factory=lambda: os.urandom(4))  # the mark of a bucket this batch makes (APPEND_LUA)
    named: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # (sid, fingerprint) -> its bucket keys
    #: seqs of the entries the read found near a page's fold (within k or not): there before the read, never a race
    folded: set[int] = field(default_factory=set)
    #: with the module: the bucket keys read, in the order of the ``SIMHASH.NEAR`` commands (each page's tables)
    near_keys: list[str] = field(default_factory=list)

    def buckets_of(self, keys: GlobalKeys, fp: int) -> list[str]:
        """``keys.buckets(fp)``, once a batch (read, filtered, appended to)."""
        names = self.named.get((keys.sid, fp))
        if names is None:
            names = self.named[keys.sid, fp] = keys.buckets(fp)
        return names


def old_exact(batch: _Batch, seq: int) -> bool | None:
    """Whether the identity ``seq`` was a short page when the batch read it (``None``: new)."""
    return batch.first_exact.get(seq)


class GlobalRedisBackend(DedupBackend):
    """The block-permuted tables of every scope sharded over a Redis Cluster's hash slots."""

    def __init__(self, config: SimhashConfig, settings: RedisConfig, stats: Any = None) -> None:
        super().__init__(config)
        self.settings = settings
        self.stats = stats
        self.client: Any = None
        self.link: Any = None  # NodeLink: the checks' round trips
        self.prefix = ""
        self.blocks = settings.table_blocks or config.max_distance + 1
        self.bucket_bits = settings.bucket_bits
        self.cache_size = settings.global_cache
        self.record_bits = bucket_bits_for(settings.capacity)
        #: (scope number << 32 | seq) -> directory slot: seq numbers are per scope
        self._cache: OrderedDict[int, tuple[int, bytes]] = OrderedDict()
        #: scope -> its state, the least recently checked first (at most ``MAX_SCOPES``)
        self._scopes: OrderedDict[str, _Scope] = OrderedDict()
        self._numbered = 0  # scopes numbered so far (``_Scope.number``)
        #: Directory keys a write of this worker found or made at their full size: a plain SETRANGE then (no script)
        self._directories: set[str] = set()
        self._queue: list[_Page] = []
        self._running = False
        self._drainer: asyncio.Future[None] | None = None
        self._append_sha = self._remove_sha = self._unset_sha = self._directory_sha = self._tail_sha = ""
        #: whether the checks use the ``simhash`` module's commands (``SIMHASH_REDIS_MODULE``; found at ``open``)
        self.module = False
        #: whether every primary's module is of ``APPEND_NEAR_VERSION`` or later (found at ``open``)
        self.append_near = False
        self.counts: dict[str, int] = {"cache_hits": 0, "cache_misses": 0, "races": 0, "unnamed": 0, "batches": 0,
                                       "checks": 0, "unreachable": 0}
        #: this worker's copies of table buckets: a bucket read again costs its new entries only
        self.buckets = BucketCache(settings.bucket_cache << 20, self.counts)
        self._last_error_log = -1e9
        self._close_logged = False  # a read at close failed and was logged (``outages.close_failure``)
        #: Wall seconds per step of a batch ("decide" awaits nothing: it is CPU): the cost per check by component.
        self.timing: dict[str, float] = {"read": 0.0, "decide": 0.0, "canonicals": 0.0, "write": 0.0}
        #: ``(url, scope)`` of the pages earlier crawls recorded in an identity's scope (``restored_pages``).
        self._restored: list[tuple[str, str]] = []

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> GlobalRedisBackend:
        return cls(config, config.redis, crawler.stats)

    # ------------------------------------------------------------- set-up
    def keys(self, scope: str) -> GlobalKeys:
        return self._scope(scope).keys

    def _scope(self, scope: str) -> _Scope:
        """The scope's state, made when new; the least recently used one forgotten beyond ``MAX_SCOPES``."""
        state = self._scopes.get(scope)
        if state is not None:
            self._scopes.move_to_end(scope)
            return state
        state = self._scopes[scope] = _Scope(self._scope_keys(scope), Codec(), self._numbered)
        self._numbered += 1
        while len(self._scopes) > MAX_SCOPES:
            self._forget(next(iter(self._scopes)))
        return state

    def _forget(self, scope: str) -> None:
        state = self._scopes.pop(scope, None)
        if state is not None:
            state.keys.release()

    def _scope_keys(self, scope: str) -> GlobalKeys:
        return GlobalKeys(self.prefix, scope, self.config.max_distance, self.blocks, self.bucket_bits, self.record_bits)

    def layout(self) -> str:
        features = self.config.features.signature()
        return (f"global v={LAYOUT_VERSION} k={self.config.max_distance} blocks={self.blocks} "
                f"bits={self.bucket_bits} rbits={self.record_bits} features={features} text={self.config.text_mode}")

    async def open(self, spider_name: str) -> None:
        if self.settings.ttl:
            raise BackendError(
                f"SIMHASH_REDIS_TTL = {self.settings.ttl:g} is not supported with SIMHASH_BACKEND='redis-global' "
                f"(its keys are kept until SIMHASH_REDIS_FLUSH_ON_START): set it to 0"
            )
        self._scope_keys(spider_name)  # validates the table layout before connecting
        for scope in list(self._scopes):
            self._forget(scope)
        self._cache.clear()
        self.buckets.clear()
        self._directories.clear()
        self.prefix = self.settings.key(spider_name)
        self.client = connection.get_client(self.settings)
        try:
            await self.client.ping()
        except Exception as exc:
            raise BackendError(
                f"Cannot reach Redis at {self.settings.describe()} ({type(exc).__name__}: {exc}). "
                f"SIMHASH_BACKEND='redis-global' needs it: fix SIMHASH_REDIS_URL / REDIS_URL"
            ) from None
        if self.settings.flush_on_start:
            await self.flush()
        if not self.settings.persist:
            # No worker registry tells the last worker out, so nothing deletes a shared global index at close:
            # say so rather than ignore the setting (its default is False).
            logger.info("simhash: SIMHASH_REDIS_PERSIST is False, but SIMHASH_BACKEND='redis-global' keeps its keys "
                        "when the crawl ends; SIMHASH_REDIS_FLUSH_ON_START deletes them when a worker starts")
        # on every primary
        self._append_sha = await self.client.script_load(APPEND_LUA)
        self._remove_sha = await self.client.script_load(_REMOVE)
        self._unset_sha = await self.client.script_load(_UNSET_EXACT)
        self._directory_sha = await self.client.script_load(DIRECTORY_LUA)
        self._tail_sha = await self.client.script_load(TAIL_LUA)
        self.link = NodeLink(self.client, float(connection.client_params(self.settings).get("socket_timeout") or 10))
        self.link.remember_script(self._append_sha, APPEND_LUA)
        self.link.remember_script(self._remove_sha, _REMOVE)
        self.link.remember_script(self._unset_sha, _UNSET_EXACT)
        self.link.remember_script(self._directory_sha, DIRECTORY_LUA)
        self.link.remember_script(self._tail_sha, TAIL_LUA)
        self.module = await self._module_on()
        self.append_near = self.module and await self._append_near_on()
        await self._read_identities()

    async def _module_on(self) -> bool:
        """Whether the checks use the ``simhash`` module's commands (``module``): ``SIMHASH_REDIS_MODULE`` "auto"
        when every primary has them, True (else ``BackendError``), False never."""
        wanted = self.settings.module
        if wanted is False:
            return False
        await self.client.initialize()  # (the slot map: the primaries)
        nodes = self.link.primaries()
        answers = await self.link.exchange([(node, [pack_command(("COMMAND", "INFO", *MODULE_COMMANDS))])
                                            for node in nodes])
        lacking = [f"{node.host}:{node.port}" for node, (reply,) in zip(nodes, answers)
                   if isinstance(reply, ReplyError) or not reply or any(info is None for info in reply)]
        if lacking and wanted is True:
            raise BackendError(
                f"SIMHASH_REDIS_MODULE = True, but the Redis node(s) {', '.join(lacking)} have no simhash module "
                f"(redis-server --loadmodule \"$(python -m simhash_scrapy.backends.redis.module)\"): load it on "
                f"every node, or set SIMHASH_REDIS_MODULE = \"auto\"")
        logger.info("simhash: redis-global checks %s", "through the simhash module of every node" if not lacking
                    else f"with scripts (no simhash module on {len(lacking)} of {len(nodes)} node(s))")
        return not lacking

    async def _append_near_on(self) -> bool:
        """Whether every primary's ``simhash`` module is of ``APPEND_NEAR_VERSION`` or later (``MODULE LIST``; a
        node that does not say, as an older one)."""
        nodes = self.link.primaries()
        answers = await self.link.exchange([(node, [pack_command(("MODULE", "LIST"))]) for node in nodes])
        return all(module_version(reply, b"simhash") >= APPEND_NEAR_VERSION for (reply,) in answers)

    async def attach(self, spider_name: str) -> list[str]:
        """Connects to read only (``scrapy simhash report``): every scope the key's registry names (sorted); their
        records are then ``members()``.  ``BackendError`` when the key holds no global index."""
        self.prefix = self.settings.key(spider_name)
        self.client = connection.get_client(self.settings)
        await self.client.initialize()  # (the slot map: ``node_link`` routes by it)
        self.link = NodeLink(self.client, float(connection.client_params(self.settings).get("socket_timeout") or 10))
        scopes = await self._registered()
        if scopes:
            self.keys(scopes[0])  # (``stored_layout``)
        return scopes

    async def _registered(self) -> list[str]:
        """Every scope the key's registry names (sorted): each worker adds a scope before its first check."""
        key = scopes_key(self.prefix)
        return sorted(s.decode("utf-8", "surrogatepass") for s in await self._one(key, "SMEMBERS", key))

    async def _meta_fields(self, sids: list[str], fieldname: str) -> list[Any]:
        """A field of the meta hash of every scope ``sids`` (``_META_BATCH`` commands a round trip)."""
        out: list[Any] = []
        for start in range(0, len(sids), _META_BATCH):
            pipe = self.link.batch()
            for sid in sids[start : start + _META_BATCH]:
                key = meta_key(self.prefix, sid)
                pipe.call(key, "HGET", key, fieldname)
            out += await pipe.execute()
        return out

    async def stored_layout(self) -> str | None:
        """The layout a scope's meta records (the first scope's; ``None`` without any)."""
        for state in self._scopes.values():
            found = await self.client.hget(state.keys.meta, "layout")
            return None if found is None else bytes(found).decode()
        return None

    async def _read_identities(self) -> None:
        """With ``SIMHASH_IDENTITY_SIGNALS`` (and no ``SIMHASH_DISTINCT_SELECTORS``), the pages earlier crawls
        recorded in an identity's scope (``plain#digest``), for ``restored_pages``: the crawl replays the identity
        each address declared (``core.cluster.viewidentity``), so the first page of an address gets its record's
        validators (``previous``), as with the single-node backend.  One SCAN of every scope's records, at most
        ``viewidentity.MAX_ADDRESSES`` pages (what the replay keeps); a failed read is a warning."""
        if not self.config.identity_signals or self.config.distinct is not None:
            return
        try:
            scopes = {scope_id(scope): scope for scope in await self._registered() if declares_identity(scope)}
            found = await self._records_of(set(scopes), MAX_ADDRESSES) if scopes else {}
            rows = []
            for (sid, records), zdict in zip(found.items(), await self._meta_fields(list(found), "zdict")):
                codec = Codec(zdict)
                rows += [((rec.first_seen, scopes[sid], seq), codec.decode(rec.payload, fieldname)[0], scopes[sid])
                         for seq, (fieldname, rec) in records.items()]
        except Exception as exc:  # noqa: BLE001 - the crawl goes on without them
            identities_unread(exc, self.settings.secrets)
            return
        rows.sort(key=lambda row: row[0])
        self._restored = [(url, scope) for _, url, scope in rows[:MAX_ADDRESSES]]
        identities_read(len(rows))

    def restored_pages(self) -> list[tuple[str, str]]:
        return self._restored

    async def previous(self, scope: str, identity: str) -> ClusterMember | None:
        """The identity's record (validators, digest): one HGET; ``None`` if unknown or a node does not answer, or
        did not answer its last call (the page is then downloaded as usual)."""
        if self.client is None:
            return None
        state = self._scopes.get(scope)
        keys = state.keys if state is not None else self._scope_keys(scope)
        bucket, fieldname, _ = identity_slot(scope, identity, keys.record_bits)
        try:
            if self.link is not None and self.link.is_down(keys.record(bucket)):
                return None  # (known down since a call it did not answer: no wait of the link's timeout a request)
            value = await self._one(keys.record(bucket), "HGET", keys.record(bucket), fieldname, skip_down=True)
            if value is None:
                return None
            rec = parse_record(bytes(value))
            codec = state.codec if state is not None else None
            if codec is None or (codec.zdict is None and Codec.needs_dict(rec.payload)):
                codec = Codec(await self._one(keys.meta, "HGET", keys.meta, "zdict", skip_down=True))
        except (OSError, asyncio.TimeoutError, RedisError, ReplyError):
            return None
        return self._member(scope, codec.decode_all(rec.payload, fieldname), rec, None)

    async def flush(self) -> int:
        """Delete every key of this prefix, on every node; returns how many."""
        deleted = 0
        async for key in self.client.scan_iter(match=f"{self.prefix}:{{*", count=10_000):
            deleted += await self.client.delete(key)
        self._cache.clear()
        self._directories.clear()
        return deleted

    async def _check_layout(self, state: _Scope) -> None:
        keys = state.keys
        wanted = self.layout()
        # One round trip (``node_link``, not the client's pool: thousands of new scopes at once exhausted it)
        pipe, registry = self.link.batch(), scopes_key(self.prefix)
        pipe.call(keys.meta, "HSETNX", keys.meta, "layout", wanted)
        pipe.call(registry, "SADD", registry, keys.scope)  # (before its first check: the report's list)
        pipe.call(keys.meta, "HMGET", keys.meta, "layout", "zdict")
        found, zdict = (await pipe.execute())[2]
        found = bytes(found or b"").decode()
        state.codec.zdict = zdict or None
        if found != wanted:
            raise BackendError(
                f"Redis key {keys.meta!r} holds a global index made with {found!r}, but this crawl uses {wanted!r} "
                f"(SIMHASH_MAX_DISTANCE, SIMHASH_REDIS_TABLE_BLOCKS, SIMHASH_REDIS_BUCKET_BITS, "
                f"SIMHASH_REDIS_CAPACITY and the feature settings must be the same on every worker); or start afresh with SIMHASH_REDIS_FLUSH_ON_START"
            )

    # -------------------------------------------------------------- check
    async def check(self, record: PageRecord, index: bool = True) -> Verdict:
        if self.client is None:
            raise BackendError("GlobalRedisBackend.check before open")
        scope = record.scope
        state = self._scope(scope)
        if state.ready is None:
            state.ready = asyncio.ensure_future(self._check_layout(state))
        ready = state.ready
        if not ready.done():
            await asyncio.wait([ready])  # every check of the scope waits here in arrival order
        failure = ready.exception()
        if failure is not None and not isinstance(failure, BackendError) and self.settings.fail_open:
            if self._scopes.get(scope) is state:
                self._forget(scope)  # the next check asks again
            return self._unreachable(failure, 1)[0]
        ready.result()
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        bucket, fieldname, keep = identity_slot(scope, record.key, state.keys.record_bits)
        self._queue.append(_Page(record, index, future, state, bucket, fieldname, keep))
        if not self._running:
            self._running = True
            self._drainer = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._queue:
                scope = self._queue[0].record.scope  # one scope per batch: seq numbers are per scope
                pages = [page for page in self._queue if page.record.scope == scope][:_MAX_BATCH]
                taken = {id(page) for page in pages}
                self._queue = [page for page in self._queue if id(page) not in taken]
                try:
                    verdicts = await self._run(pages)
                except Exception as exc:  # every page of the batch learns why, or goes on unchecked (fail-open)
                    self._module_lost(exc)
                    if not isinstance(exc, BackendError) and self.settings.fail_open:
                        verdicts = self._unreachable(exc, len(pages))
                    else:
                        error = exc if isinstance(exc, BackendError) else BackendError(
                            f"Redis error at {self.settings.describe()}: {type(exc).__name__}: "
                            f"{redact(str(exc), self.settings.secrets)}")
                        for page in pages:
                            if not page.future.done():
                                page.future.set_exception(error)
                        continue
                for page, verdict in zip(pages, verdicts):
                    page.future.set_result(verdict)
        finally:
            self._running = False

    def _module_lost(self, exc: BaseException) -> None:
        """A node that no longer has the module (restarted without it, a failover to a replica that never had it):
        with ``SIMHASH_REDIS_MODULE = "auto"`` the next batches use the scripts, said once; this batch has failed."""
        if (self.module and self.settings.module == "auto" and isinstance(exc, ReplyError)
                and "unknown command" in str(exc).lower() and "simhash." in str(exc).lower()):
            self.module = self.append_near = False
            logger.warning("simhash: a Redis node has no simhash module any more (%s): redis-global checks with "
                           "scripts from now on", redact(str(exc), self.settings.secrets))
        elif (self.append_near and isinstance(exc, ReplyError) and "wrong number of arguments" in str(exc).lower()
              and "simhash.append" in str(exc).lower()):
            self.append_near = False  # (a node restarted with an older module: its SIMHASH.APPEND as before)
            logger.warning("simhash: a Redis node has an older simhash module (%s): redis-global looks again at "
                           "the buckets that changed in a round trip of its own from now on",
                           redact(str(exc), self.settings.secrets))

    def _unreachable(self, exc: BaseException, count: int) -> list[Verdict]:
        """Fail-open: a batch that could not reach a node (or got an error reply) lets its pages through
        unchecked, never dropped; counted (``simhash/redis/global/unreachable``) and logged (once per 10 s)."""
        self.counts["unreachable"] += count
        if self.stats is not None:
            self.stats.inc_value("simhash/backend_errors")
        now = time.monotonic()
        if now - self._last_error_log >= 10:
            self._last_error_log = now
            logger.error(
                "simhash: a Redis Cluster node did not answer (%s: %s); %d page(s) went through unchecked so far "
                "(fail-open; SIMHASH_REDIS_FAIL_OPEN = False fails the checks instead)",
                type(exc).__name__, redact(str(exc), self.settings.secrets), self.counts["unreachable"],
            )
        return [Verdict(Outcome.UNCHECKED)] * count

    async def _run(self, pages: list[_Page]) -> list[Verdict]:
        self.counts["batches"] += 1
        self.counts["checks"] += len(pages)
        timing, clock = self.timing, time.perf_counter
        t0 = clock()
        # (a rule for the batch's few dozen entries: ``ScanIndex`` answers as the tables would, with none to build)
        batch = _Batch(pages, Clusterer(self.config.max_distance, self.blocks, ScanIndex), pages[0].scope.codec)
        base = await self._read(batch)
        t1 = clock()
        decisions = self._decide(batch, base)
        t2 = clock()
        canon = await self._canonicals(batch, decisions)
        t3 = clock()
        verdicts = await self._write(batch, decisions, canon)
        await self._share_dict(batch)
        timing["read"] += t1 - t0
        timing["decide"] += t2 - t1
        timing["canonicals"] += t3 - t2
        timing["write"] += clock() - t3
        return verdicts

    async def _read(self, batch: _Batch) -> dict[str, int]:
        """Step 1: seq numbers, records, buckets and the candidates' records; restores the neighbourhood into the
        batch's Clusterer."""
        pipe = self.link.batch()
        scopes: dict[str, int] = {}
        metas: dict[str, str] = {}
        for page in batch.pages:
            scopes[page.record.scope] = scopes.get(page.record.scope, 0) + 1
            metas[page.record.scope] = page.keys.meta
        for scope, n in scopes.items():
            pipe.call(metas[scope], "HINCRBY", metas[scope], "seq", n)
        keys = batch.pages[0].keys  # (one scope a batch)
        packed_calls(pipe.commands, "HGET", [keys.record(page.bucket) for page in batch.pages], 1,
                     [page.fieldname for page in batch.pages])
        shorts = [page for page in batch.pages if page.record.exact]  # their digest's HGET, then the buckets
        for page in shorts:
            key = page.keys.exact(page.record.fingerprint)
            pipe.call(key, "HGET", key, page.record.fingerprint.to_bytes(8, "big"))
        wanted: dict[str, bytearray | None] = {}  # bucket key -> this worker's copy it is read against (once a batch)
        cache = self.buckets if self.buckets.budget > 0 and not self.module else None
        k = self.config.max_distance
        if self.module:  # each page's buckets scanned where they are: its entries near the fold come back
            fps = [page.record.fingerprint for page in batch.pages if not page.record.exact]
            batch.near_keys = keys.buckets_many(fps)
            packed_calls(pipe.commands, "SIMHASH.NEAR", batch.near_keys, len(keys.tables), [fold(fp) for fp in fps],
                         (k,))
        for page in batch.pages:
            if page.record.exact or self.module:
                continue
            for key in batch.buckets_of(page.keys, page.record.fingerprint):
                if key in wanted:
                    continue
                kept = wanted[key] = cache.kept(key) if cache is not None else None
                if kept is None:
                    pipe.call(key, "GET", key)
                else:
                    pipe.call(key, "EVALSHA", self._tail_sha, 1, key, *tail_args(kept))
        out = await pipe.execute()
        top = dict(zip(scopes, out[: len(scopes)]))
        stored = out[len(scopes) : len(scopes) + len(batch.pages)]
        own: dict[int, tuple[_Page, GlobalRecord]] = {}
        for page, value in zip(batch.pages, stored):
            if value is not None:
                rec = parse_record(value)
                own[rec.seq] = (page, rec)
                batch.stored[rec.seq] = rec
                batch.slot_of[rec.seq] = (page.bucket, page.fieldname)
        await self._load_dict(batch, [rec for _, rec in own.values()])
        digests = out[len(scopes) + len(batch.pages) :][: len(shorts)]
        if self.module:
            folded = self._near_found(batch, out, len(scopes) + len(batch.pages) + len(shorts), fps)
        else:
            replies = out[len(scopes) + len(batch.pages) + len(shorts) :]
            buckets = dict(zip(wanted, replies)) if cache is None else {
                key: cache.take(key, kept, reply) for (key, kept), reply in zip(wanted.items(), replies)}
            folded = self._near_scanned(batch, buckets)
        candidates = await self._candidates(batch, list(zip(shorts, digests)), folded)
        self._restore(batch, own, candidates)
        return {scope: int(top[scope]) - scopes[scope] + 1 for scope in scopes}

    def _near_scanned(self, batch: _Batch, buckets: dict[str, bytes | bytearray | None]) -> dict[int, list[int]]:
        """Each seq of an entry near the fold of a page of the batch: the fingerprints of the pages whose buckets
        named it, from the buckets read whole (``GET``, or this worker's copies); each bucket's length into
        ``batch.lengths``."""
        tables: list[tuple[int, bytes | bytearray | None]] = []  # (fingerprint, bucket read) of the pages not short
        for key, value in buckets.items():
            batch.lengths[key] = used_of(value)
        for page in batch.pages:
            if not page.record.exact:
                fp = page.record.fingerprint
                tables.extend((fp, buckets[key]) for key in batch.buckets_of(page.keys, fp))
        near = near_entries_many([value for _, value in tables], [fp for fp, _ in tables], self.config.max_distance)
        folded: dict[int, list[int]] = {}
        for (fp, _), seqs in zip(tables, near):
            for seq in seqs:
                folded.setdefault(seq, []).append(fp)
        return folded

    @staticmethod
    def _near_found(batch: _Batch, replies: list[Any], start: int, fps: list[int]) -> dict[int, list[int]]:
        """``_near_scanned`` from the module's ``SIMHASH.NEAR`` replies (a bucket's length, then the seqs near the
        fold), one a key of ``batch.near_keys`` from ``replies[start]`` on (``fps``: the fingerprints those keys were
        named for, ``len(tables)`` keys each; one C call when built)."""
        keys, group = batch.near_keys, len(batch.pages[0].keys.tables)
        if _native.speedups is not None:
            found: dict[int, list[int]] = _native.speedups.near_replies(replies, start, keys, group, fps, batch.lengths)
            return found
        folded: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            reply = replies[start + i]
            if not isinstance(reply, list) or not reply:
                raise TypeError(f"SIMHASH.NEAR answered {type(reply).__name__}, not a list of a length and seqs")
            batch.lengths[key] = reply[0]
            for seq in reply[1:]:
                folded.setdefault(seq, []).append(fps[i // group])
        return folded

    async def _candidates(self, batch: _Batch, digests: list[tuple[_Page, Any]],
                          folded: dict[int, list[int]]) -> dict[int, tuple[int, bool]]:
        """seq -> (indexed fingerprint or digest, exact) of the canonical pages within k of a page of the batch: the
        short pages' digests found, and the bucket entries whose fold is within k (``folded``: each such entry's seq,
        and the fingerprints of the pages whose fold it is near), kept when their record's fingerprint in the index
        is."""
        k = self.config.max_distance
        candidates: dict[int, tuple[int, bool]] = {}  # seq -> (indexed fingerprint or digest, exact)
        for page, value in digests:
            if value is not None:
                candidates.setdefault(int.from_bytes(value[:4], "big"), (page.record.fingerprint, True))
        batch.folded.update(folded)
        records = await self._fetch(batch, [seq for seq in folded if seq not in batch.stored])
        for seq, fps in folded.items():
            rec = batch.stored.get(seq) or records.get(seq)
            if rec is None and seq in batch.slot_of:  # its record not written yet (the same moment): left out
                self.counts["unnamed"] += 1
            indexed = rec.indexed_fp if rec is not None else None
            if indexed is not None and any((indexed ^ fp).bit_count() <= k for fp in fps):
                candidates.setdefault(seq, (indexed, False))
        return candidates

    def _restore(self, batch: _Batch, own: dict[int, tuple[_Page, GlobalRecord]],
                 candidates: dict[int, tuple[int, bool]]) -> None:
        placeholders: dict[int, tuple[int, bool]] = {}
        for _, rec in own.values():
            if rec.canonical_seq is not None and rec.canonical_seq not in own:
                placeholders.setdefault(rec.canonical_seq, (0, False))  # its fingerprint: read with its record
        seqs = sorted(set(own) | set(candidates) | set(placeholders))
        batch.placeholders = set(placeholders) - set(candidates)
        entry_of = {seq: n for n, seq in enumerate(seqs)}
        scopes, identities, fps, exact, canonical, distance, indexed = [], [], [], [], [], [], []
        scope = batch.pages[0].record.scope if batch.pages else ""
        for seq in seqs:
            if seq in own:
                page, rec = own[seq]
                scopes.append(page.record.scope)
                identities.append(page.record.key)
                fps.append(rec.fingerprint)
                exact.append(rec.exact)
                member = rec.canonical_seq is not None
                canonical.append(entry_of[rec.canonical_seq] if member else -1)  # type: ignore[index]
                distance.append(rec.distance if member else -1)
                indexed.append(rec.indexed_fp)
                batch.initial[seq] = rec.indexed_fp
            else:
                fp, is_exact = candidates.get(seq) or placeholders[seq]
                scopes.append(scope)
                identities.append(f"\0{seq}")  # a canonical page known by its seq only
                fps.append(fp)
                exact.append(is_exact)
                canonical.append(-1)
                distance.append(-1)
                indexed.append(fp if seq in candidates else None)
        digests = [self._digest_of(own[seq][1]) if seq in own else None for seq in seqs]
        batch.clusterer.restore_many(scopes, identities, fps, exact, canonical, distance, indexed, None, digests)
        batch.clusterer.restore_indexes()
        batch.seq_of = list(seqs)

    @staticmethod
    def _digest_of(rec: GlobalRecord) -> int | None:
        return rec.fingerprint if rec.exact else Codec.digest_of(rec.payload)

    def _decide(self, batch: _Batch, base: dict[str, int]) -> list[Decision]:
        """Step 2: the core's rule, page by page, in batch order (steps 1-4: ``Clusterer.check_many``)."""
        pages = batch.pages
        clusterer = batch.clusterer
        start = len(clusterer)
        scope = pages[0].record.scope  # (one scope a batch)
        records = [page.record for page in pages]
        decisions = clusterer.check_many(
            scope, [r.key for r in records], [r.fingerprint for r in records], [r.exact for r in records],
            [page.index_it for page in pages], [r.digest for r in records], batch.snapshots,
        )
        seq = base[scope]
        for page, decision in zip(pages, decisions):
            if decision.entry == start:  # a new identity (entries are numbered in turn): the seq numbered for it
                batch.seq_of.append(seq)
                batch.slot_of[seq] = (page.bucket, page.fieldname)
                start += 1
            seq += 1
        return decisions

    async def _canonicals(self, batch: _Batch, decisions: list[Decision]) -> dict[int, GlobalRecord]:
        """Step 3: the current records of the canonical pages the verdicts name (seq -> record)."""
        wanted = {batch.seq_of[d.canonical] for d in decisions if d.canonical is not None}
        return {seq: rec for seq, rec in batch.fetched.items() if seq in wanted} | await self._fetch(
            batch, [seq for seq in wanted if seq not in batch.stored and seq not in batch.fetched])

    async def _fetch(self, batch: _Batch, seqs: list[int]) -> dict[int, GlobalRecord]:
        """The records of canonical pages known by their seq: their directory slots (cached), then the records.  A
        cached slot whose record is gone or is another seq's (another worker flushed the scope since, and the seq
        numbers started again) is forgotten and read again from the directory: a verdict never names a page by a
        seq that is not its own."""
        if not seqs:
            return {}
        records, cached = await self._read_records(batch, seqs)
        stale = [seq for seq in cached if seq not in records]
        if stale:
            tag = batch.pages[0].scope.number << 32
            for seq in stale:
                self._cache.pop(tag | seq, None)
                batch.slot_of.pop(seq, None)
            records.update((await self._read_records(batch, stale))[0])
        return records

    async def _read_records(self, batch: _Batch, seqs: list[int]) -> tuple[dict[int, GlobalRecord], list[int]]:
        """``_fetch``'s one pass: the records found (each its seq's own), and the seqs whose slot came from the
        cache."""
        scope_keys = batch.pages[0].keys
        tag = batch.pages[0].scope.number << 32
        unknown, cached = [], []
        for seq in seqs:
            slot = batch.slot_of.get(seq)
            if slot is None and (slot := self._cache.get(tag | seq)) is not None:
                self._cache.move_to_end(tag | seq)
                self.counts["cache_hits"] += 1
                cached.append(seq)
            if slot is None:
                unknown.append(seq)
                self.counts["cache_misses"] += 1
            else:
                batch.slot_of[seq] = slot
        if unknown:
            pipe = self.link.batch()
            places = [scope_keys.directory(seq) for seq in unknown]
            packed_calls(pipe.commands, "GETRANGE", [key for key, _ in places], 1,
                         [(offset, offset + DIR - 1) for _, offset in places])
            for seq, raw in zip(unknown, await pipe.execute()):
                if len(raw) != DIR or raw == bytes(DIR):  # (a slot not written yet reads as zeros)
                    self.counts["unnamed"] += 1  # an entry written in the same moment: left out
                    continue
                slot = (int.from_bytes(raw[:3], "big"), raw[3:])
                batch.slot_of[seq] = slot
                self._remember(tag | seq, slot)
        named = [(seq, slot) for seq in seqs if (slot := batch.slot_of.get(seq)) is not None]
        seqs = [seq for seq, _ in named]
        pipe = self.link.batch()
        packed_calls(pipe.commands, "HGET", [scope_keys.record(bucket) for _, (bucket, _) in named], 1,
                     [fieldname for _, (_, fieldname) in named])
        records = {}
        for seq, value in zip(seqs, await pipe.execute()):
            if value is not None and (rec := parse_record(value)).seq == seq:
                records[seq] = rec
        await self._load_dict(batch, list(records.values()))
        batch.fetched.update(records)
        return records, cached

    async def _load_dict(self, batch: _Batch, records: list[GlobalRecord]) -> None:
        """The scope's payload dictionary, once a record read was written with it (another worker made it)."""
        codec = batch.codec
        if codec.zdict is None and any(Codec.needs_dict(rec.payload) for rec in records):
            codec.zdict = await self.client.hget(batch.pages[0].keys.meta, "zdict")
            if codec.zdict is None:
                raise BackendError(f"simhash: {batch.pages[0].keys.meta!r} has no zdict, but its records need it")

    async def _share_dict(self, batch: _Batch) -> None:
        """Once this worker sampled enough payloads: the scope's dictionary (the first worker's wins)."""
        codec = batch.codec
        if codec.zdict is None and codec.proposed_dict() is not None:
            meta = batch.pages[0].keys.meta
            await self.client.hsetnx(meta, "zdict", codec.proposed_dict())
            codec.zdict = await self.client.hget(meta, "zdict")

    def _remember(self, key: int, slot: tuple[int, bytes]) -> None:
        if self.cache_size <= 0:
            return
        self._cache[key] = slot
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    async def _write(self, batch: _Batch, decisions: list[Decision], canon: dict[int, GlobalRecord]) -> list[Verdict]:
        """Step 4: records, index changes; then the verdicts."""
        clusterer = batch.clusterer
        records: dict[int, tuple[_Page, GlobalRecord]] = {}
        kinds: list[str] = []  # each index command's kind but the appends (sent last), to find the HSETNXs' replies
        appended: list[tuple[int, int]] = []  # (fingerprint, seq) of each page whose entries are appended
        verdicts: list[Verdict] = []
        for page, decision in zip(batch.pages, decisions):
            seq = batch.seq_of[decision.entry]
            old = batch.stored.get(seq)  # (a page of this batch already recorded under it: that record)
            rec = self._record(page, decision, seq, old, batch)
            batch.first_exact.setdefault(seq, old.exact if old is not None else None)
            records[seq] = (page, rec)
            batch.stored[seq] = rec
            verdicts.append(self._verdict(batch, decision, canon, old, batch.snapshots[len(verdicts)]))
        # One round trip: the records and directory slots, then the table entries (on other nodes: another
        # worker may read an entry before its page's record or directory slot is there; ``_fetch`` then leaves
        # it out, a duplicate kept twice at worst).
        first, pipe = self.link.batch(), self.link.batch()
        canonicals = 0
        made: list[str] = []  # directory keys written through the script (full size once it answered)
        if len(self._directories) > 4096:
            self._directories.clear()
        entry_of = {seq: e for e, seq in enumerate(batch.seq_of)}
        keys = batch.pages[0].keys  # (one scope a batch)
        packed_calls(first.commands, "HSET", [keys.record(page.bucket) for page, _ in records.values()], 1,
                     [(page.fieldname, pack_record(rec)) for page, rec in records.values()])
        for seq, (page, rec) in records.items():
            before, now = batch.initial.get(seq), clusterer.indexed[entry_of[seq]]
            if before == now and (before is None or old_exact(batch, seq) == rec.exact):
                continue
            if before is not None:
                canonicals -= 1
                self._unindex(pipe, kinds, keys, seq, before, bool(old_exact(batch, seq)))
            if now is not None:
                canonicals += 1
                dkey, offset = keys.directory(seq)
                slot = page.bucket.to_bytes(3, "big") + page.fieldname
                if dkey in self._directories:
                    first.call(dkey, "SETRANGE", dkey, offset, slot)
                else:
                    first.call(dkey, "EVALSHA", self._directory_sha, 1, dkey, offset, slot, DIR_SPAN * DIR)
                    made.append(dkey)
                self._index(pipe, kinds, keys, seq, now, rec.exact, appended)
        if canonicals:
            meta = batch.pages[0].keys.meta
            first.call(meta, "HINCRBY", meta, "canonicals", canonicals)
        # the table entries last (after any entry removed, which may be from the same bucket): each bucket's expected
        # length after its append, to tell a bucket another worker appended to meanwhile
        bucket_keys, expected = self._appends(pipe, batch, appended)
        written = len(first)
        first.commands += pipe.commands
        results = (await first.execute())[written:]
        self._directories.update(made)
        if not kinds and not appended:
            return verdicts
        await self._races(batch, results[len(results) - len(bucket_keys) :], bucket_keys, expected, appended,
                          [r for r, kind in zip(results, kinds) if kind == "hsetnx"])
        return verdicts

    def _appends(self, pipe: Any, batch: _Batch, appended: list[tuple[int, int]]) -> tuple[list[str], list[int]]:
        """The append of each (fingerprint, seq) of ``appended`` to each of its table buckets, in that order: the
        bucket keys, and each one's expected length after it (``batch.lengths`` grows)."""
        keys = batch.pages[0].keys
        bucket_keys = keys.buckets_many([fp for fp, _ in appended])
        entries = [pack_entry(fp, seq) for fp, seq in appended]  # (the same in every table)
        if self.module:
            tail = (batch.mark, ROOM_SHARE, ROOM_MIN) + ((self.config.max_distance,) if self.append_near else ())
            expected = packed_calls(pipe.commands, "SIMHASH.APPEND", bucket_keys, len(keys.tables), entries, tail,
                                    batch.lengths, ENTRY, sent=self.append_near)
            assert expected is not None
            return bucket_keys, expected
        expected = []
        for i, key in enumerate(bucket_keys):
            batch.lengths[key] = length = batch.lengths.get(key, 0) + ENTRY
            expected.append(length)
            pipe.call(key, "EVALSHA", self._append_sha, 1, key, entries[i // len(keys.tables)], batch.mark)
        return bucket_keys, expected

    def _record(self, page: _Page, decision: Decision, seq: int, old: GlobalRecord | None, batch: _Batch) -> GlobalRecord:
        record, clusterer, e = page.record, batch.clusterer, decision.entry
        canonical = clusterer.canonical[e]
        digest = None if record.exact else clusterer.digest[e]
        payload = batch.codec.encode(
            record.url, record.key, page.keep, record.referer, record.depth, record.text, digest, record.etag,
            record.last_modified, record.canonical_link,
        )
        return GlobalRecord(
            seq, record.fingerprint, record.exact, clusterer.indexed[e] is not None,
            RECORDED_OUTCOMES.index(decision.outcome), clusterer.distance[e],
            batch.seq_of[canonical] if canonical >= 0 else None,
            old.first_seen if old is not None else record.seen, record.seen, payload, clusterer.indexed[e],
        )

    def _index(self, pipe: Any, kinds: list[str], keys: GlobalKeys, seq: int, fp: int, exact: bool,
               appended: list[tuple[int, int]]) -> None:
        """An exact page's ``HSETNX``; a page's table entries wait in ``appended`` (``_appends``)."""
        if exact:
            key = keys.exact(fp)
            pipe.call(key, "HSETNX", key, fp.to_bytes(8, "big"), seq.to_bytes(4, "big"))
            kinds.append("hsetnx")
            return
        appended.append((fp, seq))

    def _unindex(self, pipe: Any, kinds: list[str], keys: GlobalKeys, seq: int, fp: int, exact: bool) -> None:
        raw = seq.to_bytes(4, "big")
        if exact:
            key = keys.exact(fp)
            pipe.call(key, "EVALSHA", self._unset_sha, 1, key, fp.to_bytes(8, "big"), raw)
            kinds.append("eval")
            return
        for key in keys.buckets(fp):
            pipe.call(key, "EVALSHA", self._remove_sha, 1, key, raw)
            kinds.append("eval")

    async def _races(self, batch: _Batch, append_replies: list[Any], bucket_keys: list[str], expected: list[int],
                     appended: list[tuple[int, int]], exact_replies: list[Any]) -> None:
        """Counts the canonical pages this batch made while another worker made a near-duplicate one canonical: an
        entry near the page's fold in a bucket that grew since the read, neither the batch's own nor one the read
        found (``folded``: a fold within k of the page's whose fingerprint is not, there before).  ``bucket_keys``
        and ``expected``: each append's bucket and its expected length, each page of ``appended`` (fingerprint,
        seq) in turn.  A ``SIMHASH.APPEND`` of ``APPEND_NEAR_VERSION`` replies a changed bucket's entries near the
        page's fold itself (``SIMHASH.NEAR``'s reply); otherwise they are read here, one more round trip."""
        self.counts["races"] += sum(1 for r in exact_replies if not r)
        tables = len(batch.pages[0].keys.tables)
        changed = list(compress(range(len(expected)), map(ne, append_replies, expected)))  # (a C loop: ~3 a page)
        if not changed:
            return
        suspects = [(bucket_keys[i], *appended[i // tables]) for i in changed]
        k = self.config.max_distance
        if all(isinstance(append_replies[i], list) for i in changed):  # (the appends replied them)
            near = [append_replies[i][1:] for i in changed]
        else:
            pipe = self.link.batch()
            for key, fp, _ in suspects:
                if self.module:
                    pipe.call(key, "SIMHASH.NEAR", key, fold(fp), k)
                else:
                    pipe.call(key, "GET", key)
            datas = await pipe.execute()
            near = ([reply[1:] for reply in datas] if self.module else
                    near_entries_many(datas, [fp for _, fp, _ in suspects], k))
        known = set(batch.seq_of) | batch.folded
        raced = set()
        for (_key, _fp, seq), seqs in zip(suspects, near):
            if any(s not in known for s in seqs):
                raced.add(seq)
        self.counts["races"] += len(raced)

    def _verdict(self, batch: _Batch, decision: Decision, canon: dict[int, GlobalRecord],
                 old: GlobalRecord | None, snapshot: tuple[int | None, int] | None) -> Verdict:
        if decision.previous_fingerprint is None:
            if decision.canonical is None:
                return _PLAIN[decision.outcome]  # (a new page, unique: most of them)
            previous: dict[str, Any] = {}
        else:
            previous = dict(previous_fingerprint=decision.previous_fingerprint,
                            previous_seen=(old.last_seen or None) if old is not None else None)
        if decision.canonical is None:
            return Verdict(decision.outcome, **previous)
        seq = batch.seq_of[decision.canonical]
        rec = batch.stored.get(seq) or canon.get(seq)
        url = identity = ""
        link = None
        assert snapshot is not None
        fp = snapshot[0] if snapshot[0] is not None else snapshot[1]
        if rec is not None:
            fieldname = batch.slot_of[seq][1]
            url, identity, *_, link = batch.codec.decode_all(rec.payload, fieldname)
            if seq in batch.placeholders:  # known from a member's record only: the canonical's own record tells
                fp = rec.indexed_fp if rec.indexed_fp is not None else rec.fingerprint
        return Verdict(
            decision.outcome, canonical_url=url, distance=decision.distance,
            canonical_fingerprint=fp,
            canonical_identity=identity or url, one_edit=is_one_edit(decision.distance, self.config.max_distance),
            canonical_link=link, **previous,
        )

    # ------------------------------------------------------------ export
    async def index_size(self) -> int:
        """The canonical pages of every scope the key's registry names (every worker's); 0 when a node does not
        answer (``simhash/redis/unread/index_size``, logged once: the crawl closes normally)."""
        try:
            sids = [scope_id(scope) for scope in await self._registered()]
            return sum(int(value or 0) for value in await self._meta_fields(sids, "canonicals"))
        except Exception as exc:  # noqa: BLE001 - reported once, the crawl closes normally
            self._close_logged = close_failure(self.stats, self.settings, "index_size", exc, self._close_logged)
            return 0

    async def _records_of(self, sids: set[str], limit: int = 0) -> dict[str, dict[int, tuple[bytes, GlobalRecord]]]:
        """The records of the scopes ``sids`` (scope id -> seq -> (field, record)), read from every node in one
        SCAN for them all; at most ``limit`` records (0: all).  Through ``node_link``, as every read at close: a
        node gone makes redis-py's client read the slot map again and drop its node objects unclosed."""
        out: dict[str, dict[int, tuple[bytes, GlobalRecord]]] = {}
        count = 0
        async for key in self.link.scan(records_pattern(self.prefix)):
            sid = sid_of(key, self.prefix)
            if sid not in sids:
                continue
            records = out.setdefault(sid, {})
            flat = await self._one(key.decode("utf-8", "surrogatepass"), "HGETALL", key)
            for fieldname, value in zip(flat[::2], flat[1::2]):
                rec = parse_record(value)
                records[rec.seq] = (fieldname, rec)
                count += 1
            if limit and count >= limit:
                break
        return out

    async def members(self) -> list[ClusterMember]:
        """Every page recorded in every scope the key's registry names (every worker's: the scopes this worker
        checked are more than it keeps, ``MAX_SCOPES``), scope by scope (sorted), in first-check order; none when a
        node does not answer (``simhash/redis/unread/members``, logged once: the crawl closes normally)."""
        try:
            return await self.read_members()
        except Exception as exc:  # noqa: BLE001 - reported once, the crawl closes normally
            self._close_logged = close_failure(self.stats, self.settings, "members", exc, self._close_logged)
            return []

    async def read_members(self) -> list[ClusterMember]:
        """``members()``, but a node that does not answer raises (``scrapy simhash report``: an error, not an
        empty report)."""
        members = []
        scopes = [(scope_id(scope), scope) for scope in await self._registered()]
        found = await self._records_of({sid for sid, _ in scopes})
        scopes = [(sid, scope) for sid, scope in scopes if sid in found]
        zdicts = await self._meta_fields([sid for sid, _ in scopes], "zdict")
        for (sid, scope), zdict in zip(scopes, zdicts):
            records = found[sid]
            codec = Codec(zdict)
            decoded = {seq: codec.decode_all(rec.payload, fieldname) for seq, (fieldname, rec) in records.items()}
            for seq in sorted(records):
                rec = records[seq][1]
                canonical_url = decoded[rec.canonical_seq][0] if rec.canonical_seq in decoded else None
                members.append(self._member(scope, decoded[seq], rec, canonical_url))
        return members

    @staticmethod
    def _member(scope: str, decoded: tuple[Any, ...], rec: GlobalRecord, canonical_url: str | None) -> ClusterMember:
        url, identity, referer, depth, text, digest, etag, last_modified, link = decoded
        return ClusterMember(
            url=url, fingerprint=rec.fingerprint, scope=scope, canonical_url=canonical_url,
            distance=rec.distance if rec.canonical_seq is not None else None, referer=referer, depth=depth,
            text=text, indexed=rec.indexed, identity="" if identity == url else identity, exact=rec.exact,
            outcome=RECORDED_OUTCOMES[rec.outcome], first_seen=rec.first_seen, last_seen=rec.last_seen,
            digest=rec.fingerprint if rec.exact else digest, etag=etag, last_modified=last_modified,
            canonical_link=link,
        )

    async def load_extra(self, name: str) -> bytes | None:
        """A named blob (``save_extra``); ``None`` when a node does not answer and ``SIMHASH_REDIS_FAIL_OPEN``
        (a 304's page is then downloaded again: ``simhash/replay/refetched``)."""
        try:
            value = await self._one(extra_key(self.prefix, name), "GET", extra_key(self.prefix, name))
        except (OSError, asyncio.TimeoutError, RedisError, ReplyError) as exc:
            self._extra_failed(exc)
            return None
        return None if value is None else bytes(value)

    async def save_extra(self, name: str, data: bytes) -> None:
        try:
            await self._one(extra_key(self.prefix, name), "SET", extra_key(self.prefix, name), data)
        except (OSError, asyncio.TimeoutError, RedisError, ReplyError) as exc:
            self._extra_failed(exc)

    async def _one(self, key: str, *args: Any, skip_down: bool = False) -> Any:
        """One command through ``node_link`` (a lookup a request: redis-py's cluster client costs several times the
        CPU), or the client before ``open``; ``skip_down``: a node that failed its last call is not asked
        (``NodeLink.exchange``)."""
        if self.link is None:
            return await self.client.execute_command(*args)
        pipe = self.link.batch(skip_down)
        pipe.call(key, *args)
        (reply,) = await pipe.execute()
        return reply

    def _extra_failed(self, exc: BaseException) -> None:
        if not self.settings.fail_open:
            raise BackendError(f"Redis error at {self.settings.describe()}: {type(exc).__name__}: "
                               f"{redact(str(exc), self.settings.secrets)}") from None
        self._unreachable(exc, 0)

    def publish(self) -> None:
        """The worker's counts as stats (``simhash/redis/global/*``)."""
        if self.stats is None:
            return
        for name, value in self.counts.items():
            self.stats.set_value(f"simhash/redis/global/{name}", value)

    async def close(self) -> None:
        self.publish()
        if self.link is not None:
            await self.link.close()
            self.link = None
        if self.client is not None:
            await self.client.aclose()
            self.client = None
