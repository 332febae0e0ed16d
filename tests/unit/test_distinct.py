"""core/cluster/distinct.py: protected text (SIMHASH_DISTINCT_SELECTORS): the selectors, their errors,
the text and digest they read, the same from Scrapy's parse and ours; the crawls are
tests/e2e/test_rules_named.py."""

from __future__ import annotations

from typing import Any

import pytest

from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core.cluster.distinct import DistinctSelectors, scope_key, split_scope_key
from simhash_scrapy.core.extract.text import parse_html


def test_selectors_read_text_and_attributes_as_response_css_does() -> None:
    config = SimhashConfig.from_settings(
        {"SIMHASH_DISTINCT_SELECTORS": "[itemprop=sku]::attr(content), .price::text"}  # a comma-separated string
    )
    assert config.distinct_selectors == ("[itemprop=sku]::attr(content)", ".price::text")
    page = '<html><body><meta itemprop="sku" content="A-1"><b class="price">9 <i>EUR</i></b></body></html>'
    assert config.distinct is not None
    assert config.distinct.texts(parse_html(page)) == [["A-1"], ["9"]]


@pytest.mark.parametrize(
    "fragment",
    [
        '<span class="price">24<!-- sale -->.99</span>',  # a comment cuts the price in two text nodes
        '<span class="price"><!--a-->19<!--b-->.<!--c-->99 EUR</span>',
        '<span class="price"><b>from</b><!--a-->19<?php echo ?>.99</span>',
        '<span class="price">a<b>x</b><!--c-->d</span>',
        '<div class="price">1</div><!--c--><div class="price">2</div>',
    ],
)
@pytest.mark.parametrize("css", [".price", ".price::text", ".price ::text", ".price *::text"])
def test_the_crawl_and_the_commands_read_the_same_protected_text(fragment: str, css: str) -> None:
    # The crawl reads Scrapy's parse (comments and processing instructions kept), compare and dedup
    # core.extract.text's (dropped): the digest is the same, so they decide alike (it was not: ["24", ".99"]).
    from scrapy.http import HtmlResponse

    config = SimhashConfig.from_settings({"SIMHASH_DISTINCT_SELECTORS": [css]})
    assert config.distinct is not None
    body = f"<html><body><p>Kettle</p>{fragment}</body></html>".encode()
    crawl = HtmlResponse("http://shop.example/k", body=body, encoding="utf-8").selector.root
    assert config.distinct.texts(crawl) == config.distinct.texts(parse_html(body))
    assert config.distinct.digest(crawl) == config.distinct.digest(parse_html(body)) is not None


@pytest.mark.parametrize(
    "value, words",
    [
        ([".price["], "SIMHASH_DISTINCT_SELECTORS: '.price[' is not a valid CSS selector"),
        (["p::colour"], "SIMHASH_DISTINCT_SELECTORS: 'p::colour' is not a valid CSS selector"),
        ([""], "SIMHASH_DISTINCT_SELECTORS must list CSS selectors"),
        ([3], "SIMHASH_DISTINCT_SELECTORS must list CSS selectors"),
        (7, "SIMHASH_DISTINCT_SELECTORS must be a list"),
    ],
)
def test_an_invalid_selector_is_an_error_naming_the_setting(value: Any, words: str) -> None:
    with pytest.raises(ValueError) as info:
        SimhashConfig.from_settings({"SIMHASH_DISTINCT_SELECTORS": value})
    assert str(info.value).startswith(words)


def test_the_core_refuses_a_broken_xpath() -> None:
    with pytest.raises(ValueError, match=r"selector '\.x' gives an invalid XPath"):
        DistinctSelectors([".x"], ["//*["])


def test_split_scope_key_gives_scope_keys_parts_back() -> None:
    assert split_scope_key(scope_key("item:myspider", "3f09c2d1a4b5e6f7")) == ("item:myspider", "3f09c2d1a4b5e6f7")
    assert split_scope_key(scope_key("a#b", "d1")) == ("a#b", "d1")  # the last separator splits
    assert split_scope_key(scope_key("myspider", None)) is None
    assert split_scope_key("myspider#") is None  # no digest: a plain scope's name
