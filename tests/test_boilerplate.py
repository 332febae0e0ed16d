"""Main-content extraction on real-looking templates (simhash_scrapy.core.boilerplate via extract_text)."""

from __future__ import annotations

import pytest

from simhash_scrapy import extract_text, fingerprint_html, hamming_distance
from simhash_scrapy.core.boilerplate import names_boilerplate
from lxml import etree

ARTICLE = """
<h1>Reading configuration files</h1>
<p>The configparser module reads INI-style files.  Sections are introduced by a header in square
brackets and hold key and value pairs separated by an equals sign or a colon.</p>
<p>Values are strings unless converted with getint, getfloat or getboolean, and interpolation lets
one value refer to another value of the same section or of the DEFAULT section.</p>
<h2>Writing files</h2>
<p>A parser can also write its state back, so a program may change one option and save the file
without losing comments written by hand, as long as it uses the round-trip mode.</p>
"""

COOKIE = (
    '<div class="cc-window cc-banner" role="dialog"><span class="cc-message">This website uses cookies '
    "to ensure you get the best experience on our website.</span><a class=\"cc-btn\">Got it!</a></div>"
)
PLAIN_NAV = (
    '<div class="c-x1"><a href="/">Home</a> <a href="/docs">Documentation</a> <a href="/blog">Blog</a> '
    '<a href="/about">About us</a> <a href="/contact">Contact</a></div>'
)
POPULAR = (
    '<div class="col-md-3"><h3>Popular this week</h3><ul><li><a href="/1">Ten tips for faster loops</a></li>'
    '<li><a href="/2">Understanding descriptors</a></li><li><a href="/3">Packaging in depth</a></li>'
    '<li><a href="/4">Async generators explained</a></li></ul></div>'
)
SHARE = (
    '<div class="sharedaddy sd-sharing-enabled"><h3>Share this:</h3><a href="#">Twitter</a> '
    '<a href="#">Facebook</a> <a href="#">Email</a></div>'
)
RELATED = (
    '<div class="yarpp-related"><h3>Related posts</h3><ol><li><a href="/r1">Parsing JSON</a> '
    "Reading JSON documents into dictionaries and lists.</li><li><a href=\"/r2\">Logging setup</a> "
    "How to configure handlers from a file.</li></ol></div>"
)
FOOTER_LINKS = (
    '<div class="f9"><a href="/privacy">Privacy policy</a> | <a href="/terms">Terms of use</a> | '
    '<a href="/imprint">Imprint</a> | <a href="/jobs">Careers</a> | <a href="/press">Press</a></div>'
)


def wordpress(article: str) -> str:
    return f"""<html><head><title>Reading configuration files | Example blog</title></head><body>
    {COOKIE}
    <div id="page" class="site">
      <div id="masthead" class="site-header"><p class="site-title"><a href="/">Example blog</a></p>
        <div id="site-navigation" class="main-navigation"><ul><li><a href="/a">Tutorials</a></li>
        <li><a href="/b">Reference</a></li><li><a href="/c">News</a></li></ul></div></div>
      <div id="content" class="site-content">
        <article id="post-7" class="post type-post">
          <div class="entry-content">{article}</div>
          {SHARE}
          {RELATED}
          <div id="div-gpt-ad-1591-0" class="adunit">Advertisement: try our hosted notebooks today.</div>
        </article>
        <div id="secondary" class="widget-area"><div class="widget"><h3>Archives</h3>
          <ul><li><a href="/2024">2024</a></li><li><a href="/2025">2025</a></li></ul></div>
          <div class="widget"><h3>About</h3><p>A blog about Python written by volunteers since 2009.</p></div></div>
      </div>
      <div id="colophon" class="site-footer"><p>Proudly powered by a content management system.</p>{FOOTER_LINKS}</div>
    </div></body></html>"""


def sphinx(article: str, toc: str = "") -> str:
    return f"""<html><head><title>Reading configuration files</title></head><body>
    <div class="related" role="navigation" aria-label="related navigation"><h3>Navigation</h3>
      <ul><li><a href="genindex.html">index</a></li><li><a href="next.html">next</a> |</li></ul></div>
    <div class="document"><div class="documentwrapper"><div class="bodywrapper">
      <div class="body" role="main"><section id="reading-configuration-files">{article}{toc}</section></div>
    </div></div>
    <div class="sphinxsidebar" role="navigation"><div class="sphinxsidebarwrapper"><h3>Table of Contents</h3>
      <ul><li><a href="#">Reading configuration files</a></li><li><a href="#w">Writing files</a></li></ul>
      <h4>Previous topic</h4><p><a href="csv.html">csv — CSV File Reading and Writing</a></p></div></div></div>
    <div class="footer">&copy; Copyright 2001-2026, Python Software Foundation. Last updated on May 20, 2025.</div>
    </body></html>"""


def unmarked(article: str) -> str:
    """A template whose classes say nothing: navigation, sidebar and footer are plain divs."""
    return f"""<html><body>
    <div class="x0">{PLAIN_NAV}</div>
    <div class="x1">
      <div class="x2">{article}</div>
      {POPULAR}
    </div>
    {FOOTER_LINKS}
    </body></html>"""


def words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("template", [wordpress, sphinx, unmarked])
def test_boilerplate_is_dropped_and_article_kept(template) -> None:
    main = extract_text(template(ARTICLE), main_content=True)
    assert main.startswith("Reading configuration files")
    assert "round-trip mode." in main
    for junk in ("cookies", "Tutorials", "Share this", "Related posts", "Advertisement", "Archives",
                 "Popular this week", "Privacy policy", "Proudly powered", "Documentation", "Copyright",
                 "Previous topic", "Table of Contents", "index"):  # fmt: skip
        assert junk not in main, junk
    # the visible text still has all of it
    visible = extract_text(template(ARTICLE))
    assert "Reading configuration files" in visible and ("Privacy policy" in visible or "Copyright" in visible)


def test_same_article_in_three_templates_gives_the_same_text() -> None:
    texts = {t.__name__: extract_text(t(ARTICLE), main_content=True) for t in (wordpress, sphinx, unmarked)}
    assert len(set(texts.values())) == 1, texts
    fps = [fingerprint_html(t(ARTICLE), main_content=True) for t in (wordpress, sphinx, unmarked)]
    assert fps[0] is not None and fps[0] == fps[1] == fps[2]
    # whole-page text does not agree: the templates dominate
    visible = [fingerprint_html(t(ARTICLE), main_content=False) for t in (wordpress, sphinx, unmarked)]
    assert max(hamming_distance(visible[0], v) for v in visible[1:]) > 4


def test_table_of_contents_inside_marked_content_is_content() -> None:
    toc = (
        '<div class="toctree-wrapper compound"><ul>'
        + "".join(f'<li><a href="p{i}.html">Chapter {i}: working with option files, part {i}</a></li>' for i in range(12))
        + "</ul></div>"
    )
    main = extract_text(sphinx("<h1>Guide</h1><p>The chapters of this guide.</p>", toc), main_content=True)
    assert "Chapter 11: working with option files" in main
    assert "Previous topic" not in main


def test_index_page_without_markers_keeps_its_links() -> None:
    links = "".join(f'<li><a href="m{i}.html">module{i} — reading and writing format number {i}</a></li>' for i in range(30))
    page = f"<html><body><div class='a'><h1>Module index</h1><ul>{links}</ul></div></body></html>"
    main = extract_text(page, main_content=True)
    assert "module29 — reading and writing format number 29" in main


def test_section_ids_are_headings_not_names() -> None:
    article = (
        '<h1>Lexical analysis</h1><p>Intro text of the chapter about tokens.</p>'
        '<section id="comments"><h2>Comments</h2><p>A comment starts with a hash character that is not part of a '
        "string literal, and ends at the end of the physical line.</p></section>"
        '<section id="search-path"><h2>Search path</h2><p>Modules are looked up along a list of directories.</p></section>'
    )
    main = extract_text(sphinx(article), main_content=True)
    assert "A comment starts with a hash character" in main
    assert "Modules are looked up" in main


def test_wrapper_named_like_a_sidebar_that_holds_the_article_is_kept() -> None:
    page = f"""<html><body><div class="page has-sidebar"><div class="c">{ARTICLE}</div>
    <div class="sidebar"><h3>Elsewhere</h3><p>Short note in the sidebar.</p></div></div></body></html>"""
    main = extract_text(page, main_content=True)
    assert "round-trip mode." in main
    assert "Short note in the sidebar" not in main


def test_empty_main_is_skipped_not_replaced_by_the_template() -> None:
    page = f"""<html><body>{PLAIN_NAV}<div role="main"><h1>Search</h1>
    <p>Please activate JavaScript to enable the search functionality.</p></div>
    <div class="footer">&copy; Copyright 2001-2026, Python Software Foundation. This page is licensed under the
    Python Software Foundation License Version 2. Examples, recipes, and other code in the documentation are
    additionally licensed under the Zero Clause BSD License.</div></body></html>"""
    main = extract_text(page, main_content=True)
    assert "Copyright" not in main and "Home" not in main
    assert fingerprint_html(page, main_content=True) is None  # too little text: skipped


def test_empty_marked_id_is_a_false_lead() -> None:
    page = f"""<html><body><div id="content"></div><div class="wrap">{ARTICLE}</div></body></html>"""
    assert "round-trip mode." in extract_text(page, main_content=True)


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ('<div class="site-footer"></div>', True),
        ('<div id="cookie-notice"></div>', True),
        ('<div class="widget_recent_entries widget"></div>', True),
        ('<div id="div-gpt-ad-1591-0"></div>', True),
        ('<section id="related-work"></section>', False),  # a heading slug
        ('<div class="section" id="navigation"></div>', False),  # docutils' old section markup
        ('<div class="highlight-python3 notranslate"></div>', False),
        ('<div class="headerlink"></div>', False),
        ('<nav class="contents"></nav>', True),
        ('<div role="complementary"></div>', True),
    ],
)
def test_names_boilerplate(html: str, expected: bool) -> None:
    assert names_boilerplate(etree.fromstring(html)) is expected


def test_broken_and_odd_markup_never_raises() -> None:
    for page in ("", "<main></main>", "<article><article>x</article></article>", "<div role=main>" * 3000,
                 b"\xff\xfe<p>x</p>", "<table><tr><td><a>a</a><a>b</a></td></tr></table>"):  # fmt: skip
        assert isinstance(extract_text(page, main_content=True), str)


ABOUT = (
    "<p>I am a software developer who writes about Python, packaging and the odd bit of C.  These notes "
    "started as a diary of things I kept looking up, and they grew into the articles you find here.</p>"
)


def test_sidebar_box_of_prose_inside_the_text_is_kept() -> None:
    # DocBook's <sidebar>, docutils' sidebar directive: a titled box of prose between paragraphs.
    box = f'<div class="sidebar"><p class="title"><b>Background</b></p>{ABOUT}</div>'
    page = f"<html><body>{PLAIN_NAV}<div class='c'>{ARTICLE}{box}<p>After the box the text goes on.</p></div></body></html>"
    main = extract_text(page, main_content=True)
    assert "grew into the articles you find here" in main and "round-trip mode." in main


@pytest.mark.parametrize(
    "column",
    [
        # the first block of its parent: a column beside the article, not a box in its text
        lambda article: f'<div class="wrap"><div class="sidebar">{ABOUT}</div><div class="c">{article}</div></div>',
        # an id that names it ("sidebar", "secondary"), or another boilerplate class word
        lambda article: f'<div class="wrap"><div class="c">{article}</div><div id="sidebar" class="sidebar">{ABOUT}</div></div>',
        lambda article: f'<div class="wrap"><div class="c">{article}</div><div class="sidebar widget-area">{ABOUT}</div></div>',
        # mostly links
        lambda article: f'<div class="wrap"><div class="c">{article}</div><div class="sidebar">{POPULAR}</div></div>',
    ],
)
def test_sidebar_column_is_still_dropped(column) -> None:
    page = f"<html><body>{PLAIN_NAV}{column(ARTICLE)}</body></html>"
    main = extract_text(page, main_content=True)
    assert "round-trip mode." in main
    assert "grew into the articles" not in main and "Packaging in depth" not in main
