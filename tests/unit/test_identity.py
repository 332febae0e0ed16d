"""Identity signals (``core.cluster.identity``): what a page declares it is, read from its parsed tree."""

from __future__ import annotations

import json

import lxml.html
import pytest

from simhash_scrapy.core.cluster import identity
from simhash_scrapy.core.cluster.identity import combine_digests, identity_digest, identity_signals


def tree(html: str):
    return lxml.html.document_fromstring(html)


def jsonld(data: object) -> str:
    return f'<script type="application/ld+json">{json.dumps(data)}</script>'


def page(head: str = "", body: str = "<p>Some text.</p>") -> str:
    return f"<html><head><title>t</title>{head}</head><body>{body}</body></html>"


PRODUCT = {
    "@context": "https://schema.org",
    "@type": "Product",
    "name": "Linen shirt, blue",
    "sku": "LS-01-BL",
    "gtin13": "4006381333931",
    "brand": {"@type": "Brand", "name": "Acme"},
    "offers": {"@type": "Offer", "price": "49.90", "priceCurrency": "EUR"},
}


def test_jsonld_product_identifiers_price_and_name() -> None:
    signals = identity_signals(tree(page(jsonld(PRODUCT))))
    assert signals.values == {
        "sku": {"ls-01-bl"}, "gtin": {"4006381333931"}, "price": {"49.90"}, "name": {"linen shirt, blue"},
    }  # fmt: skip
    assert signals.kinds() == ["sku", "gtin", "price", "name"]  # the brand's name is not the product's


def test_jsonld_graph_lists_and_untyped_offers() -> None:
    graph = {"@graph": [{"@type": "WebPage", "name": "Shop"}, {"@type": ["Product"], "mpn": "X1",
             "offers": [{"price": 10}, {"price": 12.5}]}]}  # fmt: skip
    signals = identity_signals(tree(page(jsonld(graph))))
    assert signals.values == {"mpn": {"x1"}, "price": {"10", "12.5"}}  # the web page's name is no product's


def test_jsonld_variants_and_related_products_are_not_this_pages_identity() -> None:
    data = dict(PRODUCT, hasVariant=[{"@type": "Product", "sku": "LS-01-RD"}],
                isRelatedTo={"@type": "Product", "sku": "SOCKS"})  # fmt: skip
    assert identity_signals(tree(page(jsonld(data)))).values["sku"] == {"ls-01-bl"}


def test_a_variant_declares_another_identity_and_a_copy_the_same() -> None:
    red = dict(PRODUCT, name="Linen shirt, red", sku="LS-01-RD")
    blue_page = page(jsonld(PRODUCT), "<p>A shirt.</p><div class='ad'>Ad 1</div>")
    tracked_copy = page(jsonld(PRODUCT), "<div class='session'>Session 42</div><p>A shirt.</p>")
    assert identity_digest(tree(blue_page)) == identity_digest(tree(tracked_copy)) is not None
    assert identity_digest(tree(page(jsonld(red)))) != identity_digest(tree(blue_page))


def test_broken_and_huge_jsonld_are_counted_not_raised() -> None:
    broken = '<script type="application/ld+json">{"@type": "Product", "sku": </script>'
    signals = identity_signals(tree(page(broken)))
    assert signals.bad_jsonld == 1 and signals.digest() is None
    huge = jsonld(dict(PRODUCT, description="x" * (identity.MAX_JSONLD_CHARS + 10)))
    signals = identity_signals(tree(page(huge)))
    assert signals.bad_jsonld == 1 and signals.digest() is None


def test_deeply_nested_jsonld_is_bounded() -> None:
    deep = '<script type="application/ld+json">' + '{"@type": "Product", "a": ' * 5000 + "1" + "}" * 5000
    signals = identity_signals(tree(page(deep + "</script>")))  # the parser's recursion limit, counted
    assert signals.bad_jsonld == 1
    wide = [{"@type": "Product", "sku": f"S{i}"} for i in range(identity.MAX_JSON_NODES * 2)]
    assert len(identity_signals(tree(page(jsonld(wide)))).values["sku"]) == identity.MAX_VALUES


def test_jsonld_without_a_product_is_not_parsed_and_declares_nothing() -> None:
    article = {"@type": "NewsArticle", "headline": "A story", "author": {"@type": "Person", "name": "Jo"}}
    assert identity_digest(tree(page(jsonld(article)))) is None


def test_microdata_values_from_content_or_text() -> None:
    body = (
        '<div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">Lamp  <b>L2</b></h1>'
        '<meta itemprop="sku" content="L-2"><span itemprop="productID">isbn:123</span>'
        '<div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
        '<span itemprop="price" content="19.00">$19.00</span></div>'
        '<div itemprop="brand" itemscope itemtype="https://schema.org/Brand"><span itemprop="name">Acme</span></div>'
        '</div><div itemscope itemtype="https://schema.org/Person"><span itemprop="name">Jo</span></div>'
    )
    assert identity_signals(tree(page(body=body))).values == {
        "name": {"lamp l2"}, "sku": {"l-2"}, "productid": {"isbn:123"}, "price": {"19.00"},
    }  # fmt: skip


def test_a_price_in_text_keeps_its_digits_only() -> None:
    one = identity_signals(tree(page(body='<p>Now <span itemprop="price">€ 1.299,00</span></p>')))
    assert one.values == {"price": {"1.299,00"}}


def test_rdfa_properties_with_a_vocabulary_prefix() -> None:
    body = (
        '<div vocab="https://schema.org/" typeof="Product"><span property="name">Chair</span>'
        '<span property="schema:sku">C-9</span><span property="http://schema.org/mpn">M9</span>'
        '<div property="offers" typeof="Offer"><span property="price" content="80"></span></div></div>'
    )
    assert identity_signals(tree(page(body=body))).values == {
        "name": {"chair"}, "sku": {"c-9"}, "mpn": {"m9"}, "price": {"80"},
    }  # fmt: skip


def test_opengraph_product_meta() -> None:
    head = (
        '<meta property="og:title" content="Chair"><meta property="og:url" content="https://shop.test/chair">'
        '<meta property="product:price:amount" content="80.00"><meta property="product:retailer_item_id" '
        'content="C-9"><meta property="og:upc" content="0123">'
    )
    assert identity_signals(tree(page(head))).values == {"price": {"80.00"}, "sku": {"c-9"}, "gtin": {"0123"}}


@pytest.mark.parametrize(
    ("links", "expected"),
    [
        ('<link rel="next" href="/shoes?page=3&sort=price"><link rel="prev" href="/shoes?page=1">', {"next:3", "prev:1"}),
        ('<link rel="next" href="/blog/page/4/">', {"next:4"}),
        ('<link rel="prev" href="viewtopic.php?t=12&amp;start=25">', {"prev:25"}),
        ('<link rel="next" href="/2024/05/another-post">', None),  # not a page number
        ('<link rel="next" href="/?p=123">', None),  # WordPress' post id, not a page number
    ],
)
def test_pagination_links(links: str, expected: set[str] | None) -> None:
    values = identity_signals(tree(page(head=links))).values
    assert values.get("page") == expected


def test_pagination_links_are_read_from_the_head_only() -> None:
    assert identity_signals(tree(page(body='<a rel="next" href="?page=2">Next</a>'))).values == {}


def test_a_listing_sorted_another_way_declares_the_same_products() -> None:
    items = [{"@type": "ListItem", "position": i, "item": {"@type": "Product", "sku": f"S{i}"}} for i in range(3)]
    sorted_other_way = list(reversed(items))
    one = identity_digest(tree(page(jsonld({"@type": "ItemList", "itemListElement": items}))))
    two = identity_digest(tree(page(jsonld({"@type": "ItemList", "itemListElement": sorted_other_way}))))
    assert one == two is not None


def test_many_elements_are_bounded() -> None:
    body = "".join(f'<span itemprop="sku">{i}</span>' for i in range(identity.MAX_ELEMENTS + 500))
    values = identity_signals(tree(page(body=body))).values["sku"]
    assert len(values) == identity.MAX_VALUES


def test_a_page_without_signals_and_no_tree() -> None:
    assert identity_digest(tree(page())) is None
    assert identity_digest(None) is None


def test_combine_digests() -> None:
    assert combine_digests((None, None)) is None
    assert combine_digests(("a" * 16, None)) == "a" * 16
    assert combine_digests((None, "b" * 16)) == "b" * 16
    both = combine_digests(("a" * 16, "b" * 16))
    assert both is not None and both not in ("a" * 16, "b" * 16) and len(both) == 16


@pytest.mark.parametrize(
    "html",
    [
        page(jsonld(PRODUCT)),
        page(body='<div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">Lamp</h1>'
                  '<span itemprop="price">19</span></div>'),
        page(body='<p>Only <span itemprop="sku">S-1</span> left</p>'),
        page('<meta property="product:price:amount" content="80.00">'),
        page('<link rel="next" href="/shoes?page=3">'),
        page(jsonld({"@type": "NewsArticle", "headline": "No product"}), '<span itemprop="author">Jo</span>'),
    ],
)
def test_the_bytes_only_spare_work_never_change_the_answer(html: str) -> None:
    raw = html.encode()
    assert identity_signals(tree(html), raw).values == identity_signals(tree(html)).values


def test_bytes_that_name_no_signal_skip_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(root: object) -> list:
        raise AssertionError("walked")

    monkeypatch.setattr(identity, "_FIND_PROPERTY", fail)
    monkeypatch.setattr(identity, "_FIND_JSONLD", fail)
    html = page(jsonld({"@type": "NewsArticle"}), '<span itemprop="author">Jo</span> <p>a property of x</p>')
    assert identity_signals(tree(html), html.encode()).values == {}


def test_properties_of_other_items_and_a_paywalls_product_are_not_the_pages() -> None:
    quote = (
        '<table itemscope itemtype="http://schema.org/Intangible/FinancialQuote">'
        '<tr><td><meta itemprop="price" content="109.33">$109.33</td></tr></table>'
    )
    assert identity_signals(tree(page(body=quote))).values == {}
    paywall = {"@type": "NewsArticle", "headline": "A story", "isPartOf": {"@type": ["CreativeWork", "Product"],
               "name": "The Daily", "productID": "daily.com:basic"}}  # fmt: skip
    assert identity_signals(tree(page(jsonld(paywall)))).values == {}
    whole_page = '<body itemscope itemtype="https://schema.org/WebPage"><span itemprop="price">19</span></body>'
    assert identity_signals(tree(f"<html><head></head>{whole_page}</html>")).values == {"price": {"19"}}


def test_microdata_of_an_item_that_is_part_of_the_page_is_not_its_identity() -> None:
    body = (
        '<div itemscope itemtype="http://schema.org/NewsArticle"><span itemprop="isPartOf" itemscope '
        'itemtype="http://schema.org/CreativeWork%20http://schema.org/Product"><meta itemprop="name" '
        'content="The Daily"><meta itemprop="productID" content="daily.com:basic"></span>'
        '<div itemprop="isRelatedTo" itemscope itemtype="https://schema.org/Product"><b itemprop="sku">X</b></div></div>'
    )
    assert identity_signals(tree(page(body=body))).values == {}


def test_url_options_name_a_product_variant() -> None:
    assert identity.url_options("https://shop.test/p/shirt?variant=4711&utm_source=mail") == ["variant=4711"]
    assert identity.url_options("https://shop.test/p?attribute_pa_color=Blue&Size=XL") == [
        "attribute_pa_color=blue", "size=xl",
    ]  # fmt: skip
    # tracking, sorting, paging and print parameters, an empty value, no query: no option
    for url in ("https://shop.test/p?utm_source=x&sessionid=1", "https://shop.test/c?sort=price&page=2",
                "https://shop.test/p?format=print", "https://shop.test/p?variant=", "https://shop.test/p", "", None):
        assert identity.url_options(url) == []  # fmt: skip


def test_a_variant_address_is_an_identity_of_its_own() -> None:
    body = page(body="<p>A linen shirt. 49.90 EUR</p>").encode()
    plain = identity_digest(tree(body), body, "https://shop.test/p/shirt")
    red = identity_digest(tree(body), body, "https://shop.test/p/shirt?variant=red")
    red_tracked = identity_digest(tree(body), body, "https://shop.test/p/shirt?utm_source=x&variant=red")
    blue = identity_digest(tree(body), body, "https://shop.test/p/shirt?variant=blue")
    assert plain is None and identity.may_declare(body) is False  # the page alone declares nothing
    assert identity.may_declare(body, "https://shop.test/p/shirt?variant=red") is True
    assert red == red_tracked is not None and red != blue
    # with what the page declares, the option is one more kind of signal (its digest differs from either)
    declared = page(jsonld(PRODUCT)).encode()
    signals = identity_signals(tree(declared), declared, "https://shop.test/p/shirt?colour=blue")
    assert signals.values["option"] == {"colour=blue"} and signals.values["sku"] == {"ls-01-bl"}
    assert signals.digest() != identity_digest(tree(declared), declared)
    # the tree is not asked for when only the address names an option
    assert identity_signals(lambda: pytest.fail("parsed"), body, "https://shop.test/p?size=m").kinds() == ["option"]
