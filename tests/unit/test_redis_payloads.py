"""The Redis backends' payload and record bytes: the quick paths give the reference's bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from simhash_scrapy.backends.redis.cluster_layout import GlobalRecord, pack_record, parse_record
from simhash_scrapy.backends.redis.layout import _JSON, Codec, json_list
from simhash_scrapy.core import _native

_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)  # lone surrogates and controls too
_VALUE = st.one_of(st.none(), _TEXT, st.integers(-(2**70), 2**70))


@settings(max_examples=400, deadline=None)
@given(st.lists(_VALUE, max_size=9))
def test_json_list_is_the_encoders_text(values: list[object]) -> None:
    assert json_list(values) == _JSON.encode(values)


def test_json_list_hands_other_values_to_the_encoder() -> None:
    values = ["a", 1.5, True, None, {"x": 1}]
    assert json_list(values) == _JSON.encode(values) == json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    assert json_list([True]) == "[true]"  # a bool is not an int here


def test_payloads_decode_to_what_was_encoded() -> None:
    codec = Codec()
    payload = codec.encode("https://h.example/a?x=\"1\"\n", "id\u2028\ud800", b"", "https://h.example/", 3, "t\x00ext",
                           12345, 'W/"e"', "Mon, 30 Nov 2026 04:00:00 GMT", "https://h.example/c")
    assert codec.decode_all(payload, b"") == (
        "https://h.example/a?x=\"1\"\n", "id\u2028\ud800", "https://h.example/", 3, "t\x00ext", 12345, 'W/"e"',
        "Mon, 30 Nov 2026 04:00:00 GMT", "https://h.example/c")


_ARGS = st.tuples(_TEXT, _TEXT, st.sampled_from([b"", bytes(range(12))]), st.one_of(st.none(), _TEXT),
                  st.one_of(st.none(), st.integers(-(2**70), 2**70)), st.one_of(st.none(), _TEXT),
                  st.one_of(st.none(), st.integers(0, 2**64 - 1)), st.one_of(st.none(), _TEXT),
                  st.one_of(st.none(), _TEXT), st.one_of(st.none(), _TEXT))


@pytest.mark.skipif(_native.speedups is None, reason="the C helpers are not built")
@settings(max_examples=400, deadline=None)
@given(_ARGS)
def test_the_compiled_encoder_gives_the_python_encoders_bytes(args: tuple[Any, ...]) -> None:
    codec = Codec(b"a scope's dictionary: https://www.example.com/ \"null\"")
    with _native.switched(True):
        compiled = codec.encode(*args)
    with _native.switched(False):
        python = codec.encode(*args)
    assert compiled == python
    assert codec.decode_all(compiled, b"\0" * 8)[0] == args[0]


@pytest.mark.skipif(_native.speedups is None, reason="the C helpers are not built")
def test_the_compiled_encoder_hands_other_values_to_python() -> None:
    codec = Codec(b"a dictionary")
    for depth in (True, 2.5):  # a bool, a float: not a str, None or an int
        assert _native.speedups.encode_payload(codec._scope_primed(), 1, b"", None, "u", None, None, depth, None,
                                               None, None, None) is NotImplemented
        with _native.switched(True):
            compiled = codec.encode("u", "", b"", None, depth, None)  # type: ignore[arg-type]
        with _native.switched(False):
            assert compiled == codec.encode("u", "", b"", None, depth, None)  # type: ignore[arg-type]
    for digest in (-1, 2**64):  # as int.to_bytes(8, "big") does
        with _native.switched(True), pytest.raises(OverflowError):
            codec.encode("u", "", b"", None, None, None, digest)
    for identity_bytes, digest in ((bytearray(12), None), (b"", 1.5)):  # not bytes, not an int: the Python lines
        assert _native.speedups.encode_payload(codec._scope_primed(), 1, identity_bytes, digest, "u", None, None,
                                               None, None, None, None, None) is NotImplemented
        compiled, python = _both(codec.encode, "u", "", identity_bytes, None, None, None, digest)
        assert compiled == python


def _both(function: Any, *args: Any) -> tuple[Any, Any]:
    """``function(*args)`` with the C helpers, then without: each result, or the type of what it raised."""
    out = []
    for on in (True, False):
        with _native.switched(on):
            try:
                out.append(function(*args))
            except Exception as exc:  # noqa: BLE001 - the two paths must fail alike
                out.append(type(exc))
    return out[0], out[1]


_U32 = st.integers(0, 2**32 - 1)
_U64 = st.integers(0, 2**64 - 1)
_SEEN = st.one_of(st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, 1.7e9, 1.7e9 + 0.01]))
_RECORDS = st.builds(
    GlobalRecord, st.one_of(_U32, st.integers(-5, 2**33)), _U64, st.booleans(), st.booleans(),
    st.one_of(st.integers(0, 7), st.integers(8, 300)), st.integers(-3, 300), st.one_of(st.none(), _U32), _SEEN,
    _SEEN, st.binary(max_size=40), st.one_of(st.none(), _U64, st.integers(2**64, 2**65)),
)


@pytest.mark.skipif(_native.speedups is None, reason="the C helpers are not built")
@settings(max_examples=300, deadline=None)
@given(_RECORDS, st.integers(0, 60))
def test_the_compiled_records_are_the_pythons(record: GlobalRecord, cut: int) -> None:
    packed, python = _both(pack_record, record)
    assert packed == python
    if isinstance(packed, bytes):
        parsed = _both(parse_record, packed)
        assert parsed[0] == parsed[1] == parse_record(packed)
        indexed_fp = None if not record.indexed else record.fingerprint if record.indexed_fp is None else record.indexed_fp
        assert parsed[0] == record._replace(
            distance=max(record.distance, 0) if record.canonical_seq is not None else -1, indexed_fp=indexed_fp)
        shorter = _both(parse_record, packed[:cut])  # cut short: the same record, or the same error
        assert shorter[0] == shorter[1]


@pytest.mark.skipif(_native.speedups is None, reason="the C helpers are not built")
def test_the_compiled_records_hand_other_values_to_python() -> None:
    record = GlobalRecord(1, 2, False, True, 0, -1, None, 1.0, 1.0, b"p", 2)
    assert _native.speedups.pack_global_record(record._replace(first_seen=1)) is NotImplemented  # an int, not a float
    assert _native.speedups.pack_global_record(record._replace(payload=bytearray(b"p"))) is NotImplemented
    assert _both(pack_record, record._replace(first_seen=1)) == (pack_record(record),) * 2
    assert _native.speedups.parse_global_record(bytearray(pack_record(record)), GlobalRecord) is NotImplemented
    assert _native.speedups.parse_global_record(pack_record(record)[:13], GlobalRecord) is NotImplemented
