"""core/cluster/representative.py: a cluster's representative (``choose``), the crawl's per-cluster view
(``ClusterBook``), rel=canonical from a tag or a header; the crawls are tests/e2e/test_representative.py."""

from __future__ import annotations

import pytest

from simhash_scrapy.core.cluster.representative import (
    Candidate,
    ClusterBook,
    Reason,
    choose,
    html_canonical,
    link_header_canonical,
    names_elsewhere,
    redirect_named,
)
from simhash_scrapy.core.extract.text import parse_html


def test_choose_follows_the_order_of_the_rules() -> None:
    a = "https://x.example/doc/a.html"
    tracking, printed, _amp = a + "?utm_source=x", "https://x.example/print/doc/a.html", "https://x.example/doc/a.amp.html"
    mirror = "https://x.example/mirror/doc/a.html"
    assert choose([Candidate(tracking), Candidate(printed), Candidate(a)]) == (2, Reason.NOT_VARIANT)
    # Both with a query, neither a copy: the first crawled, never the shorter one.
    assert choose([Candidate(a + "?sort=1", None, 0), Candidate(a + "?p=1", None, 1)]) == (0, Reason.FIRST_CRAWLED)
    # ... unless one of them carries a tracking parameter
    assert choose([Candidate(tracking, None, 0), Candidate(a + "?p=1", None, 1)]) == (1, Reason.NOT_VARIANT)
    assert choose([Candidate(tracking), Candidate(printed)]) == (1, Reason.NO_QUERY)
    assert choose([Candidate(mirror), Candidate(a)]) == (1, Reason.NOT_VARIANT)
    # The site's own word: a page naming another page as canonical is a copy, whatever its URL looks like ...
    short_copy = "https://x.example/t/a.html"
    assert choose([Candidate(short_copy, "https://news.example/2026/a"), Candidate(a)]) == (1, Reason.NOT_VARIANT)
    # ... and it counts before the URL's look (a clean-looking copy naming elsewhere loses to a /print/ page).
    assert choose([Candidate(short_copy, "https://news.example/2026/a"), Candidate(printed)]) == (1, Reason.NOT_VARIANT)
    # A page naming itself under another scheme or host (www, https) is not a copy.
    assert choose([Candidate(short_copy, None, 0), Candidate(a, "https://www.x.example/doc/a.html", 1)]) \
        == (0, Reason.FIRST_CRAWLED)
    # Across hosts: the page that was there first, not the shorter domain.
    assert choose([Candidate("https://origin-news.example/2026/a", None, 0), Candidate("https://cp.example/2026/a", None, 1)]) \
        == (0, Reason.FIRST_CRAWLED)
    # A member named by rel=canonical wins over a shorter, cleaner one (the site's choice).
    assert choose([Candidate(a, mirror), Candidate(mirror)]) == (1, Reason.REL_CANONICAL)
    # A target nobody crawled names no member; the URL form is compared (host case, query order).
    assert choose([Candidate(tracking, "https://other.example/"), Candidate(a)]) == (1, Reason.NO_QUERY)
    assert choose([Candidate(a + "?b=2&a=1"), Candidate(a, "https://X.example/doc/a.html?a=1&b=2")])[0] == 0
    # Ties: the first crawled.
    assert choose([Candidate(a), Candidate(a.replace("/a.", "/b."))]) == (0, Reason.FIRST_CRAWLED)
    assert choose([Candidate(tracking), Candidate(a)], "first") == (0, Reason.FIRST_CRAWLED)
    with pytest.raises(ValueError):
        choose([])


def test_names_elsewhere() -> None:
    a = "https://x.example/doc/a.html"
    assert not names_elsewhere(a, None)
    assert not names_elsewhere(a, a) and not names_elsewhere(a, "http://WWW.x.example/doc/a.html")
    assert not names_elsewhere(a + "?b=1&a=2", "https://x.example/doc/a.html?a=2&b=1")
    assert names_elsewhere(a + "?utm_source=x", a)
    assert names_elsewhere("https://x.example/mirror/doc/a.html", a)


def test_redirect_named() -> None:
    a = "https://x.example/articles/a.html"
    assert redirect_named(a, ["https://x.example/go/a"]) == a
    assert redirect_named(a, ["https://x.example/articles/a.html?utm_source=x"]) == a
    assert redirect_named(a, []) is None
    assert redirect_named(a + "?ref=old", ["https://x.example/old/a"]) is None  # a redirect adding a query
    assert redirect_named(a, ["http://x.example/articles/a.html", "https://www.x.example/articles/a.html/"]) is None


def test_canonical_from_tag_and_header() -> None:
    root = parse_html(b'<html><head><base href="/base/"><link rel="Canonical" href="page.html"></head></html>')
    assert html_canonical(root, "https://x.example/base/") == "https://x.example/base/page.html"
    assert html_canonical(parse_html(b"<html><head><link rel=canonical href='javascript:x'></head></html>"),
                          "https://x.example/") is None
    assert link_header_canonical(['<https://x.example/a>; rel="preload", <https://x.example/b>; rel="canonical"']) \
        == "https://x.example/b"
    assert link_header_canonical(['<https://x.example/a,b>; rel=canonical']) == "https://x.example/a,b"
    assert link_header_canonical(['<https://x.example/a>; rel="next"']) is None


def test_cluster_book_replacements_and_positions() -> None:
    book = ClusterBook("best")
    a = "https://x.example/a.html"
    first = book.place("s", "anchor", a + "?utm=1", a, "p2", "https://x.example/print/a.html", None)
    assert (first.position, first.representative, first.replaced) == (2, "https://x.example/print/a.html", True)
    again = book.place("s", "anchor", a + "?utm=1", a, "p2", "https://x.example/print/a.html", None)
    assert (again.position, again.replaced) == (2, False)  # a page checked again keeps its place
    last = book.place("s", "anchor", a + "?utm=1", a, "p3", a, a)
    assert (last.position, last.representative, last.reason, last.replaced) == (3, a, Reason.REL_CANONICAL, True)
    with pytest.raises(ValueError, match="one of best, first"):
        ClusterBook("nope")
