"""The optional C helpers (``_speedups.c``) give exactly what the pure-Python path gives.

Both paths are compared on real pages and on generated markup full of the
cases the rules are about (hidden attributes, inline styles, non-ASCII
values, nested blocks, comments, tails).  CI sets SIMHASH_REQUIRE_SPEEDUPS=1 so
that a failed build of the extension fails the tests instead of silently
testing the Python path twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from lxml import etree, html as lxml_html

import simhash_scrapy
from simhash_scrapy.core import _native, features, text

pytestmark = pytest.mark.skipif(_native.speedups is None, reason="the C extension is not built")

FAST = _native.speedups
REAL_PAGES = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "quality" / "sample" / "pages").rglob("*.html"))


def tokens_of(data: bytes) -> list[str]:
    # Text bytes may differ in control characters vs spaces (both separate words): compare the words.
    return features.tokenize(data)


def both(func, *args, **kwargs):
    """``func``'s result with the C helpers, then on the pure-Python path."""
    fast = func(*args, **kwargs)
    with _native.switched(False):
        slow = func(*args, **kwargs)
    return fast, slow


@pytest.mark.skipif(os.environ.get("SIMHASH_REQUIRE_SPEEDUPS") != "1", reason="only where the build is required")
def test_the_extension_was_built() -> None:
    assert _native.speedups_enabled()


def test_pure_python_can_be_forced_by_environment() -> None:
    code = "from simhash_scrapy.core import _native; print(_native.speedups_enabled(), _native.speedups is None)"
    env = {**os.environ, "SIMHASH_SCRAPY_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_built_against_the_running_lxml() -> None:
    import lxml

    assert FAST.BUILT_LXML_VERSION == lxml.__version__
    assert FAST.BUILT_LIBXML_VERSION == ".".join(map(str, etree.LIBXML_COMPILED_VERSION))
    assert _native.build_mismatch(FAST) is None


def test_another_lxml_at_run_time_means_the_pure_path_with_one_warning(monkeypatch, caplog) -> None:
    monkeypatch.setattr(FAST, "BUILT_LXML_VERSION", "5.0.0")
    with caplog.at_level("WARNING", logger="simhash_scrapy"):
        assert _native._load() is None
    records = [r for r in caplog.records if r.name.startswith("simhash_scrapy")]
    assert len(records) == 1
    assert records[0].levelname == "WARNING"
    assert "built against lxml 5.0.0" in records[0].getMessage()
    assert "pure-Python path" in records[0].getMessage()


def test_lxml_mismatch_in_a_fresh_process_falls_back_and_gives_the_same_fingerprint() -> None:
    # A real import of the package with the running lxml reporting another version than the build's.
    page = REAL_PAGES[0] if REAL_PAGES else None
    code = (
        "import logging, sys; logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format='%(levelname)s %(message)s')\n"
        "import lxml; lxml.__version__ = '4.9.0'\n"
        "from simhash_scrapy import fingerprint_html\n"
        "from simhash_scrapy.core import _native\n"
        "print(_native.speedups_enabled(), _native.speedups is None)\n"
        f"print(fingerprint_html(open({str(page)!r}, 'rb').read()) if {page is not None} else 0)\n"
    )
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.split("\n")
    assert lines[0].split() == ["False", "True"]
    warnings = [line for line in out.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1
    assert f"built against lxml {FAST.BUILT_LXML_VERSION}" in warnings[0] and "but lxml 4.9.0" in warnings[0]
    if page is not None:
        with _native.switched(False):
            expected = simhash_scrapy.fingerprint_html(page.read_bytes())
        assert int(lines[1]) == expected


# ------------------------------------------------------------------ real pages
@pytest.mark.parametrize("path", REAL_PAGES, ids=lambda p: p.name)
@pytest.mark.parametrize("main_content", [False, True])
def test_same_text_and_fingerprint_on_real_pages(path: Path, main_content: bool) -> None:
    data = path.read_bytes()
    fast, slow = both(text.extract_text_bytes, data, main_content=main_content)
    assert tokens_of(fast) == tokens_of(slow)
    fast, slow = both(text.extract_text, data, main_content=main_content)
    assert fast == slow
    fast, slow = both(simhash_scrapy.fingerprint_html, data, main_content=main_content)
    assert fast == slow


@pytest.mark.parametrize("path", REAL_PAGES[:10], ids=lambda p: p.name)
@pytest.mark.parametrize("main_content", [False, True])
def test_shared_tree_text_is_the_same_and_the_tree_unchanged(path: Path, main_content: bool) -> None:
    data = path.read_bytes()
    root = lxml_html.fromstring(data)
    before = etree.tostring(root)
    fast, slow = both(text.text_of_parsed, root, data, main_content, as_bytes=True)
    assert tokens_of(fast) == tokens_of(slow)
    assert etree.tostring(root) == before


def test_real_pages_have_text() -> None:
    with_text = [p for p in REAL_PAGES if len(tokens_of(text.extract_text_bytes(p.read_bytes()))) > 30]
    assert len(with_text) >= 0.8 * len(REAL_PAGES)


# ------------------------------------------------------------ generated markup
WORDS = st.sampled_from(["alpha", "Beta", "gamma", "délta", "日本語", "x", "", " ", "\n", "a\x01b", "&amp;", "&lt;p&gt;"])
STYLES = st.sampled_from([
    "display:none", "DISPLAY : NONE", "color:red; display: none", "color:red;display:none!important",
    "display:nonesuch", "xdisplay:none", "visibility:hidden", "visibility: hiddenly", "; visibility :HIDDEN",
    "display:block", "display:\u00a0none", "\u2003display:none", "display:none\u00e9", "font: x;  \tdisplay\n:none",
    "display:none;", "display: inline", "",
])  # fmt: skip
ARIA = st.sampled_from(["true", " TRUE ", "false", "", "true\u00a0", "tru", "True;"])
TAGS = st.sampled_from(["p", "div", "span", "b", "li", "td", "br", "section", "a", "script", "style", "noscript", "head", "svg", "template"])


@st.composite
def attributes(draw) -> str:
    parts = []
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(["hidden", 'hidden=""', 'HIDDEN="x"', 'class="x"', 'hiddenx="1"'])))
    if draw(st.booleans()):
        parts.append(f'aria-hidden="{draw(ARIA)}"')
    if draw(st.booleans()):
        parts.append(f'style="{draw(STYLES)}"')
    return (" " + " ".join(parts)) if parts else ""


@st.composite
def fragments(draw, depth: int = 0) -> str:
    out = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.integers(0, 3 if depth < 4 else 1))
        if kind == 0:
            out.append(draw(WORDS))
        elif kind == 1:
            out.append(draw(st.sampled_from(["<!-- c -->", "<br>", "<?pi x?>", "<img alt='no'>"])))
        else:
            tag = draw(TAGS)
            out.append(f"<{tag}{draw(attributes())}>{draw(fragments(depth + 1))}</{tag}>{draw(WORDS)}")
    return "".join(out)


@settings(max_examples=400, deadline=None)
@given(body=fragments(), root_attributes=attributes())
@example(body="a\x01b<script></script>", root_attributes="")  # found by hypothesis: undo beside control characters
@example(body='<p style="display:none"></p>a\x01b<script></script>', root_attributes="")
def test_same_text_on_generated_markup(body: str, root_attributes: str) -> None:
    page = f"<html><body{root_attributes}>{body}</body></html>"
    for main_content in (False, True):
        fast, slow = both(text.extract_text_bytes, page, main_content=main_content)
        assert tokens_of(fast) == tokens_of(slow)
        fast, slow = both(text.extract_text, page, main_content=main_content)
        assert fast == slow
    root = lxml_html.document_fromstring(page)
    before = etree.tostring(root)
    for main_content in (False, True):
        fast, slow = both(text.text_of_parsed, root, page.encode(), main_content, as_bytes=True)
        assert tokens_of(fast) == tokens_of(slow)
        fast, slow = both(text.text_of_parsed, root, page.encode(), main_content)
        assert fast == slow
        assert etree.tostring(root) == before


def test_generated_markup_covers_the_rules() -> None:
    # The cases above must really hide things on both paths (the comparison alone could pass on two bugs).
    page = (
        "<p>keep</p><div hidden>h1</div><div aria-hidden=' TRUE '>h2</div><div style='color:red; DISPLAY : none'>h3</div>"
        "<div style='display:\u00a0none'>h4</div><div style='display:nonesuch'>shown1</div>"
        "<div aria-hidden='true\u00a0'>h5</div><b style='visibility:hidden'>h6</b>tail<script>s</script>"
    )
    for compiled in (True, False):
        with _native.switched(compiled):
            assert text.extract_text(page) == "keep\nshown1\ntail", compiled


# ---------------------------------------------------------------------- tokens
@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet=st.characters(codec="utf-8"), max_size=300), cjk=st.integers(1, 3))
def test_same_token_hashes(value: str, cjk: int) -> None:
    fast, slow = both(features.token_hashes, value, cjk)
    assert fast.dtype == slow.dtype == np.uint64
    assert np.array_equal(fast, slow)


_SEPARATORS = [chr(cp) for cp in features.SEPARATOR_CODE_POINTS]
# Pieces around the separators the C tokeniser splits at itself: ASCII words, other non-ASCII
# characters (letters, a combining mark, NFKC-expanding ones, CJK, a soft hyphen), invalid UTF-8.
_PIECES = st.one_of(
    st.sampled_from(["a", "word", "x1", "42", " ", "\n"]),
    st.sampled_from(_SEPARATORS),
    st.sampled_from(["\u00e9", "\u00df", "\u03c0", "\u00b2", "\ufb01", "\u2122", "\u4e2d\u6587", "\u0301", "\u00ad", "\u200b"]),
)


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=20), invalid=st.sampled_from([b"", b"\xc2", b"\xe2\x80", b"\xed\xa0\x80", b"\xff"]))
def test_same_token_hashes_around_separators(pieces: list[str], invalid: bytes) -> None:
    value = "".join(pieces).encode("utf-8")
    value = value[: len(value) // 2] + invalid + value[len(value) // 2 :]
    fast, slow = both(features.token_hashes, value)
    assert np.array_equal(fast, slow)


def test_separators_split_words_as_the_unicode_rules_do() -> None:
    assert len(_SEPARATORS) > 100
    for char in ("\u00b6", "\u2019", "\u201c", "\u2014", "\u2026", "\u00a0", "\u2500", "\u3002"):
        assert char in _SEPARATORS
    for char in ("\u00b2", "\u2122", "\u00aa", "\u00bd"):  # NFKC makes them word characters
        assert char not in _SEPARATORS
    value = "Heading\u00b6 it\u2019s \u201cquoted\u201d\u2014done\u2026".encode("utf-8")
    fast, slow = both(features.token_hashes, value)
    assert np.array_equal(fast, slow)
    assert features.tokenize(value) == ["heading", "it", "s", "quoted", "done"]
    assert len(fast) == 5


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# Bytes near the edges of UTF-8: lead bytes of every length (and the invalid C0, C1, F5),
# continuation bytes, surrogates (ED A0..), above U+10FFFF (F4 90..), ASCII runs to cross the
# eight-byte fast path.
_UTF8_EDGES = st.lists(
    st.one_of(
        st.sampled_from([0x00, 0x41, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]),
        st.integers(0, 255),
    ),
    max_size=24,
).map(bytes)


@pytest.mark.slow  # 2,000 examples
@settings(max_examples=2000, deadline=None)
@given(data=st.one_of(_UTF8_EDGES, st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass"))), ascii_run=st.integers(0, 19))
def test_is_utf8_accepts_exactly_what_decode_accepts(data: bytes, ascii_run: int) -> None:
    data = b"x" * ascii_run + data
    assert FAST.is_utf8(data) is _decodes(data)
    assert FAST.is_utf8(bytearray(data)) is _decodes(data)


def test_same_token_hashes_on_real_text() -> None:
    for path in REAL_PAGES:
        words = text.extract_text(path.read_bytes())
        fast, slow = both(features.token_hashes, words)
        assert np.array_equal(fast, slow)


def test_walk_rejects_what_is_not_an_element() -> None:
    with pytest.raises(TypeError, match="lxml element"):
        FAST.visible_text("<p>x</p>", b"\n")
    with pytest.raises(TypeError):
        FAST.hash_tokens("not bytes")


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(0, 60),
    new=st.lists(st.integers(0, 2**32 - 1), max_size=20),
    data=st.data(),
    wide=st.booleans(),
)
def test_insert_sorted_matches_numpy_insert(count: int, new: list[int], data, wide: bool) -> None:
    # The index's two kinds of table arrays: uint32 row numbers and uint8 key filters.
    dtype = np.dtype(np.uint32 if wide else np.uint8)
    rng = np.random.default_rng(count + len(new))
    old = rng.integers(0, np.iinfo(dtype).max, count, dtype=dtype, endpoint=True)
    values = np.array([v & np.iinfo(dtype).max for v in new], dtype=dtype)
    at = np.array(sorted(data.draw(st.lists(st.integers(0, count), min_size=len(new), max_size=len(new)))), dtype=np.int64)
    expected = np.insert(old, at, values)
    room = np.zeros(count + len(new) + 3, dtype=dtype)
    room[:count] = old
    FAST.insert_sorted(room, count, at, values)
    assert room[: count + len(new)].tobytes() == expected.tobytes()


def test_insert_sorted_refuses_what_does_not_fit() -> None:
    room = np.zeros(4, dtype=np.uint32)
    with pytest.raises(ValueError, match="sizes"):
        FAST.insert_sorted(room, 3, np.array([0, 1], dtype=np.int64), np.ones(2, dtype=np.uint32))
    with pytest.raises(ValueError, match="sorted"):
        FAST.insert_sorted(np.zeros(8, dtype=np.uint32), 3, np.array([2, 1], dtype=np.int64), np.ones(2, dtype=np.uint32))


# ------------------------------------------------------- main-content walks
# The C walks of main-content mode (``scan``, ``text_length``, ``text_count``) against the
# pure-Python ones (lxml's iter and attribute access, libxml2's XPath, itertext) on markup full
# of what they read: class/id/role/itemprop values (boilerplate names, content markers, article
# bodies, non-ASCII, empty and bare attributes), links and paragraphs nested in each other,
# whitespace runs of every XML blank, CDATA, comments and tails.
NAMES = st.sampled_from([
    "", "nav", "sidebar has-sidebar", "entry-content", "post_body", "content", "Main", "comments",
    "widget", "section", "toc", "body", "contents", "navheader", "ÉLAN nav", "articleBody", "x y",
])  # fmt: skip
BLOCK_TAGS = st.sampled_from(["div", "section", "article", "main", "aside", "nav", "ul", "li", "p", "a", "td", "h2", "h3", "span"])
TEXTS = st.sampled_from(["alpha", " beta ", "\t\r\n", "", "  ", "dél ta", "日本", "a\u00a0b", "x\ny", "<![CDATA[ c d ]]>", "&amp; z"])


@st.composite
def named_fragments(draw, depth: int = 0) -> str:
    out = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.integers(0, 3 if depth < 5 else 1))
        if kind == 0:
            out.append(draw(TEXTS))
        elif kind == 1:
            out.append(draw(st.sampled_from(["<!-- c d -->", "<br>", "<img alt='no'>"])))
        else:
            tag = draw(BLOCK_TAGS)
            attrs = ""
            for name in ("class", "id", "role", "itemprop"):
                if draw(st.integers(0, 2)) == 0:
                    attrs += f' {name}="{draw(NAMES)}"'
                elif draw(st.integers(0, 9)) == 0:
                    attrs += f" {name}"  # a bare attribute: the value ""
            out.append(f"<{tag}{attrs}>{draw(named_fragments(depth + 1))}</{tag}>{draw(TEXTS)}")
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(body=named_fragments())
@example(body='<div class="content"><a> x <p>y </p></a><a><a>z</a></a></div> <p><a>\t w\n</a></p>')
def test_main_content_walks_match_the_python_path(body: str) -> None:
    from simhash_scrapy.core import boilerplate

    root = etree.fromstring(f"<html><body>{body}</body></html>", etree.HTMLParser())
    for element in root.iter():
        if not isinstance(element.tag, str):
            continue
        assert both(boilerplate._text_len, element)[0] == boilerplate._TEXT_LEN(element)
        assert both(boilerplate._LINK_LEN, element)[0] == boilerplate._LINK_LEN_XPATH(element)
        fast, slow = both(boilerplate._p_len, element)
        assert fast == slow
        for chars in (0, 1, 3, 10, 40):
            fast, slow = both(boilerplate._has_text, element, chars)
            assert fast == slow, chars
        fast, slow = both(boilerplate._scan, element)
        assert fast == slow
        fast, slow = both(lambda e: [pair for pair in boilerplate._markers(e) if pair[0]], element)
        assert fast == slow


def test_main_content_walks_cover_the_rules() -> None:
    # The comparison above must see real verdicts and lengths (it could pass on two empty results).
    from simhash_scrapy.core import boilerplate

    page = ('<html><body><main><div class="entry-content"><h2>T</h2><p>one <a href="/x">two  three</a></p></div>'
            '<nav><a>menu</a></nav><div id="comments">c</div></main></body></html>')
    for compiled in (True, False):
        with _native.switched(compiled):
            root = etree.fromstring(page, etree.HTMLParser())
            main = root.find(".//main")
            named, bodies, headings = boilerplate._scan(main)
            assert [e.tag for e in named] == ["nav", "div"] and [e.get("class") for e in bodies] == ["entry-content"]
            assert [e.tag for e in headings] == ["h2"]
            assert [(s, e.tag) for s, e in boilerplate._markers(root) if s] == [(2, "main")]
            assert (boilerplate._text_len(main), boilerplate._LINK_LEN(main), boilerplate._p_len(main)) == (19, 13, 13)
            assert boilerplate._has_text(main, 17) and not boilerplate._has_text(main, 18)
