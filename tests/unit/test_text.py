"""Visible-text extraction on real-looking HTML."""

from __future__ import annotations

from pathlib import Path

import pytest

from simhash_scrapy import extract_text, fingerprint, fingerprint_html
from bs4_reference import extract_text_bs4

# Every test runs on the compiled helpers and on the pure-Python path (conftest.implementation).
pytestmark = pytest.mark.usefixtures("implementation")

PAGE = """<!DOCTYPE html>
<html lang="en"><head><title>Title is not body text</title>
<meta charset="utf-8"><style>body { color: red }</style>
<script>var tracking = "script text";</script></head>
<body>
<noscript>Enable JavaScript</noscript>
<template><p>template text</p></template>
<svg><text>svg text</text></svg>
<!-- a comment -->
<h1>Visible heading</h1><p>First paragraph with <b>bold</b> and <a href="/x">a link</a>.</p><p>Second&nbsp;paragraph &amp; entities &lt;ok&gt; &#233;t&eacute;</p>
<div hidden>hidden attribute</div>
<div aria-hidden="true">aria hidden</div>
<div aria-hidden="false">aria visible</div>
<span style="display:none">display none</span>
<span style="color: red; VISIBILITY : hidden">visibility hidden</span>
<span style="display: inline">display inline</span>
line one<br>line two
<table><tr><td>cell a</td><td>cell b</td></tr><tr><th>head c</th></tr></table>
<ul><li>item one</li><li>item two</li></ul>
</body></html>"""


def test_visible_text_drops_invisible_markup() -> None:
    text = extract_text(PAGE)
    assert text.splitlines() == [
        "Visible heading",
        "First paragraph with bold and a link.",
        "Second paragraph & entities <ok> été",
        "aria visible",
        "display inline line one",
        "line two",
        "cell a",
        "cell b",
        "head c",
        "item one",
        "item two",
    ]
    for gone in ("Title", "script", "color", "Enable", "template", "svg", "comment", "hidden", "display none"):
        assert gone not in text


@pytest.mark.parametrize(
    "html,expected",
    [
        ("<p>a</p><p>b</p>", "a\nb"),
        ("<div>a<div>b</div>c</div>", "a\nb\nc"),
        ("<td>a</td><td>b</td>", "a\nb"),
        ("<li>a</li><li>b</li>", "a\nb"),
        ("a<br>b<br/>c", "a\nb\nc"),
        ("<span>a</span><span>b</span>", "ab"),
        ("x <i>y</i>  z\t\n w", "x y z w"),  # source newlines render as spaces
        ("<p>  spaced   out  </p>", "spaced out"),
    ],
)
def test_blocks_separate_words_and_whitespace_is_normalised(html: str, expected: str) -> None:
    assert extract_text(html) == expected


def test_hidden_element_keeps_its_tail() -> None:
    assert extract_text("<p>before <span hidden>secret</span>after</p>") == "before after"
    assert extract_text("<p><span hidden>secret</span>after</p>") == "after"


def test_broken_markup() -> None:
    html = "<html><body><p>unclosed <b>bold <i>both</p><div>next</span></div><p>last"
    assert extract_text(html) == "unclosed bold both\nnext\nlast"
    assert extract_text("<<<>>> <p>text</p></html></html>") .endswith("text")


def test_script_cut_does_not_swallow_similar_tags() -> None:
    html = "<scripts>kept</scripts> <script type='x'>dropped</script><styled>also kept</styled> <style>x{}</style>end"
    assert extract_text(html) == "kept also kept end"
    assert extract_text("<p>a</p><script>never closed") == "a"


@pytest.mark.parametrize(
    "data,encoding,expected",
    [
        ('<meta charset="iso-8859-1"><p>caf\xe9</p>'.encode("latin-1"), None, "café"),
        ('<meta http-equiv="Content-Type" content="text/html; charset=windows-1251"><p>Привет</p>'.encode("cp1251"), None, "Привет"),
        ('<?xml version="1.0" encoding="shift_jis"?><html><p>日本語</p></html>'.encode("shift_jis"), None, "日本語"),
        ("<p>naïve</p>".encode("utf-8"), None, "naïve"),
        ("<p>naïve</p>".encode("cp1252"), None, "naïve"),  # undeclared, not UTF-8: windows-1252
        ("<p>naïve</p>".encode("latin-1"), "latin-1", "naïve"),
        ("<p>Grüße</p>".encode("utf-16"), None, "Grüße"),
        ('<meta charset="no-such-codec"><p>ok</p>'.encode(), None, "ok"),
        ("<p>x</p>".encode(), "bogus-encoding", "x"),
    ],
)
def test_encodings(data: bytes, encoding: str | None, expected: str) -> None:
    assert extract_text(data, encoding=encoding) == expected


def test_xml_declaration_in_str_and_bytes() -> None:
    page = '<?xml version="1.0" encoding="utf-8"?>\n<html><body><p>xhtml page</p></body></html>'
    assert extract_text(page) == "xhtml page"
    assert extract_text(page.encode()) == "xhtml page"


def test_invalid_utf8_and_nul_bytes() -> None:
    assert extract_text(b'<meta charset="utf-8"><p>ok \xff\xfe bad</p>') == "ok \ufffd\ufffd bad"
    # libxml2 reads NUL as U+FFFD; other control characters separate words.
    assert extract_text(b"<p>a\x00b\x01c</p>") == "a\ufffdb c"
    assert extract_text("<p>a\x00b</p>") == "a\ufffdb"
    assert fingerprint("a\ufffdb c") == fingerprint("a b c")
    hidden_with_control_tail = "<p>x<span hidden>h</span>\x01tail</p>"
    assert extract_text(hidden_with_control_tail) == "x tail"


def test_deeply_nested_markup() -> None:
    html = "<div>" * 10_000 + "deep text" + "</div>" * 10_000
    assert extract_text(html) == "deep text"
    assert fingerprint_html(html, min_tokens=1) == fingerprint("deep text")


@pytest.mark.parametrize("html", ["", "   \n\t ", "<html></html>", "<!-- only a comment -->", b"", "<p>!!! ??? ...</p>"])
def test_empty_pages(html) -> None:
    assert extract_text(html).strip("!?. ") == ""
    assert fingerprint_html(html) is None


def test_binary_input_never_raises() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4
    assert extract_text(png) == ""
    assert fingerprint_html(png) is None


def test_main_content_mode_exists_and_drops_boilerplate() -> None:
    page = """<html><body>
    <div class="site-nav"><a href="/">Home</a> <a href="/a">About</a> <a href="/b">Blog</a></div>
    <div id="cookie-banner">We use cookies to improve your experience. Accept all cookies?</div>
    <main><h1>Article title</h1><p>The article body is what a reader came for, and it is long enough
    to matter for the fingerprint of this page.</p></main>
    <div class="sidebar related"><h3>Popular pages</h3><ul><li><a href="/1">One</a></li><li><a href="/2">Two</a></li></ul></div>
    <div class="footer">Copyright 2026 Example Corp. All rights reserved.</div>
    </body></html>"""
    main = extract_text(page, main_content=True)
    assert "article body" in main and "Article title" in main
    for boilerplate in ("cookies", "Popular", "Copyright", "About"):
        assert boilerplate not in main
    assert "cookies" in extract_text(page)


def test_fingerprint_html_equals_fingerprint_of_extracted_text() -> None:
    assert fingerprint_html(PAGE) == fingerprint(extract_text(PAGE))
    assert fingerprint_html(PAGE, main_content=True) == fingerprint(extract_text(PAGE, main_content=True))


def test_elements_cut_from_bytes_follow_html_rules() -> None:
    assert extract_text("<p>a</p><svg><text>label</text><svg><text>inner</text></svg>tail</svg><p>b</p>") == "a\nb"
    assert extract_text("<p>a</p><svg><text>label</text></svg><p>b</p>") == "a\nb"
    assert extract_text("<p>a <svg-icon>kept</svg-icon></p>") == "a kept"
    assert extract_text("<p>a</p><svg><text>unclosed svg") == "a"
    assert extract_text("<p>a</p><template><p>t</p><template>x</template></template><p>b</p>") == "a\nb"
    assert extract_text("<p>a</p><noscript>enable js</noscript>b") == "a\nb"


REAL_PAGES = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "quality" / "sample" / "pages").rglob("*.html"))


def test_real_sample_pages_are_committed() -> None:
    assert len(REAL_PAGES) >= 20


@pytest.mark.parametrize("path", REAL_PAGES, ids=lambda p: p.name)
def test_lxml_path_agrees_with_beautifulsoup_reference(path: Path) -> None:
    # Two independent parsers (libxml2 and Python's html.parser) must give the
    # same visible text on real pages.
    data = path.read_bytes()
    assert extract_text(data) == extract_text_bs4(data)


@pytest.mark.parametrize("html", [PAGE, "<p>a</p><p>b</p>", "<p>before <span hidden>secret</span>after</p>"])
def test_reference_extractor_follows_the_same_rules(html: str) -> None:
    assert extract_text_bs4(html) == extract_text(html)


@pytest.mark.parametrize("main_content", [False, True])
@pytest.mark.parametrize(
    "page",
    [
        PAGE,
        "<p>x<span hidden>h</span>\x01tail</p><script>a</script>tail2<noscript><script>b</script>n</noscript>t3",
        "<div><nav>menu <a href='/'>home</a></nav>text <style>s{}</style>more</div>",
    ]
    + [p.read_bytes() for p in REAL_PAGES[:8]],
)
def test_text_of_a_shared_tree_leaves_it_as_it_was(page, main_content: bool) -> None:
    # The plugin cleans Scrapy's own parse in place and undoes every removal.
    from lxml import etree, html as lxml_html

    from simhash_scrapy.core.extract.text import extract_text_bytes, text_of_parsed, to_utf8

    root = lxml_html.fromstring(to_utf8(page).decode("utf-8"))
    root = root.getroottree().getroot()
    before = etree.tostring(root)
    raw = page if isinstance(page, bytes) else page.encode()
    assert text_of_parsed(root, raw, main_content) == extract_text(page, main_content=main_content)
    assert text_of_parsed(root, raw, main_content, as_bytes=True) == extract_text_bytes(page, main_content=main_content)
    assert etree.tostring(root) == before


@pytest.mark.parametrize(
    "style",
    ["display:none", "DISPLAY : NONE", "color:red;display:none", "display:\u00a0none", "visibility:\u2003hidden",
     "\x1cdisplay:none", "visibility :\tHidden"],
)  # fmt: skip
def test_hidden_by_inline_style_with_any_whitespace(style: str) -> None:
    # Python's \s (Unicode whitespace) decides; the byte-level pre-check must not miss non-ASCII spaces.
    page = f'<html><body><p>shown</p><p style="{style}">gone</p><b style="display:nonesuch">kept</b></body></html>'
    assert extract_text(page) == "shown\nkept"
    assert extract_text(page.encode("utf-8")) == "shown\nkept"


@pytest.mark.parametrize("main_content", [False, True])
@pytest.mark.parametrize(
    "body",
    ["a\x01b<script></script>", '<p style="display:none"></p>a\x01b<script></script>', "<p>x\x02</p><nav>n</nav>"],
)
def test_shared_tree_with_control_characters_next_to_removed_elements(body: str, main_content: bool) -> None:
    # Text with C0 controls cannot be set back by lxml: removals beside it must not need that.
    from lxml import etree, html as lxml_html

    from simhash_scrapy.core.extract.text import text_of_parsed

    page = f"<html><body>{body}</body></html>"
    root = lxml_html.document_fromstring(page)
    before = etree.tostring(root)
    assert text_of_parsed(root, page.encode(), main_content) == extract_text(page, main_content=main_content)
    assert etree.tostring(root) == before
