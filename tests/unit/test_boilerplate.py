"""Main-content extraction on real-looking templates (simhash_scrapy.core.extract.boilerplate via extract_text)."""

from __future__ import annotations

import pytest

from simhash_scrapy import extract_text, fingerprint_html, hamming_distance
from simhash_scrapy.core.extract.boilerplate import names_boilerplate
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
    # the headline is the frame's (test_the_frame_around_an_article_is_not_its_text), the rest is text
    assert main.startswith("The configparser module reads INI-style files.")
    assert "Reading configuration files" not in main and "\nWriting files\n" in main
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
        ('<div class="section level2" id="sharing"></div>', False),  # pandoc's
        ('<div class="section bleeding" id="footer"></div>', True),  # a page builder's, named by its id
        ('<div class="sectionColumns" id="footer"></div>', True),
        ('<div class="byline"></div>', True),
        ('<div class="PostByline"></div>', True),
        ('<div class="relatedRail" id="editorialRelatedNews"></div>', True),
        ('<div class="relation"></div>', False),
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


# --- extraction failures fall back; teaser lists; redirect stubs -----------------------------------

LONG_ARTICLE = " ".join(
    f"<p>Paragraph {i}: the council approved the new budget for the harbour district after a long debate, "
    f"and the mayor said work on the {word} quay would start in spring, paid for by the regional fund.</p>"
    for i, word in enumerate(["north", "south", "east", "west", "old", "new", "fishing", "ferry"])
)
OTHER_ARTICLE = " ".join(
    f"<p>Section {i}: the museum reopened its {word} wing with a collection of maps, letters and ship models "
    f"lent by families of the town, and entry stays free for children until the end of the year.</p>"
    for i, word in enumerate(["maritime", "textile", "railway", "school", "market", "garden", "glass", "clock"])
)


def false_lead(article: str) -> str:
    """A page whose <main> holds only a byline; the article sits in a plain div beside it."""
    return f"""<html><body>{PLAIN_NAV}<main><p class="byline">By the newsroom staff, updated daily</p></main>
    <div class="c-7">{article}</div>{FOOTER_LINKS}</body></html>"""


def test_a_main_text_tiny_against_the_page_falls_back_to_the_visible_text() -> None:
    main = extract_text(false_lead(LONG_ARTICLE), main_content=True)
    assert "harbour district" in main and "ferry quay" in main
    assert "Privacy policy" not in main  # the fallback still drops boilerplate (a link list)


def test_a_short_main_text_cut_from_a_long_page_is_not_an_exact_short_page() -> None:
    from simhash_scrapy.core.analysis import analyse_html

    first, second = analyse_html(false_lead(LONG_ARTICLE)), analyse_html(false_lead(OTHER_ARTICLE))
    assert not first.exact and not second.exact  # the same byline is not their text
    assert hamming_distance(first.fingerprint, second.fingerprint) > 10


def test_a_block_of_prose_named_widget_by_a_page_builder_is_kept() -> None:
    page = f"""<html><body><main><div class="elementor-widget-wrap"><h1>Harbour budget</h1>
    <div class="elementor-widget elementor-widget-text-editor"><div class="elementor-widget-container">
    {LONG_ARTICLE}</div></div></div>
    <div class="widget widget_recent_entries"><h3>Recent</h3><ul><li><a href="/a">A post</a></li>
    <li><a href="/b">Another post</a></li></ul></div></main></body></html>"""
    main = extract_text(page, main_content=True)
    assert "ferry quay" in main and "Another post" not in main


def teaser(i: int) -> str:
    return (
        f'<div class="card"><h3><a href="/story-{i}">Story number {i} about the town</a></h3>'
        f"<p>A short summary of story {i}, two lines long, with the usual first sentence.</p></div>"
    )


def test_teaser_lists_beside_the_article_are_dropped() -> None:
    teasers = "".join(teaser(i) for i in range(6))
    page = f"""<html><body><article><h1>Harbour budget</h1>{LONG_ARTICLE}
    <div class="c-more"><h2>More from the town</h2>{teasers}</div></article></body></html>"""
    main = extract_text(page, main_content=True)
    assert "ferry quay" in main
    assert "Story number" not in main and "short summary" not in main


def test_a_page_that_is_a_list_of_teasers_keeps_them() -> None:
    teasers = "".join(teaser(i) for i in range(6))
    page = f"<html><body><main><h1>Latest stories</h1>{teasers}</main></body></html>"
    main = extract_text(page, main_content=True)
    assert all(f"Story number {i}" in main for i in range(6))


def test_headings_with_in_page_anchors_are_not_teasers() -> None:
    sections = "".join(
        f'<div class="section"><h2>Option {i}<a class="headerlink" href="#option-{i}">link to option {i}</a></h2>'
        f"<p>Option {i} sets how many workers run.</p></div>"
        for i in range(6)
    )
    page = f"<html><body><main><h1>Options</h1>{LONG_ARTICLE}{sections}</main></body></html>"
    main = extract_text(page, main_content=True)
    assert all(f"Option {i} sets" in main for i in range(6))


STUB = """<!DOCTYPE html><html lang="en"><head>
<meta http-equiv="refresh" content="0;URL=../../std/primitive.slice.html"><title>Redirection</title></head>
<body><p>Redirecting to <a href="../../std/primitive.slice.html">../../std/primitive.slice.html</a>...</p>
{noise}<script>location.replace("../../std/primitive.slice.html" + location.search + location.hash);</script>
</body></html>"""


def test_redirect_stubs_of_one_target_are_one_page_whatever_their_noise() -> None:
    from simhash_scrapy.core.analysis import AnalysisOptions, analyse_html, analyse_tree
    from simhash_scrapy.core.extract.text import parse_html

    plain = analyse_html(STUB.format(noise=""))
    noisy = analyse_html(
        STUB.format(noise="<div>Session 8f7a61c0 started 12:03:44, request id 77810293, ad: try our app</div>").encode()
    )
    assert plain.exact and noisy.exact and plain.fingerprint == noisy.fingerprint
    other = analyse_html(STUB.format(noise="").replace("primitive.slice", "primitive.str"))
    assert other.fingerprint != plain.fingerprint
    # the same answer from a tree parsed elsewhere (the crawl), with or without the raw bytes
    options = AnalysisOptions(keep_text=True)
    raw = STUB.format(noise="").encode()
    for answer in (analyse_tree(parse_html(raw), raw, options), analyse_tree(parse_html(raw), None, options)):
        assert answer.fingerprint == plain.fingerprint and answer.text == "redirect ../../std/primitive.slice.html"


@pytest.mark.parametrize(
    "head",
    [
        '<noscript><meta http-equiv="refresh" content="0; url=/no-javascript"></noscript>',  # not a redirect
        '<meta http-equiv="refresh" content="300">',  # a news page reloading itself
        '<meta http-equiv="refresh" content="60; url=/login">',  # too late to be a redirect
        '<meta name="description" content="refresh your kitchen, url=/x">',
    ],
)
def test_refreshes_that_are_not_redirects(head: str) -> None:
    from simhash_scrapy.core.extract.boilerplate import redirect_target

    assert redirect_target(f"<html><head>{head}</head><body><p>Text</p></body></html>".encode()) is None


def test_a_long_page_with_a_refresh_is_content() -> None:
    from simhash_scrapy.core.analysis import analyse_html

    page = f'<html><head><meta http-equiv="refresh" content="0; url=/elsewhere"></head><body>{LONG_ARTICLE}</body></html>'
    answer = analyse_html(page)
    assert not answer.exact and answer.fingerprint == fingerprint_html(page)


@pytest.mark.parametrize("heading", ["<h1>City news</h1>", ""])  # the paragraph walk / the walk down
def test_the_walks_never_enter_a_comment_thread(heading: str) -> None:
    """An unmarked page (a table layout) whose comment thread holds most of its paragraphs: the
    walks stop above the thread, so two articles sharing one thread are not one page."""
    comments = "".join(
        f"<p>Comment {n}: I read this on the train and I have to say the second half of the argument "
        f"about the budget of the city and its harbour did not convince me at all, number {n}.</p>"
        for n in range(12)
    )

    def page(story: str) -> str:
        return (
            f"<html><body><table><tr><td>{heading}<div><p>{story}</p></div>"
            f'<div class="comment-list">{comments}</div></td></tr></table></body></html>'
        )

    harbour = page("The harbour opens a new ferry line to the islands next spring, the council said. " * 4)
    museum = page("The museum shows a collection of early photographs from the valley this winter. " * 4)
    assert "ferry line" in extract_text(harbour, main_content=True)
    assert "early photographs" in extract_text(museum, main_content=True)
    assert hamming_distance(fingerprint_html(harbour), fingerprint_html(museum)) > 4


@pytest.mark.parametrize(
    "chrome",
    [
        '<div class="article-inline-byline">By Alyssa Newcomb</div>',
        '<div class="PostByline"><a class="PostByline__author">Ashley Brown</a> Oct 13, 2016</div>',
        '<div class="postedby">Posted by jrmylmb - Tuesday, January 08, 2008</div>',
        '<div class="trackbacks"><p>TrackBack URL for this entry: http://example.com/tb/6a00d8</p></div>',
        '<div class="expanded-byline"><p>Alyssa Newcomb is a contributor who writes about business.</p></div>',
        '<div class="postmetadata">Posted in Contagious Disease, Ashley | 1 Comment</div>',
        '<ol class="commentlist"><li><cite>Ashley</cite> says: Agree that this is a concern.</li></ol>',
        '<div id="respond"><h3>Leave a Reply to Ashley</h3></div>',
        '<div class="post relatedContent"><a href="/x"><span>Ashley on the new tests</span></a></div>',
        '<div id="relatedNews"><ul><li><a href="/y">Airbus to work with Ashley</a></li></ul></div>',
    ],
)
def test_post_chrome_named_by_its_class_is_not_content(chrome: str) -> None:
    # A print view or a syndicated copy of an article drops its byline, the author's bio, the trackback
    # box, the post's metadata line, the comments and "related" boxes: chrome named so by its class or id.
    page = f"<html><body><article>{chrome}{ARTICLE}</article></body></html>"
    text = extract_text(page, main_content=True)
    assert "configparser module" in text
    assert not any(word in text for word in ("Newcomb", "Ashley", "jrmylmb", "TrackBack"))


def test_a_data_table_or_a_list_of_points_before_the_first_heading_is_text() -> None:
    # An unmarked page (a table layout) whose article opens without a heading: the chrome before
    # the first heading is dropped, but a data table and a list of points there are the text's own.
    intro = "".join(f"<p>{s}</p>" for s in ARTICLE.split("</p>")[0].split("<p>")[1:])
    table = "<table><tr><th>format</th><th>end 2013</th></tr><tr><td>HTML</td><td>57Kb</td></tr></table>"
    points = "<ul><li>Pages contain more than fifty images, which seems excessive.</li></ul>"
    bar = '<div class="c-x1"><a href="/">Home</a> | <a href="/print">Print</a></div>'
    page = (
        "<html><body><table><tr><td>" + PLAIN_NAV + "</td><td>"
        + bar + intro + table + points + ARTICLE.split("</h1>", 1)[1]
        + "</td></tr></table></body></html>"
    )  # fmt: skip
    text = extract_text(page, main_content=True)
    assert "57Kb" in text and "fifty images" in text
    assert "round-trip mode." in text and "Print" not in text  # the link bar is still chrome


def test_a_link_list_between_paragraphs_is_the_texts_own() -> None:
    # A list of links in the article's flow (the reports it cites, between two paragraphs) is text;
    # the same list standing after the article is a "more links" box beside it.
    cited = (
        '<ul><li><a href="http://a.example/r1">Meeting report from the Osaka venue (a reader blog)</a></li>'
        '<li><a href="http://b.example/r2">Slides of the meeting published (another blog)</a></li>'
        '<li><a href="http://c.example/r3">I joined the Tokyo meeting (a third blog)</a></li></ul>'
    )
    head, tail = ARTICLE.split("<h2>", 1)
    inside = f"<html><body><div class='x'>{head}{cited}<h2>{tail}</div></body></html>"
    assert "Osaka venue" in extract_text(inside, main_content=True)
    beside = f"<html><body><div class='x'>{ARTICLE}{cited}</div></body></html>"
    assert "Osaka venue" not in extract_text(beside, main_content=True)


@pytest.mark.parametrize("name", ["post__content", "article__body", "entry-content", "story_text"])
def test_the_article_body_class_narrows_the_article_bem_names_too(name: str) -> None:
    # <article> holds the post's details column (kicker, date, category links) beside the text; a
    # block named as the article's body (BEM's double "__" too) holds the text alone.
    details = (
        '<div class="c-details"><span>Reader Submissions</span> <span>Oct 13, 2016</span> <span>House Call, '
        "Living Rooms, Kitchens and Dining Rooms, Small Space Living, Renovations and Makeovers</span></div>"
    )
    page = f'<html><body><article class="post">{details}<div class="{name}">{ARTICLE}</div></article></body></html>'
    text = extract_text(page, main_content=True)
    assert "round-trip mode." in text and "Reader Submissions" not in text


BODY = (
    "<p>The city council voted on Monday to keep the old library open for another year, after a "
    "petition signed by four thousand residents asked it to wait for the new building's budget.</p>"
    "<p>The library will open on Saturdays again from March, and its reading room, closed since the "
    "roof leaked in the autumn storms, is to be repaired with money from the maintenance fund.</p>"
    "<p>The council will vote on the new building again in the spring, when the budget is known.</p>"
)


def blog_post(body: str) -> str:
    """A blog template that frames its post: a previous/next bar, a date row and the headline above
    it, a "posted by" row and a tag bar below it, all in the marked container."""
    return f"""<html><body><div id="content">
      <p class="nav"><a href="/older">&laquo; Storm damage closes the coast road between the harbour and the lighthouse</a> |
        <a href="/">Main</a> | <a href="/newer">The primary school on Mill Lane reopens after the holidays &raquo;</a></p>
      <p class="date-header">November 06, 2012</p>
      <h3 class="entry-header">Library stays open for another year</h3>
      <div class="entry">{body}</div>
      <p class="posted">Posted by Ann Lee at 7:43 PM</p>
      <p class="tags">Tags: <a href="/t/city">City council</a>, <a href="/t/library">Public library</a>,
        <a href="/t/budget">Library budget</a>, <a href="/t/storms">Autumn storms</a>,
        <a href="/t/hours">Saturday opening hours</a>, <a href="/t/roof">Roof repairs</a>,
        <a href="/t/petitions">Petitions</a>, <a href="/t/maintenance">Maintenance fund</a></p>
    </div></body></html>"""


def print_view(body: str) -> str:
    return f'<html><body class="print"><div id="print-content">{body}</div></body></html>'


def test_the_frame_around_an_article_is_not_its_text() -> None:
    # Its headline, date rows and link bars at both edges frame an article differently in every
    # template; its print view has none of them.  Both give the article's paragraphs, word for word.
    post = extract_text(blog_post(BODY), main_content=True)
    assert post == extract_text(print_view(BODY), main_content=True)
    assert post.startswith("The city council voted") and post.endswith("when the budget is known.")
    assert fingerprint_html(blog_post(BODY), main_content=True) == fingerprint_html(print_view(BODY), main_content=True)
    visible = extract_text(blog_post(BODY))
    assert "Posted by Ann Lee" in visible and "November 06, 2012" in visible


def test_a_second_heading_at_the_edge_starts_the_text() -> None:
    # One heading is the frame's (the headline); the next one is the first section's title.
    page = f"<html><body><main><h1>Library stays open</h1><h2>The vote</h2>{BODY}</main></body></html>"
    text = extract_text(page, main_content=True)
    assert text.startswith("The vote\nThe city council voted")


def test_a_short_row_without_a_date_is_text_not_frame() -> None:
    page = f"<html><body><main><p>Dear residents,</p>{BODY}<p>Thank you!</p></main></body></html>"
    text = extract_text(page, main_content=True)
    assert text.startswith("Dear residents,") and text.endswith("Thank you!")


def test_a_stub_page_keeps_its_frame() -> None:
    # Cut down to under 300 characters, stubs of one generator would be one page: kept whole.
    stub = "<html><body><main><h1>Class Widget</h1><p>Updated 2021-04-02</p><p>A widget of the toolkit, drawn by its parent.</p></main></body></html>"
    assert extract_text(stub, main_content=True) == "Class Widget\nUpdated 2021-04-02\nA widget of the toolkit, drawn by its parent."


def test_a_page_of_dated_rows_only_is_not_trimmed() -> None:
    rows = "".join(f"<p>Meeting minutes of March {day}, 2024 (two pages)</p>" for day in range(1, 20))
    text = extract_text(f"<html><body><main><h1>Minutes</h1>{rows}</main></body></html>", main_content=True)
    assert text.startswith("Minutes\nMeeting minutes of March 1, 2024") and text.endswith("March 19, 2024 (two pages)")


def test_the_frame_walk_stops_in_deep_markup() -> None:
    # 1,500 nested wrappers (libxml2 builds up to 2,048 levels): the walk down to the text is
    # bounded, never Python's recursion limit.
    deep = "<div>" * 1500 + BODY + "</div>" * 1500
    page = f"<html><body><main><h1>Library stays open</h1>{deep}</main></body></html>"
    text = extract_text(page, main_content=True)
    assert "The city council voted" in text and text.endswith("when the budget is known.")
