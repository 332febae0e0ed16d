"""The shop set's builder (``benchmarks/quality/build_shops.py``) on synthetic shop pages in a real git repository.

The set is built from a pinned snapshot CI does not have; here a repository laid out as that collection
(``sample_data/<site>/<name>.html``) is made, built, checked (copies, hard negatives, the variant row,
halves by site) and scored by ``score.py``.
"""

from __future__ import annotations

import json
import random
import re
import subprocess

import pytest

from test_build_realweb import _VOCAB, _git
from test_quality_kinds import _load

common = _load("common")
score = _load("score")
shops = _load("build_shops")


def _product(site: str, i: int, rng: random.Random) -> str:
    name = f"{rng.choice(_VOCAB).capitalize()} {rng.choice(_VOCAB)} model {i}"
    words = " ".join(rng.choice(_VOCAB) + str(rng.randrange(1000)) for _ in range(260))
    menu = " ".join(f'<a href="/c/{k}">Department {k} {_VOCAB[k]}</a>' for k in range(30))
    ld = json.dumps({"@type": "Product", "name": name, "sku": f"SKU{i}X", "offers": {"price": f"{20 + i}.00"}})
    main = (
        f"<h1>{name}</h1><p>Price: ${20 + i}.99 Item code B0ABC{i}DEF9</p><p>{words}</p>"
        f'<span itemprop="sku" content="SKU{i}X"></span>'
    )
    wrap = f"<div id='ppd'>{main}</div>" if site == "amazon.com" else f"<main>{main}</main>"
    return (
        f"<!DOCTYPE html><html><head><title>{name} | {site}</title>"
        f"<link rel='canonical' href='https://www.{site}/p/{i}'>"
        f'<script type="application/ld+json">{ld}</script></head><body><nav>{menu}</nav>{wrap}'
        f"<footer>Copyright {site}. All rights reserved.</footer></body></html>"
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    mirror = tmp_path_factory.mktemp("mirror")
    repo = mirror / "genai-data-scraping+genai-data-scraping"
    rng = random.Random(4)
    for site in shops.CONTENT:
        folder = repo / "sample_data" / site
        folder.mkdir(parents=True)
        for i in range(3):
            (folder / f"item {i}.html").write_text(_product(site, i, rng))
        (folder / "item 0_files").mkdir()
        (folder / "item 0_files" / "frame.html").write_text("<p>an iframe's page, not read</p>")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "pages")
    commit = _git(repo, "rev-parse", "HEAD")
    out = tmp_path_factory.mktemp("shops")
    mp = pytest.MonkeyPatch()
    mp.setattr(shops, "SOURCES", {"genai-data-scraping/genai-data-scraping": commit})
    mp.setattr(shops.shop_sources, "SOURCES", {})  # the first collection only (the others: below)
    half_of = shops.build_realweb.half_of
    try:
        truth = shops.build(out, mirror, seed=5)
    finally:
        mp.undo()
        shops.build_realweb.half_of = half_of
    pages = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    return out, truth, pages


def test_every_saved_page_and_its_copies(built) -> None:
    _, truth, pages = built
    originals = [p for p in pages if p["role"] == "original"]
    assert len(originals) == 9  # three per site; the _files folders are left out
    kinds = {kind for _, _, kind in truth["positive"]}
    assert kinds >= {"tracking", "print", "edit", "sidebar", "cross"}
    by_id = {p["id"]: p for p in pages}
    for a, c, _ in truth["positive"]:
        assert by_id[a]["source"] == by_id[c]["source"]


def test_halves_by_site(built) -> None:
    _, _, pages = built
    halves = {p["host"]: p["half"] for p in pages}
    assert halves == {"amazon.com.test": "tune", "upwork.com.test": "tune", "cars.com.test": "test"}
    assert all(p["half"] == halves[p["host"]] for p in pages)


def test_variants_differ_in_name_price_and_code_and_are_kept_out_of_f1(built) -> None:
    out, truth, pages = built
    by_id = {p["id"]: p for p in pages}
    variants = truth["hard_pairs"]["variant"]
    assert len(variants) == 9
    positive = {(a, c) for a, c, _ in truth["positive"]}
    gray = {(a, c) for a, c, _ in truth["gray"]}
    for a, c in variants:
        original, variant = sorted((by_id[a], by_id[c]), key=lambda p: p["role"] != "original")
        assert (a, c) not in positive and (a, c) in gray
        html = (out / variant["file"]).read_text()
        before = (out / original["file"]).read_text()
        assert html != before and "B0ABC" not in html and "B0ABC" in before  # the product code changed
        data = json.loads(html.split('application/ld+json">')[1].split("</script>")[0])
        assert data["sku"].startswith("SKU") and data["sku"] not in before
    assert not any(by_id[a]["category"] == "variant" or by_id[c]["category"] == "variant" for a, c in positive)


def test_hard_negatives_are_different_items_of_one_site(built) -> None:
    _, truth, pages = built
    by_id = {p["id"]: p for p in pages}
    assert len(truth["hard_pairs"]["hn_product"]) == 6 and len(truth["hard_pairs"]["hn_site"]) == 3
    for a, c in truth["hard_pairs"]["hn_product"] + truth["hard_pairs"]["hn_site"]:
        assert by_id[a]["host"] == by_id[c]["host"] and by_id[a]["source"] != by_id[c]["source"]


def test_score_reports_the_variant_row_apart(built) -> None:
    out, _, _ = built
    evalset = common.load_set(out, half="tune")
    result = score.run_library(evalset, score.default_setup(), score.Texts(evalset))
    assert result.hard["variant"][1] == 6  # Amazon's and Upwork's three variants each
    _flagged, pairs = result.hard_total()
    assert pairs == result.hard["hn_product"][1] + result.hard["hn_site"][1] == 6  # the variant row left out
    table = score.markdown_table([result])
    assert "product variants (other colour/size: name, SKU, price) merged | 6 |" in table
    assert "all hard negatives" in table and "the page with another sidebar" in table


# --------------------------------------------------------------------------- the other collections (shop_sources.py)

sources = shops.shop_sources


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_VOCAB) + str(rng.randrange(1000)) for _ in range(n))


def _chrome(title: str, body: str, canonical: str) -> str:
    menu = "".join(f'<li><a href="/c/{k}">Section {k} {_VOCAB[k]}</a></li>' for k in range(12))
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title><link rel='canonical' href='{canonical}'></head>"
        f"<body><nav><ul>{menu}</ul></nav>{body}<footer>Copyright. All rights reserved.</footer></body></html>"
    )


def _recipe(host: str, i: int, rng: random.Random) -> tuple[str, dict]:
    data = {
        "title": f"{rng.choice(_VOCAB).capitalize()} pie {i}",
        "canonical_url": f"https://www.{host}/recipes/{i}",
        "ingredients": [_words(rng, 4) for _ in range(12)],
        "instructions_list": [_words(rng, 15) for _ in range(6)],
    }
    card = (
        f"<div class='recipe-card'><h2>{data['title']}</h2><ul>"
        + "".join(f"<li>{x}</li>" for x in data["ingredients"])
        + "</ul><ol>"
        + "".join(f"<li>{x}</li>" for x in data["instructions_list"])
        + "</ol></div>"
    )
    story = f"<div class='story'><p>{_words(rng, 200)}</p></div>"
    return _chrome(data["title"], story + card, data["canonical_url"]), data


def _thread(url: str, posts: int, rng: random.Random) -> str:
    body = "".join(f"<div class='post'><p>{_words(rng, 60)}</p></div>" for _ in range(posts))
    return _chrome("A question", f"<div id='ContentLeft'>{body}</div><div id='ContentRight'>tags</div>", url)


def _listing(url: str, rng: random.Random) -> str:
    items = "".join(
        f"<li class='item'><a href='/p/{rng.randrange(10**6)}'>{_words(rng, 6)}</a> <span>€ {rng.randrange(99)},99</span></li>"
        for _ in range(20)
    )
    return _chrome("Listing", f"<div id='gh_content_wrapper'><h1>Dryers</h1><ul class='grid'>{items}</ul></div>", url)


def _repo(mirror, name: str, files: dict[str, str]) -> str:
    repo = mirror / name
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "pages")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def built_more(tmp_path_factory):
    mirror = tmp_path_factory.mktemp("mirror")
    rng = random.Random(7)
    genai = {f"sample_data/{site}/item {i}.html": _product(site, i, rng) for site in shops.CONTENT for i in range(2)}
    recipes = {}
    for host in ("pies.example", "cakes.example"):
        for i in range(2):
            html, data = _recipe(host, i, rng)
            recipes[f"tests/test_data/{host}/r_{i}.testhtml"] = html
            recipes[f"tests/test_data/{host}/r_{i}.json"] = json.dumps(data)
    base = "https://ask.example.org/en/question/"
    askbot = {
        "tests/data/askbot/q1.html": _thread(base + "1/one/", 4, rng),
        "tests/data/askbot/q2.html": _thread(base + "2/two/", 3, rng),
        "tests/data/askbot/q3_multipage_1.html": _thread(base + "3/three/", 5, rng),
        "tests/data/askbot/q3_multipage_2.html": _thread(base + "3/three/", 4, rng),
        "tests/data/askbot/empty.html": "<html><head><title>Page not found</title></head><body>gone</body></html>",
    }
    gh = {
        "inst/extdata/gh-lst-dry-01.html": _listing("https://geizhals.at/?cat=dry", rng),
        "inst/extdata/gh-lst-dry-02.html": _listing("https://geizhals.at/?cat=dry&pg=2", rng),
        "inst/extdata/gh-dp-dry-01.html": _chrome("A dryer", f"<div id='gh_content_wrapper'><p>Price € 499,00 {_words(rng, 150)}</p></div>", "https://geizhals.at/a1.html"),
        "inst/extdata/gh-dp-dry-02.html": _chrome("B dryer", f"<div id='gh_content_wrapper'><p>Price € 599,00 {_words(rng, 150)}</p></div>", "https://geizhals.at/a2.html"),
    }  # fmt: skip
    commits = {
        "genai-data-scraping/genai-data-scraping": _repo(mirror, "genai-data-scraping+genai-data-scraping", genai),
        "hhursev/recipe-scrapers": _repo(mirror, "hhursev+recipe-scrapers", recipes),
        "chaoss/grimoirelab-perceval": _repo(mirror, "chaoss+grimoirelab-perceval", askbot),
        "ingonader/rgeizhals": _repo(mirror, "ingonader+rgeizhals", gh),
    }
    out = tmp_path_factory.mktemp("shops2")
    mp = pytest.MonkeyPatch()
    mp.setattr(shops, "SOURCES", {k: v for k, v in commits.items() if k.startswith("genai")})
    mp.setattr(sources, "SOURCES", {k: v for k, v in commits.items() if not k.startswith("genai")})
    half_of = shops.build_realweb.half_of
    try:
        truth = shops.build(out, mirror, seed=5)
    finally:
        mp.undo()
        shops.build_realweb.half_of = half_of
    pages = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    return out, truth, pages


def test_more_collections_give_every_kind_of_hard_negative(built_more) -> None:
    _, truth, pages = built_more
    by_id = {p["id"]: p for p in pages}
    hard = truth["hard_pairs"]

    def sources_of(name: str) -> set[frozenset]:
        return {frozenset((by_id[a]["source"], by_id[c]["source"])) for a, c in hard.get(name, [])}

    assert sources_of("hn_listing") == {frozenset(("geizhals:gh-lst-dry-01", "geizhals:gh-lst-dry-02"))}
    assert sources_of("hn_page") == {frozenset(("askbot:q3_multipage_1-1", "askbot:q3_multipage_2-2"))}
    assert len(sources_of("hn_thread")) == 5  # q1, q2 and the two pages of q3: every pair but q3's own
    assert frozenset(("recipe:pies.example-0", "recipe:pies.example-1")) in sources_of("hn_product")
    assert frozenset(("geizhals:gh-dp-dry-01", "geizhals:gh-dp-dry-02")) in sources_of("hn_product")
    site = {pair for pair in sources_of("hn_site") if all(k.startswith("geizhals:") for k in pair)}
    assert len(site) == 4  # each listing page with each product page (and Upwork's profiles, as before)
    for a, c in (pair for name, rows in hard.items() if name != "variant" for pair in rows):
        assert by_id[a]["host"] == by_id[c]["host"] and by_id[a]["source"] != by_id[c]["source"]
    assert truth["info"]["left_out"] == {"askbot:tests/data/askbot/empty.html": "no canonical address (an error page)"}
    kinds = truth["info"]["kinds"]
    assert sum(kinds.get(h, {}).get("forum", 0) for h in ("tune", "test")) == 4
    assert sum(kinds.get(h, {}).get("listing", 0) for h in ("tune", "test")) == 2  # (Upwork profiles: items)


def test_pages_of_one_thread_get_their_own_addresses(built_more) -> None:
    _, _, pages = built_more
    urls = {p["source"]: p["url"] for p in pages if p["role"] == "original" and p["source"].startswith("askbot:q3")}
    assert urls["askbot:q3_multipage_1-1"] != urls["askbot:q3_multipage_2-2"]
    assert urls["askbot:q3_multipage_2-2"].endswith("?page=2")


def test_listing_sorted_another_way_is_a_duplicate(built_more) -> None:
    out, truth, pages = built_more
    by_id = {p["id"]: p for p in pages}
    rows = [(a, c) for a, c, kind in truth["positive"] if kind == "sort"]
    assert len(rows) == 2  # one per listing page
    for a, c in rows:
        original, copy = sorted((by_id[a], by_id[c]), key=lambda p: p["role"] != "original")
        assert original["role"] == "original" and "sort=" in copy["url"]
        before, after = ((out / p["file"]).read_text() for p in (original, copy))
        items = [re.findall(r"<li class=\"item\">.*?</li>", html) for html in (before, after)]
        assert items[0] != items[1] and sorted(items[0]) == sorted(items[1])  # the same items, another order
        assert before.split("<div id=\"gh_content_wrapper\">")[0] == after.split("<div id=\"gh_content_wrapper\">")[0]


def test_variants_only_of_shop_products(built_more) -> None:
    _, truth, pages = built_more
    by_id = {p["id"]: p for p in pages}
    made = {by_id[a]["source"] if by_id[a]["role"] == "original" else by_id[c]["source"] for a, c in truth["hard_pairs"]["variant"]}
    assert {"geizhals:gh-dp-dry-01", "geizhals:gh-dp-dry-02"} <= made
    assert not any(s.startswith(("recipe:", "askbot:")) or "lst" in s for s in made)


def test_halves_by_site_dealt_out_per_kind(built_more) -> None:
    _, _, pages = built_more
    halves: dict[str, set] = {}
    for p in pages:
        halves.setdefault(p["host"], set()).add(p["half"])
    assert all(len(h) == 1 for h in halves.values())
    recipe_halves = {halves[h].pop() for h in ("pies.example.test", "cakes.example.test")}
    assert recipe_halves == {"tune", "test"}  # two product sites: one in each half
    assert halves["amazon.com.test"] == {"tune"} and halves["cars.com.test"] == {"test"}  # as the first set had them


def test_item_grid_is_outside_the_menus_and_reorder_keeps_the_items() -> None:
    html = (
        "<div><nav><ul>" + "".join(f"<li>m{i}</li>" for i in range(9)) + "</ul></nav>"
        "<ul class='grid'>" + "".join(f"<li class='it'>item {i}</li>\n" for i in range(5)) + "<li class='more'>more</li></ul></div>"
    )  # fmt: skip
    node = shops.build_realweb.parse(f"<html><body>{html}</body></html>".encode()).find(".//body/div")
    grid = sources.item_grid(node)
    assert grid is not None and grid.get("class") == "grid"
    moved = sources.reorder(grid, random.Random(1))
    texts = [li.text for li in grid]
    assert moved >= 2 and texts[-1] == "more" and sorted(texts[:5]) == [f"item {i}" for i in range(5)]
    assert texts[:5] != [f"item {i}" for i in range(5)] and all(li.tail == "\n" for li in grid[:5])
    assert sources.item_grid(shops.build_realweb.parse(b"<html><body><div><p>one</p></div></body></html>").find(".//body/div")) is None


def test_hard_kind_names() -> None:
    mp = pytest.MonkeyPatch()
    mp.setattr(sources, "PAGE_KIND", {"a": "forum", "b": "forum", "c": "forum", "l": "listing", "m": "listing", "p": "product"})
    mp.setattr(sources, "THREAD", {"a": "t1", "b": "t1", "c": "t2"})
    try:
        assert sources.hard_kind("a", "b") == "hn_page" and sources.hard_kind("a", "c") == "hn_thread"
        assert sources.hard_kind("l", "m") == "hn_listing" and sources.hard_kind("l", "p") == "hn_site"
        assert sources.hard_kind("l", "first-collection:0") == "hn_site"  # the first collection's pages: items
        assert sources.hard_kind("x", "y") is None
    finally:
        mp.undo()
