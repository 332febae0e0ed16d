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
    S:meta          HASH   layout, scope, canonicals (count), seq (Redis Cluster only)
    S:log           STRING the canonical log: 20-byte entries, appended only.
                           add:    op 1 (simhash) or 3 (exact digest), fingerprint (8),
                                   identity bucket (3), identity field (8)
                           remove: op 2, position of the removed add entry (4), zeros
    S:i:<bucket>    HASH   one record per identity: field = 8 bytes of the identity's
                           hash, value = record (below); <bucket> is hex of the hash's
                           first bucket_bits bits

Identity record: seq (>I4), fingerprint (8), flags (1: exact 1, indexed 2,
member 4, previous 8, last-seen 16, outcome << 5), distance (1), [own log
position >I4 if indexed], [canonical log position >I4 if member], [previous
fingerprint (8)], first seen (>d), [last seen (>d)], payload: raw DEFLATE of
``[url, identity or null (= url), referer, depth, text]`` as JSON with a fixed
dictionary of common URL parts.

Each worker keeps a replica of ``S:log`` (``replica.py``); the check script
only scans the entries appended since the worker's last sync, so its work does
not grow with the index.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...config import SimhashConfig

#: Version of the key layout (part of the layout string every worker must agree on).
LAYOUT_VERSION = 2
ENTRY = 20
OP_ADD, OP_REMOVE, OP_EXACT = 1, 2, 3
F_EXACT, F_INDEXED, F_MEMBER, F_PREV, F_LAST = 1, 2, 4, 8, 16
OUTCOMES = ("unique", "near_duplicate", "unchanged", "changed")
_HEAD = struct.Struct(">I8sBB")
_I4 = struct.Struct(">I")
_D = struct.Struct(">d")
#: Preset dictionary of the payload compression (part of the layout: never change it within a version).
ZDICT = (
    b'"https://www.http://www..html.htm.php.aspx/index?id=&page=/category/article/news/product/blog/tag/'
    b'search?q=-20.com/.org/.net/.de/.co.uk/.fr/", null, '
)
_SETTING_OF = {
    "k": "SIMHASH_MAX_DISTANCE",
    "features": "SIMHASH_WORD_NGRAM / SIMHASH_CHAR_NGRAM / SIMHASH_WEIGHTING / SIMHASH_CJK_NGRAM",
    "text": "SIMHASH_TEXT_MODE",
    "v": "the simhash-scrapy version (key layout)",
}


def layout_string(config: SimhashConfig) -> str:
    """What every worker sharing a key must agree on (the block layout is each worker's own business)."""
    return f"v={LAYOUT_VERSION} k={config.max_distance} features={config.features.signature()} text={config.text_mode}"


def layout_mismatch(found: str, wanted: str, key: str) -> str:
    def parts(text: str) -> dict[str, str]:
        return dict(item.split("=", 1) for item in text.split() if "=" in item)

    have, want = parts(found), parts(wanted)
    for name in ("v", "k", "features", "text"):
        if have.get(name) != want.get(name):
            setting = _SETTING_OF[name]
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

    def __init__(self, prefix: str, cluster: bool = False) -> None:
        self.prefix = prefix
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
            keys = self._scopes[scope] = ScopeKeys(scope, base)
        return keys


@dataclass(frozen=True)
class ScopeKeys:
    scope: str
    base: str

    @property
    def meta(self) -> str:
        return f"{self.base}:meta"

    @property
    def log(self) -> str:
        return f"{self.base}:log"

    @property
    def bucket_prefix(self) -> str:
        return f"{self.base}:i:"

    def bucket(self, number: int) -> str:
        return f"{self.base}:i:{number:x}"


def identity_slot(scope: str, identity: str, bucket_bits: int) -> tuple[int, bytes]:
    """(bucket number, 8-byte field) of an identity in its scope."""
    digest = hashlib.blake2b(
        scope.encode("utf-8", "surrogatepass") + b"\0" + identity.encode("utf-8", "surrogatepass"), digest_size=12
    ).digest()
    return int.from_bytes(digest[:4], "big") >> (32 - bucket_bits), digest[4:]


# ---------------------------------------------------------------- payloads
def encode_payload(url: str, identity: str, referer: str | None, depth: int | None, text: str | None) -> bytes:
    values: list[Any] = [url, None if identity in ("", url) else identity, referer, depth]
    if text is not None:
        values.append(text)
    while values and values[-1] is None and len(values) > 1:
        values.pop()
    raw = json.dumps(values, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, ZDICT)
    return packer.compress(raw) + packer.flush()


def decode_payload(data: bytes) -> tuple[str, str, str | None, int | None, str | None]:
    """``(url, identity, referer, depth, text)``."""
    unpacker = zlib.decompressobj(-15, ZDICT)
    values = json.loads((unpacker.decompress(data) + unpacker.flush()).decode("utf-8", "surrogatepass"))
    values += [None] * (5 - len(values))
    url, identity, referer, depth, text = values[:5]
    return url, identity if identity is not None else url, referer, depth, text


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
        seq, int.from_bytes(fp, "big"), bool(flags & F_EXACT), OUTCOMES[flags >> 5], distance, own, canonical,
        previous, first, last, value[p:],
    )


def pack_seen(seen: float) -> bytes:
    return _D.pack(float(seen))


def unpack_seen(data: bytes) -> float:
    return float(_D.unpack(data)[0])


def parse_log(data: bytes, start: int) -> list[tuple[int, int, int, int, bytes]]:
    """``(position, op, fingerprint or removed position, bucket, field)`` of each 20-byte log entry."""
    out = []
    for i in range(0, len(data) - ENTRY + 1, ENTRY):
        op = data[i]
        if op == OP_REMOVE:
            out.append((start + i // ENTRY, op, _I4.unpack_from(data, i + 1)[0], 0, b""))
        else:
            out.append((
                start + i // ENTRY, op, int.from_bytes(data[i + 1 : i + 9], "big"),
                int.from_bytes(data[i + 9 : i + 12], "big"), data[i + 12 : i + 20],
            ))
    return out
