"""Step 7's other views through a real Scrapy crawl: a recipe's print card at the recipe's address (``core.cluster.views``)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest_twisted
from conftest import RecordingSpider, run_crawl

from simhash_scrapy.core.analysis import analyse_html
from simhash_scrapy.core.cluster import containment, views
from simhash_scrapy.core.settings.config import SimhashConfig

_WORDS = [f"w{i}" for i in range(3000)]


def sentences(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=rng.randrange(10, 20))).capitalize() + "." for _ in range(count)]


def html(lines: list[str]) -> str:
    return "<html><head><title>Soup</title></head><body><article>{}</article></body></html>".format(
        "".join(f"<p>{line}</p>" for line in lines)
    )


def sketch(body: str) -> containment.Sketch:
    options = replace(SimhashConfig.from_settings({}).analysis, sketch=True)
    answer = analyse_html(body.encode(), None, options)
    assert answer.sketch is not None
    return answer.sketch


async def crawl_flagging(serve: Any, pages: dict[str, str]) -> tuple[Any, Any, dict[str, dict[str, Any]]]:
    """Serve ``pages`` and crawl them in this order at the defaults, flagging: the site, the crawler and what
    the spider saw of each URL."""
    site = serve(pages)
    settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag"}
    crawler = await run_crawl(RecordingSpider, settings, start_urls=[site.url(path) for path in pages])
    return site, crawler, {entry["url"]: entry for entry in crawler.spider.seen}


STORY = sentences(20, 70)  # the recipe post's story


def card_sharing(shared: int) -> list[str]:
    """A recipe card, a tenth of the post or more, whose pair sample with the whole post holds exactly ``shared``
    of its sentences (all of them the post's)."""
    for seed in range(100, 400):
        card = sentences(seed, 10)
        small, large = sketch(html(card)), sketch(html(STORY + card))
        if small.sentences > views.MIN_RATIO * large.sentences and containment.estimate(small, large) == (1.0, shared):
            return card
    raise AssertionError("no such card")


@pytest_twisted.ensureDeferred
async def test_a_print_card_with_three_sampled_sentences_joins_its_recipe_at_its_address(serve: Any) -> None:
    card = card_sharing(views.MIN_SHARED)  # three: fewer than step 7's own four
    pages = {
        "/recipes/soup": html(STORY + card),
        "/recipes/soup?format=print": html(card),  # the print view: the card alone, a tenth of the post or so
        "/recipes/stew?format=print": html(card),  # the same card at another address: not a view of the soup
    }
    site, _crawler, seen = await crawl_flagging(serve, pages)
    printed = seen[site.url("/recipes/soup?format=print")]
    assert printed["duplicate_of"] == site.url("/recipes/soup")
    assert printed["rule"] == "containment" and printed["distance"] > 4
    # at another address step 7's own bounds hold (a tenth of the post is not a copy of it), and the print
    # view's row in the soup's cluster serves only its own address: the same card elsewhere stays apart
    assert seen[site.url("/recipes/stew?format=print")]["duplicate_of"] is None


@pytest_twisted.ensureDeferred
async def test_a_print_card_under_a_tenth_of_its_recipe_joins_it_at_its_address(serve: Any) -> None:
    story = sentences(21, 87)  # a long post: the card is 8 of its 95 sentences (scrummylane's broccoli)
    for seed in range(100, 400):
        card = sentences(seed, 8)
        small, large = sketch(html(card)), sketch(html(story + card))
        if containment.estimate(small, large) == (1.0, views.MIN_SHARED):
            break
    assert small.sentences < 0.1 * large.sentences  # under a tenth of the post (the bound before)
    pages = {"/recipes/broccoli": html(story + card), "/recipes/broccoli?format=print": html(card)}
    site, _crawler, seen = await crawl_flagging(serve, pages)
    printed = seen[site.url("/recipes/broccoli?format=print")]
    assert printed["duplicate_of"] == site.url("/recipes/broccoli") and printed["rule"] == "containment"


def marked(lines: list[str]) -> list[str]:
    """``lines`` as a CMS print view with links shows them: a numbered marker after a link in each, the
    addresses listed below."""
    out = []
    for number, line in enumerate(lines, 1):
        words = line.split()
        out.append(" ".join(words[:3] + [f"[{number}]"] + words[3:]))
    return out + [f"[{number}] https://recipes.test/w{number}" for number in range(1, len(lines) + 1)]


@pytest_twisted.ensureDeferred
async def test_a_print_view_with_numbered_links_joins_its_recipe_at_its_address(serve: Any) -> None:
    card = card_sharing(views.MIN_SHARED + 1)
    pages = {
        "/recipes/soup": html(STORY + card),
        "/recipes/soup?format=print&links=1": html(marked(card)),  # every sentence of the card has a link
    }
    site, _crawler, seen = await crawl_flagging(serve, pages)
    printed = seen[site.url("/recipes/soup?format=print&links=1")]
    assert printed["duplicate_of"] == site.url("/recipes/soup") and printed["rule"] == "containment"


@pytest_twisted.ensureDeferred
async def test_a_home_page_of_three_sentences_keeps_its_tracking_copy_with_a_session_line(serve: Any) -> None:
    home = sentences(30, 3)  # a short home page: three sentences of eight words or more
    pages = {
        "/": html(home),
        "/?utm_source=newsletter": html(sentences(31, 1) + home),  # a tracking copy adds its session line
        "/about": html(sentences(32, 1) + home),  # another address: step 7's own four shared sentences
    }
    assert sketch(pages["/"]).sentences == views.MIN_SHARED < containment.MIN_SHARED
    site, _crawler, seen = await crawl_flagging(serve, pages)
    tracked = seen[site.url("/?utm_source=newsletter")]
    assert tracked["duplicate_of"] == site.url("/") or seen[site.url("/")]["duplicate_of"] == tracked["url"]
    joined = tracked if tracked["duplicate_of"] else seen[site.url("/")]
    assert joined["rule"] == "containment" and joined["distance"] > 8
    assert seen[site.url("/about")]["duplicate_of"] is None


def product_page(sku: str, price: str, jsonld: bool) -> str:
    data = {"@context": "https://schema.org", "@type": "Product", "name": f"Monitor {sku}", "sku": sku,
            "offers": {"@type": "Offer", "price": price, "priceCurrency": "EUR"}}  # fmt: skip
    script = f'<script type="application/ld+json">{json.dumps(data)}</script>' if jsonld else ""
    body = "".join(f"<p>{line}</p>" for line in sentences(40, 30))  # one description for both products
    return f"<html><head><title>Monitor</title>{script}</head><body><article>{body}</article></body></html>"


@pytest_twisted.ensureDeferred
async def test_a_print_view_without_the_json_ld_takes_its_product_pages_identity(serve: Any) -> None:
    pages = {
        "/p/a-1.html": product_page("A-1", "199.00", jsonld=True),
        "/p/b-2.html": product_page("B-2", "249.00", jsonld=True),  # another product, the same text
        "/p/a-1.html?format=print": product_page("A-1", "199.00", jsonld=False),  # A-1's print view
        "/p/b-2.html?format=print": product_page("B-2", "249.00", jsonld=False),
        "/p/c-3.html?format=print": product_page("C-3", "99.00", jsonld=False),  # a view before (without) its page
    }
    site = serve(pages)
    settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag"}
    crawler = await run_crawl(RecordingSpider, settings, start_urls=[site.url(path) for path in pages])
    seen = {entry["url"]: entry["duplicate_of"] for entry in crawler.spider.seen}
    # the products' declared identities keep them apart; each print view joins its own product
    assert seen[site.url("/p/b-2.html")] is None
    assert seen[site.url("/p/a-1.html?format=print")] == site.url("/p/a-1.html")
    assert seen[site.url("/p/b-2.html?format=print")] == site.url("/p/b-2.html")
    assert seen[site.url("/p/c-3.html?format=print")] is None  # plain scope: nothing declared there before
    stats = crawler.stats.get_stats()
    assert stats["simhash/identity/inherited"] == 2 and stats["simhash/identity/pages"] == 2


@pytest_twisted.ensureDeferred
async def test_a_resumed_crawl_goes_on_with_the_identities_its_store_recorded(serve: Any, tmp_path: Path) -> None:
    pages = {
        "/p/a-1.html": product_page("A-1", "199.00", jsonld=True),
        "/p/b-2.html": product_page("B-2", "249.00", jsonld=True),
        "/p/a-1.html?format=print": product_page("A-1", "199.00", jsonld=False),
    }
    site = serve(pages)
    settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag", "SIMHASH_DIR": str(tmp_path / "state")}
    await run_crawl(RecordingSpider, settings, start_urls=[site.url(path) for path in list(pages)[:2]])
    crawler = await run_crawl(RecordingSpider, settings, start_urls=[site.url("/p/a-1.html?format=print")])
    assert crawler.spider.seen[0]["duplicate_of"] == site.url("/p/a-1.html")  # as in one uninterrupted crawl
    assert crawler.stats.get_value("simhash/identity/inherited") == 1
