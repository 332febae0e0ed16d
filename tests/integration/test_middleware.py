"""SimhashMiddleware component tests (``get_crawler``, real responses, real backend)."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
import pytest_twisted
from conftest import article_html, article_words
from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.test import get_crawler

import simhash_scrapy
from simhash_scrapy.backends import DedupBackend, PageRecord, Verdict
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.middleware import FLAG, MIDDLEWARE_PRIORITY, NearDuplicate, SimhashMiddleware
from simhash_scrapy.pipeline import SimhashPipeline
from simhash_scrapy.state import DedupState


WORDS = article_words(1)
# (the variant's difference is a line of text: a row with a date or a time would be the article's frame)
PAGE = article_html("Harbour budget", WORDS, "Filed by the harbour desk", links=["/a", "/b"])
PAGE_VARIANT = article_html("Harbour budget", WORDS, "Filed by the harbour desk, session 99812", links=["/a", "/b"])
OTHER = article_html("Railway", article_words(2))


class MySpider(Spider):
    name = "myspider"


async def make(settings: dict[str, Any] | None = None) -> tuple[SimhashMiddleware, Any]:
    crawler = get_crawler(MySpider, {"SIMHASH_THREADS": False, **(settings or {})})
    mw = SimhashMiddleware.from_crawler(crawler)
    spider = MySpider.from_crawler(crawler)
    await mw.state.spider_opened(spider)
    return mw, crawler


def html(url: str, body: str | bytes = PAGE, status: int = 200, ctype: str | None = "text/html; charset=utf-8",
         cls: type[Response] = HtmlResponse, **request_kw: Any) -> tuple[Request, Response]:
    request = Request(url, **request_kw)
    headers = {"Content-Type": ctype} if ctype else {}
    data = body.encode("utf-8") if isinstance(body, str) else body
    return request, cls(url, status=status, headers=headers, body=data, request=request)


async def process(mw: SimhashMiddleware, request: Request, response: Response) -> Response:
    return await mw.process_response(request=request, response=response)


def stats(crawler: Any) -> dict[str, Any]:
    return {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simhash/")}


@pytest_twisted.ensureDeferred
async def test_unique_then_dropped_near_duplicate(caplog: pytest.LogCaptureFixture) -> None:
    mw, crawler = await make()
    request, response = html("http://site/a")
    assert await process(mw, request, response) is response
    assert isinstance(request.meta["simhash"], int)
    assert request.meta["simhash_duplicate_of"] is None and request.meta["simhash_distance"] is None
    assert response.flags == []

    request2, response2 = html("http://site/a?session=1", PAGE_VARIANT)
    with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"), pytest.raises(NearDuplicate) as info:
        await process(mw, request2, response2)
    exc = info.value
    assert isinstance(exc, IgnoreRequest)
    assert exc.canonical_url == "http://site/a" and exc.url == "http://site/a?session=1"
    assert 1 <= exc.distance <= 3
    assert str(exc) == f"Near-duplicate of http://site/a (simhash within k=4, distance {exc.distance}): http://site/a?session=1"
    assert exc.rule == f"simhash within k=4, distance {exc.distance}"
    assert request2.meta["simhash_duplicate_of"] == "http://site/a"
    assert request2.meta["simhash_distance"] == exc.distance
    assert simhash_scrapy.hamming_distance(request.meta["simhash"], request2.meta["simhash"]) == exc.distance
    [record] = [r for r in caplog.records if "near-duplicate" in r.getMessage()]
    assert record.levelno == logging.DEBUG
    assert "Dropped near-duplicate page http://site/a?session=1: duplicates http://site/a" in record.getMessage()

    request3, response3 = html("http://site/other", OTHER)
    assert await process(mw, request3, response3) is response3
    assert stats(crawler) == {
        "simhash/fingerprinted": 3,
        "simhash/unique": 2,
        "simhash/near_duplicates": 1,
        "simhash/dropped": 1,
        f"simhash/distance_count/{exc.distance}": 1,
    }
    assert await mw.state.backend.index_size() == 2


@pytest_twisted.ensureDeferred
async def test_flag_mode() -> None:
    mw, crawler = await make({"SIMHASH_ACTION": "flag"})
    await process(mw, *html("http://site/a"))
    request, response = html("http://site/a?x=1", PAGE_VARIANT)
    assert await process(mw, request, response) is response
    assert response.flags == [FLAG] == ["near-duplicate"]
    assert request.meta["simhash_duplicate_of"] == "http://site/a"
    assert stats(crawler)["simhash/flagged"] == 1
    assert "simhash/dropped" not in stats(crawler)
    # the verdict travels with the response, for SimhashSpiderMiddleware and the spider
    assert request.meta["simhash_outcome"] == "near_duplicate"
    assert request.meta["simhash_short"] is False


@pytest_twisted.ensureDeferred
async def test_dont_filter_is_recorded_but_never_dropped() -> None:
    mw, crawler = await make()
    await process(mw, *html("http://site/a"))
    request, response = html("http://site/a?again", PAGE_VARIANT, dont_filter=True)
    assert await process(mw, request, response) is response
    assert response.flags == ["near-duplicate"]
    assert request.meta["simhash_duplicate_of"] == "http://site/a"
    assert stats(crawler)["simhash/near_duplicates"] == 1
    assert stats(crawler)["simhash/flagged"] == 1
    assert [m.url for m in await mw.state.backend.members()] == ["http://site/a", "http://site/a?again"]


@pytest_twisted.ensureDeferred
async def test_opt_out_meta() -> None:
    mw, crawler = await make()
    await process(mw, *html("http://site/a"))
    request, response = html("http://site/a?x", PAGE_VARIANT, meta={"simhash_enabled": False})
    assert await process(mw, request, response) is response
    assert "simhash" not in request.meta
    assert request.meta["simhash_skipped"] == "opted_out"
    assert stats(crawler)["simhash/skipped/opted_out"] == 1
    assert stats(crawler)["simhash/fingerprinted"] == 1


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"status": 404}, "status"),
        ({"status": 500}, "status"),
        ({"ctype": "image/png", "body": b"\x89PNG\r\n", "cls": Response}, "content_type"),
        ({"ctype": "application/json", "body": '{"a": 1}', "cls": TextResponse}, "content_type"),
        ({"ctype": None, "body": b"%PDF-1.4", "cls": Response}, "content_type"),
        ({"body": ""}, "empty"),
        ({"body": "   \n  "}, "empty"),
        ({"body": "<html><body><script>x()</script></body></html>"}, "empty"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_skipped_pages_are_counted(kwargs: dict[str, Any], reason: str) -> None:
    mw, crawler = await make()
    request, response = html("http://site/x", **kwargs)
    assert await process(mw, request, response) is response
    assert request.meta["simhash_skipped"] == reason
    assert "simhash" not in request.meta
    assert stats(crawler) == {f"simhash/skipped/{reason}": 1}


@pytest_twisted.ensureDeferred
async def test_short_pages_are_compared_exactly() -> None:
    """A soft-404 shell under many URLs is one cluster; a short page that differs is unique."""
    mw, crawler = await make()
    shell = "<html><body><h1>Not found</h1><p>Sorry, no page here.</p></body></html>"
    for n in range(5):
        request, response = html(f"http://site/missing/{n}", body=shell)
        if n == 0:
            assert await process(mw, request, response) is response
            assert request.meta["simhash_short"] is True
            assert request.meta["simhash_outcome"] == "unique"
        else:
            with pytest.raises(NearDuplicate) as caught:
                await process(mw, request, response)
            assert caught.value.canonical_url == "http://site/missing/0" and caught.value.distance == 0
    # one word more is another short page: exact, so never "near"
    request, response = html("http://site/other-shell", body=shell.replace("no page", "no such page"))
    assert await process(mw, request, response) is response
    assert request.meta["simhash_outcome"] == "unique"
    counted = stats(crawler)
    assert counted["simhash/short/unique"] == 2 and counted["simhash/short/near_duplicates"] == 4
    assert counted["simhash/unique"] == 2 and counted["simhash/near_duplicates"] == 4
    assert counted["simhash/dropped"] == 4


@pytest_twisted.ensureDeferred
async def test_too_large_and_custom_statuses_and_types() -> None:
    mw, crawler = await make(
        {"SIMHASH_MAX_BYTES": len(PAGE) - 1, "SIMHASH_HTTP_STATUSES": [200, 404], "SIMHASH_CONTENT_TYPES": ["text/html"]}
    )
    request, response = html("http://site/big")
    await process(mw, request, response)
    assert request.meta["simhash_skipped"] == "too_large"
    small = article_html("t", article_words(3, 60))
    request, response = html("http://site/404", small, status=404)
    await process(mw, request, response)
    assert isinstance(request.meta["simhash"], int)
    request, response = html("http://site/x", small, ctype="application/xhtml+xml")
    await process(mw, request, response)
    assert request.meta["simhash_skipped"] == "content_type"
    # No Content-Type header: an HtmlResponse (Scrapy sniffed HTML) is fingerprinted.
    request, response = html("http://site/nohdr", OTHER, ctype=None)
    await process(mw, request, response)
    assert "simhash" in request.meta
    assert stats(crawler)["simhash/skipped/too_large"] == 1


@pytest_twisted.ensureDeferred
async def test_fingerprinting_error_lets_the_page_pass(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    mw, crawler = await make()

    def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("simhash_scrapy.middleware.analyse_html", broken)
    monkeypatch.setattr("simhash_scrapy.middleware.analyse_tree", broken)
    request, response = html("http://site/a")
    with caplog.at_level(logging.ERROR):
        assert await process(mw, request, response) is response
    assert request.meta["simhash_skipped"] == "error"
    assert stats(crawler) == {"simhash/skipped/error": 1}
    assert "cannot fingerprint http://site/a" in caplog.text and "boom" in caplog.text


class FailingCheckBackend(MemoryBackend):
    async def check(self, record: PageRecord, index: bool = True) -> Verdict:
        raise ConnectionError("backend went away")


@pytest_twisted.ensureDeferred
async def test_backend_error_lets_the_page_pass() -> None:
    mw, crawler = await make({"SIMHASH_BACKEND": f"{__name__}.FailingCheckBackend"})
    assert isinstance(mw.state.backend, FailingCheckBackend)
    request, response = html("http://site/a")
    assert await process(mw, request, response) is response
    assert stats(crawler) == {"simhash/skipped/error": 1}


@pytest_twisted.ensureDeferred
async def test_threads_give_the_same_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("simhash_scrapy.state.THREAD_MIN_BYTES", 0)  # every page the plugin parses goes to a thread
    monkeypatch.setattr("simhash_scrapy.middleware.SHARED_PARSE_MAX_BYTES", 0)  # no page shares Scrapy's parse
    inline, _ = await make({"SIMHASH_THREADS": False})
    threaded, _ = await make({"SIMHASH_THREADS": True})
    r1, p1 = html("http://site/a")
    r2, p2 = html("http://site/a")
    await process(inline, r1, p1)
    await process(threaded, r2, p2)
    assert inline.state._executor is None and threaded.state._executor is not None
    assert r1.meta["simhash"] == r2.meta["simhash"] == simhash_scrapy.fingerprint_html(
        PAGE, main_content=True
    )
    await threaded.state.spider_closed(threaded.state.spider, "finished")


@pytest_twisted.ensureDeferred
async def test_visible_mode_and_features_change_the_fingerprint() -> None:
    mw, _ = await make({"SIMHASH_TEXT_MODE": "visible", "SIMHASH_WORD_NGRAM": 2})
    request, response = html("http://site/a")
    await process(mw, request, response)
    assert request.meta["simhash"] == simhash_scrapy.fingerprint_html(
        PAGE, main_content=False, features=simhash_scrapy.FeatureConfig(word_ngram=2)
    )


@pytest_twisted.ensureDeferred
async def test_domain_scope() -> None:
    mw, _ = await make({"SIMHASH_SCOPE": "domain"})
    await process(mw, *html("http://one.example/a"))
    request, response = html("http://two.example/a", PAGE_VARIANT)
    await process(mw, request, response)  # another domain: its own index
    assert request.meta["simhash_duplicate_of"] is None
    with pytest.raises(NearDuplicate):
        await process(mw, *html("http://one.example/b", PAGE_VARIANT))
    assert sorted({m.scope for m in await mw.state.backend.members()}) == ["one.example", "two.example"]


@pytest_twisted.ensureDeferred
async def test_spider_scope_matches_across_domains() -> None:
    mw, _ = await make()
    await process(mw, *html("http://one.example/a"))
    with pytest.raises(NearDuplicate):
        await process(mw, *html("http://two.example/a", PAGE_VARIANT))


@pytest_twisted.ensureDeferred
async def test_debug_logs_every_duplicate_at_the_configured_level(caplog: pytest.LogCaptureFixture) -> None:
    page_c = article_html("Harbour budget", WORDS, "Published 11:00 token abc")
    for debug, expected in ((False, 1), (True, 2)):
        caplog.clear()
        mw, _ = await make({"SIMHASH_DEBUG": debug, "SIMHASH_LOG_LEVEL": "INFO", "SIMHASH_ACTION": "flag"})
        with caplog.at_level(logging.INFO, logger="simhash_scrapy"):
            await process(mw, *html("http://site/a"))
            await process(mw, *html("http://site/b", PAGE_VARIANT))
            await process(mw, *html("http://site/c", page_c))
        records = [r for r in caplog.records if "near-duplicate" in r.getMessage()]
        assert len(records) == expected
        assert all(r.levelno == logging.INFO for r in records)
        assert ("no more near-duplicates will be shown" in records[0].getMessage()) is (not debug)


@pytest_twisted.ensureDeferred
async def test_progress_line(caplog: pytest.LogCaptureFixture) -> None:
    mw, _ = await make({"SIMHASH_ACTION": "flag"})
    await process(mw, *html("http://site/a"))
    await process(mw, *html("http://site/b", PAGE_VARIANT))
    await process(mw, *html("http://site/c", OTHER))
    await process(mw, *html("http://site/d", PAGE_VARIANT))
    with caplog.at_level(logging.INFO, logger="simhash_scrapy"):
        mw.state.log_progress()
    assert "Simhash: fingerprinted 4 pages, 2 near-duplicates (50.0%)" in caplog.text


@pytest_twisted.ensureDeferred
async def test_close_sets_final_stats() -> None:
    mw, crawler = await make({"SIMHASH_ACTION": "flag"})
    await process(mw, *html("http://site/a"))
    await process(mw, *html("http://site/b", PAGE_VARIANT))
    await process(mw, *html("http://site/c", OTHER))
    await mw.state.spider_closed(mw.state.spider, "finished")
    assert crawler.stats.get_value("simhash/index_size") == 2
    assert crawler.stats.get_value("simhash/clusters") == 1


def test_disabled_raises_not_configured() -> None:
    crawler = get_crawler(MySpider, {"SIMHASH_ENABLED": False})
    with pytest.raises(NotConfigured):
        SimhashMiddleware.from_crawler(crawler)


def error_of(settings: dict[str, object]) -> str | None:
    """The start-up error a crawl with ``settings`` logs when the spider opens (then it closes: simhash_error)."""
    return SimhashMiddleware.from_crawler(get_crawler(MySpider, settings)).state.error


def test_bad_setting_stops_the_component() -> None:
    # Not raised from from_crawler (a traceback in `scrapy crawl`): said in one line when the spider opens.
    assert error_of({"SIMHASH_MAX_DISTANCE": "far"}) == "SIMHASH_MAX_DISTANCE must be an integer from 0 to 63, got 'far'"
    assert error_of({}) is None


def test_unknown_backend_class() -> None:
    assert re.match(r"SIMHASH_BACKEND='nowhere.Backend': cannot load", error_of({"SIMHASH_BACKEND": "nowhere.Backend"}) or "")
    error = error_of({"SIMHASH_BACKEND": "collections.OrderedDict"}) or ""
    assert "is not a subclass of simhash_scrapy.backends.DedupBackend" in error


def test_middleware_and_pipeline_share_one_state() -> None:
    crawler = get_crawler(MySpider)
    mw = SimhashMiddleware.from_crawler(crawler)
    pipeline = SimhashPipeline.from_crawler(crawler)
    assert mw.state is pipeline.state is DedupState.for_crawler(crawler)
    other = SimhashMiddleware.from_crawler(get_crawler(MySpider))
    assert other.state is not mw.state


@pytest_twisted.ensureDeferred
async def test_replay_blobs_are_kept_by_the_pages_scope_and_identity() -> None:
    """``simhash_scrapy.replay`` keeps and reads a page's requests with one call of the state each: under the
    scope of the address that answered and the request's fingerprint (what ``previous`` reads), so the same
    page asked with its query in another order finds them; another page, or another host, does not."""
    mw, _ = await make({"SIMHASH_SCOPE": "domain"})
    state = mw.state
    await state.save_replay(Request("http://site/a?b=1&a=2"), "http://site/a?b=1&a=2", b"requests of a")
    await state.save_replay(Request("http://site/old"), "http://site/new", b"requests of old")  # redirected
    assert await state.load_replay(Request("http://site/a?a=2&b=1"), "http://site/a?a=2&b=1") == b"requests of a"
    assert await state.load_replay(Request("http://site/old"), "http://site/new") == b"requests of old"
    assert await state.load_replay(Request("http://site/new"), "http://site/new") is None
    assert await state.load_replay(Request("http://site/b"), "http://site/b") is None
    assert await state.load_replay(Request("http://other/a?b=1&a=2"), "http://other/a?b=1&a=2") is None


def test_addon_inserts_components() -> None:
    crawler = get_crawler(MySpider, {"ADDONS": {"simhash_scrapy.Addon": 0}})
    from simhash_scrapy.spidermw import SimhashSpiderMiddleware
    mws = crawler.settings.getdict("DOWNLOADER_MIDDLEWARES")
    pipes = crawler.settings.getdict("ITEM_PIPELINES")
    assert mws == {SimhashMiddleware: MIDDLEWARE_PRIORITY}  # UrlRulesMiddleware only with SIMHASH_URL_RULES
    assert MIDDLEWARE_PRIORITY < 550
    from simhash_scrapy.replay import REPLAY_PRIORITY, SimhashReplayMiddleware

    # The replay middleware sits after every built-in one (the requests kept are the ones the engine got).
    assert crawler.settings.getdict("SPIDER_MIDDLEWARES") == {
        SimhashSpiderMiddleware: 950, SimhashReplayMiddleware: REPLAY_PRIORITY}  # fmt: skip
    assert REPLAY_PRIORITY < 25
    assert list(pipes.values()) == [200]
    # The state the components share is the extension Scrapy built (no registry of ours).
    from simhash_scrapy.state import STATE_PRIORITY

    assert crawler.settings.getdict("EXTENSIONS") == {DedupState: STATE_PRIORITY}
    state = crawler.get_extension(DedupState)
    assert state is not None and SimhashMiddleware.from_crawler(crawler).state is state
    assert SimhashPipeline.from_crawler(crawler).state is state
    assert SimhashSpiderMiddleware.from_crawler(crawler).state is state


def test_addon_leaves_everything_out_when_disabled() -> None:
    crawler = get_crawler(MySpider, {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ENABLED": False})
    assert crawler.get_extension(DedupState) is None
    with pytest.raises(NotConfigured):
        SimhashMiddleware.from_crawler(crawler)


def test_addon_keeps_user_priorities() -> None:
    crawler = get_crawler(
        MySpider,
        {
            "ADDONS": {simhash_scrapy.Addon: 0},
            "DOWNLOADER_MIDDLEWARES": {"simhash_scrapy.SimhashMiddleware": 520},
            "ITEM_PIPELINES": {"simhash_scrapy.pipeline.SimhashPipeline": 900},
        },
    )
    mws = crawler.settings.getdict("DOWNLOADER_MIDDLEWARES")
    assert mws["simhash_scrapy.SimhashMiddleware"] == 520 and SimhashMiddleware not in mws
    assert crawler.settings.getdict("ITEM_PIPELINES") == {"simhash_scrapy.pipeline.SimhashPipeline": 900}


def test_backend_interface_is_abstract() -> None:
    with pytest.raises(TypeError):
        DedupBackend(None)  # type: ignore[abstract,arg-type]


SHARED_PAGE = """<html><head><title>T</title><script>var s = 1;</script></head><body>
<nav><a href="/">Home</a> <a href="/x">X</a></nav>
<main><p>""" + " ".join(f"word{i} shared parse test" for i in range(60)) + """</p>
<div hidden>hidden words here</div></main><footer>Footer text</footer></body></html>"""


@pytest.mark.parametrize("mode", ["main", "visible"])
@pytest_twisted.ensureDeferred
async def test_pages_are_fingerprinted_from_scrapys_own_parse(mode: str) -> None:
    from simhash_scrapy import fingerprint_html

    mw, _ = await make({"SIMHASH_TEXT_MODE": mode})
    request, response = html("http://site/shared", SHARED_PAGE)
    assert await process(mw, request, response) is response
    # The spider's selector was built once, here, and is reused as it is:
    # cleaning for the fingerprint happened on a copy.
    cached = response._cached_selector
    assert cached is not None and response.selector is cached
    assert response.css("script::text").get() == "var s = 1;"
    assert response.css("nav a::text").getall() == ["Home", "X"]
    assert response.xpath("//div[@hidden]/text()").get() == "hidden words here"
    # The same fingerprint the core gives for the body.
    expected = fingerprint_html(response.body, response.encoding, main_content=(mode == "main"),
                                features=mw.config.features, min_tokens=mw.config.min_tokens)
    assert request.meta["simhash"] == expected


@pytest_twisted.ensureDeferred
async def test_very_large_pages_are_parsed_by_the_plugin_not_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("simhash_scrapy.middleware.SHARED_PARSE_MAX_BYTES", 100)
    mw, _ = await make()
    request, response = html("http://site/big", SHARED_PAGE)
    assert await process(mw, request, response) is response
    assert response._cached_selector is None  # left for the spider to build, if it wants it
    assert isinstance(request.meta["simhash"], int)
