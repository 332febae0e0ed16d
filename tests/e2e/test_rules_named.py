"""Which rule fired, and protected text: real crawls of a local shop, reports read back, ``compare``.

Product pages of a few dozen tokens that differ only in their price are
near-duplicates by the rule (one token apart).  Every flagged page says which
rule matched it and k (log line, error, report rows, ``compare``);
``SIMHASH_DISTINCT_SELECTORS`` keeps pages whose protected text differs apart,
on every backend.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from conftest import RecordingSpider, run_crawl, simhash_stats

from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core import defaults
from simhash_scrapy.core.analysis import analyse_html
from simhash_scrapy.core.cluster.clustering import Rule
from simhash_scrapy.core.cluster.distinct import scope_key
from simhash_scrapy.core.extract.text import parse_html

pytest_plugins = ["conftest_redis"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "quality"
# A real pair of 31 and 32 tokens one word apart, 11 bits apart (tests/integration/test_one_edit.py).
GFX10 = (FIXTURES / "amdgpu_vdst_gfx10.html").read_bytes()
GFX940 = (FIXTURES / "amdgpu_vdst_gfx940.html").read_bytes()

K = defaults.MAX_DISTANCE
DESCRIPTION = (
    "This sturdy kettle boils water quickly and quietly thanks to its concealed heating element and "
    "its wide spout pours without dripping while the cool touch handle keeps fingers safe every morning"
)


def product(price: str, sku: str = "KT-1001", description: str = DESCRIPTION) -> str:
    return (
        "<!doctype html><html><head><title>Kettle</title></head><body><main>"
        f"<h1>Steel kettle</h1><p>{description}</p>"
        f'<p>Price <span class="price">{price}</span> SKU <span class="sku">{sku}</span></p>'
        "</main></body></html>"
    )


ABOUT = (
    "<!doctype html><html><head><title>About</title></head><body><main><h1>About us</h1><p>"
    + " ".join(f"word{i} story{i}" for i in range(40))
    + "</p></main></body></html>"
)
SHOP = {
    "/kettle": product("24.99"),
    "/kettle-sale": product("19.99"),  # one token apart: the price
    "/kettle?ref=mail": product("24.99"),  # the same page under another URL: a real duplicate
    "/about": ABOUT,  # no price: checked in the plain scope
}
ORDER = ["/kettle", "/kettle-sale", "/kettle?ref=mail", "/about"]


def test_the_shop_pages_are_what_the_test_says() -> None:
    """A few dozen tokens, one token apart: the price alone makes them distinct."""
    first, sale = analyse_html(SHOP["/kettle"].encode()), analyse_html(SHOP["/kettle-sale"].encode())
    assert not first.exact and first.edit_keys and set(first.edit_keys) & set(sale.edit_keys)
    assert (first.fingerprint ^ sale.fingerprint).bit_count() == 1
    selectors = SimhashConfig.from_settings({"SIMHASH_DISTINCT_SELECTORS": [".price", ".sku"]}).distinct
    assert selectors is not None
    root = parse_html(SHOP["/kettle"])
    assert selectors.texts(root) == [["24.99"], ["KT-1001"]]
    assert selectors.digest(root) != selectors.digest(parse_html(SHOP["/kettle-sale"]))
    assert selectors.digest(root) == selectors.digest(parse_html(SHOP["/kettle?ref=mail"].replace("<h1>", "<h1> ")))
    assert selectors.digest(parse_html(ABOUT)) is None
    assert scope_key("shop", None) == "shop" and scope_key("shop", "ab") == "shop#ab"


@pytest_twisted.ensureDeferred
async def test_an_invalid_selector_stops_the_crawl_at_start(serve: Any) -> None:
    site = serve(SHOP)
    crawler = await run_crawl(
        RecordingSpider,
        {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_DISTINCT_SELECTORS": [".price["]},
        start_urls=[site.url("/kettle")],
    )
    stats = crawler.stats.get_stats()
    assert stats["finish_reason"] == "simhash_error"
    assert stats["simhash/error"].startswith("SIMHASH_DISTINCT_SELECTORS: '.price[' is not a valid CSS selector")


async def crawl_shop(serve: Any, tmp_path: Path, name: str, **settings: Any) -> tuple[Any, Path]:
    site = serve(SHOP)
    report = tmp_path / f"{name}.jsonl"
    crawler = await run_crawl(
        RecordingSpider,
        {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_REPORT_URI": str(report), "SIMHASH_DEBUG": True, **settings},
        start_urls=[site.url(path) for path in ORDER],
    )
    crawler.site = site  # type: ignore[attr-defined]
    return crawler, report


def backend_settings(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    if backend == "persistent":
        return {"SIMHASH_DIR": str(tmp_path / "store")}
    if backend == "redis":
        server = request.getfixturevalue("redis_server")
        return {"SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": server.url}
    return {}


@pytest.mark.slow  # 3 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("backend", ["memory", "persistent", "redis"])
@pytest_twisted.ensureDeferred
async def test_pages_differing_in_price_are_duplicates_unless_the_price_is_protected(
    serve: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    extra = backend_settings(backend, tmp_path, request)
    # Without the setting: the sale page is a near-duplicate (one token apart), named as such everywhere.
    with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"):
        plain, report = await crawl_shop(serve, tmp_path / "plain", "plain", **extra)
    site = plain.site
    assert plain.spider.seen_urls == [site.url("/kettle"), site.url("/about")]
    failures = {f.value.url: f.value for f in plain.spider.failures}
    assert set(failures) == {site.url("/kettle-sale"), site.url("/kettle?ref=mail")}
    sale = failures[site.url("/kettle-sale")]
    sale_rule = Rule.SIMHASH  # 1 bit apart (test_the_shop_pages_are_what_the_test_says)
    assert sale.distance == 1 and sale.rule == f"simhash within k={K}, distance 1"
    assert f"({sale.rule}): {site.url('/kettle-sale')}" in str(sale)
    copy = failures[site.url("/kettle?ref=mail")]
    assert copy.distance == 0 and copy.rule == f"simhash within k={K}, distance 0"
    logged = [r.getMessage() for r in caplog.records if "near-duplicate page" in r.getMessage()]
    assert f"Dropped near-duplicate page {site.url('/kettle-sale')}: duplicates {site.url('/kettle')} ({sale.rule})" in logged
    stats = simhash_stats(plain)
    assert stats["simhash/near_duplicates"] == 2 and "simhash/distinct/pages" not in stats
    # The JSON Lines report names each member's rule and the k it used.
    cluster, summary = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    assert summary["type"] == "summary"
    assert cluster["max_distance"] == K
    assert [(m["url"], m["rule"]) for m in cluster["members"]] == [
        (site.url("/kettle"), None), (site.url("/kettle-sale"), sale_rule.value), (site.url("/kettle?ref=mail"), "simhash"),
    ]  # fmt: skip

    # With the price protected: the sale page is kept, the same-price copy is still dropped.
    caplog.clear()
    if backend == "persistent":
        extra = {"SIMHASH_DIR": str(tmp_path / "store2")}
    elif backend == "redis":
        extra = {**extra, "SIMHASH_REDIS_KEY": "protected:%(spider)s"}
    protected, report = await crawl_shop(
        serve, tmp_path / "protected", "protected", SIMHASH_DISTINCT_SELECTORS=[".price"], **extra
    )
    site = protected.site
    assert protected.spider.seen_urls == [site.url("/kettle"), site.url("/kettle-sale"), site.url("/about")]
    (copy,) = [f.value for f in protected.spider.failures]
    assert copy.url == site.url("/kettle?ref=mail") and copy.canonical_url == site.url("/kettle")
    stats = simhash_stats(protected)
    assert stats["simhash/distinct/pages"] == 3 and stats["simhash/distinct/unmatched"] == 1
    assert stats["simhash/near_duplicates"] == 1 and stats["simhash/unique"] == 3
    cluster, summary = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    assert summary["type"] == "summary"
    assert [m["url"] for m in cluster["members"]] == [site.url("/kettle"), site.url("/kettle?ref=mail")]
    assert cluster["scope"].startswith("recording#") and len(cluster["scope"]) == len("recording#") + 16


@pytest.mark.slow  # 2 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_every_rule_is_named_in_log_lines_and_report_rows(
    serve: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """simhash within k, exact short page, one edit: each flagged page's log line, CSV and HTML row."""
    short = "<html><body><p>Out of stock</p></body></html>"
    site = serve({**SHOP, "/short": short, "/short?x": short, "/gfx10": GFX10, "/gfx940": GFX940})
    paths = [*ORDER, "/short", "/short?x", "/gfx10", "/gfx940"]
    for fmt in ("csv", "html"):
        caplog.clear()
        report = tmp_path / f"shop.{fmt}"
        with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"):
            crawler = await run_crawl(
                RecordingSpider,
                {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_REPORT_URI": str(report), "SIMHASH_ACTION": "flag",
                 "SIMHASH_DEBUG": True},
                start_urls=[site.url(path) for path in paths],
            )
        assert simhash_stats(crawler)["simhash/flagged"] == 4
        # meta["simhash_rule"]: the same vocabulary as the report rows, None on pages that are not duplicates.
        rules = {seen["url"]: seen["rule"] for seen in crawler.spider.seen if seen["rule"] or seen["duplicate_of"]}
        assert len(crawler.spider.seen) == len(paths) and rules == {
            site.url("/kettle-sale"): "simhash", site.url("/kettle?ref=mail"): "simhash",
            site.url("/short?x"): "exact", site.url("/gfx940"): "one_edit",
        }  # fmt: skip
        logged = sorted(r.getMessage() for r in caplog.records if "near-duplicate page" in r.getMessage())
        one_edit = (analyse_html(GFX10).fingerprint ^ analyse_html(GFX940).fingerprint).bit_count()
        assert one_edit > K
        assert logged == sorted([
            f"Flagged near-duplicate page {site.url('/gfx940')}: duplicates {site.url('/gfx10')} "
            f"(one edit, distance {one_edit} > k={K})",
            f"Flagged near-duplicate page {site.url('/kettle-sale')}: duplicates {site.url('/kettle')} "
            f"(simhash within k={K}, distance 1)",
            f"Flagged near-duplicate page {site.url('/kettle?ref=mail')}: duplicates {site.url('/kettle')} "
            f"(simhash within k={K}, distance 0)",
            f"Flagged near-duplicate page {site.url('/short?x')}: duplicates {site.url('/short')} "
            f"(exact short page, distance 0, k={K})",
        ])  # fmt: skip
    with (tmp_path / "shop.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    by_url = {row["url"]: (row["rule"], row["max_distance"]) for row in rows}
    assert by_url == {
        site.url("/kettle"): ("", str(K)), site.url("/kettle-sale"): ("simhash", str(K)),
        site.url("/kettle?ref=mail"): ("simhash", str(K)), site.url("/short"): ("", str(K)),
        site.url("/short?x"): ("exact", str(K)), site.url("/gfx10"): ("", str(K)), site.url("/gfx940"): ("one_edit", str(K)),
    }  # fmt: skip
    page = (tmp_path / "shop.html").read_text(encoding="utf-8")
    data = json.loads(page.split('<script type="application/json" id="simhash-data">', 1)[1].split("</script>", 1)[0])
    shown = {m[0]: m[6] for c in data["clusters"] for m in c[3]}
    assert shown[site.url("/gfx940")] == f"one edit, beyond k={K}"
    assert shown[site.url("/short?x")] == f"exact short page, k={K}"
    assert shown[site.url("/kettle-sale")] == f"simhash within k={K}" and shown[site.url("/kettle")] is None


@pytest.mark.slow  # 42 s measured (--durations, -n 2, loaded 2-core machine)
def test_compare_prints_the_rule_and_protected_text(tmp_path: Path) -> None:
    from command_helpers import simhash  # a real ``scrapy`` process

    files = []
    for name, body in (("1.html", SHOP["/kettle"]), ("2.html", SHOP["/kettle-sale"]), ("3.html", SHOP["/kettle"]),
                       ("4.html", "<p>Out of stock</p>"), ("5.html", "<p>Out of stock</p>")):  # fmt: skip
        (tmp_path / name).write_text(body, encoding="utf-8")
        files.append(str(tmp_path / name))
    proc = simhash("compare", *files, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    decisions = json.loads(proc.stdout)["decisions"]
    sale = decisions[1]
    assert (sale["rule"], sale["distance"], sale["max_distance"]) == ("simhash", 1, K)
    assert (decisions[2]["rule"], decisions[2]["distance"]) == ("simhash", 0)
    assert decisions[4]["rule"] == "exact"
    text = simhash("compare", *files, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert f"  2  near-duplicate of 1 (simhash within k={K}, distance 1): dropped" in text.stdout
    assert f"  3  near-duplicate of 1 (simhash within k={K}, distance 0): dropped" in text.stdout
    assert f"  5  near-duplicate of 4 (exact short page, distance 0, k={K}): dropped" in text.stdout
    # The crawl's protected text: the sale page becomes unique, the copy stays a duplicate.
    kept = simhash("compare", *files[:3], "-s", "SIMHASH_DISTINCT_SELECTORS=.price", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert "SIMHASH_DISTINCT_SELECTORS=['.price']" in kept.stdout
    assert "  2  unique: becomes a canonical page" in kept.stdout
    assert f"  3  near-duplicate of 1 (simhash within k={K}, distance 0): dropped" in kept.stdout
    bad = simhash("compare", *files[:2], "-s", "SIMHASH_DISTINCT_SELECTORS=.price[", cwd=tmp_path)
    assert bad.returncode == 2 and "SIMHASH_DISTINCT_SELECTORS: '.price[' is not a valid CSS selector" in bad.stderr


@pytest.mark.slow  # 38 s measured (--durations, -n 2, loaded 2-core machine)
def test_dedup_keeps_protected_pages_apart_as_the_crawl_does(tmp_path: Path) -> None:
    from command_helpers import read_jsonl, simhash  # a real ``scrapy`` process

    folder = tmp_path / "shop"
    folder.mkdir()
    for name, path in (("1.html", "/kettle"), ("2.html", "/kettle-sale"), ("3.html", "/kettle?ref=mail"), ("4.html", "/about")):
        (folder / name).write_text(SHOP[path], encoding="utf-8")
    plain = simhash("dedup", str(folder), cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert [[m["url"].rsplit("/", 1)[1] for m in c["members"]] for c in read_jsonl(plain.stdout)] == [["1.html", "2.html", "3.html"]]
    for jobs in ("1", "2"):  # worker processes get the setting too
        kept = simhash("dedup", str(folder), "--jobs", jobs, "-s", "SIMHASH_DISTINCT_SELECTORS=.price", cwd=tmp_path)
        assert kept.returncode == 0, kept.stderr
        (cluster,) = read_jsonl(kept.stdout)
        assert [m["url"].rsplit("/", 1)[1] for m in cluster["members"]] == ["1.html", "3.html"]
        assert cluster["scope"].startswith("#") and len(cluster["scope"]) == 17
