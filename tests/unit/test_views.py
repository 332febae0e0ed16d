"""Step 7 between views of one address (``core.cluster.views``): a partial print view kept with its page."""

from __future__ import annotations

import random

from simhash_scrapy.core.analysis import AnalysisOptions, analyse_text
from simhash_scrapy.core.cluster import containment
from simhash_scrapy.core.cluster.clustering import Clusterer, Outcome
from simhash_scrapy.core.cluster.views import (
    MAX_PER_ADDRESS, MIN_CONTAINMENT, MIN_RATIO, MIN_SHARED, AddressBook, address_of, host_and_address, page_address,
)
from simhash_scrapy.core.detector import Detector, Page

_WORDS = [f"w{i}" for i in range(3000)]


def sentences(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=rng.randrange(10, 20))).capitalize() + "." for _ in range(count)]


def page(*parts: list[str]) -> tuple[int, containment.Sketch]:
    answer = analyse_text("\n".join(line for part in parts for line in part), AnalysisOptions(sketch=True))
    assert answer.fingerprint is not None and answer.sketch is not None
    return answer.fingerprint, answer.sketch


STORY, CARD = sentences(1, 60), sentences(2, 12)  # a recipe post: its story, and the recipe card
ORIGINAL = page(STORY, CARD)
PRINT = page(CARD)  # the print view: the card only, a sixth of the page


def test_address_is_host_path_and_page_number() -> None:
    assert address_of("https://Shop.test/item/7/?print=1#top") == address_of("https://shop.test/item/7") == "shop.test/item/7"
    assert address_of("http://shop.test:8080/a?utm_source=x") == "shop.test:8080/a"
    assert address_of("https://forum.test/t/9?page=2&print=1") == "forum.test/t/9 page 2"
    assert address_of("https://forum.test/t/9?page=2") != address_of("https://forum.test/t/9?page=3")
    assert address_of("https://forum.test/t/9/page/2/") == "forum.test/t/9/page/2 page 2"
    assert address_of(None) is None and address_of("") is None and address_of("no host") is None
    assert address_of("http://[::1/x") is None  # not a URL


def test_host_and_address_is_host_of_and_page_address() -> None:
    """A Redis worker's one reading of a URL (``host_and_address``) gives ``host_of`` and ``page_address``."""
    from simhash_scrapy.core.cluster.sitetemplate import host_of

    sketch = containment.Sketch((1, 2, 3), 3)
    urls = ["https://Shop.test/item/7/?print=1#top", "http://shop.test:8080/a?utm_source=x", "https://f.test/t/9?page=2",
            "http://user:pw@Host.test/x", "https://h.test/a\tb", "http://[::1/x", "no host", "https://h.test",
            "http://x.test/item.php?id=7&print=1", "https://h.test/p/page/3/", "ftp://files.test/a"]  # fmt: skip
    for url in urls:
        for given in (sketch, None):
            assert host_and_address(url, given) == (host_of(url), page_address(url, given, host_of(url))), url
    assert host_and_address(None, sketch) == host_and_address("", sketch) == (None, None)


def test_a_query_that_names_the_item_is_part_of_the_address() -> None:
    # items named in the query are different addresses: their small pages must not pass as each other's views
    assert address_of("http://x.test/item.php?id=7") != address_of("http://x.test/item.php?id=8")
    assert address_of("http://x.test/item.php?id=7&print=1") == address_of("http://x.test/item.php?id=7")
    assert address_of("http://d.test/details.php?page=offer_1_14") != address_of("http://d.test/details.php?page=offer_2_6")
    assert address_of("http://w.test/?p=123") != address_of("http://w.test/?p=124")
    assert address_of("http://s.test/a?productId=5") != address_of("http://s.test/a?productId=6")
    # found in review: phpBB topics (t is also a cache buster's name), names of letters only
    assert address_of("http://f.test/viewtopic.php?f=3&t=12345") != address_of("http://f.test/viewtopic.php?f=3&t=678")
    assert address_of("http://f.test/viewtopic.php?t=678&view=print") == address_of("http://f.test/viewtopic.php?t=678")
    assert address_of("http://s.test/a?t=1732790000") == "s.test/a"  # a timestamp: not a name
    assert address_of("http://s.test/product.php?name=red-scarf") != address_of("http://s.test/product.php?name=blue-shirt")
    assert address_of("http://w.test/index.php?title=Main_Page") != address_of("http://w.test/index.php?title=Help")
    assert address_of("http://s.test/search?q=boots") != address_of("http://s.test/search?q=shoes")
    # views, tracking, sessions and sorting are not names
    for query in ("format=print&links=1", "utm_campaign=bf2026", "sessionid=ab12cd", "PHPSESSID=x9y8", "sort=price2"):
        assert address_of(f"http://s.test/a?{query}") == "s.test/a", query


def test_the_book_lists_a_few_entries_per_scope_and_address_and_forgets_removed_ones() -> None:
    book = AddressBook()
    for entry in range(MAX_PER_ADDRESS + 2):
        book.add("s", "a", entry)
    book.add("t", "a", 99)
    assert book.entries("s", "a") == list(range(MAX_PER_ADDRESS)) and book.entries("t", "a") == [99]
    book.remove(0)
    book.remove(12345)  # never listed: nothing to do
    assert book.entries("s", "a") == list(range(1, MAX_PER_ADDRESS))
    for entry in range(1, MAX_PER_ADDRESS):
        book.remove(entry)
    assert book.entries("s", "a") == [] and len(book) == 1


def test_a_partial_print_view_joins_its_page_at_the_same_address_only() -> None:
    assert PRINT[1].sentences < containment.MIN_RATIO * ORIGINAL[1].sentences  # too small for step 7 alone
    assert PRINT[1].sentences >= MIN_RATIO * ORIGINAL[1].sentences
    for first, second in ((ORIGINAL, PRINT), (PRINT, ORIGINAL)):  # either may come first
        clusters = Clusterer()
        clusters.check("s", "a", first[0], sketch=first[1], address="shop.test/item/7")
        decision = clusters.check("s", "b", second[0], sketch=second[1], address="shop.test/item/7")
        assert decision.outcome is Outcome.NEAR_DUPLICATE and decision.canonical == 0
        assert decision.via == "containment"
        # at another address, or without one, step 7's own bounds keep them apart
        for address in ("shop.test/item/8", "shop.test/item/7 page 2", None):
            clusters = Clusterer()
            clusters.check("s", "a", first[0], sketch=first[1], address="shop.test/item/7")
            assert clusters.check("s", "b", second[0], sketch=second[1], address=address).outcome is Outcome.UNIQUE


def _card_with_shared(story: list[str], shared: int) -> tuple[list[str], int]:
    """A card of a few sentences, the first whose pair sample with ``story`` + card shares exactly ``shared``."""
    for seed in range(100, 400):
        card = sentences(seed, 8)
        view, whole = page(card), page(story, card)
        if containment.estimate(view[1], whole[1]) == (1.0, shared):
            return card, seed
    raise AssertionError("no such card")


def test_a_card_whose_sample_holds_three_of_its_sentences_joins_its_page_at_one_address() -> None:
    # a long page's sketch keeps its 32 smallest sentence hashes: a card a tenth of it has about three in
    # the pair's sample; all of them in the page and three shared is enough between views of one address
    story = sentences(20, 70)
    card, _ = _card_with_shared(story, MIN_SHARED)
    view, whole = page(card), page(story, card)
    assert MIN_SHARED < containment.MIN_SHARED and view[1].sentences >= MIN_RATIO * whole[1].sentences
    for first, second in ((whole, view), (view, whole)):
        clusters = Clusterer()
        clusters.check("s", "a", first[0], sketch=first[1], address="recipes.test/soup")
        decision = clusters.check("s", "b", second[0], sketch=second[1], address="recipes.test/soup")
        assert decision.outcome is Outcome.NEAR_DUPLICATE and decision.via == "containment"
        clusters = Clusterer()  # another address: step 7's own bounds
        clusters.check("s", "a", first[0], sketch=first[1], address="recipes.test/soup")
        assert clusters.check("s", "b", second[0], sketch=second[1], address="recipes.test/stew").outcome is Outcome.UNIQUE
    # two sampled sentences are too few, at one address too
    card, _ = _card_with_shared(story, MIN_SHARED - 1)
    view, whole = page(card), page(story, card)
    clusters = Clusterer()
    clusters.check("s", "a", whole[0], sketch=whole[1], address="recipes.test/soup")
    assert clusters.check("s", "b", view[0], sketch=view[1], address="recipes.test/soup").outcome is Outcome.UNIQUE


def test_a_card_under_a_tenth_of_its_page_joins_it_at_one_address_down_to_a_twentieth() -> None:
    # a recipe card of 8 sentences under a post of 95 (scrummylane's): under a tenth, over a twentieth
    story = sentences(21, 87)
    card, _ = _card_with_shared(story, MIN_SHARED)
    view, whole = page(card), page(story, card)
    assert MIN_RATIO * whole[1].sentences <= view[1].sentences < 0.1 * whole[1].sentences
    for first, second in ((whole, view), (view, whole)):
        clusters = Clusterer()
        clusters.check("s", "a", first[0], sketch=first[1], address="recipes.test/broccoli")
        decision = clusters.check("s", "b", second[0], sketch=second[1], address="recipes.test/broccoli")
        assert decision.outcome is Outcome.NEAR_DUPLICATE and decision.via == "containment"
    # under a twentieth (a sentence or two of a long page, all of them the page's) it stays apart
    story = sentences(22, 200)
    card, _ = _card_with_shared(story, MIN_SHARED)
    view, whole = page(card), page(story, card)
    assert view[1].sentences < MIN_RATIO * whole[1].sentences
    clusters = Clusterer()
    clusters.check("s", "a", whole[0], sketch=whole[1], address="recipes.test/broccoli")
    assert clusters.check("s", "b", view[0], sketch=view[1], address="recipes.test/broccoli").outcome is Outcome.UNIQUE


def test_a_page_of_the_same_address_with_other_sentences_stays_apart() -> None:
    clusters = Clusterer()
    clusters.check("s", "a", ORIGINAL[0], sketch=ORIGINAL[1], address="shop.test/list")
    other = page(sentences(3, 12))  # the listing's next items, sorted another way: other sentences
    assert clusters.check("s", "b", other[0], sketch=other[1], address="shop.test/list").outcome is Outcome.UNIQUE
    mixed = page(CARD[:8], sentences(4, 6))  # most of the card, and sentences the page lacks
    assert clusters.check("s", "c", mixed[0], sketch=mixed[1], address="shop.test/list").outcome is Outcome.UNIQUE


def test_a_canonical_page_that_changed_leaves_its_address() -> None:
    clusters = Clusterer()
    clusters.check("s", "a", ORIGINAL[0], sketch=ORIGINAL[1], address="shop.test/item/7")
    other = page(sentences(5, 40))
    assert clusters.check("s", "a", other[0], sketch=other[1], address="shop.test/item/7").outcome is Outcome.CHANGED
    assert clusters.check("s", "b", PRINT[0], sketch=PRINT[1], address="shop.test/item/7").outcome is Outcome.UNIQUE


def test_the_detector_passes_the_address_of_the_url() -> None:
    detector = Detector()
    url = "https://shop.test/recipes/soup/"
    detector.check(Page("s", "a", ORIGINAL[0], url, sketch=ORIGINAL[1]))
    decision = detector.check(Page("s", "b", PRINT[0], url + "?print=1", sketch=PRINT[1]))
    assert decision.outcome is Outcome.NEAR_DUPLICATE and decision.via == "containment"
    stew = page(STORY, sentences(6, 12))  # another recipe told with the same story: its card is its own
    decision = detector.check(Page("s", "c", stew[0], "https://shop.test/recipes/stew/", sketch=stew[1]))
    assert decision.outcome is Outcome.UNIQUE
    # the soup's print view, now a row of the soup's cluster: a copy of it at the soup's address joins the soup
    decision = detector.check(Page("s", "d", PRINT[0], url + "?print=1&utm_source=x", sketch=PRINT[1]))
    assert decision.outcome is Outcome.NEAR_DUPLICATE and decision.canonical == 0 and decision.via == "containment"
    assert decision.distance == (PRINT[0] ^ ORIGINAL[0]).bit_count() > detector.rule.max_distance
    assert detector.rule.copy_rows == {0: [PRINT[0]]}  # found by the row: no second row
    # ... at another address, the row does not serve (a sibling page within k of a print view is not a copy)
    assert detector.check(Page("s", "e", PRINT[0], "https://shop.test/recipes/soup-2/")).outcome is Outcome.UNIQUE


def test_copy_rows_are_bounded_and_leave_with_their_canonical_page() -> None:
    clusters = Clusterer()
    clusters.check("s", "a", ORIGINAL[0], sketch=ORIGINAL[1], address="shop.test/item/7")
    rows = [PRINT[0] ^ (0xFFFF << (16 * i)) for i in range(4)] + [PRINT[0] ^ 0xFF00FF]
    for row in rows:
        clusters.add_copy_row("s", 0, row)
    assert clusters.copy_rows[0] == rows[:4] and clusters.index_size() == 1  # MAX_COPY_ROWS; rows not counted
    other = page(sentences(5, 40))
    assert clusters.check("s", "a", other[0], sketch=other[1]).outcome is Outcome.CHANGED
    assert 0 not in clusters.copy_rows and clusters._copy_rows == 0
    assert clusters.check("s", "b", rows[1], address="elsewhere").outcome is Outcome.UNIQUE


def test_a_print_view_joins_an_edited_copy_of_its_page_on_most_of_its_sentences() -> None:
    story, card = sentences(8, 40), sentences(9, 20)
    view = page(card)
    first = min(range(len(card)), key=lambda i: containment.sentence_hashes(card[i]))  # a sampled sentence
    edited = page(story, [line if i != first else "Edited: " + line for i, line in enumerate(card)])
    contained, shared = containment.estimate(view[1], edited[1])
    assert MIN_CONTAINMENT <= contained < 1.0 and shared >= containment.MIN_SHARED
    clusters = Clusterer()
    clusters.check("s", "copy", edited[0], sketch=edited[1], address="recipes.test/soup")  # crawled first
    decision = clusters.check("s", "print", view[0], sketch=view[1], address="recipes.test/soup")
    assert decision.outcome is Outcome.NEAR_DUPLICATE and decision.canonical == 0
    # the same sentences left out as common (three pages had them): too few left to tell, kept apart
    clusters = Clusterer()
    clusters.check("s", "copy", edited[0], sketch=edited[1], address="recipes.test/soup")
    assert clusters._sentences is not None
    for _ in range(containment.COMMON):
        clusters._sentences.add(view[1].hashes)
    assert clusters.check("s", "print", view[0], sketch=view[1], address="recipes.test/soup").outcome is Outcome.UNIQUE


def test_a_page_of_three_sentences_has_a_sketch_and_joins_its_view_at_one_address() -> None:
    # three shared sentences are enough between views of one address: a page of three gets a sketch
    # (before, a sketch needed four sentences, and a short home page never met its tracking copy)
    home = sentences(30, 3)
    session = sentences(31, 1)  # the tracking copy's session line
    small, large = page(home), page(session, home)
    assert containment.MIN_SENTENCES <= small[1].sentences == MIN_SHARED < containment.MIN_SHARED
    assert (small[0] ^ large[0]).bit_count() > 8  # far apart in simhash: only step 7 can join them
    for first, second in ((small, large), (large, small)):
        clusters = Clusterer()
        clusters.check("s", "a", first[0], sketch=first[1], address="shop.test/")
        decision = clusters.check("s", "b", second[0], sketch=second[1], address="shop.test/")
        assert decision.outcome is Outcome.NEAR_DUPLICATE and decision.via == "containment"
        clusters = Clusterer()  # at another address, step 7's own four shared sentences are not there
        clusters.check("s", "a", first[0], sketch=first[1], address="shop.test/")
        assert clusters.check("s", "b", second[0], sketch=second[1], address="shop.test/about").outcome is Outcome.UNIQUE
    assert containment.sketch_of("\n".join(home[:2])) is None  # two sentences: never enough, no sketch


def _product(name: str, own: list[str], shop: list[str]) -> str:
    body = "".join(f"<p>{line}</p>" for line in own + shop)
    return f"<html><head><title>{name}</title></head><body><main><h1>{name}</h1>{body}</main></body></html>"


def test_different_items_named_by_a_letters_only_value_or_a_topic_number_stay_apart() -> None:
    """Found in review: a short item whose sampled sentences are all the shop's shipping text (or a forum's
    notice) joined a long item of another name at "one address" (``?name=``, phpBB's ``?t=``); with the
    names in the address, step 7 keeps its own bounds and they stay apart, on every seed tried."""
    from simhash_scrapy import decide_html

    for seed in range(40):
        shop = sentences(1000 + seed, 8)
        long_item = _product("Blue shirt", sentences(2000 + seed, 150), shop)
        short_item = _product("Red scarf", sentences(3000 + seed, 2), shop)
        for first, second in (("product.php?name=blue-shirt", "product.php?name=red-scarf"),
                              ("viewtopic.php?f=3&t=12345", "viewtopic.php?f=3&t=678")):
            decisions = decide_html([(f"https://shop.test/{first}", long_item), (f"https://shop.test/{second}", short_item)])
            assert decisions[1] is None or decisions[1].canonical != 0, (seed, second, decisions[1])
