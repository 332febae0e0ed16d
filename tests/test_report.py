"""Cluster building, report paths (feed-style, never outside their folder) and report files."""

from __future__ import annotations

import csv
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from simhash_scrapy.backends import ClusterMember
from simhash_scrapy.core.report import (
    CSV_COLUMNS,
    build_clusters,
    check_format_available,
    expand_report_path,
    render_report,
    report_params,
    write_report,
)

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
    clusters = build_clusters(MEMBERS)
    assert clusters == [
        {
            "cluster_id": 1,
            "canonical": "http://x/a",
            "size": 3,
            "scope": "s",
            "members": [
                {"url": "http://x/a", "fingerprint": "0f0f0000000000ff", "distance": 0, "referer": None, "depth": 0},
                {"url": "http://x/a?s=1", "fingerprint": "0f0f0000000000fe", "distance": 1, "referer": "http://x/a", "depth": 1},
                {"url": "http://x/a?s=2", "fingerprint": "0f0f0000000000fc", "distance": 2, "referer": "http://x/", "depth": 2},
            ],
        },
        {
            "cluster_id": 2,
            "canonical": "http://x/c",
            "size": 2,
            "scope": "s",
            "members": [
                {"url": "http://x/c", "fingerprint": "00000000ffff0000", "distance": 0, "referer": None, "depth": None},
                {"url": "http://x/c/print", "fingerprint": "00000000ffff0007", "distance": 3, "referer": "http://x/c", "depth": 1},
            ],
        },
    ]


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
    clusters = build_clusters(MEMBERS)
    path = write_report(tmp_path / "deep" / "r.jsonl", clusters, "jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == clusters
    assert list(json.loads(lines[0])) == ["cluster_id", "canonical", "size", "scope", "members"]

    path = write_report(tmp_path / "r.csv", clusters, "csv")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == 5
    assert rows[0] == {
        "cluster_id": "1", "cluster_size": "3", "scope": "s", "canonical": "http://x/a", "url": "http://x/a",
        "fingerprint": "0f0f0000000000ff", "distance": "0", "referer": "", "depth": "0",
    }
    assert rows[4]["url"] == "http://x/c/print" and rows[4]["distance"] == "3"
    assert not [p for p in tmp_path.rglob("*.tmp")], "no temporary file is left behind"


def test_empty_report(tmp_path: Path) -> None:
    assert write_report(tmp_path / "r.jsonl", [], "jsonl").read_text() == ""
    assert write_report(tmp_path / "r.csv", [], "csv").read_text().strip() == ",".join(CSV_COLUMNS)


def test_html_report_uses_render_html(tmp_path: Path) -> None:
    pytest.importorskip("simhash_scrapy.core.html_report")
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
    with pytest.raises(ValueError, match="SIMHASH_REPORT_URI=.*not a file inside"):
        expand_report_path("reports/%(name)s/../../../outside.jsonl", params, cwd=tmp_path)
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

    monkeypatch.setitem(sys.modules, "simhash_scrapy.core.html_report", None)  # import now raises ImportError
    with pytest.raises(ValueError, match="SIMHASH_REPORT_FORMAT='html' needs simhash_scrapy.core.html_report"):
        check_format_available("html")
    crawler = get_crawler(settings_dict={"SIMHASH_REPORT_URI": "reports/%(name)s.html"})
    with pytest.raises(ValueError, match="use 'jsonl' or 'csv'"):
        SimhashMiddleware.from_crawler(crawler)


def test_report_files_get_ordinary_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        path = write_report(tmp_path / "r.jsonl", build_clusters(MEMBERS), "jsonl")
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
