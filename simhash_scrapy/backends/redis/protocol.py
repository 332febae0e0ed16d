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
from typing import Any, NamedTuple

from ...core.cluster.clustering import RECORDED_OUTCOMES, is_one_edit
from ..base import Verdict
from .layout import (
    MODE_EXACT, MODE_EXTRA, MODE_INDEX, NO_POSITION, PART_BUCKET, PART_HINT, PART_CANONICAL, PART_PAYLOAD, PART_PREVIOUS, PART_RECORD, Codec, pack_seen,
    unpack_seen,
)

__all__ = ["Hint", "pack_page", "parse_verdicts", "verdict"]

_PAGE = struct.Struct(">8s8sB8sIH")
_VERDICT = struct.Struct(">BBIB")
_LENGTH = struct.Struct(">I")
_SHARD_HEAD = struct.Struct(">HBI")
_HINT = struct.Struct(">IIBB")  # log position, seq, kind, distance (``Hint``)
_LENGTH2 = struct.Struct(">H")


class Hint(NamedTuple):
    """What a worker's mirror of steps 5-7 (``mirror.py``) found for a page: the check script's hint."""

    position: int  # the canonical page's log position
    seq: int  # its seq (ties)
    kind: int  # 1: template-free text or second simhash (a candidate within k); 2: sentence containment
    distance: int  # kind 1: the distance it matched at (kind 2: the script computes the real one)  # bucket (3 bytes: >I3 in Lua), length of the old record


class CanonicalAt(NamedTuple):
    """With shards: where the canonical page a verdict names is (its record's bucket, its log position)."""

    bucket: int
    position: int


class Row(NamedTuple):
    """One page's answer in the check script's reply (``parse_verdicts``); ``verdict`` makes it a ``Verdict``."""

    outcome: int  # the outcome's code in the reply (``verdict`` names it)
    distance: int
    canonical_fingerprint: bytes | None  # 8 bytes, big-endian (None: no canonical page)
    canonical_field: bytes  # the canonical page's field in its identity bucket (b"" when none)
    canonical_payload: bytes | None  # its payload (``layout.Codec``); with shards read from its shard
    previous: bytes | None  # the identity's previous fingerprint and time seen (16 bytes)
    record: bytes | None  # with shards: the identity's new record, written back to its shard
    canonical_at: CanonicalAt | None  # with shards: where the canonical page's record is
    hinted: bool = False  # the page's hint (``mirror.py``: steps 5-7) made it a near-duplicate
    via: str | None = None  # then the step that matched (``Verdict.via``), set by the backend


def parse_verdicts(data: bytes, count: int) -> list[Row]:
    """A ``Row`` per record (``record`` and ``canonical_at`` with shards only: the caller writes the record
    to its shard and reads the canonical page's payload from the canonical's)."""
    rows = []
    p = 0
    for _ in range(count):
        outcome, has, _seq, distance = _VERDICT.unpack_from(data, p)
        p += _VERDICT.size
        canon_fp = payload = prev = record = None
        canon_bucket: CanonicalAt | None = None
        field = b""
        if has & PART_CANONICAL:
            canon_fp, field = data[p : p + 8], data[p + 8 : p + 16]
            p += 16
        if has & PART_PAYLOAD:
            (length,) = _LENGTH.unpack_from(data, p)
            payload = data[p + 4 : p + 4 + length]
            p += 4 + length
        if has & PART_PREVIOUS:
            prev = data[p : p + 16]
            p += 16
        if has & PART_RECORD:
            (length,) = _LENGTH.unpack_from(data, p)
            record = data[p + 4 : p + 4 + length]
            p += 4 + length
        if has & PART_BUCKET:
            canon_bucket = CanonicalAt(int.from_bytes(data[p : p + 3], "big"), int.from_bytes(data[p + 3 : p + 7], "big"))
            p += 7
        hinted = bool(has & PART_HINT)
        rows.append(Row(outcome, distance, canon_fp, field, payload, prev, record, canon_bucket, hinted))
    return rows




def pack_page(field: bytes, fingerprint: int, index: bool, exact: bool, seen: float, local: bytes, payload: bytes,
              shard_record: tuple[int, bytes] | None = None, edit_keys: tuple[int, ...] = (),
              extra: tuple[Hint | None, bytes] | None = None) -> bytes:
    """One page's argument of the check script; with shards, ``shard_record`` is (bucket, old record or b"");
    ``extra``: a page checked with steps 5-7, its mirror's hint and its extras record (``mirror.py``)."""
    mode = (MODE_INDEX if index else 0) | (MODE_EXACT if exact else 0) | (MODE_EXTRA if extra is not None else 0)
    page = _PAGE.pack(field, fingerprint.to_bytes(8, "big"), mode, pack_seen(seen), len(local), len(edit_keys))
    head = b"" if shard_record is None else _SHARD_HEAD.pack(shard_record[0] >> 8, shard_record[0] & 0xFF, len(shard_record[1])) + shard_record[1]
    keys = b"".join(key.to_bytes(8, "big") for key in edit_keys)
    tail = b""
    if extra is not None:
        hint = extra[0] if extra[0] is not None else Hint(NO_POSITION, 0, 0, 0)
        tail = _HINT.pack(*hint) + _LENGTH2.pack(len(extra[1])) + extra[1]
    return b"".join((head, page, local, keys, tail, payload))


def verdict(codec: Codec, k: int, outcome: int, distance: int, canon_fp: bytes | None, field: bytes,
            payload: bytes | None, prev: bytes | None) -> Verdict:
    """The ``Verdict`` of one row of ``parse_verdicts`` (``codec`` decodes the canonical page's payload)."""
    previous: dict[str, Any] = dict(
        previous_fingerprint=int.from_bytes(prev[:8], "big") if prev else None,
        previous_seen=(unpack_seen(prev[8:]) or None) if prev else None,
    )
    if canon_fp is None:
        return Verdict(RECORDED_OUTCOMES[outcome], **previous)
    url, identity, link = ("", "", None)
    if payload:
        url, identity, *_, link = codec.decode_all(payload, field)
    return Verdict(
        RECORDED_OUTCOMES[outcome],
        canonical_url=url,
        canonical_identity=identity or url,
        canonical_fingerprint=int.from_bytes(canon_fp, "big"),
        distance=distance,
        one_edit=is_one_edit(distance, k),
        canonical_link=link,
        **previous,
    )
