"""core/records.py: the records every backend takes, built in one place (``page_record``, ``record_again``),
the scopes and the flag fields."""

from __future__ import annotations

import dataclasses

import pytest

from simhash_scrapy import analyse_html
from simhash_scrapy.core.analysis import AnalysisOptions
from simhash_scrapy.core.records import (
    ClusterMember,
    PageRecord,
    flag_item,
    is_item_scope,
    item_scope,
    page_record,
    page_scope,
    record_again,
)

PAGE = b"<html><body><main><h1>Harbour news</h1><p>" + b" ".join(b"word%d" % i for i in range(120)) + b"</p></main></body></html>"


def test_page_record_carries_everything_the_answer_found() -> None:
    answer = analyse_html(PAGE, options=AnalysisOptions(keep_text=True, second=True, sketch=True))
    assert answer.fingerprint is not None and answer.second is not None and answer.text
    record = page_record(
        answer, url="https://e/a", scope="e", seen=5.0, referer="https://e/", depth=2, identity="id",
        etag='"v1"', last_modified="Mon", canonical_link="https://e/c", also=7,
    )  # fmt: skip
    assert record == PageRecord(
        url="https://e/a", fingerprint=answer.fingerprint, scope="e", referer="https://e/", depth=2,
        text=answer.text, identity="id", exact=answer.exact, seen=5.0, edit_keys=answer.edit_keys,
        digest=answer.digest, etag='"v1"', last_modified="Mon", canonical_link="https://e/c", also=7,
        second=answer.second, sketch=answer.sketch,
    )  # fmt: skip


def test_page_record_is_keyword_only_and_needs_a_fingerprint() -> None:
    answer = analyse_html(PAGE)
    with pytest.raises(TypeError):
        page_record(answer, "https://e/a", "e", 1.0)  # type: ignore[misc]
    skipped = analyse_html(b"<html><body></body></html>")
    assert skipped.fingerprint is None
    with pytest.raises(AssertionError):
        page_record(skipped, url="https://e/a", scope="e", seen=1.0)


def test_a_short_page_record_is_exact() -> None:
    answer = analyse_html(b"<p>three short words</p>")
    record = page_record(answer, url="https://e/s", scope="e", seen=1.0)
    assert record.exact and record.fingerprint == answer.fingerprint == answer.digest


def test_record_again_is_the_stored_page_met_now() -> None:
    previous = ClusterMember(
        url="https://e/old", fingerprint=0xABC, scope="e", text="stored text", exact=True, digest=0xABC,
        etag='"old"', last_modified="Sun", canonical_link="https://e/canon", identity="id",
    )  # fmt: skip
    again = record_again(previous, url="https://e/a", scope="e", seen=9.0, referer=None, depth=1, identity="id",
                         etag='"new"', last_modified=None)
    assert again == PageRecord(
        url="https://e/a", fingerprint=0xABC, scope="e", depth=1, text="stored text", identity="id", exact=True,
        seen=9.0, digest=0xABC, etag='"new"', last_modified="Sun", canonical_link="https://e/canon",
    )  # fmt: skip
    # Nothing sent this time: the stored validators stay.
    kept = record_again(previous, url="https://e/a", scope="e", seen=9.0)
    assert (kept.etag, kept.last_modified) == ('"old"', "Sun")
    assert {f.name for f in dataclasses.fields(PageRecord)} >= {"edit_keys", "second", "sketch"}
    assert (kept.edit_keys, kept.second, kept.sketch, kept.also) == ((), None, None, None)


def test_scopes_and_flag_fields() -> None:
    assert page_scope("domain", "https://Example.com:8080/a") == "example.com"
    assert page_scope("spider", "https://example.com/a", "news") == "news"
    assert page_scope("spider", "https://example.com/a") == ""
    assert item_scope("news") == "item:news"
    assert is_item_scope("item:news") and not is_item_scope("news") and not is_item_scope(None)
    fields: dict[str, object] = {}
    flag_item(fields, "https://e/canon", 3)
    assert fields == {"simhash_duplicate_of": "https://e/canon", "simhash_distance": 3}


def test_flag_item_leaves_out_the_fields_an_item_refuses() -> None:
    class Declared(dict):  # an item class that declares only the URL field
        def __setitem__(self, key: str, value: object) -> None:
            if key != "simhash_duplicate_of":
                raise KeyError(key)
            super().__setitem__(key, value)

    fields = Declared()
    flag_item(fields, "https://e/canon", None)
    assert fields == {"simhash_duplicate_of": "https://e/canon"}
