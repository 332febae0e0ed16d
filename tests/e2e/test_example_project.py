"""The example project, run the way a user runs it: ``scrapy crawl site`` in a subprocess.

Each crawl serves the bundled sample site on 127.0.0.1 (the spider does it),
then the test reads the stats dump the command prints, the cluster report it
writes and the items it exports, and checks them against the sample site's
ground truth (``example_project/sample_site/ground_truth.json``).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from simhash_scrapy import hamming_distance

PROJECT = Path(__file__).resolve().parents[2] / "example_project"
SITE = PROJECT / "sample_site"
TRUTH = json.loads((SITE / "ground_truth.json").read_text(encoding="utf-8"))
ROUTES = json.loads((SITE / "routes.json").read_text(encoding="utf-8"))

HTML_ROLES = {"hub", "article", "duplicate", "distinct-shared-template", "thin"}
HTML_PAGES = {url for url, info in TRUTH["pages"].items() if info["role"] in HTML_ROLES}
GROUPS = [frozenset(group["members"]) for group in TRUTH["groups"]]
IN_GROUP = {url: group for group in GROUPS for url in group}
SHARED_TEMPLATE = {url for url, info in TRUTH["pages"].items() if info["role"] == "distinct-shared-template"}
THIN = {url for url, info in TRUTH["pages"].items() if info["role"] == "thin"}
BROKEN = {url for url, info in TRUTH["pages"].items() if info["role"] == "broken-link"}
NOT_HTML = {url for url, info in TRUTH["pages"].items() if info["role"] in ("not-html", "robots")}
MAX_DISTANCE = TRUTH["max_distance"]


def site_path(url: str) -> str:
    """``http://127.0.0.1:1234/a.html?x=1`` -> ``/a.html?x=1`` (ground-truth keys)."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def parse_stats_dump(log: str) -> dict[str, object]:
    """The dict printed after "Dumping Scrapy stats:" (datetimes become None)."""
    match = re.search(r"Dumping Scrapy stats:\n(\{.*?\})\n(?=\d{4}-\d\d-\d\d |\Z)", log, re.DOTALL)
    assert match, "no stats dump in the output of scrapy crawl"
    text = re.sub(r"datetime\.datetime\([^)]*\)", "None", match.group(1))
    return ast.literal_eval(text)


class CrawlRun:
    def __init__(self, tmp: Path, *extra: str) -> None:
        self.items_path = tmp / "items.jsonl"
        cmd = [
            sys.executable, "-m", "scrapy.cmdline", "crawl", "site",
            "-O", str(self.items_path),
            # Keep the project's %(name)s-%(time)s pattern, in a folder of the test's own.
            "-s", f"SIMHASH_REPORT_URI={tmp / 'reports' / '%(name)s-%(time)s.jsonl'}",
            "-s", "TELNETCONSOLE_ENABLED=False",
            *extra,
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
        proc = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
        self.log = proc.stdout + proc.stderr
        assert proc.returncode == 0, self.log[-5000:]
        self.stats = parse_stats_dump(self.log)
        reports = sorted((tmp / "reports").glob("site-*.jsonl"))
        assert len(reports) == 1, (reports, self.log[-3000:])
        self.report_path = reports[0]
        records = [json.loads(line) for line in reports[0].read_text(encoding="utf-8").splitlines()]
        self.summary = records.pop()  # the last line
        assert self.summary["type"] == "summary", self.summary
        self.clusters = records
        self.items = [json.loads(line) for line in self.items_path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def drop_run(tmp_path_factory: pytest.TempPathFactory) -> CrawlRun:
    return CrawlRun(tmp_path_factory.mktemp("drop"))


@pytest.fixture(scope="module")
def flag_run(tmp_path_factory: pytest.TempPathFactory) -> CrawlRun:
    return CrawlRun(tmp_path_factory.mktemp("flag"), "-s", "SIMHASH_ACTION=flag")


# ------------------------------------------------------------------ the sample site itself
def test_ground_truth_matches_the_served_site() -> None:
    for url in HTML_PAGES | NOT_HTML:
        assert url in ROUTES, url
        assert (SITE / "pages" / ROUTES[url]["file"]).is_file(), url
    assert set(ROUTES) == HTML_PAGES | NOT_HTML
    assert not BROKEN & set(ROUTES)
    for group in TRUTH["groups"]:
        assert group["original"] in group["members"]
        assert all(TRUTH["pages"][url]["role"] == "duplicate" for url in group["members"] if url != group["original"])
    # Every kind of near-duplicate the example promises is in the site.
    kinds = {info.get("kind") for info in TRUTH["pages"].values()}
    assert {"tracking-parameters", "session-id", "printer-friendly", "second-template", "lightly-edited-copy"} <= kinds
    assert len(SHARED_TEMPLATE) >= 20
    assert THIN


# ------------------------------------------------------------------ drop mode (the project's settings)
@pytest.mark.slow  # shares drop_run: a whole crawl of the example project (15 s measured in setup)
def test_clusters_are_exactly_the_ground_truth_groups(drop_run: CrawlRun) -> None:
    found = [frozenset(site_path(m["url"]) for m in cluster["members"]) for cluster in drop_run.clusters]
    assert sorted(found, key=sorted) == sorted(GROUPS, key=sorted)


@pytest.mark.slow  # shares drop_run: a whole crawl of the example project (15 s measured in setup)
def test_heavy_template_pages_are_not_near_duplicates(drop_run: CrawlRun) -> None:
    clustered = {site_path(m["url"]) for cluster in drop_run.clusters for m in cluster["members"]}
    assert not clustered & SHARED_TEMPLATE
    reached = {site_path(item["url"]) for item in drop_run.items}
    assert SHARED_TEMPLATE <= reached


@pytest.mark.slow  # shares drop_run: a whole crawl of the example project (15 s measured in setup)
def test_report_members_are_consistent(drop_run: CrawlRun) -> None:
    for n, cluster in enumerate(drop_run.clusters, start=1):
        members = cluster["members"]
        assert cluster["cluster_id"] == n
        assert cluster["size"] == len(members) >= 2
        assert cluster["scope"] == "site"
        head = members[0]
        assert cluster["canonical"] == head["url"]
        assert head["distance"] == 0
        for member in members:
            assert re.fullmatch(r"[0-9a-f]{16}", member["fingerprint"])
            assert member["distance"] == hamming_distance(int(member["fingerprint"], 16), int(head["fingerprint"], 16))
            assert 0 <= member["distance"] <= MAX_DISTANCE
            assert isinstance(member["depth"], int) and member["depth"] >= 1
            assert member["referer"] and site_path(member["referer"]) in HTML_PAGES
    sizes = [cluster["size"] for cluster in drop_run.clusters]
    assert sizes == sorted(sizes, reverse=True)


@pytest.mark.slow  # shares drop_run: a whole crawl of the example project (15 s measured in setup)
def test_drop_mode_lets_exactly_one_page_per_group_reach_the_spider(drop_run: CrawlRun) -> None:
    reached = [site_path(item["url"]) for item in drop_run.items]
    assert len(reached) == len(set(reached))
    canonicals = {site_path(cluster["canonical"]) for cluster in drop_run.clusters}
    dropped = {u for group in GROUPS for u in group} - canonicals
    assert set(reached) == HTML_PAGES - dropped
    for group in GROUPS:
        assert len(group & set(reached)) == 1
    for item in drop_run.items:
        assert re.fullmatch(r"[0-9a-f]{16}", item["simhash"])
        assert item["duplicate_of"] is None and item["distance"] is None
        assert "near-duplicate" not in item["flags"]
    # Every drop is logged, naming the page it duplicates.
    drops = re.findall(
        r"Dropped near-duplicate page (\S+): duplicates (\S+) \((simhash within k=\d+, distance \d+|"
        r"exact short page, distance 0, k=\d+|one edit, distance \d+ > k=\d+)\)",
        drop_run.log,
    )
    assert {site_path(url) for url, _, _ in drops} == dropped
    for url, canonical, _ in drops:
        assert IN_GROUP[site_path(url)] == IN_GROUP[site_path(canonical)]


@pytest.mark.slow  # shares drop_run: a whole crawl of the example project (15 s measured in setup)
def test_stats_dump_numbers_are_consistent(drop_run: CrawlRun) -> None:
    stats = drop_run.stats
    duplicates = sum(len(group) - 1 for group in GROUPS)
    fingerprinted = len(HTML_PAGES)  # short (thin) pages too: they are compared exactly
    assert stats["simhash/fingerprinted"] == fingerprinted
    assert stats["simhash/near_duplicates"] == duplicates
    assert stats["simhash/dropped"] == duplicates
    assert stats.get("simhash/flagged", 0) == 0
    assert stats["simhash/unique"] == fingerprinted - duplicates
    assert stats["simhash/unique"] + stats["simhash/near_duplicates"] == stats["simhash/fingerprinted"]
    assert stats["simhash/index_size"] == stats["simhash/unique"]
    assert stats["simhash/clusters"] == len(GROUPS) == len(drop_run.clusters)
    assert stats["item_scraped_count"] == stats["simhash/unique"] == len(drop_run.items)
    # The thin page, and the home page: main content drops link lists inside <main> too, and its text
    # besides the article listing is its title and a 26-word intro (a hub of under 30 words is short).
    assert stats["simhash/short/unique"] == len(THIN | {"/"})
    distance_counts = {int(k.rsplit("/", 1)[1]): v for k, v in stats.items() if k.startswith("simhash/distance_count/")}
    assert sum(distance_counts.values()) == duplicates
    assert max(distance_counts) <= MAX_DISTANCE
    report_distances = sorted(m["distance"] for c in drop_run.clusters for m in c["members"][1:])
    assert report_distances == sorted(d for d, n in distance_counts.items() for _ in range(n))
    # Skipped, each with its reason: the 404s of the broken links, the RSS feed and robots.txt.
    assert stats["simhash/skipped/status"] == len(BROKEN)
    assert stats["simhash/skipped/content_type"] == len(NOT_HTML)
    assert stats["downloader/response_status_count/404"] == len(BROKEN)
    assert stats.get("log_count/ERROR", 0) == 0
    assert stats["finish_reason"] == "finished"


@pytest.mark.slow  # shares drop_run: a whole crawl of the example project (15 s measured in setup)
def test_log_names_the_report_and_has_no_warnings(drop_run: CrawlRun) -> None:
    assert re.search(
        rf"Simhash: wrote the jsonl report to {re.escape(str(drop_run.report_path))} "
        rf"\(\d+ pages: \d+ unique, \d+ near-duplicates in {len(GROUPS)} clusters\)",
        drop_run.log,
    ), re.findall(r".*Simhash: wrote.*", drop_run.log)
    assert "Serving the bundled sample site at http://127.0.0.1:" in drop_run.log
    assert not re.search(r"\w*(Deprecation)?Warning:", drop_run.log), re.findall(r".*Warning:.*", drop_run.log)
    assert "Traceback" not in drop_run.log


# ------------------------------------------------------------------ flag mode (-s SIMHASH_ACTION=flag)
@pytest.mark.slow  # 15 s measured (--durations, -n 2, loaded 2-core machine)
def test_flag_mode_passes_every_page_and_flags_the_duplicates(flag_run: CrawlRun) -> None:
    by_path = {site_path(item["url"]): item for item in flag_run.items}
    assert set(by_path) == HTML_PAGES
    flagged = {path for path, item in by_path.items() if "near-duplicate" in item["flags"]}
    assert flagged == {path for path, item in by_path.items() if item["duplicate_of"] is not None}
    for group in GROUPS:
        originals = [p for p in group if by_path[p]["duplicate_of"] is None]
        assert len(originals) == 1, (group, originals)
        for path in group - set(originals):
            assert site_path(by_path[path]["duplicate_of"]) == originals[0]
            assert 0 <= by_path[path]["distance"] <= MAX_DISTANCE
    assert not flagged & SHARED_TEMPLATE
    stats = flag_run.stats
    duplicates = sum(len(group) - 1 for group in GROUPS)
    assert stats["simhash/flagged"] == stats["simhash/near_duplicates"] == len(flagged) == duplicates
    assert stats.get("simhash/dropped", 0) == 0
    assert stats["item_scraped_count"] == len(HTML_PAGES)
    found = [frozenset(site_path(m["url"]) for m in cluster["members"]) for cluster in flag_run.clusters]
    assert sorted(found, key=sorted) == sorted(GROUPS, key=sorted)


# ------------------------------------------------------------------ -a start_url=... -a max_pages=...
@pytest.mark.slow  # 10 s measured (--durations, -n 2, loaded 2-core machine)
def test_start_url_crawls_that_site_within_the_page_limit(tmp_path: Path) -> None:
    sys.path.insert(0, str(PROJECT))
    try:
        from example_project.sample_site import SampleSite
    finally:
        sys.path.remove(str(PROJECT))
    site = SampleSite()
    base_url = site.start()
    try:
        run = CrawlRun(tmp_path, "-a", f"start_url={base_url}articles/", "-a", "max_pages=8", "-s", "DOWNLOAD_DELAY=0")
    finally:
        site.stop()
    assert "Serving the bundled sample site" not in run.log
    assert "max_pages=8 reached: not following more links" in run.log
    stats = run.stats
    assert stats["scheduler/enqueued"] == 8
    assert stats["downloader/request_count"] == 8 + 1  # + robots.txt
    # Every fetched page is accounted for: an item, a drop, or a skip that never reaches the spider
    # (404, not HTML; robots.txt is the 9th).  Thin pages are skipped *and* reach the spider.
    skipped = stats.get("simhash/skipped/status", 0) + stats.get("simhash/skipped/content_type", 0)
    assert len(run.items) + stats.get("simhash/dropped", 0) + skipped == 8 + 1
    assert run.items[0]["url"] == f"{base_url}articles/" and run.items[0]["depth"] == 0
    assert all(item["url"].startswith(base_url) for item in run.items)


@pytest.mark.slow  # 20 s measured (--durations, -n 2, loaded 2-core machine)
def test_a_rerun_with_simhash_dir_sees_the_same_pages_unchanged(tmp_path: Path) -> None:
    # The sample site is served on a fixed port, so a second crawl fetches the same URLs and the
    # store of the first (SIMHASH_DIR) recognises every page as unchanged, not as new duplicates.
    store = f"SIMHASH_DIR={tmp_path / 'store'}"
    first = CrawlRun(tmp_path / "first", "-s", store)
    second = CrawlRun(tmp_path / "second", "-s", store)
    assert "Serving the bundled sample site at http://127.0.0.1:8741/" in first.log
    assert second.stats["simhash/initial"] == first.stats["simhash/fingerprinted"] == len(HTML_PAGES)
    assert second.stats["simhash/unchanged"] == second.stats["simhash/fingerprinted"] == len(HTML_PAGES)
    assert second.stats.get("simhash/near_duplicates", 0) == 0 and second.stats.get("simhash/unique", 0) == 0
