"""What changed since the last crawl (``core.report.changes``) and clusters that stay true after a re-crawl (issue 35)."""

from __future__ import annotations

import pytest

from simhash_scrapy.backends.base import ClusterMember, Outcome
from simhash_scrapy.core.report.changes import (
    LastCrawl, build_page_changes, count_changes, decode_last_crawl, encode_last_crawl,
)  # fmt: skip
from simhash_scrapy.core.features.fingerprint import hamming_distance
from simhash_scrapy.core.report.report import build_clusters

K = 3
OLD_A = 0x0F0F_0F0F_0F0F_0F0F
NEW_A = OLD_A ^ 0xFFFF_FF00_0000_0000  # 24 bits away: a14 changed beyond k
PRINT = OLD_A ^ 0b1  # the print view of a14's old text: 1 bit from the old version
AMP = OLD_A ^ 0b110  # another copy of the old text: 2 bits from it, 3 from PRINT
NEAR_NEW = NEW_A ^ 0b1  # a copy of the new text, checked after the change


def member(url: str, fp: int, canonical: str | None = None, distance: int | None = None, outcome: str = "unique",
           previous: int | None = None, first: float = 1.0, last: float = 1.0) -> ClusterMember:  # fmt: skip
    return ClusterMember(
        url=url, fingerprint=fp, scope="s", canonical_url=canonical, distance=distance, outcome=Outcome(outcome),
        previous_fingerprint=previous, first_seen=first, last_seen=last,
    )  # fmt: skip


def recrawled() -> list[ClusterMember]:
    """a14 changed beyond k in crawl 2 (started at 10); its old copies were placed in crawl 1."""
    return [
        member("a14", NEW_A, outcome="changed", previous=OLD_A, last=11.0),
        member("print/a14", PRINT, "a14", hamming_distance(PRINT, OLD_A), "unchanged", previous=PRINT, last=12.0),
        member("amp/a14", AMP, "a14", hamming_distance(AMP, OLD_A), "unchanged", previous=AMP, last=12.0),
        member("copy/a14", NEAR_NEW, "a14", 1, "near_duplicate", first=13.0, last=13.0),
        member("b", 0x1234_5678_9ABC_DEF0, last=2.0),
        member("gone-page", 0x1111, last=1.0),
    ]


def test_members_of_an_old_version_leave_the_cluster_and_are_placed_again() -> None:
    clusters = build_clusters(recrawled(), max_distance=K)
    by_canonical = {c["canonical"]: c for c in clusters}
    assert set(by_canonical) == {"a14", "print/a14"}
    new = by_canonical["a14"]["members"]
    assert [(m["url"], m["distance"]) for m in new] == [("a14", 0), ("copy/a14", 1)]
    old = by_canonical["print/a14"]["members"]
    assert [(m["url"], m["distance"]) for m in old] == [("print/a14", 0), ("amp/a14", hamming_distance(AMP, PRINT))]
    # No distance the fingerprints contradict: each is the members' own Hamming distance.
    fps = {m.url: m.fingerprint for m in recrawled()}
    for cluster in clusters:
        head = fps[cluster["canonical"]]
        assert all(m["distance"] == hamming_distance(fps[m["url"]], head) for m in cluster["members"])


def test_a_fresh_crawl_places_the_same_pages_the_same_way() -> None:
    """The clusters of the store after the re-crawl equal those of a crawl of today's pages in the same order."""
    fresh = [
        member("a14", NEW_A),
        member("print/a14", PRINT),
        member("amp/a14", AMP, "print/a14", hamming_distance(AMP, PRINT), "near_duplicate"),
        member("copy/a14", NEAR_NEW, "a14", 1, "near_duplicate"),
        member("b", 0x1234_5678_9ABC_DEF0),
    ]

    def shape(clusters: list[dict]) -> set[tuple]:
        return {(c["canonical"], tuple((m["url"], m["distance"]) for m in c["members"])) for c in clusters}

    assert shape(build_clusters(recrawled(), max_distance=K)) == shape(build_clusters(fresh, max_distance=K))


def test_an_edit_within_k_keeps_the_cluster_with_the_distance_of_today() -> None:
    edited = OLD_A ^ 0b1000_0000
    members = [
        member("a", edited, outcome="edited", previous=OLD_A, last=11.0),
        member("p", PRINT, "a", hamming_distance(PRINT, OLD_A), "unchanged", last=12.0),
    ]
    (cluster,) = build_clusters(members, max_distance=K)
    assert [(m["url"], m["distance"]) for m in cluster["members"]] == [("a", 0), ("p", hamming_distance(PRINT, edited))]


def test_each_page_of_the_latest_crawl_is_listed_by_what_happened_to_it() -> None:
    last = LastCrawl(started=10.0, previous_crawl=True, gone=[("gone-page", "s", 404), ("gone-page", "s", 404)])
    pages = build_page_changes(recrawled(), last)
    kinds = {page["url"]: page["change"] for page in pages}
    # b was not reached by the latest crawl: not listed.
    assert kinds == {"a14": "changed", "print/a14": "unchanged", "amp/a14": "unchanged", "copy/a14": "new",
                     "gone-page": "gone"}  # fmt: skip
    assert count_changes(pages) == {"new": 1, "changed": 1, "edited": 0, "unchanged": 2, "gone": 1}
    changed = next(page for page in pages if page["change"] == "changed")
    assert changed["distance"] == hamming_distance(NEW_A, OLD_A) and changed["previous_fingerprint"] == f"{OLD_A:016x}"
    assert build_page_changes(recrawled(), LastCrawl(10.0, previous_crawl=False)) == []  # a first crawl


def test_the_last_crawl_blob_round_trips_and_damage_is_named() -> None:
    last = LastCrawl(5.5, True, [("http://x/é", "s", 410)])
    back = decode_last_crawl(encode_last_crawl(last))
    assert (back.started, back.previous_crawl, back.gone) == (5.5, True, [("http://x/é", "s", 410)])
    with pytest.raises(ValueError, match="damaged changes/last_crawl record"):
        decode_last_crawl(b'{"version": 1}')


def test_every_report_format_lists_the_pages_of_the_crawl(tmp_path: object) -> None:
    from pathlib import Path

    from simhash_scrapy.core.report.report import render_report, write_report

    pages = build_page_changes(recrawled(), LastCrawl(10.0, True, [("gone-page", "s", 410)]))
    clusters = build_clusters(recrawled(), max_distance=K)
    jsonl = render_report(clusters, "jsonl", changes=[], pages=pages)
    assert '{"type": "gone", "url": "gone-page", "scope": "s"' in jsonl and '"type": "new", "url": "copy/a14"' in jsonl
    html = render_report(clusters, "html", {"title": "t"}, pages=pages)
    assert "Gone since the last crawl (404 or 410): 1" in html and "New since the last crawl: 1" in html
    target = write_report(Path(str(tmp_path)) / "r.csv", clusters, "csv", pages=pages)
    rows = (target.parent / "r.changes.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "change,url,scope,previous_fingerprint,fingerprint,distance,status"
    assert "gone,gone-page,s,,,,410" in rows and any(row.startswith("new,copy/a14,s,") for row in rows)
    write_report(target, clusters, "csv")  # a report without them removes the old list
    assert not (target.parent / "r.changes.csv").exists()
