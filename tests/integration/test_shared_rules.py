"""The shared types and small rules of the core, each written once (issue 26, item 2).

Each rule moved here from two or three copies; the old copies are kept below
(``_old_*``, verbatim from the commit before the move) and the one rule must
give their answer on every case they handled alike.  Where the old copies
disagreed (the two readers of ``<link rel=canonical>``, the media type of a
``Content-Type`` with no type), the test states the behaviour decided.  The
Lua scripts take their constants from ``layout.lua_constants``: a static check
reads every script, and a real redis-server runs the generated line.
"""

from __future__ import annotations

import dataclasses
import re
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from simhash_scrapy.backends import base
from simhash_scrapy.backends.redis import layout
from simhash_scrapy.backends.redis.backend import lua
from simhash_scrapy.core import records
from simhash_scrapy.core.store import store_rows
from simhash_scrapy.core.cluster.clustering import RECORDED_OUTCOMES, Outcome, Rule, is_one_edit, rule_of
from simhash_scrapy.core.cluster.representative import absolute, html_canonical
from simhash_scrapy.core.skip import item_is_html, media_type, skip_reason, too_large
from simhash_scrapy.core.extract.text import parse_html

pytest_plugins = ["conftest_redis"]

LUA_DIR = Path(str(resources.files("simhash_scrapy.backends.redis")))
SCRIPTS = sorted(p.stem for p in LUA_DIR.glob("*.lua"))


# ------------------------------------------------------------------ types
def test_the_records_live_in_the_core_and_the_backend_interface_names_them() -> None:
    for name in ("PageRecord", "Verdict", "ClusterMember", "UNCHECKED"):
        assert getattr(base, name) is getattr(records, name)
    assert records.UNCHECKED.checked is False and records.Verdict(Outcome.UNIQUE).checked is True
    # One record per identity: the key defaults to the URL.
    assert records.PageRecord("https://x.example/a", 1, "s").key == "https://x.example/a"
    assert records.ClusterMember("https://x.example/a", 1, "s", identity="id").key == "id"


# ------------------------------------------------------------------ scope
def _old_scope(by: str, url: str, name: str) -> str:
    # state.scope_for, compare._decisions and dedup before the move (the commands pass name "").
    return (urlsplit(url).hostname or "").lower() if by == "domain" else name


@pytest.mark.parametrize(
    "url",
    ["https://Example.COM:8080/a?b=1", "http://user:secret@Host.Example/x", "/relative/path", "", "https://[::1]/p",
     "https://xn--bcher-kva.example/", "HTTP://WWW.SITE.TEST", "file:///tmp/page.html", "https://sub.site.test./"],
)  # fmt: skip
@pytest.mark.parametrize("by", ["domain", "spider"])
@pytest.mark.parametrize("name", ["", "myspider"])
def test_page_scope_answers_as_the_three_copies_did(url: str, by: str, name: str) -> None:
    assert records.page_scope(by, url, name) == _old_scope(by, url, name)


def test_item_scopes_are_apart_from_page_scopes() -> None:
    assert records.item_scope("myspider") == "item:myspider"
    assert records.is_item_scope(records.item_scope("site.test"))
    assert not records.is_item_scope("myspider") and not records.is_item_scope(None) and not records.is_item_scope("")
    assert not records.is_item_scope("items.site.test")  # a host is never an item scope (no colon in a host)


# ------------------------------------------------------------- flag fields
def test_flag_item_writes_the_fields_the_item_accepts() -> None:
    from itemadapter import ItemAdapter
    from scrapy import Field, Item

    plain: dict[str, Any] = {"title": "t"}
    records.flag_item(ItemAdapter(plain), "https://x.example/a", 3)
    assert plain == {"title": "t", "simhash_duplicate_of": "https://x.example/a", "simhash_distance": 3}

    class Half(Item):
        title = Field()
        simhash_duplicate_of = Field()

    half = Half(title="t")
    records.flag_item(ItemAdapter(half), "https://x.example/a", None)
    assert dict(half) == {"title": "t", "simhash_duplicate_of": "https://x.example/a"}

    @dataclasses.dataclass
    class Bare:
        title: str

    bare = Bare("t")
    records.flag_item(ItemAdapter(bare), "https://x.example/a", 1)  # declares neither: unchanged, no error
    assert bare == Bare("t")
    assert records.FLAG_FIELDS == ("simhash_duplicate_of", "simhash_distance")  # documented item fields


# --------------------------------------------------------------- outcomes
def test_outcome_codes_are_defined_once_and_keep_their_numbers() -> None:
    # The codes are stored in Redis identity records (layout 4): a new order would misread every record.
    assert [o.value for o in RECORDED_OUTCOMES] == ["unique", "near_duplicate", "unchanged", "changed", "edited"]
    assert set(RECORDED_OUTCOMES) == set(Outcome) - {Outcome.UNCHECKED}
    assert store_rows.OUTCOMES == layout.OUTCOMES == tuple(o.value for o in RECORDED_OUTCOMES)
    for code, outcome in enumerate(RECORDED_OUTCOMES):
        packed = layout.pack_record(7, 99, False, outcome.value, 0, None, None, None, 1.0, 1.0, b"")
        assert packed[12] >> layout.OUTCOME_SHIFT == code
        assert layout.parse_record(packed).outcome == outcome.value
    # Step 7's flag in the distance byte: the distance reads back whole, and the report's rule is containment.
    for distance in (0, 9, 64):
        for containment in (False, True):
            packed = layout.pack_record(7, 99, False, "near_duplicate", distance, None, 3, None, 1.0, 1.0, b"",
                                        containment)  # fmt: skip
            record = layout.parse_record(packed)
            assert (record.distance, record.containment) == (distance, containment)


def test_one_edit_is_a_distance_beyond_k() -> None:
    for k in (0, 3, 4, 8):
        for distance in (None, 0, 1, k, k + 1, 40):
            old = distance is not None and distance > k  # memory.py, protocol.py, compare before the move
            assert is_one_edit(distance, k) is old
            assert (rule_of(False, distance, k) is Rule.ONE_EDIT) is old
            assert rule_of(True, distance, k) is Rule.EXACT


# ------------------------------------------------------------ input rules
def _old_middleware_media_type(raw: bytes | None) -> str | None:
    if not raw:
        return None
    return raw.decode("latin-1").split(";", 1)[0].strip().lower()


def _old_compare_media_type(content_type: str | None) -> str | None:
    return (content_type or "").split(";", 1)[0].strip().lower() or None


@pytest.mark.parametrize(
    "raw",
    [None, b"", b"text/html", b"Text/HTML; charset=UTF-8", b"  application/xhtml+xml ;q=1", b"text/plain;",
     "text/html; charset=\xe9".encode("latin-1")],
)  # fmt: skip
def test_media_type_answers_as_the_crawl_did(raw: bytes | None) -> None:
    assert media_type(raw) == _old_middleware_media_type(raw)
    text = None if raw is None else raw.decode("latin-1")
    assert media_type(text) == _old_middleware_media_type(raw)
    assert media_type(text) == _old_compare_media_type(text)  # compare agreed on every header with a type


def test_a_content_type_without_a_type_is_the_crawls_answer_in_compare_too() -> None:
    # The one case the copies differed on: compare read "; charset=x" as no header (None: the page passed);
    # the crawl as an empty media type, which SIMHASH_CONTENT_TYPES does not hold.  Both now skip it.
    assert media_type("; charset=utf-8") == "" and _old_compare_media_type("; charset=utf-8") is None
    assert skip_reason(200, media_type("; charset=utf-8"), b"<p>x</p>", {200}, {"text/html"}, 100) == "content_type"


def test_too_large_is_over_the_limit_not_at_it() -> None:
    for limit in (0, 10, 1 << 20):
        for size in (0, limit - 1, limit, limit + 1):
            if size < 0:
                continue
            assert too_large(size, limit) is (size > limit)  # skip, pipeline and dedup before the move
            body = b"x" * size
            reason = skip_reason(200, "text/html", body, {200}, {"text/html"}, limit)
            assert (reason == "too_large") is (size > limit)


def _old_dedup_is_html(value: str, fmt: str) -> bool:
    return fmt == "html" or (fmt == "auto" and value.lstrip().startswith("<"))


@pytest.mark.parametrize("value", ["<p>x</p>", "  \n<html>", "plain text", "", " x < y", "\ufeff<p>bom</p>"])
@pytest.mark.parametrize("fmt", ["auto", "html", "text"])
def test_item_is_html_answers_as_the_dedup_copy_did(value: str, fmt: str) -> None:
    assert item_is_html(value, fmt) is _old_dedup_is_html(value, fmt)


# --------------------------------------------------------- rel=canonical
def _old_html_canonical(root: Any, base_url: str) -> str | None:
    # core.cluster.representative.html_canonical before the move: any <link> of the document.
    for element in root.iter("link"):
        rel, href = element.get("rel"), element.get("href")
        if rel and href and "canonical" in rel.lower().split():
            return absolute(href, base_url)
    return None


def _old_declared_canonical(root: Any, base_url: str) -> str | None:
    # urlrules.declared_canonical before the move: direct children of <head>, rel exactly "canonical".
    from urllib.parse import urljoin

    head = root.find("head")
    if head is None:
        return None
    for link in head.iterchildren("link"):
        if (link.get("rel") or "").strip().lower() == "canonical":
            href = (link.get("href") or "").strip()
            return urljoin(base_url, href) if href else None
    return None


BASE = "https://x.example/dir/page.html"
AGREED = [
    (b'<html><head><link rel="canonical" href="/one"></head><body>x</body></html>', "https://x.example/one"),
    (b'<html><head><link rel="Canonical" href="two.html"></head></html>', "https://x.example/dir/two.html"),
    (b'<html><head><link rel=" canonical " href=" https://y.example/three "></head></html>', "https://y.example/three"),
    (b'<html><head><link rel="stylesheet" href="/s.css"><link rel="canonical" href="/four"></head></html>',
     "https://x.example/four"),
    (b'<html><head><link rel="alternate" href="/m"></head><body>x</body></html>', None),
    (b"<html><head><title>none</title></head><body><p>x</p></body></html>", None),
    (b'<link rel="canonical" href="/implied-head"><p>text</p>', "https://x.example/implied-head"),
    (b'<html><head><link rel="canonicalish" href="/no"></head></html>', None),
    # A tracking pixel inside <noscript> leaves the head open: the link after it is still in it.
    (b'<html><head><noscript><img src="/p.gif"></noscript><link rel="canonical" href="/nine"></head></html>',
     "https://x.example/nine"),
]  # fmt: skip
DECIDED = [
    # rel is a list of tokens: "canonical nofollow" names a canonical URL (urlrules missed it).
    (b'<html><head><link rel="canonical nofollow" href="/five"></head></html>', "https://x.example/five"),
    (b'<html><head><link rel="NOFOLLOW\tCanonical" href="/six"></head></html>', "https://x.example/six"),
    # A link outside the head is not one (representative counted it).
    (b'<html><head><title>t</title></head><body><p>x</p><link rel="canonical" href="/late"></body></html>', None),
    # An element that cannot be in a head (an <img>, a <div>, text) ends it as libxml2 (and a browser, and
    # search engines) read the page: a link written after it is in the body (representative counted it).
    (b'<html><head><title>t</title><img src="/p.gif"><link rel="canonical" href="/after-img"></head></html>', None),
    (b'<html><head><title>t</title><div></div><link rel="canonical" href="/after-div"></head></html>', None),
    # A link with no URL is passed over; the next one counts (urlrules stopped at it).
    (b'<html><head><link rel="canonical" href=" "><link rel="canonical" href="/seven"></head></html>',
     "https://x.example/seven"),
    # Only http(s) targets (urlrules took any).
    (b'<html><head><link rel="canonical" href="javascript:alert(1)"></head></html>', None),
    (b'<html><head><link rel="canonical" href="mailto:a@x.example"></head></html>', None),
]  # fmt: skip


@pytest.mark.parametrize(("html", "expected"), AGREED)
def test_html_canonical_answers_as_both_old_readers_did_where_they_agreed(html: bytes, expected: str | None) -> None:
    root = parse_html(html)
    assert _old_html_canonical(root, BASE) == _old_declared_canonical(root, BASE) == expected
    assert html_canonical(root, BASE) == expected


@pytest.mark.parametrize(("html", "expected"), DECIDED)
def test_html_canonical_reads_the_head_and_rel_tokens(html: bytes, expected: str | None) -> None:
    root = parse_html(html)
    assert html_canonical(root, BASE) == expected
    # These are the cases the two old readers did not agree on (or both got wrong).
    assert (_old_html_canonical(root, BASE), _old_declared_canonical(root, BASE)) != (expected, expected)


def test_html_canonical_of_no_page() -> None:
    assert html_canonical(None, BASE) is None
    assert html_canonical("not a tree", BASE) is None


def test_the_url_rules_and_the_crawl_read_the_same_canonical_link() -> None:
    """``urlrules.declared_canonical`` (the learner) and the middleware's record of the page agree."""
    from scrapy.http import HtmlResponse, TextResponse

    from simhash_scrapy.middleware import _canonical_link
    from simhash_scrapy.urlrules import declared_canonical

    pages = [html for html, _ in AGREED + DECIDED] + [
        b'<html><head><base href="https://z.example/base/"><link rel="canonical" href="eight"></head></html>',
    ]
    for body in pages:
        response = HtmlResponse(BASE, body=body, encoding="utf-8")
        assert declared_canonical(response) == _canonical_link(response)
    based = HtmlResponse(BASE, body=pages[-1], encoding="utf-8")
    assert declared_canonical(based) == "https://z.example/base/eight"
    nofollow = HtmlResponse(BASE, body=DECIDED[0][0], encoding="utf-8")
    assert declared_canonical(nofollow) == "https://x.example/five"
    assert declared_canonical(TextResponse(BASE, body=DECIDED[0][0], encoding="utf-8")) is None  # not HTML


# -------------------------------------------------------------- Lua scripts
_NAME = re.compile(r"\b[A-Z][A-Z0-9_]*\b")
_LOCAL = re.compile(r"\blocal\s+(?:function\s+)?([A-Za-z_][\w\s,]*?)\s*(?:=|\(|$)", re.M)


def _code_of(lua_text: str) -> str:
    """Lua source with comments and string literals blanked (enough for these scripts: no long strings)."""
    out = re.sub(r"--[^\n]*", "", lua_text)
    return re.sub(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"", "''", out)


def generated_names() -> dict[str, int]:
    line = layout.lua_constants()
    match = re.fullmatch(r"local ([\w, ]+) = ([\d, ]+)\n", line)
    assert match, line
    names = [n.strip() for n in match.group(1).split(",")]
    values = [int(v) for v in match.group(2).split(",")]
    assert len(names) == len(values) == len(set(names))
    return dict(zip(names, values))


def lua_problems(text: str, generated: dict[str, int]) -> list[str]:
    """What a script does wrong with the shared constants: declares one by hand, or uses a name none declares."""
    code = _code_of(text)
    problems = []
    declared = {n.strip() for group in _LOCAL.findall(code) for n in group.split(",")}
    problems += [f"declares {name} by hand" for name in sorted(declared & set(generated))]
    problems += [f"assigns {m}" for m in re.findall(r"^\s*([A-Z][A-Z0-9_]*)\s*=[^=]", code, re.M) if m in generated]
    used = set(_NAME.findall(code)) - {"KEYS", "ARGV"}
    problems += [f"uses {name}, which layout.lua_constants does not declare" for name in sorted(used - set(generated))]
    return problems


def test_the_generated_constants_are_layouts() -> None:
    generated = generated_names()
    expected = {
        "ENTRY": layout.ENTRY, "EDIT_MATCH": layout.EDIT_MATCH, "OP_ADD": layout.OP_ADD,
        "OP_REMOVE": layout.OP_REMOVE, "OP_EXACT": layout.OP_EXACT, "OP_EDIT_KEY": layout.OP_EDIT_KEY,
        "F_EXACT": layout.F_EXACT, "F_INDEXED": layout.F_INDEXED, "F_MEMBER": layout.F_MEMBER,
        "F_PREV": layout.F_PREV, "F_LAST": layout.F_LAST, "OUTCOME_SHIFT": layout.OUTCOME_SHIFT,
        "MODE_INDEX": layout.MODE_INDEX, "MODE_EXACT": layout.MODE_EXACT, "MODE_EXTRA": layout.MODE_EXTRA,
        "NO_POSITION": layout.NO_POSITION, "D_CONTAINMENT": layout.D_CONTAINMENT, "PART_HINT": layout.PART_HINT,
        "PART_CANONICAL": layout.PART_CANONICAL, "PART_PAYLOAD": layout.PART_PAYLOAD,
        "PART_PREVIOUS": layout.PART_PREVIOUS, "PART_RECORD": layout.PART_RECORD, "PART_BUCKET": layout.PART_BUCKET,
        "K_SCOPE_DICT": 1, "K_HEX_IDENTITY": 2, "K_DIGEST": 4,
        **{o.name: code for code, o in enumerate(RECORDED_OUTCOMES)},
    }  # fmt: skip
    assert generated == expected
    # The payload kinds are the ones Codec writes: a hex identity and a digest set bits 2 and 4.
    payload = layout.Codec().encode("https://x.example/a", "ab" * 20, b"\1" * 12, None, None, None, digest=5)
    assert payload[0] == generated["K_HEX_IDENTITY"] | generated["K_DIGEST"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_no_script_declares_a_shared_constant_by_hand(script: str) -> None:
    text = (LUA_DIR / f"{script}.lua").read_text(encoding="utf-8")
    assert lua_problems(text, generated_names()) == []
    assert lua(script) == layout.lua_constants() + text  # what the backend loads


def test_the_lua_check_finds_a_constant_written_by_hand_or_misspelt() -> None:
    generated = generated_names()
    check = (LUA_DIR / "check.lua").read_text(encoding="utf-8")
    assert "check" in SCRIPTS and "OP_REMOVE" in _code_of(check)
    assert lua_problems("local ENTRY = 24\nreturn ENTRY", generated) == ["declares ENTRY by hand"]
    assert lua_problems("local a, F_LAST = 1, 16\nreturn a", generated) == ["declares F_LAST by hand"]
    assert lua_problems(check.replace("OP_REMOVE", "OP_DELETE", 1), generated) == [
        "uses OP_DELETE, which layout.lua_constants does not declare"
    ]
    assert lua_problems("-- NOT_A_NAME in a comment\nreturn 'NOR_THIS'", generated) == []


def test_every_script_loads_with_its_constants_in_redis(redis_server: Any) -> None:
    client = redis_server.client()
    try:
        for script in SCRIPTS:
            assert re.fullmatch(r"[0-9a-f]{40}", client.script_load(lua(script)))
        generated = generated_names()
        names = list(generated)
        got = client.eval(layout.lua_constants() + "return {" + ", ".join(names) + "}", 0)
        assert dict(zip(names, got)) == generated
    finally:
        client.close()
