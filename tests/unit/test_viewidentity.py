"""The identity a view takes from its address (``core.cluster.viewidentity``): a print view without its page's JSON-LD."""

from __future__ import annotations

import json

from simhash_scrapy.core.cluster.viewidentity import AddressIdentities
from simhash_scrapy.core.detector import decide_html, scope_of
from simhash_scrapy.core.settings.config import SimhashConfig

PAGE = "https://shop.test/p/acer-monitor-123.html"


def test_a_page_declaring_none_takes_the_identity_its_address_declared() -> None:
    book = AddressIdentities()
    assert book.resolve("s", PAGE + "?utm_source=x", "d1") == ("d1", False)  # its own, remembered
    assert book.resolve("s", PAGE + "?format=print", None) == ("d1", True)  # the print view: the page's
    assert book.resolve("s", PAGE + "?format=print#top", None) == ("d1", True)
    assert book.resolve("s", PAGE, "d2") == ("d2", False)  # a page declaring one keeps its own ...
    assert book.resolve("s", PAGE + "?format=print", None) == (None, False)  # ... and the address is ambiguous now
    assert book.resolve("s", PAGE + "?format=print", "d1") == ("d1", False)


def test_other_addresses_scopes_and_options_neither_teach_nor_take() -> None:
    book = AddressIdentities()
    book.resolve("s", PAGE, "d1")
    assert book.resolve("t", PAGE + "?print=1", None) == (None, False)  # another scope (another spider, protected text)
    assert book.resolve("s", "https://shop.test/p/other-7.html?print=1", None) == (None, False)
    assert book.resolve("s", "https://shop.test/p/acer-monitor-123.html?page=2", None) == (None, False)  # page 2
    # an item named in the query is another address
    book.resolve("s", "https://d.test/details.php?page=offer_1_14", "d3")
    assert book.resolve("s", "https://d.test/details.php?page=offer_2_6&format=print", None) == (None, False)
    assert book.resolve("s", "https://d.test/details.php?page=offer_1_14&format=print", None) == ("d3", True)
    # a variant's page (an option in its URL) is no view of the product, and teaches nothing
    assert book.resolve("s", PAGE + "?variant=red", None) == (None, False)
    book.resolve("s", "https://shop.test/q/1.html?color=red", "d4")
    assert book.resolve("s", "https://shop.test/q/1.html", None) == (None, False)
    assert book.resolve("s", None, None) == (None, False) and book.resolve("s", "no host", "d5") == ("d5", False)


def test_the_book_is_bounded() -> None:
    book = AddressIdentities(max_addresses=2)
    for n in range(4):
        book.resolve("s", f"https://shop.test/p/{n}", f"d{n}")
    assert len(book) == 2
    assert book.resolve("s", "https://shop.test/p/1?print=1", None) == ("d1", True)
    assert book.resolve("s", "https://shop.test/p/3?print=1", None) == (None, False)  # not remembered


def product(name: str, sku: str, price: str, jsonld: bool) -> str:
    data = {"@context": "https://schema.org", "@type": "Product", "name": name, "sku": sku,
            "offers": {"@type": "Offer", "price": price, "priceCurrency": "EUR"}}  # fmt: skip
    script = f'<script type="application/ld+json">{json.dumps(data)}</script>' if jsonld else ""
    words = " ".join(f"{name.split()[0].lower()}{i} feature{i % 7} detail{i % 11}" for i in range(120))
    return f"<html><head><title>{name}</title>{script}</head><body><article><h1>{name}</h1><p>{words}</p></article></body></html>"


def test_decide_html_joins_a_print_view_without_json_ld_to_its_product_page() -> None:
    page = product("Acer Monitor", "A-1", "199.00", jsonld=True)
    pages = [(PAGE, page), (PAGE + "?format=print", product("Acer Monitor", "A-1", "199.00", jsonld=False))]
    config = SimhashConfig.from_settings({})
    assert scope_of(config, pages[0][0], page) != scope_of(config, pages[1][0], pages[1][1])  # page by page: apart
    decisions = decide_html(pages, config)
    assert decisions[1] is not None and decisions[1].canonical == 0
    # crawled before its page, the view keeps its plain scope; without identity signals, there is no scope to take
    assert decide_html(pages[::-1], config)[1].canonical is None  # type: ignore[union-attr]
    plain = SimhashConfig.from_settings({"SIMHASH_IDENTITY_SIGNALS": False})
    assert decide_html(pages, plain)[1].canonical == 0  # type: ignore[union-attr]


def test_a_store_s_records_are_replayed_as_they_were_checked() -> None:
    crawl = AddressIdentities()
    pages = [(PAGE, "shop.test", "d1"), (PAGE + "?format=print", "shop.test", None),
             ("https://shop.test/q/2.html", "shop.test", "d2"), ("https://shop.test/q/2.html?x=1", "shop.test", "d3")]  # fmt: skip
    recorded = []
    for url, plain, declared in pages:
        identity = crawl.resolve(plain, url, declared)[0]
        recorded.append((url, plain if identity is None else f"{plain}#{identity}"))
    assert recorded[1] == (PAGE + "?format=print", "shop.test#d1")
    resumed = AddressIdentities()
    resumed.replay(recorded + [("https://shop.test/items", "items:shop.test")])  # (an item's scope: nothing)
    for url in (PAGE + "?print=1", "https://shop.test/q/2.html?print=1", "https://shop.test/items?print=1"):
        assert resumed.resolve("shop.test", url, None) == crawl.resolve("shop.test", url, None)
    assert resumed.resolve("shop.test", PAGE + "?print=1", None) == ("d1", True) and len(resumed) == 2


def test_address_keys_are_the_same_in_every_process() -> None:
    """The view identities and step 7's address book key an address by a hash that does not depend on the process
    (``PYTHONHASHSEED``): two workers, or a crawl and its resumed run, list and resolve alike."""
    import os
    import subprocess
    import sys

    code = (
        "from simhash_scrapy.core.cluster.viewidentity import AddressIdentities\n"
        "from simhash_scrapy.core.cluster.views import AddressBook, address_of\n"
        f"url = {PAGE!r}\n"
        "identities, book = AddressIdentities(), AddressBook()\n"
        "identities.resolve('shop', url, 'd1')\n"
        "book.add('shop', address_of(url), 7)\n"
        "print(sorted(identities._declared), sorted(book._entries))\n"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(keys) == 1, keys


def test_declared_gives_an_address_s_identity_without_learning() -> None:
    """The scope a page of an address was checked in, before it is downloaded (its record's, for a conditional
    re-crawl): the identity the address declared; none for an unknown or ambiguous address or a URL naming an
    option; asking teaches nothing."""
    book = AddressIdentities()
    assert book.declared("s", PAGE) is None and len(book) == 0
    book.resolve("s", PAGE, "d1")
    assert book.declared("s", PAGE + "?utm_source=x") == "d1" and book.declared("t", PAGE) is None
    assert book.declared("s", PAGE + "?variant=red") is None
    book.resolve("s", PAGE, "d2")
    assert book.declared("s", PAGE) is None and len(book) == 1
