"""core/urlrules/urlrewrite.py: URL keys, the kinds of pages, the rules' relations (no learner, no crawl)."""

from __future__ import annotations

from simhash_scrapy.core.urlrules.urlrewrite import Rule, page_kind, related
from simhash_scrapy.core.urlrules.urlrules import LIST_MIN_ITEMS, is_listing, url_key


def test_url_key_normalises_host_port_fragment_and_query_order() -> None:
    assert url_key("HTTP://Site.Test:80/a?b=2&a=1#top") == "http://site.test/a?a=1&b=2"
    assert url_key("https://site.test:443") == "https://site.test/"


def test_page_kind_and_list_pages() -> None:
    assert page_kind("/news-12") == "/news-#"
    assert page_kind("/shop/") == "/*/"
    assert page_kind("/shop/product-7") == "/*/product-#"
    assert page_kind("/articles/intro.html") == "/*/*.html"
    assert page_kind("/item", [("id", "id=3"), ("id", "id=4")]) == "/*?id"
    items = [f"/shop/product-{i}" for i in range(LIST_MIN_ITEMS)]
    assert is_listing(items + ["/", "/about"])
    assert not is_listing(items[:-1] + ["/", "/about"])
    # The same item twice, its fragment or query, and script links count once or not at all.
    assert not is_listing(items[:-1] + [items[0] + "#top", items[0] + "?page=2", "javascript:void(0)",
                                        "mailto:a@b.c"] * 3)
    # A menu of sections plus a few related articles is not a listing; absolute and relative links count alike.
    assert not is_listing([f"/docs/s{i}/" for i in range(8)] + [f"http://x.test/news-{i}" for i in range(6)])
    assert is_listing([f"http://x.test/news-{i}" for i in range(5)] + [f"/news-{i}" for i in range(5, 10)])


def test_related_rules() -> None:
    page = Rule("h", "param", name="page")
    shop_page = Rule("h", "param", name="page", prefix="/shop/")
    page2 = Rule("h", "value", name="page", value="page=2", prefix="/shop/")
    shop_sort = Rule("h", "param", name="sort", prefix="/shop/")
    utm = Rule("h", "param", name="utm_source")
    en = Rule("h", "path", at=0, old=("en",), new=())
    en_fr = Rule("h", "path", at=0, old=("en", "x"), new=("fr",))
    de = Rule("h", "path", at=0, old=("de",), new=())
    other_host = Rule("g", "param", name="page")
    assert related(page, shop_page) and related(page, page2) and related(shop_page, page)
    assert related(shop_page, shop_sort)  # the same prefix
    assert not related(page, shop_sort)  # the root prefix is no prefix
    assert not related(page, utm) and not related(page, other_host) and not related(page, page)
    assert related(en, en_fr) and not related(en, de) and not related(en, page) and not related(page, en)
