"""Counts agree with their nouns in every message (``core.wording``, issue 39)."""

from __future__ import annotations

from simhash_scrapy.core.report.html_report import render_html
from simhash_scrapy.core.report.report import describe_report
from simhash_scrapy.core.wording import plural, were


def test_plural_and_verb() -> None:
    assert [plural(n, "page") for n in (0, 1, 2, 1200)] == ["0 pages", "1 page", "2 pages", "1,200 pages"]
    assert plural(1, "process", "processes") == "1 process" and plural(3, "process", "processes") == "3 processes"
    assert (were(1), were(0), were(2)) == ("was", "were", "were")


def change(n: int) -> dict[str, object]:
    return {"url": f"https://x.example/{n}", "scope": "s", "fingerprint": "0f", "previous_fingerprint": "f0",
            "distance": 9}


def test_the_html_report_agrees_for_one_changed_page_and_for_several() -> None:
    one = render_html([], {}, changes=[change(1)])
    assert "1 page was crawled before and its text moved more than 4" not in one  # no k given
    assert "1 page was crawled before and its text moved bits away" in one and "1 pages" not in one
    two = render_html([], {}, changes=[change(1), change(2)])
    assert "2 pages were crawled before and their text moved" in two


def test_the_summary_line() -> None:
    line = describe_report({"pages": 1, "unique": 1, "near_duplicates": 1, "clusters": 1})
    assert line == "1 page: 1 unique, 1 near-duplicate in 1 cluster"
