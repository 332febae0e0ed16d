"""The Redis backends' payload and record bytes: the quick paths give the reference's bytes."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from simhash_scrapy.backends.redis.layout import _JSON, Codec, json_list

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
