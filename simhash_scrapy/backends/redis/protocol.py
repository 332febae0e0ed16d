"""The check script's wire format: one packed argument per page, one packed reply per batch.

An argument (``check.lua`` reads it with ``struct.unpack('>c8c8Bc8I4I2')``): the
identity's field (8 bytes), the fingerprint (8), mode (1: index, 2: exact),
the time seen (big-endian double), the length of the local candidates, the
number of one-edit keys, the local candidates (``>IIB`` each: log position,
seq, distance; ``EDIT_MATCH`` for a page found by a one-edit key), the
one-edit keys (8 bytes each) and the payload (``layout.Codec``); with shards (``SIMHASH_REDIS_SHARDS`` > 1) after
the identity's bucket and its old record, read from its shard by ``claim.lua``.
The reply: see ``parse_verdicts``.
"""

from __future__ import annotations

import struct
from typing import Any

from ...core.clustering import Rule, rule_of
from ..base import Outcome, Verdict
from .layout import Codec, pack_seen, unpack_seen

__all__ = ["pack_page", "parse_verdicts", "verdict"]

_OUTCOMES = (Outcome.UNIQUE, Outcome.NEAR_DUPLICATE, Outcome.UNCHANGED, Outcome.CHANGED, Outcome.EDITED)
_PAGE = struct.Struct(">8s8sB8sIH")
_VERDICT = struct.Struct(">BBIB")
_LENGTH = struct.Struct(">I")
_SHARD_HEAD = struct.Struct(">HBI")  # bucket (3 bytes: >I3 in Lua), length of the old record


Row = tuple[int, int, "bytes | None", bytes, "bytes | None", "bytes | None", "bytes | None", "tuple[int, int] | None"]


def parse_verdicts(data: bytes, count: int) -> list[Row]:
    """``(outcome, distance, canonical fingerprint, canonical field, canonical payload, previous, new record,
    (canonical's bucket, its log position))`` per record (the last two with shards only: the caller writes the record to its
    shard and reads the canonical page's payload from the canonical's)."""
    rows = []
    p = 0
    for _ in range(count):
        outcome, has, _seq, distance = _VERDICT.unpack_from(data, p)
        p += _VERDICT.size
        canon_fp = payload = prev = record = None
        canon_bucket: tuple[int, int] | None = None
        field = b""
        if has & 1:
            canon_fp, field = data[p : p + 8], data[p + 8 : p + 16]
            p += 16
        if has & 2:
            (length,) = _LENGTH.unpack_from(data, p)
            payload = data[p + 4 : p + 4 + length]
            p += 4 + length
        if has & 4:
            prev = data[p : p + 16]
            p += 16
        if has & 8:
            (length,) = _LENGTH.unpack_from(data, p)
            record = data[p + 4 : p + 4 + length]
            p += 4 + length
        if has & 16:
            canon_bucket = (int.from_bytes(data[p : p + 3], "big"), int.from_bytes(data[p + 3 : p + 7], "big"))
            p += 7
        rows.append((outcome, distance, canon_fp, field, payload, prev, record, canon_bucket))
    return rows




def pack_page(field: bytes, fingerprint: int, index: bool, exact: bool, seen: float, local: bytes, payload: bytes,
              shard_record: tuple[int, bytes] | None = None, edit_keys: tuple[int, ...] = ()) -> bytes:
    """One page's argument of the check script; with shards, ``shard_record`` is (bucket, old record or b"")."""
    mode = (1 if index else 0) | (2 if exact else 0)
    page = _PAGE.pack(field, fingerprint.to_bytes(8, "big"), mode, pack_seen(seen), len(local), len(edit_keys))
    head = b"" if shard_record is None else _SHARD_HEAD.pack(shard_record[0] >> 8, shard_record[0] & 0xFF, len(shard_record[1])) + shard_record[1]
    keys = b"".join(key.to_bytes(8, "big") for key in edit_keys)
    return b"".join((head, page, local, keys, payload))


def verdict(codec: Codec, k: int, outcome: int, distance: int, canon_fp: bytes | None, field: bytes,
            payload: bytes | None, prev: bytes | None) -> Verdict:
    """The ``Verdict`` of one row of ``parse_verdicts`` (``codec`` decodes the canonical page's payload)."""
    previous: dict[str, Any] = dict(
        previous_fingerprint=int.from_bytes(prev[:8], "big") if prev else None,
        previous_seen=(unpack_seen(prev[8:]) or None) if prev else None,
    )
    if canon_fp is None:
        return Verdict(_OUTCOMES[outcome], **previous)
    url, identity, link = ("", "", None)
    if payload:
        url, identity, *_, link = codec.decode_all(payload, field)
    return Verdict(
        _OUTCOMES[outcome],
        canonical_url=url,
        canonical_identity=identity or url,
        canonical_fingerprint=int.from_bytes(canon_fp, "big"),
        distance=distance,
        one_edit=rule_of(False, distance, k) is Rule.ONE_EDIT,  # an exact page's distance is 0
        canonical_link=link,
        **previous,
    )
