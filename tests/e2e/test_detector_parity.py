"""One detector everywhere: the library's entry point (``simhash_scrapy.decide_html``) gives the pairs a real
in-process crawl of the same pages in the same order finds (steps 1-7), on the sample sets of real pages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from conftest import RecordingSpider, run_crawl
from urllib.parse import urlsplit

import simhash_scrapy
from detector_helpers import clusters, sample_pages, steps_pages  # (tests/ is on sys.path)

pytest_plugins = ["conftest_redis"]

def serve_by_host(serve: Any, pages: list[tuple[str, bytes]]) -> dict[str, str]:
    """One local site per host of the set (the template learner groups pages by host); set URL -> local URL."""
    by_host: dict[str, dict[str, bytes]] = {}
    for url, body in pages:
        parts = urlsplit(url)
        by_host.setdefault(parts.netloc, {})[parts.path + (f"?{parts.query}" if parts.query else "")] = body
    local = {}
    for host, table in by_host.items():
        site = serve(table)
        for path in table:
            local[f"http://{host}{path}"] = site.url(path)
    return local


async def crawl_pairs(urls: list[str], settings: dict[str, Any] | None = None) -> tuple[list[str], set[tuple[str, str]]]:
    """The order a real crawl checked ``urls`` in and the (near-duplicate, canonical) pairs it flagged."""
    crawler = await run_crawl(
        RecordingSpider, {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag", **(settings or {})},
        start_urls=urls,
    )  # fmt: skip
    seen = crawler.spider.seen  # type: ignore[attr-defined]
    order = [entry["url"] for entry in seen if entry["simhash"] is not None]
    return order, {(entry["url"], entry["duplicate_of"]) for entry in seen if entry["duplicate_of"] is not None}


def library_pairs(order: list[str], bodies: dict[str, bytes]) -> set[tuple[str, str]]:
    decisions = simhash_scrapy.decide_html([(url, bodies[url]) for url in order])
    return {(order[d.position], order[d.canonical]) for d in decisions if d is not None and d.canonical is not None}


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("name", ["sample", "sample_wide", "steps", "shop"])
async def test_the_library_gives_the_in_process_crawls_pairs(serve: Any, name: str) -> None:
    pages = sample_pages(name)
    local = serve_by_host(serve, pages)
    bodies = {local[url]: body for url, body in pages}
    order, crawled = await crawl_pairs([local[url] for url, _ in pages])
    assert len(order) >= len(pages) - 2  # (a page without text has no fingerprint)
    assert crawled, "the sample set has near-duplicates"
    assert library_pairs(order, bodies) == crawled
    if name == "steps":  # every step beyond the first simhash matched a pair
        vias = {d.via for d in simhash_scrapy.decide_html([(url, bodies[url]) for url in order]) if d is not None}
        assert {"template", "second", "containment"} <= vias
    if name == "shop":  # the library reads the identity a page declares and its URL's options, as the crawl
        paths = {(urlsplit(a).path + "?" + urlsplit(a).query, urlsplit(b).path) for a, b in crawled}
        assert ("/p/shirt?utm_source=mail&variant=red", "/p/shirt") in paths
        assert not any("variant=blue" in a or "attribute_pa" in a or "shirt-red" in a for a, _ in paths)


@pytest.mark.parametrize(("paths", "via"), [
    (["/story/1", "/story/2", "/story/3", "/reader/3"], "template"),
    (["/article/4", "/edited/4"], "second"),
    (["/story", "/story/print"], "containment"),
])  # fmt: skip
def test_compare_explains_a_step_5_to_7_match_with_its_evidence(tmp_path: Path, paths: list[str], via: str) -> None:
    import io
    from types import SimpleNamespace

    from scrapy.settings import Settings

    from simhash_scrapy.commands.compare import run_compare

    pages = dict(steps_pages())
    host = {"template": "tmpl.test", "second": "edits.test", "containment": "contain.test"}[via]
    files = []
    for n, path in enumerate(paths):
        files.append(tmp_path / f"{n}.html")
        files[-1].write_bytes(pages[f"http://{host}{path}"])
    out = io.StringIO()
    opts = SimpleNamespace(pages=[str(f) for f in files], features=5, diff_lines=5, json=True)
    assert run_compare(opts, Settings(), out) == 0
    last = json.loads(out.getvalue())["decisions"][-1]
    assert last["decision"] == "near-duplicate" and last["via"] == via
    found = last["evidence"]
    if via == "template":  # the site's box was left out; the article's own lines are what the two share
        assert found["template_lines"] >= 10 and all("Most read today" in s for s in found["template_examples"])
        assert found["shared_lines"] >= 5 and not any("Most read today" in s for s in found["shared_examples"])
    elif via == "second":
        assert found["second_distance"] <= 4 < found["first_distance"] <= 8
    else:
        assert found["shared_sentences"] >= 20 and found["examples"]


STEPS_OFF = {"SIMHASH_TEMPLATES": False, "SIMHASH_SECOND_SIMHASH": False, "SIMHASH_CONTAINMENT": False}


@pytest_twisted.ensureDeferred
async def test_memory_store_and_resumed_store_crawls_give_the_same_pairs(serve: Any, tmp_path: Path) -> None:
    """The same pages in one order: an in-process crawl, a crawl on a ``SIMHASH_DIR`` store, and a crawl
    stopped halfway (the spider closed) then resumed on the same ``JOBDIR`` find the same pairs, steps 5-7
    included (what they learned is restored from the store)."""
    pages = steps_pages() + sample_pages("sample")
    local = serve_by_host(serve, pages)
    urls = [local[url] for url, _ in pages]
    _, memory = await crawl_pairs(urls)
    assert memory
    _, stored = await crawl_pairs(urls, {"SIMHASH_DIR": str(tmp_path / "store")})
    job = {"JOBDIR": str(tmp_path / "job")}
    half = len(urls) // 2
    _, first = await crawl_pairs(urls[:half], job)
    _, second = await crawl_pairs(urls[half:], job)
    assert stored == memory
    assert first | second == memory


@pytest_twisted.ensureDeferred
async def test_a_redis_crawl_with_one_worker_gives_the_in_process_pairs_of_steps_1_to_4(
    serve: Any, redis_server: Any
) -> None:
    """Steps 1-4 alone (steps 5-7 off): one Redis worker finds the in-process crawl's pairs on the same page
    order (the Lua script's rule)."""
    pages = sample_pages("sample") + sample_pages("sample_wide")
    local = serve_by_host(serve, pages)
    urls = [local[url] for url, _ in pages]
    _, memory = await crawl_pairs(urls, STEPS_OFF)
    _, redis = await crawl_pairs(urls, {**STEPS_OFF, "SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": redis_server.url})
    assert memory and redis == memory


@pytest_twisted.ensureDeferred
async def test_a_redis_crawl_with_one_worker_gives_the_in_process_pairs_of_steps_1_to_7(
    serve: Any, redis_server: Any
) -> None:
    """Steps 5-7 on Redis (``backends.redis.mirror``): one worker finds the in-process crawl's pairs on the
    same page order, the pairs only steps 5-7 find included; what they keep is in Redis (the scope's extras)."""
    pages = steps_pages() + sample_pages("sample")
    local = serve_by_host(serve, pages)
    urls = [local[url] for url, _ in pages]
    _, memory = await crawl_pairs(urls)
    _, without = await crawl_pairs(urls, STEPS_OFF)
    settings = {"SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": redis_server.url, "SIMHASH_REDIS_PERSIST": True}
    _, redis = await crawl_pairs(urls, settings)
    assert without < memory  # steps 5-7 find pairs steps 1-4 do not
    assert redis == memory
    client = redis_server.client()
    try:
        extras = [key for key in client.scan_iter("*:extras")]
        assert extras and all(client.strlen(key) > 0 for key in extras)
    finally:
        client.close()


@pytest_twisted.ensureDeferred
async def test_two_redis_crawlers_find_only_the_in_process_duplicates(serve: Any, redis_server: Any) -> None:
    """Two real crawls at once against one redis-server, each fetching every other page: every pair they flag
    joins pages the in-process rule puts in one cluster, on the order Redis checked them or on the set's
    (races: docs/guides/redis.md); most pairs are found."""
    import asyncio

    from twisted.internet import defer

    from simhash_scrapy.backends.redis import RedisBackend, RedisSettings
    from simhash_scrapy.config import SimhashConfig

    pages = steps_pages() + sample_pages("sample")
    local = serve_by_host(serve, pages)
    urls = [local[url] for url, _ in pages]
    settings = {"SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": redis_server.url, "SIMHASH_REDIS_PERSIST": True}
    crawls = await defer.gatherResults([
        defer.ensureDeferred(crawl_pairs(urls[worker::2], settings)) for worker in range(2)
    ])  # fmt: skip
    redis = crawls[0][1] | crawls[1][1]

    async def checked_order() -> list[str]:
        backend = RedisBackend(SimhashConfig(), RedisSettings({"SIMHASH_REDIS_URL": redis_server.url}))
        await backend.attach(RecordingSpider.name)
        try:
            return [member.url for member in await backend.members()]
        finally:
            await backend.close()

    order = await defer.Deferred.fromFuture(asyncio.ensure_future(checked_order()))
    assert sorted(order) == sorted(crawls[0][0] + crawls[1][0])
    _, memory = await crawl_pairs(order)
    bodies = {local[url]: body for url, body in pages}
    cluster = clusters(memory, library_pairs(urls, bodies))  # on Redis' order and on the set's
    assert redis and all(cluster.get(a, a) == cluster.get(b, b) for a, b in redis), redis - memory
    assert len(redis) >= 2 * len(memory) // 3


def views_site_pages() -> dict[str, str]:
    """A small shop and a recipe blog, named so that the paths' sorted order is a crawl's order (``dedup`` reads a
    folder in sorted order): two products declaring their identity (JSON-LD), the print view of each (the page's
    text, no JSON-LD: it takes its page's identity from its address, ``core.cluster.viewidentity``), a tracking
    copy, two variants named by their URL's option, and a recipe with its print card (step 7 at one address,
    ``core.cluster.views.MIN_SHARED``)."""
    from test_shop_crawl import DESCRIPTION, plain_product_html, product_html
    from test_views_crawl import STORY, card_sharing, html

    from simhash_scrapy.core.cluster import views

    def print_html(name: str, price: str) -> str:
        return (f"<!doctype html><html><head><title>{name}</title></head><body><main><h1>{name}</h1>"
                f"<p class='price'>{price} EUR</p><p>{DESCRIPTION}</p></main></body></html>")  # fmt: skip

    card = card_sharing(views.MIN_SHARED)
    return {
        "/p/shirt-blue.html": product_html("Linen shirt blue", "LS-1-BL", "49.90"),
        "/p/shirt-blue.html?print=1": print_html("Linen shirt blue", "49.90"),
        "/p/shirt-blue.html?utm_source=mail": product_html(
            "Linen shirt blue", "LS-1-BL", "49.90", "<div class='session'>Welcome back, session 9f8e</div>"
        ),
        "/p/shirt-red.html": product_html("Linen shirt red", "LS-1-RD", "52.90"),
        "/p/shirt-red.html?print=1": print_html("Linen shirt red", "52.90"),
        # variants named by their URL only (the option is their identity, ``core.cluster.identity.url_options``)
        "/p/shirt.html?variant=blue": plain_product_html("Linen shirt blue", "49.90"),
        "/p/shirt.html?variant=red": plain_product_html("Linen shirt red", "52.90"),
        "/recipes/soup.html": html(STORY + card),
        "/recipes/soup.html?format=print": html(card),
    }


def dedup_pairs(folder: Path, base: str, cwd: Path) -> set[tuple[str, str]]:
    """The (near-duplicate, canonical) pairs of ``scrapy simhash dedup`` on a folder of the pages (a real process),
    its files named by their paths (``--base-url``: the URL of each is the crawl's)."""
    from command_helpers import read_jsonl, simhash

    suffixes = sorted({"." + path.name.split(".", 1)[1] for path in folder.rglob("*") if path.is_file()})
    run = simhash("dedup", str(folder), "--base-url", base, *(f"--suffix={s}" for s in suffixes), cwd=cwd)
    assert run.returncode == 0, run.stderr
    clusters = read_jsonl(run.stdout)
    return {(m["url"], c["canonical"]) for c in clusters for m in c["members"] if m["url"] != c["canonical"]}


@pytest.mark.slow  # 2.1 s measured (--durations, loaded 2-core machine): dedup and compare in subprocesses
@pytest_twisted.ensureDeferred
async def test_a_crawl_the_library_dedup_and_compare_give_the_same_pairs_on_one_page_order(
    serve: Any, tmp_path: Path
) -> None:
    """One page order, four ways: a real in-process crawl, the library's entry point (``decide_html``),
    ``scrapy simhash dedup`` on the pages saved as files, and ``scrapy simhash compare`` on a pair (a print view
    after its page) decide alike: print views join their own product (the identity their address's page
    declared), never another product's print view; variants stay apart; the recipe's print card joins it at its
    address."""
    from command_helpers import simhash

    pages = views_site_pages()
    site = serve(pages)
    urls = sorted(site.url(path) for path in pages)
    order, crawled = await crawl_pairs(urls)
    assert order == urls  # (one request at a time, in the order given)
    bodies = {site.url(path): body.encode() for path, body in pages.items()}
    expected = {
        (site.url("/p/shirt-blue.html?print=1"), site.url("/p/shirt-blue.html")),
        (site.url("/p/shirt-blue.html?utm_source=mail"), site.url("/p/shirt-blue.html")),
        (site.url("/p/shirt-red.html?print=1"), site.url("/p/shirt-red.html")),
        (site.url("/recipes/soup.html?format=print"), site.url("/recipes/soup.html")),
    }
    assert crawled == expected
    assert library_pairs(order, bodies) == crawled
    folder = tmp_path / "pages"
    for path, body in pages.items():
        (folder / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (folder / path.lstrip("/")).write_text(body, encoding="utf-8")
    assert dedup_pairs(folder, site.url("").rstrip("/"), tmp_path) == crawled
    view, page = site.url("/p/shirt-red.html?print=1"), site.url("/p/shirt-red.html")
    run = simhash("compare", page, view, "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    decision = json.loads(run.stdout)["decisions"][-1]
    assert decision["decision"] == "near-duplicate" and decision["canonical"] == 1


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("backend", ["store", "redis"])
async def test_store_and_redis_crawls_decide_views_as_the_in_process_crawl(
    serve: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """The views site (print views taking their product's identity, a print card at its recipe's address) on a
    ``SIMHASH_DIR`` store and on Redis with one worker: the in-process crawl's pairs on the same order."""
    pages = views_site_pages()
    site = serve(pages)
    urls = sorted(site.url(path) for path in pages)
    _, memory = await crawl_pairs(urls)
    if backend == "store":
        settings: dict[str, Any] = {"SIMHASH_DIR": str(tmp_path / "store")}
    else:
        redis_server = request.getfixturevalue("redis_server")
        settings = {"SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": redis_server.url}
    order, pairs = await crawl_pairs(urls, settings)
    assert order == urls and len(memory) == 4
    assert pairs == memory
