"""The shop set's builder (``benchmarks/quality/build_shops.py``) on synthetic shop pages in a real git repository.

The set is built from a pinned snapshot CI does not have; here a repository laid out as that collection
(``sample_data/<site>/<name>.html``) is made, built, checked (copies, hard negatives, the variant row,
halves by site) and scored by ``score.py``.
"""

from __future__ import annotations

import json
import random
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
