"""A print view's numbered links leave before extraction (``core.extract.printlinks``): its main text is its page's."""

from __future__ import annotations

import random

import pytest
from lxml import etree
from lxml import html as lxml_html

from simhash_scrapy import extract_text
from simhash_scrapy.core.extract import printlinks
from simhash_scrapy.core.extract.dom import UndoableDrops, drop_elements
from simhash_scrapy.core.extract.text import text_of_parsed

_WORDS = [f"w{i}" for i in range(3000)]


def home(menus: int, links: int, seed: int = 1, text_seed: int | None = None) -> str:
    """A home page's frame: ``menus`` menus of ``links`` short links, then two paragraphs (``text_seed``'s)."""
    rng = random.Random(seed)
    out = ["<div class='frame'>"]
    for m in range(menus):
        out.append("<ul>" + "".join(f"<li><a href='/c/{m}/{i}'>{rng.choice(_WORDS)} {rng.choice(_WORDS)}</a></li>"
                                    for i in range(links)) + "</ul>")
    if text_seed is not None:
        rng = random.Random(text_seed)
    out += ["<p>" + " ".join(rng.choices(_WORDS, k=40)) + ".</p>" for _ in range(2)]
    return "".join(out) + "</div>"


def page(body: str) -> str:
    return f"<html><head><title>Home</title></head><body>{body}</body></html>"


def printed(body: str, links: bool) -> str:
    """``body`` in a CMS print template; with ``links``, a marker after each link and the addresses listed."""
    frame = lxml_html.fragment_fromstring(body)
    urls: list[str] = []
    if links:
        for a in frame.iter("a"):
            urls.append("https://shop.test" + a.get("href"))
            a.tail = f" [{len(urls)}]" + (a.tail or "")
    listing = "".join(f"<li>[{i}] {url}</li>" for i, url in enumerate(urls, 1))
    return (
        "<html><head><title>Home (printer-friendly)</title></head><body class='print'>"
        f"<div class='print-header'>Shop</div><div id='print-content'>{lxml_html.tostring(frame, encoding='unicode')}"
        "</div><div class='print-footer'><p>Source URL: https://shop.test/</p><p>Printed on 2025-05-15 00:36</p>"
        + (f"<p>Links:</p><ol class='print-links'>{listing}</ol>" if urls else "")
        + "</div></body></html>"
    )


def main_text(html: str) -> str:
    return " ".join(extract_text(html, main_content=True).split())


@pytest.mark.parametrize(("menus", "links"), [(3, 30), (20, 10), (6, 12)])
def test_a_print_view_with_numbered_links_gives_its_pages_main_text(menus: int, links: int) -> None:
    body = home(menus, links)
    # (3, 30): the markers made the menus prose, kept (350 words); (20, 10): the address list outweighed the
    # menus, which the page itself keeps as its content (an index), and the print view dropped them (80 words)
    assert main_text(printed(body, links=True)) == main_text(page(body)) == main_text(printed(body, links=False))


def tree(html: str) -> etree._Element:
    return etree.fromstring(html, etree.HTMLParser())


def test_the_address_list_and_the_markers_leave_and_nothing_else() -> None:
    root = tree(printed(home(2, 3), links=True))
    assert printlinks.drop_print_links(root) is True
    assert root.find(".//ol") is None
    assert all(not (a.tail or "").strip().startswith("[") for a in root.iter("a"))
    assert [li.findtext("a") is not None for li in root.iter("li")] == [True] * 6  # the menus stay
    assert "Links:" in etree.tostring(root, encoding="unicode")  # (the fingerprint leaves the heading out)


@pytest.mark.parametrize(
    "html",
    [
        # markers after links but no address list: a wiki's citation marks, a page of its own
        "<html><body><p><a href='/a'>alpha</a> [1] beta <a href='/b'>gamma</a> [2]</p></body></html>",
        # a list of links, not of addresses
        "<html><body><ol><li><a href='https://a.test'>[1] https://a.test</a></li>"
        "<li><a href='https://b.test'>[2] https://b.test</a></li></ol><a href='/x'>x</a> [1]</body></html>",
        # one address is no list; an item with words besides its address is a reference, not a print view's list
        "<html><body><ol><li>[1] https://a.test/</li></ol><a href='/x'>x</a> [1]</body></html>",
        "<html><body><ol><li>[1] https://a.test/ the first</li><li>[2] https://b.test/</li></ol></body></html>",
        "<html><body><ul><li>[1] https://a.test/</li>and more<li>[2] https://b.test/</li></ul></body></html>",
    ],
)
def test_a_page_without_a_print_views_address_list_is_not_touched(html: str) -> None:
    root = tree(html)
    before = etree.tostring(root)
    assert printlinks.drop_print_links(root) is False
    assert etree.tostring(root) == before


@pytest.mark.parametrize("seed", range(20))
def test_undo_puts_the_tree_back_after_the_lists_markers_and_removals_beside_them(seed: int) -> None:
    root = tree(printed(home(3, 5, seed=seed), links=True))
    before = etree.tostring(root)
    rng = random.Random(seed)
    with UndoableDrops() as drops:
        drop_elements([li for li in root.iter("li") if rng.random() < 0.3])  # a link's tail taking others' tails
        assert printlinks.drop_print_links(root) is True
        drop_elements([a for a in root.iter("a") if rng.random() < 0.3])  # tails set, then moved
    assert etree.tostring(root) != before
    drops.undo()
    assert etree.tostring(root) == before


def test_the_crawls_parsed_tree_is_left_as_it_was() -> None:
    html = printed(home(3, 30), links=True)
    root = tree(html)
    before = etree.tostring(root)
    assert " ".join(text_of_parsed(root, html.encode(), main_content=True).split()) == main_text(page(home(3, 30)))
    assert etree.tostring(root) == before


def test_the_pages_bytes_let_a_page_without_an_address_list_skip_the_walk() -> None:
    html = printed(home(2, 3), links=True)
    assert printlinks.drop_print_links(tree(html), html.encode()) is True
    # the same list with its brackets as character references: not looked for when the bytes are known
    encoded = html.replace("<li>[", "<li>&#91;").replace("] https", "&#93; https")
    assert printlinks.drop_print_links(tree(encoded), encoded.encode()) is False
    assert printlinks.drop_print_links(tree(encoded)) is True
