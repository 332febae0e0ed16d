"""The Redis key layout of the simhash backend, and the binary formats in it.

``P`` is the key prefix (``SIMHASH_REDIS_KEY`` with ``%(spider)s`` expanded,
``myspider:simhash`` by default).  ``G`` is ``{P}`` (one hash slot for the
global keys) and ``S`` is ``P:{<scope id>}`` (one hash slot per scope, so a
Redis Cluster spreads the scopes of one spider over its nodes; the scope id
is 12 hex digits of a BLAKE2b hash of the scope).  When ``P`` already holds a
hash tag, every key shares it (one slot)::

    G:meta          HASH   layout, created, seq (identities numbered in first-check
                           order), bucket_bits
    G:workers       ZSET   worker id -> last heartbeat (server time, seconds)
    G:scopes        SET    the scopes that have keys
    G:extra:<name>  STRING load_extra / save_extra
    S:meta          HASH   layout, scope, canonicals (count), records (count), zdict,
                           epoch (a random token made with the meta: the scope's
                           incarnation), seq (Redis Cluster only)
    S:log           STRING the canonical log: 24-byte entries, appended only.
                           add:    op 1 (simhash) or 3 (exact digest), fingerprint (8),
                                   seq (4: ties go to the lowest), identity bucket (3),
                                   identity field (8)
                           key:    op 4, one one-edit key of the add entry before it
                                   (``core.features.edits``): key (8), seq (4), position of that
                                   add entry (4), zeros; removed with it
                           remove: op 2, position of the removed add entry (4), zeros
    S:i:<bucket>    HASH   one record per identity: field = 8 bytes of the identity's
                           hash, value = record (below); <bucket> is hex of the hash's
                           first bucket_bits bits
    S:positions     HASH   with SIMHASH_KEEP_PER_CLUSTER > 1: members counted per cluster
                           (field = anchor identity) and each member's position (field =
                           anchor identity, NUL, identity); ``position.lua``

With ``SIMHASH_REDIS_SHARDS = N`` > 1 (layout string ``shards=N``) the buckets
move to N shards, one hash slot each, ``R = P:{<scope id>.<n>}`` with
n = bucket % N, so a Redis Cluster spreads one scope over its nodes::

    R:i:<bucket>    HASH   as S:i:<bucket>
    R:claims        HASH   identities being checked: 3-byte bucket + field -> expiry
                           (>d, ms of server time) + worker id (claim.lua, write.lua);
                           "#epoch": the epoch of the scope whose records the shard holds

A check then takes three steps: claim.lua on each shard claims the batch's
identities and reads their records; check.lua on the scope's slot decides
(the log: the one serialisation point of near-duplicate decisions) from the
records passed in and returns the new ones; write.lua on each shard writes
them back, releases the claims and reads the canonical pages' records the
verdicts name (their payload: URL, ...).

Identity record: seq (>I4), fingerprint (8), flags (1: exact 1, indexed 2,
member 4, previous 8, last-seen 16, outcome << 5), distance (1), [own log
position >I4 if indexed], [canonical log position >I4 if member], [previous
fingerprint (8)], first seen (>d), [last seen (>d)], payload: raw DEFLATE of
see ``Codec`` below.

Each worker keeps a replica of ``S:log`` (``replica.py``); the check script
only scans the entries appended since the worker's last sync, so its work does
not grow with the index.

Lost data.  A replica belongs to one incarnation of its scope (``S:meta``'s
``epoch``).  When Redis restarted empty (or the keys were flushed or expired)
the script finds another epoch, or none, or a log shorter than the replica:
it changes nothing and answers ``SIMHASH_RESET``; the worker drops the replica,
counts the scope's pages as lost (``simhash/redis/lost_pages``), logs one
ERROR line and checks the batch again against the scope made anew.  With
shards, a shard that lost its records lacks its ``#epoch`` marker: the scope is
deleted (``drop.lua``) and made anew as a whole.  ``epoch`` and ``#epoch`` are
additions, not a change of layout (``LAYOUT_VERSION`` stays): a scope made
before them has no epoch and is read as the epoch "" by every worker.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core import _native
from ...core.cluster.clustering import RECORDED_OUTCOMES
from ...core.settings.settings import setting_names
from ...core.store.store import feature_setting

if TYPE_CHECKING:
    from ...core.settings.config import SimhashConfig

#: Version of the key layout (part of the layout string every worker must agree on).
#: 4: the outcome "edited", and payloads carry the content digest and the HTTP validators.
LAYOUT_VERSION = 4
ENTRY = 24
OP_ADD, OP_REMOVE, OP_EXACT, OP_EDIT_KEY = 1, 2, 3, 4
#: The distance a worker's replica gives a canonical page found by a one-edit key (more than any k:
#: a page within k always wins); the check script replaces it with the real distance.
EDIT_MATCH = 255
F_EXACT, F_INDEXED, F_MEMBER, F_PREV, F_LAST = 1, 2, 4, 8, 16
#: An identity record's flags byte holds its outcome's code (``core.cluster.clustering.RECORDED_OUTCOMES``) from this bit up.
OUTCOME_SHIFT = 5
#: An identity record's outcome by its code.
OUTCOMES = tuple(outcome.value for outcome in RECORDED_OUTCOMES)
#: The parts of one verdict in the check script's reply (its "has" byte; ``protocol.parse_verdicts``): the
#: canonical page, its payload, the previous version, the new record (shards), the canonical's bucket (shards).
PART_CANONICAL, PART_PAYLOAD, PART_PREVIOUS, PART_RECORD, PART_BUCKET = 1, 2, 4, 8, 16
#: A flag of the "has" byte without a part: the page's hint (``mirror.py``) made it a near-duplicate.
PART_HINT = 32
#: A page's mode in the check script's argument (``protocol.pack_page``): index it if unique; a short page.
MODE_INDEX, MODE_EXACT = 1, 2
#: ... a page with steps 5-7 data (``mirror.py``): its containment hint and extras record follow its one-edit keys.
MODE_EXTRA = 4
#: The log position of "no page" in a containment hint and an extras record (``mirror.py``).
NO_POSITION = 0xFFFFFFFF
#: Set in an identity record's distance byte (distances are 0..64): step 7 (sentence containment, the page's
#: hint) made it a near-duplicate; reports then name the rule ``containment`` (``Record.containment``).
D_CONTAINMENT = 0x80
_HEAD = struct.Struct(">I8sBB")
_I4 = struct.Struct(">I")
_D = struct.Struct(">d")
#: Preset dictionary of the payload compression (part of the layout: never change it within a version).
ZDICT = (
    b'"https://www.http://www..html.htm.php.aspx/index?id=&page=/category/article/news/product/blog/tag/'
    b'search?q=-20.com/.org/.net/.de/.co.uk/.fr/", null, '
)
#: The config field each part of a layout string holds (``layout_string``); its setting's name is the table's.
_FIELD_OF = {"k": "max_distance", "features": "features", "text": "text_mode", "shards": "redis.shards"}


def _setting_of(part: str) -> str:
    """The setting behind a part of the layout string, for messages."""
    return setting_names(_FIELD_OF[part]) if part in _FIELD_OF else "the simhash-scrapy version (key layout)"


def layout_string(config: SimhashConfig, shards: int = 1) -> str:
    """What every worker sharing a key must agree on (the block layout is each worker's own business)."""
    text = f"v={LAYOUT_VERSION} k={config.max_distance} features={config.features.signature()} text={config.text_mode}"
    # Where the identity records live; absent (one shard) in layouts written before shards existed.
    return text + (f" shards={shards}" if shards > 1 else "")


def _layout_parts(layout: str) -> dict[str, str]:
    """A layout string's ``name=value`` items (``shards`` is 1 when absent: layouts before shards)."""
    return {"shards": "1", **dict(item.split("=", 1) for item in layout.split() if "=" in item)}


def layout_shards(layout: str) -> int:
    """The ``shards=`` of a layout string (1 when absent)."""
    return int(_layout_parts(layout)["shards"])


def layout_max_distance(layout: str) -> int | None:
    """The ``k=`` of a layout string (the SIMHASH_MAX_DISTANCE of the crawls that wrote the key), if any."""
    k = _layout_parts(layout).get("k", "")
    return int(k) if k.isdigit() else None


def layout_mismatch(found: str, wanted: str, key: str) -> str:
    have, want = _layout_parts(found), _layout_parts(wanted)
    for name in ("v", "k", "features", "text", "shards"):
        if have.get(name) != want.get(name):
            setting = _setting_of(name)
            if name == "features" and name in have:
                setting = feature_setting(have[name], want[name])
            return (
                f"Redis key {key!r} holds fingerprints made with {name}={have.get(name)} ({setting}), but this "
                f"crawl uses {name}={want.get(name)}. Fingerprints made with different settings cannot be "
                f"compared, so they are never mixed: use the same settings on every worker, or another "
                f"SIMHASH_REDIS_KEY, or start afresh with SIMHASH_REDIS_FLUSH_ON_START = True."
            )
    return f"Redis key {key!r} layout {found!r} differs from this crawl's {wanted!r}"


def bucket_bits_for(capacity: int) -> int:
    """Identity buckets for ``capacity`` identities per scope: about 64 identities per bucket, 2**4..2**24."""
    bits = 4
    while bits < 24 and (capacity >> bits) > 64:
        bits += 1
    return bits


class Keys:
    """Key names of one prefix."""

    def __init__(self, prefix: str, cluster: bool = False, shards: int = 1) -> None:
        self.prefix = prefix
        self.shards = shards
        tagged = "{" in prefix and "}" in prefix[prefix.index("{") + 1 :]
        self.tagged = tagged
        #: One sequence counter for all scopes (first-check order across scopes), unless the
        #: scopes are spread over a Redis Cluster: then one counter per scope.
        self.global_seq = tagged or not cluster
        g = prefix if tagged else "{" + prefix + "}"
        self.meta, self.workers, self.scopes = f"{g}:meta", f"{g}:workers", f"{g}:scopes"
        self._extra = f"{g}:extra:"
        self._scopes: dict[str, ScopeKeys] = {}

    def extra(self, name: str) -> str:
        return self._extra + name

    def scope(self, scope: str) -> ScopeKeys:
        keys = self._scopes.get(scope)
        if keys is None:
            if len(self._scopes) > 100_000:
                self._scopes.clear()
            sid = hashlib.blake2b(scope.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
            base = f"{self.prefix}:{sid}" if self.tagged else f"{self.prefix}:{{{sid}}}"
            shard_bases: tuple[str, ...] = ()
            if self.shards > 1:  # one hash slot per shard: "P:{<scope id>.<shard>}"
                shard_bases = tuple(
                    f"{self.prefix}:{sid}.{n}" if self.tagged else f"{self.prefix}:{{{sid}.{n}}}"
                    for n in range(self.shards)
                )
            keys = self._scopes[scope] = ScopeKeys(scope, base, shard_bases)
        return keys


@dataclass(frozen=True)
class ScopeKeys:
    scope: str
    base: str
    #: With SIMHASH_REDIS_SHARDS > 1, the bases of the shards holding the identity records
    #: (bucket b in shard b % shards); empty: the records live beside the log.
    shard_bases: tuple[str, ...] = ()

    @property
    def meta(self) -> str:
        return f"{self.base}:meta"

    @property
    def log(self) -> str:
        return f"{self.base}:log"

    @property
    def extras(self) -> str:
        """What steps 5-7 need of the scope's pages (``mirror.py``): one record a page that reached step 7."""
        return f"{self.base}:extras"

    @property
    def positions(self) -> str:
        """Members' positions in their clusters (``position.lua``, with ``SIMHASH_KEEP_PER_CLUSTER`` > 1)."""
        return f"{self.base}:positions"

    @property
    def bucket_prefix(self) -> str:
        return f"{self.base}:i:"

    def bucket(self, number: int) -> str:
        base = self.shard_bases[self.shard_of(number)] if self.shard_bases else self.base
        return f"{base}:i:{number:x}"

    def shard_of(self, number: int) -> int:
        return number % len(self.shard_bases) if self.shard_bases else 0

    def claims(self, shard: int) -> str:
        """(Shards only) identities being checked: field -> claim (worker, expiry), in the shard's slot."""
        return f"{self.shard_bases[shard]}:claims"

    def bucket_prefixes(self) -> list[str]:
        """Prefixes of every identity bucket key of the scope (one per shard)."""
        return [f"{base}:i:" for base in self.shard_bases] if self.shard_bases else [self.bucket_prefix]


def identity_slot(scope: str, identity: str, bucket_bits: int) -> tuple[int, bytes, bytes]:
    """``(bucket number, 8-byte field, identity bytes to keep)`` of an identity in its scope.

    A 40-digit lowercase hex identity (Scrapy's request fingerprint, already a
    SHA-1) is used as its own hash and kept as the 12 bytes the bucket and field
    do not hold; any other identity is hashed and kept in the payload.
    """
    if len(identity) == 40:
        try:
            raw = bytes.fromhex(identity)
        except ValueError:
            raw = b""
        if raw and raw.hex() == identity:
            return int.from_bytes(raw[:4], "big") >> (32 - bucket_bits), raw[4:12], raw[:4] + raw[12:]
    digest = hashlib.blake2b(
        scope.encode("utf-8", "surrogatepass") + b"\0" + identity.encode("utf-8", "surrogatepass"), digest_size=12
    ).digest()
    return int.from_bytes(digest[:4], "big") >> (32 - bucket_bits), digest[4:], b""


# ---------------------------------------------------------------- payloads
_K_SCOPE_DICT, _K_HEX_IDENTITY, _K_DIGEST = 1, 2, 4
_WBITS = -12
#: ``json.dumps(values, ensure_ascii=False, separators=(",", ":"))``, made once: ``dumps`` with arguments makes an
#: encoder a call (4.4 µs a payload against 2.1 here).
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: The string escaper ``_JSON`` uses (the C one when built).
_QUOTE = json.encoder.encode_basestring


def json_list(values: list[Any]) -> str:
    """``_JSON.encode(values)`` for a list of str, None and int, the same text (tested), in about 0.9 µs against
    2.2 (no encoder made a call); any other value goes through ``_JSON``."""
    parts = []
    for value in values:
        kind = type(value)
        if kind is str:
            parts.append(_QUOTE(value))
        elif value is None:
            parts.append("null")
        elif kind is int:
            parts.append(int.__repr__(value))
        else:
            return _JSON.encode(values)
    return "[" + ",".join(parts) + "]"
#: Payloads sampled before a scope's compression dictionary is made.
DICT_SAMPLES = 32


def _primed(zdict: bytes) -> Any:
    return zlib.compressobj(6, zlib.DEFLATED, _WBITS, 1, zlib.Z_DEFAULT_STRATEGY, zdict)


@functools.lru_cache(maxsize=1)
def _preset_primed() -> Any:
    """The compressor primed with ``ZDICT``, one for every codec (~25 kB of zlib state: a codec each was ~25 kB a
    scope, with thousands of identity scopes)."""
    return _primed(ZDICT)


class Codec:
    """Payloads of one scope: a kind byte, [12 identity bytes], [the content digest, 8 bytes, uncompressed:
    ``check.lua`` compares it to tell "unchanged" from "edited"], then raw DEFLATE of the JSON list
    ``[url, identity or null, referer, depth, text, etag, last_modified, rel=canonical URL]`` (trailing nulls
    left out) with the scope's dictionary (``S:meta`` ``zdict``, made from the first pages of the scope by
    whichever worker gets there first) or ``ZDICT``."""

    def __init__(self, zdict: bytes | None = None) -> None:
        self.zdict = zdict or None
        self.samples: list[bytes] = []
        #: A compressor primed with the dictionary in use (the dictionary, the compressor): each payload
        #: compresses with a copy of it, the same bytes as a new one's, at half the cost.
        self._primed: tuple[bytes, Any] | None = None

    def encode(self, url: str, identity: str, identity_bytes: bytes, referer: str | None, depth: int | None,
               text: str | None, digest: int | None = None, etag: str | None = None,
               last_modified: str | None = None, canonical_link: str | None = None) -> bytes:
        shown = None if identity_bytes or not identity else identity  # (a hex identity: its bytes, in the head)
        kind = (_K_HEX_IDENTITY if identity_bytes else 0) | (0 if digest is None else _K_DIGEST)
        if self.zdict is not None:
            kind |= _K_SCOPE_DICT
            if self.samples:
                self.samples = []  # (not needed any more)
            if _native.speedups is not None:  # (one C call: the lines below are its twin)
                payload: bytes = _native.speedups.encode_payload(
                    self._scope_primed(), kind, identity_bytes, digest, url, shown, referer, depth, text, etag,
                    last_modified, canonical_link)
                if payload is not NotImplemented:
                    return payload
        values: list[Any] = [url, shown, referer, depth, text, etag, last_modified, canonical_link]
        while len(values) > 1 and values[-1] is None:
            values.pop()
        raw = json_list(values).encode("utf-8", "surrogatepass")
        if digest is not None:
            identity_bytes += digest.to_bytes(8, "big")
        if self.zdict is None and len(self.samples) < DICT_SAMPLES:
            self.samples.append(raw[:512])
        packer = (self._scope_primed() if self.zdict is not None else _preset_primed()).copy()
        return bytes([kind]) + identity_bytes + packer.compress(raw) + packer.flush()

    def _scope_primed(self) -> Any:
        zdict = self.zdict or ZDICT
        primed = self._primed
        if primed is None or primed[0] is not zdict:
            primed = self._primed = zdict, _primed(zdict)
        return primed[1]

    def proposed_dict(self) -> bytes | None:
        """A dictionary from the sampled payloads, once there are enough of them."""
        return b"".join(self.samples)[-(1 << 12) :] if len(self.samples) >= DICT_SAMPLES else None

    @staticmethod
    def needs_dict(payload: bytes) -> bool:
        return bool(payload and payload[0] & _K_SCOPE_DICT)

    @staticmethod
    def _head(payload: bytes) -> tuple[int, bytes | None, int | None, int]:
        """A payload's uncompressed head: its kind, its 12 identity bytes (a hex identity's, else ``None``), its
        content digest (``None``: none, or a head cut short), and where its DEFLATE data starts."""
        kind, start = payload[0], 1
        identity = digest = None
        if kind & _K_HEX_IDENTITY:
            identity, start = payload[1:13], 13
        if kind & _K_DIGEST:
            if len(payload) >= start + 8:
                digest = int.from_bytes(payload[start : start + 8], "big")
            start += 8
        return kind, identity, digest, start

    @staticmethod
    def digest_of(payload: bytes) -> int | None:
        """The content digest ``payload`` records (``decode_all``'s ``digest``; ``None``: none), read from its head
        (uncompressed, where ``check.lua`` reads it too): nothing decompressed."""
        return Codec._head(payload)[2] if payload else None

    def decode(self, payload: bytes, field: bytes) -> tuple[str, str, str | None, int | None, str | None]:
        """``(url, identity ("" when it is the URL), referer, depth, text)``; ``field`` rebuilds a hex identity."""
        return self.decode_all(payload, field)[:5]

    def decode_all(self, payload: bytes, field: bytes) -> tuple[Any, ...]:
        """``decode``'s values, then ``digest`` (``None``: not recorded), ``etag``, ``last_modified`` and the
        rel=canonical URL the page names (``None`` in payloads written without one)."""
        kind, extra, digest, p = self._head(payload)
        hex_identity = None if extra is None else (extra[:4] + field + extra[4:]).hex()
        if kind & _K_SCOPE_DICT and self.zdict is None:
            raise ValueError("payload compressed with the scope dictionary, which is not loaded")
        unpacker = zlib.decompressobj(_WBITS, self.zdict if kind & _K_SCOPE_DICT else ZDICT)  # type: ignore[arg-type]
        values = json.loads((unpacker.decompress(payload[p:]) + unpacker.flush()).decode("utf-8", "surrogatepass"))
        values += [None] * (8 - len(values))
        url, identity, referer, depth, text, etag, last_modified, link = values[:8]
        if hex_identity is not None:
            identity = hex_identity
        return url, identity or "", referer, depth, text, digest, etag, last_modified, link if isinstance(link, str) else None


@dataclass
class Record:
    """An identity record as stored in ``S:i:<bucket>``."""

    seq: int
    fingerprint: int
    exact: bool
    outcome: str
    distance: int
    own: int | None
    canonical: int | None
    previous: int | None
    first_seen: float
    last_seen: float
    payload: bytes
    #: Found by step 7 (``D_CONTAINMENT``): the report's rule is ``containment``, whatever the distance.
    containment: bool = False


def parse_record(value: bytes) -> Record:
    seq, fp, flags, distance = _HEAD.unpack_from(value)
    p = _HEAD.size
    own = canonical = previous = None
    if flags & F_INDEXED:
        own = _I4.unpack_from(value, p)[0]
        p += 4
    if flags & F_MEMBER:
        canonical = _I4.unpack_from(value, p)[0]
        p += 4
    if flags & F_PREV:
        previous = int.from_bytes(value[p : p + 8], "big")
        p += 8
    first = last = _D.unpack_from(value, p)[0]
    p += 8
    if flags & F_LAST:
        last = _D.unpack_from(value, p)[0]
        p += 8
    return Record(
        seq, int.from_bytes(fp, "big"), bool(flags & F_EXACT), OUTCOMES[flags >> OUTCOME_SHIFT],
        distance & ~D_CONTAINMENT, own, canonical, previous, first, last, value[p:], bool(distance & D_CONTAINMENT),
    )


def pack_seen(seen: float) -> bytes:
    return _D.pack(float(seen))


def unpack_seen(data: bytes) -> float:
    return float(_D.unpack(data)[0])


def parse_log(data: bytes, start: int) -> list[tuple[int, int, int, int, bytes]]:
    """``(position, op, fingerprint or removed position, bucket, field)`` of each log entry
    (a one-edit key entry: ``(position, op, key, position of its add entry, b"")``)."""
    out = []
    for i in range(0, len(data) - ENTRY + 1, ENTRY):
        op = data[i]
        if op == OP_REMOVE:
            out.append((start + i // ENTRY, op, _I4.unpack_from(data, i + 1)[0], 0, b""))
        elif op == OP_EDIT_KEY:
            key, owner = int.from_bytes(data[i + 1 : i + 9], "big"), _I4.unpack_from(data, i + 13)[0]
            out.append((start + i // ENTRY, op, key, owner, b""))
        else:
            out.append((
                start + i // ENTRY, op, int.from_bytes(data[i + 1 : i + 9], "big"),
                int.from_bytes(data[i + 13 : i + 16], "big"), data[i + 16 : i + 24],
            ))
    return out


def pack_record(
    seq: int, fingerprint: int, exact: bool, outcome: str, distance: int, own: int | None, canonical: int | None,
    previous: int | None, first_seen: float, last_seen: float, payload: bytes, containment: bool = False,
) -> bytes:
    """An identity record, byte for byte as ``check.lua`` writes it (bulk loads, tests)."""
    flags = OUTCOMES.index(outcome) << OUTCOME_SHIFT | (F_EXACT if exact else 0)
    parts = [b""]
    if own is not None:
        flags |= F_INDEXED
        parts.append(_I4.pack(own))
    if canonical is not None:
        flags |= F_MEMBER
        parts.append(_I4.pack(canonical))
    if previous is not None:
        flags |= F_PREV
        parts.append(previous.to_bytes(8, "big"))
    parts.append(_D.pack(first_seen))
    if _D.pack(last_seen) != _D.pack(first_seen):
        flags |= F_LAST
        parts.append(_D.pack(last_seen))
    parts[0] = _HEAD.pack(seq, fingerprint.to_bytes(8, "big"), flags, distance | (D_CONTAINMENT if containment else 0))
    parts.append(payload)
    return b"".join(parts)


# ------------------------------------------------------------ Lua scripts
def lua_constants() -> str:
    """The numbers the Lua scripts share with this module, as one line of Lua ``local`` declarations.

    ``backend.lua()`` puts this line before every script it loads, so no script declares them by hand: the log's
    entry size and op codes, the record flags and the outcome codes (``core.cluster.clustering.RECORDED_OUTCOMES``, by
    name: ``UNIQUE``, ``NEAR_DUPLICATE``...), the one-edit match distance, the payload kinds and the parts of
    the check script's reply.  (A script's line numbers in Redis errors are one more than in its file.)
    """
    values: dict[str, int] = {
        "ENTRY": ENTRY, "EDIT_MATCH": EDIT_MATCH,
        "OP_ADD": OP_ADD, "OP_REMOVE": OP_REMOVE, "OP_EXACT": OP_EXACT, "OP_EDIT_KEY": OP_EDIT_KEY,
        "F_EXACT": F_EXACT, "F_INDEXED": F_INDEXED, "F_MEMBER": F_MEMBER, "F_PREV": F_PREV, "F_LAST": F_LAST,
        "MODE_INDEX": MODE_INDEX, "MODE_EXACT": MODE_EXACT, "MODE_EXTRA": MODE_EXTRA, "NO_POSITION": NO_POSITION, "D_CONTAINMENT": D_CONTAINMENT, "OUTCOME_SHIFT": OUTCOME_SHIFT,
        **{outcome.name: code for code, outcome in enumerate(RECORDED_OUTCOMES)},
        "K_SCOPE_DICT": _K_SCOPE_DICT, "K_HEX_IDENTITY": _K_HEX_IDENTITY, "K_DIGEST": _K_DIGEST,
        "PART_CANONICAL": PART_CANONICAL, "PART_PAYLOAD": PART_PAYLOAD, "PART_PREVIOUS": PART_PREVIOUS,
        "PART_RECORD": PART_RECORD, "PART_BUCKET": PART_BUCKET, "PART_HINT": PART_HINT,
    }  # fmt: skip
    return f"local {', '.join(values)} = {', '.join(str(v) for v in values.values())}\n"
