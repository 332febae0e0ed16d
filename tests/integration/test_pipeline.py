"""SimhashPipeline component tests."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
import pytest_twisted
import scrapy
from conftest import article_html, article_words
from scrapy import Spider
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.test import get_crawler

from simhash_scrapy.middleware import SimhashMiddleware
from simhash_scrapy.pipeline import NearDuplicateItem, SimhashPipeline

WORDS = article_words(5)
TEXT = " ".join(WORDS)
TEXT_EDITED = " ".join(WORDS[:-1] + ["updated"])
OTHER_TEXT = " ".join(article_words(6))


class MySpider(Spider):
    name = "myspider"


async def make(settings: dict[str, Any] | None = None) -> tuple[SimhashPipeline, Any]:
    crawler = get_crawler(MySpider, {"SIMHASH_THREADS": False, **(settings or {})})
    pipeline = SimhashPipeline.from_crawler(crawler)
    await pipeline.state.spider_opened(MySpider.from_crawler(crawler))
    return pipeline, crawler


def stats(crawler: Any) -> dict[str, Any]:
    return {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simhash/")}


@pytest_twisted.ensureDeferred
async def test_text_field_drop() -> None:
    pipeline, crawler = await make({"SIMHASH_ITEM_FIELD": "body", "SIMHASH_LOG_LEVEL": "INFO"})
    first = {"url": "http://x/1", "body": TEXT}
    assert await pipeline.process_item(first) is first
    with pytest.raises(NearDuplicateItem) as info:
        await pipeline.process_item({"url": "http://x/2", "body": TEXT_EDITED})
    exc = info.value
    assert isinstance(exc, DropItem)
    assert exc.canonical_url == "http://x/1" and exc.url == "http://x/2"
    assert str(exc) == f"Near-duplicate of http://x/1 (simhash within k=4, distance {exc.distance}): http://x/2"
    assert exc.log_level == logging.INFO
    third = {"url": "http://x/3", "body": OTHER_TEXT}
    assert await pipeline.process_item(third) is third
    assert stats(crawler) == {
        "simhash/items/fingerprinted": 3,
        "simhash/items/unique": 2,
        "simhash/items/near_duplicates": 1,
        f"simhash/items/distance_count/{exc.distance}": 1,
        "simhash/items/dropped": 1,
    }
    members = await pipeline.state.backend.members()
    assert [m.scope for m in members] == ["item:myspider"] * 3


@pytest_twisted.ensureDeferred
async def test_html_field_is_detected_and_items_without_url_are_numbered() -> None:
    pipeline, _ = await make({"SIMHASH_ITEM_FIELD": "html"})
    await pipeline.process_item({"html": article_html("T", WORDS, "v1")})
    with pytest.raises(NearDuplicateItem, match=r"^Near-duplicate of item-1 \(simhash within k=4, distance \d\)$"):
        await pipeline.process_item({"html": article_html("T", WORDS, "v2").encode()})


@pytest_twisted.ensureDeferred
async def test_forced_text_format_does_not_parse_markup() -> None:
    pipeline, _ = await make({"SIMHASH_ITEM_FIELD": "body", "SIMHASH_ITEM_FORMAT": "text"})
    a = {"body": "<b>" + TEXT}
    await pipeline.process_item(a)
    # with the markup read as words, "b" is a token of the first item only: still near
    with pytest.raises(NearDuplicateItem):
        await pipeline.process_item({"body": TEXT})


@pytest_twisted.ensureDeferred
async def test_missing_short_and_odd_fields() -> None:
    """Missing, empty and odd fields are skipped; a short text is compared exactly, not skipped."""
    pipeline, crawler = await make({"SIMHASH_ITEM_FIELD": "body", "SIMHASH_MAX_BYTES": 5000})
    items = [{"url": "http://x/0"}, {"body": ""}, {"body": 42}, {"body": "too few words"}, {"body": "x " * 3000}]
    for item in items:
        assert await pipeline.process_item(item) is item
    with pytest.raises(NearDuplicateItem):
        await pipeline.process_item({"body": "Too few  words!"})  # the same tokens
    assert stats(crawler) == {
        "simhash/items/skipped/no_field": 3,
        "simhash/items/skipped/too_large": 1,
        "simhash/items/fingerprinted": 2,
        "simhash/items/unique": 1,
        "simhash/items/short/unique": 1,
        "simhash/items/near_duplicates": 1,
        "simhash/items/short/near_duplicates": 1,
        "simhash/items/distance_count/0": 1,
        "simhash/items/dropped": 1,
    }


@pytest_twisted.ensureDeferred
async def test_flag_mode_sets_fields_when_the_item_accepts_them(caplog: pytest.LogCaptureFixture) -> None:
    class Declared(scrapy.Item):
        url = scrapy.Field()
        body = scrapy.Field()
        simhash_duplicate_of = scrapy.Field()
        simhash_distance = scrapy.Field()

    class Plain(scrapy.Item):
        url = scrapy.Field()
        body = scrapy.Field()

    @dataclasses.dataclass
    class DataItem:
        url: str
        body: str

    pipeline, crawler = await make({"SIMHASH_ITEM_FIELD": "body", "SIMHASH_ACTION": "flag"})
    await pipeline.process_item({"url": "http://x/1", "body": TEXT})
    as_dict = await pipeline.process_item({"url": "http://x/2", "body": TEXT_EDITED})
    assert as_dict["simhash_duplicate_of"] == "http://x/1" and 1 <= as_dict["simhash_distance"] <= 3
    declared = await pipeline.process_item(Declared(url="http://x/3", body=TEXT_EDITED))
    assert declared["simhash_duplicate_of"] == "http://x/1"
    plain = await pipeline.process_item(Plain(url="http://x/4", body=TEXT_EDITED))
    assert dict(plain) == {"url": "http://x/4", "body": TEXT_EDITED}
    data = await pipeline.process_item(DataItem("http://x/5", TEXT_EDITED))
    assert data == DataItem("http://x/5", TEXT_EDITED)
    assert stats(crawler)["simhash/items/flagged"] == 4


@pytest_twisted.ensureDeferred
async def test_item_action_can_differ_from_action() -> None:
    pipeline, _ = await make({"SIMHASH_ITEM_FIELD": "body", "SIMHASH_ACTION": "flag", "SIMHASH_ITEM_ACTION": "drop"})
    await pipeline.process_item({"body": TEXT})
    with pytest.raises(NearDuplicateItem):
        await pipeline.process_item({"body": TEXT_EDITED})


@pytest_twisted.ensureDeferred
async def test_items_of_a_flagged_page_are_dropped_by_the_spider_middleware() -> None:
    """Middleware flags; SimhashSpiderMiddleware drops that response's items (no SIMHASH_ITEM_FIELD)."""
    from scrapy.http import HtmlResponse

    from simhash_scrapy.spidermw import SimhashSpiderMiddleware

    crawler = get_crawler(MySpider, {"SIMHASH_THREADS": False, "SIMHASH_ACTION": "flag", "SIMHASH_ITEM_ACTION": "drop"})
    mw = SimhashMiddleware.from_crawler(crawler)
    spider_mw = SimhashSpiderMiddleware.from_crawler(crawler)
    await mw.state.spider_opened(MySpider.from_crawler(crawler))
    responses = []
    for url, extra in (("http://x/a", "v1"), ("http://x/a?utm=1", "v2")):
        request = scrapy.Request(url)
        body = article_html("T", WORDS, extra).encode()
        responses.append(
            await mw.process_response(
                request=request,
                response=HtmlResponse(url, body=body, headers={"Content-Type": "text/html"}, request=request),
            )
        )
    follow = scrapy.Request("http://x/next")

    async def output(url: str) -> Any:
        yield {"url": url, "title": "T"}
        yield follow

    unique_out = [x async for x in spider_mw.process_spider_output_async(responses[0], output("http://x/a"))]
    assert unique_out == [{"url": "http://x/a", "title": "T"}, follow]
    flagged_out = [x async for x in spider_mw.process_spider_output_async(responses[1], output("http://x/a?utm=1"))]
    assert flagged_out == [follow]  # the item is dropped, the request goes on
    sync_out = list(spider_mw.process_spider_output(responses[1], [{"url": "u"}, follow]))
    assert sync_out == [follow]
    assert crawler.stats.get_value("simhash/items/dropped") == 2
    assert crawler.stats.get_value("simhash/items/fingerprinted") is None


@pytest_twisted.ensureDeferred
async def test_items_never_match_pages() -> None:
    """The text of an item matches the page it comes from; items have their own index."""
    from scrapy.http import HtmlResponse

    crawler = get_crawler(MySpider, {"SIMHASH_THREADS": False, "SIMHASH_ITEM_FIELD": "text"})
    mw = SimhashMiddleware.from_crawler(crawler)
    pipeline = SimhashPipeline.from_crawler(crawler)
    await mw.state.spider_opened(MySpider.from_crawler(crawler))
    request = scrapy.Request("http://x/a")
    await mw.process_response(
        request=request,
        response=HtmlResponse("http://x/a", body=article_html("T", WORDS).encode(), headers={"Content-Type": "text/html"}, request=request),
    )
    item = {"url": "http://x/a", "text": "T " + TEXT}
    assert await pipeline.process_item(item) is item


def test_disabled() -> None:
    with pytest.raises(NotConfigured):
        SimhashPipeline.from_crawler(get_crawler(MySpider, {"SIMHASH_ENABLED": "false"}))


@pytest_twisted.ensureDeferred
async def test_an_item_flagged_for_its_page_and_its_field_is_counted_once() -> None:
    # Issue 37: the spider middleware flags the items of a flagged page; the pipeline flagged the same
    # item again for its own field, and simhash/items/flagged counted it twice.
    from scrapy.http import HtmlResponse

    from simhash_scrapy.spidermw import SimhashSpiderMiddleware

    settings = {"SIMHASH_THREADS": False, "SIMHASH_ACTION": "flag", "SIMHASH_ITEM_FIELD": "body"}
    crawler = get_crawler(MySpider, settings)
    mw = SimhashMiddleware.from_crawler(crawler)
    spider_mw = SimhashSpiderMiddleware.from_crawler(crawler)
    pipeline = SimhashPipeline.from_crawler(crawler)
    await mw.state.spider_opened(MySpider.from_crawler(crawler))
    items = []
    for url, extra, body in (("http://x/a", "v1", TEXT), ("http://x/a?utm=1", "v2", TEXT_EDITED)):
        request = scrapy.Request(url)
        page = article_html("T", WORDS, extra).encode()
        response = await mw.process_response(
            request=request, response=HtmlResponse(url, body=page, headers={"Content-Type": "text/html"}, request=request)
        )

        async def output(url: str = url, body: str = body) -> Any:
            yield {"url": url, "body": body}

        for item in [x async for x in spider_mw.process_spider_output_async(response, output())]:
            items.append(await pipeline.process_item(item))
    assert items[0].get("simhash_duplicate_of") is None
    assert items[1]["simhash_duplicate_of"] == "http://x/a"  # flagged for its page, then for its field
    assert stats(crawler)["simhash/items/flagged"] == 1
    assert stats(crawler)["simhash/flagged"] == 1
