"""The real-web set's builder (``benchmarks/quality/build_realweb.py``) on tiny synthetic pages.

The set itself is built from pinned snapshots of public collections that CI does not have; these
tests build it from a real git repository made here, laid out as one of those collections
(mozilla/readability's ``test/test-pages/<name>/{source,expected}.html``), and check the variant
and hard-negative logic, the halves, the truth, and that ``score.py`` scores the result.
"""

from __future__ import annotations

import collections
import json
import random
import subprocess
from pathlib import Path

import lxml.html
import pytest

from test_quality_kinds import _load  # loads benchmarks/quality/<name>.py once


common = _load("common")
score = _load("score")
brw = _load("build_realweb")

_VOCAB = (
    "river council budget school market storm harbour vote engine garden museum festival railway bridge "
    "doctor season library farmer village island court energy museum ticket report coast forest mayor "
    "police airport station theatre orchestra painter novel recipe bakery cheese winter summer autumn spring "
    "harvest climate ocean mountain valley desert canyon glacier volcano planet comet galaxy satellite rocket"
).split()


def _article(rng: random.Random, n_par: int = 5) -> tuple[str, str]:
    """(headline, article HTML) of random words (each page's words its own)."""
    headline = " ".join(rng.choice(_VOCAB) for _ in range(6)).capitalize()
    pars = []
    for _ in range(n_par):
        sentence = " ".join(rng.choice(_VOCAB) + str(rng.randrange(1000)) for _ in range(30))
        pars.append(f"<p>{sentence.capitalize()}. More words follow here.</p>")
    return headline, "".join(pars)


def _page(site: int, slug: str, headline: str, article: str, rng: random.Random) -> str:
    nav = " ".join(f'<a href="/s{site}/{i}">Section {site}-{i} {rng.choice(_VOCAB)}</a>' for i in range(12))
    related = "".join(f"<li><a href='/r/{i}'>{rng.choice(_VOCAB)} {rng.choice(_VOCAB)}</a></li>" for i in range(8))
    return (
        f"<!DOCTYPE html><html><head><title>{headline} | Site {site}</title>"
        f"<link rel='canonical' href='https://www.site{site}news.com/news/{slug}'></head><body>"
        f"<div id='top'>{nav}</div><h1>{headline}</h1>"
        f"<div class='story'><div class='story-body'>{article}</div></div>"
        f"<div class='related'><ul>{related}</ul></div><div id='footer'>Copyright site {site}. All rights reserved.</div>"
        "</body></html>"
    )


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> tuple[Path, str, dict]:
    """A git repository in readability's layout: 10 sites x 3 saved pages (and their expected articles)."""
    mirror = tmp_path_factory.mktemp("mirror")
    repo = mirror / "mozilla+readability"
    rng = random.Random(3)
    articles = {}
    for site in range(10):
        for k in range(3):
            name = f"site{site}-{k}"
            headline, article = _article(rng)
            base = repo / "test" / "test-pages" / name
            base.mkdir(parents=True)
            (base / "source.html").write_text(_page(site, name, headline, article, rng))
            (base / "expected.html").write_text(f"<div id='readability-page-1' class='page'>{article}</div>")
            articles[name] = article
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "pages")
    return mirror, _git(repo, "rev-parse", "HEAD"), articles


@pytest.fixture(scope="module")
def built(collection, tmp_path_factory):
    mirror, commit, _ = collection
    out = tmp_path_factory.mktemp("realweb")
    mp = pytest.MonkeyPatch()
    mp.setattr(brw, "SOURCES", {"mozilla/readability": commit})
    mp.setattr(brw, "MIN_SOURCE_BYTES", 0)
    try:
        truth = brw.build(out, mirror, seed=5)
    finally:
        mp.undo()
        common.CJK_CHARACTERS = False  # build() turns it on for the real-web set's truth
    pages = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    return out, truth, pages


def test_locate_finds_the_article_element() -> None:
    rng = random.Random(1)
    headline, article = _article(rng)
    tree = lxml.html.document_fromstring(_page(1, "x", headline, article, rng))
    gold = lxml.html.fragment_fromstring(article, create_parent="div").text_content()
    node, f1 = brw.locate(tree, gold)
    assert node is not None and node.get("class") == "story-body"  # the smaller of two equal matches
    assert f1 == pytest.approx(1.0)
    # a gold text the page does not hold is not located
    other = lxml.html.fragment_fromstring(_article(rng)[1], create_parent="div").text_content()
    assert brw.locate(tree, other)[1] < brw.MIN_LOCATE_F1


def test_index_path_finds_the_node_in_a_fresh_parse() -> None:
    rng = random.Random(2)
    raw = _page(2, "y", *_article(rng), rng).encode()
    tree = brw.parse(raw)
    node = tree.xpath("//div[@class='story-body']")[0]
    again = brw.by_index_path(brw.parse(raw), brw.index_path(node))
    assert again is not None and again.get("class") == "story-body"
    assert brw.by_index_path(tree, "0/99") is None


def test_mercury_content_rule_and_selection() -> None:
    js = """export const X = {
  domain: 'example.com',
  content: {
    selectors: [['.a', '.b'], 'div[itemprop="articleBody"]', ['.lede img', 'src']],
    // comment with a 'quote'
    clean: ['.ad', "aside"],
  },
};"""
    selectors, clean = brw.mercury_content_rule(js)
    assert selectors == [[".a", ".b"], 'div[itemprop="articleBody"]', [".lede img", "src"]]
    assert clean == [".ad", "aside"]
    tree = lxml.html.document_fromstring(
        "<html><body><div itemprop='articleBody'><p>Kept text</p><div class='ad'>Buy</div><aside>x</aside></div>"
        "<div class='a'>only a</div></body></html>"
    )
    nodes = brw.select_content(tree, selectors, clean)  # ['.a', '.b'] needs both: the next rule applies
    assert len(nodes) == 1 and nodes[0].text_content() == "Kept text"


def test_decode_reads_the_declared_charset() -> None:
    raw = "<html><head><meta charset='iso-8859-1'></head><body>café</body></html>".encode("cp1252")
    assert "café" in brw.decode(raw)
    assert "naïve" in brw.decode("<p>naïve</p>".encode())
    assert "é" in brw.decode(b"<p>\xe9t\xe9</p>")  # no charset, not UTF-8: windows-1252


@pytest.mark.parametrize(
    ("host", "domain"),
    [("www.bbc.co.uk", "bbc.co.uk"), ("news.example.com", "example.com"), ("foo.blogspot.com", "foo.blogspot.com"),
     ("www.dot.state.fl.us", "state.fl.us"), ("health.gov.au", "health.gov.au")],
)  # fmt: skip
def test_registered_domain(host: str, domain: str) -> None:
    assert brw.registered_domain(host) == domain


def test_genre_of() -> None:
    tree = lxml.html.document_fromstring("<html><head></head><body><p>x</p></body></html>")
    assert brw.genre_of("nih.gov", "https://www.nih.gov/news/x", tree, "l3s-gn1") == "government"
    assert brw.genre_of("fl.us", "http://www.fl.us/a", tree, "cleaneval") == "government"
    assert brw.genre_of("shop.example", "https://shop.example/products/42", tree, "newspaper") == "shop"
    assert brw.genre_of("x.blogspot.com", "http://x.blogspot.com/2004/a.html", tree, "cleaneval") == "blog"
    assert brw.genre_of("paper.example", "https://paper.example/a", tree, "newspaper") == "news"
    assert brw.genre_of("paper.example", "https://paper.example/a", tree, "cleaneval") == "other"


def test_missing_snapshot_says_how_to_get_it(tmp_path) -> None:
    with pytest.raises(SystemExit, match=r"git clone https://github\.com/mozilla/readability"):
        brw.Snapshot(tmp_path, "mozilla/readability")


def test_snapshot_without_the_pinned_commit_is_named(collection, monkeypatch) -> None:
    mirror, _, _ = collection
    monkeypatch.setattr(brw, "SOURCES", {"mozilla/readability": "0" * 40})
    with pytest.raises(SystemExit, match=r"0{40} of mozilla/readability is not in this snapshot"):
        brw.Snapshot(mirror, "mozilla/readability")


def test_every_page_is_read_with_its_site(built, collection) -> None:
    _, truth, pages = built
    originals = [p for p in pages if p["role"] == "original"]
    donors = round(brw.DONOR_SHARE * 30)
    assert len(originals) == 30 - donors
    assert not truth["info"]["left_out"]
    assert {p["host"] for p in originals} <= {f"site{i}news.com.test" for i in range(10)}
    assert all(p["url"].split("/", 3)[3].startswith("news/site") for p in originals)


def test_halves_split_by_site(built) -> None:
    _, _, pages = built
    half_of_host = collections.defaultdict(set)
    for p in pages:
        half_of_host[p["host"]].add(p["half"])
    assert all(len(h) == 1 for h in half_of_host.values())  # every page of a host in one half
    assert {p["half"] for p in pages} == {"tune", "test"}
    for p in pages:  # a page made of another site's article: that article's page is of the same half
        if p["source"]:
            src_host = next(q["host"] for q in pages if q["source"] == p["source"] and q["role"] == "original") \
                if any(q["source"] == p["source"] and q["role"] == "original" for q in pages) else None
            if src_host is not None:
                assert half_of_host[src_host] == {p["half"]}


def test_variants_are_duplicates_of_their_source(built) -> None:
    out, truth, pages = built
    by_id = {p["id"]: p for p in pages}
    positive = {(a, c): kind for a, c, kind in truth["positive"]}
    kinds = collections.Counter(positive.values())
    assert set(kinds) >= {"template", "tracking", "print", "edit"}
    for (a, c), _kind in positive.items():
        assert by_id[a]["source"] == by_id[c]["source"]  # random articles: only one page's copies are alike
        assert by_id[a]["half"] == by_id[c]["half"]
    texts = {json.loads(line)["id"]: json.loads(line)["text"] for line in (out / "texts.jsonl").read_text().splitlines()}
    for p in pages:
        if p["category"] == "template":
            # the article in another site's template: that site's chrome, the source's words
            src = next(q for q in pages if q["source"] == p["source"] and q["role"] == "original")
            assert p["host"] != src["host"]
            html = (out / p["file"]).read_text()
            assert f"Copyright site {p['host'][4]}" in html
            assert common.words(texts[p["id"]]) == common.words(texts[src["id"]])
        if p["category"] == "tracking":
            assert "?" in p["url"]
        if p["category"] == "edit":
            src = next(q for q in pages if q["source"] == p["source"] and q["role"] == "original")
            a, b = common.words(texts[p["id"]]), common.words(texts[src["id"]])
            assert a != b and abs(len(a) - len(b)) <= 0.05 * len(b)


def test_hard_negatives_are_different_articles(built) -> None:
    out, truth, pages = built
    by_id = {p["id"]: p for p in pages}
    swaps = truth["hard_pairs"]["hn_swap"]
    assert swaps
    for a, c in swaps + truth["hard_pairs"]["hn_site"] + truth["hn_title"]:
        assert by_id[a]["source"] != by_id[c]["source"]
        assert by_id[a]["host"] == by_id[c]["host"]  # one site's template
    for a, c in truth["hn_title"]:
        pa, pc = by_id[a], by_id[c]
        title = lambda p: lxml.html.document_fromstring((out / p["file"]).read_bytes()).findtext(".//title")  # noqa: E731
        assert title(pa) == title(pc)
    for a, c in truth["hard_pairs"]["hn_site"]:
        assert by_id[a]["role"] == by_id[c]["role"] == "original"
    positive = {(a, c) for a, c, _ in truth["positive"]}
    assert not positive & {tuple(x) for x in swaps}


def test_score_reads_the_set(built) -> None:
    out, truth, _ = built
    for half in ("tune", "test"):
        evalset = common.load_set(out, half)
        assert evalset.genres() == ["news"]
        result = score.run_library(evalset, score.default_setup(), score.Texts(evalset))
        n_swap = sum(1 for a, c in truth["hard_pairs"]["hn_swap"] if a in evalset.by_id() and c in evalset.by_id())
        assert result.hard["hn_swap"][1] == n_swap
        assert set(result.genres) == {"news"}
        assert result.overall.pairs == len(evalset.positive) > 0
        table = score.markdown_table([result])
        assert "different articles in one site's real template" in table and "all hard negatives" in table


def test_extractors_script_scores_the_plugin_as_score_py_does(built) -> None:
    out, _, _ = built
    extractors = _load("extractors")
    evalset = common.load_set(out, "test")
    truth = extractors.truth_texts(out)
    row = extractors.run_extractor(evalset, "plugin", truth)
    direct = score.run_library(evalset, score.default_setup(), score.Texts(evalset))
    assert row["result"].found == direct.found and row["result"].overall.fp == direct.overall.fp
    quality = row["quality"]
    assert quality["pages"] == sum(1 for p in evalset.pages if p.role == "original")
    assert quality["recall"] > 0.9  # the plugin finds these plain synthetic articles
    assert set(quality["by_collection"]) == {"readability"}
    # an extractor that returns nothing: every page empty, nothing found
    extractors.BUILTIN["nothing"] = lambda html: ""
    try:
        empty = extractors.run_extractor(evalset, "nothing", truth)
    finally:
        del extractors.BUILTIN["nothing"]
    assert empty["quality"]["empty"] == quality["pages"] and empty["result"].overall.tp == 0


def test_cleaneval_format_files() -> None:
    text, url = brw.cleaneval_gold("URL: http://www.example.org/a.html\n<h>A title\n\n<p>First paragraph here.\n<l>an item\n")
    assert url == "http://www.example.org/a.html"
    assert common.words(text) == ["a", "title", "first", "paragraph", "here", "an", "item"]
    assert brw.cleaneval_gold("<p>No address line")[1] is None
    html, url = brw.cleaneval_input(b'<text id="http://x.example/p" title="t" encoding="utf8">\n<html><body>B</body></html></text>\n')
    assert url == "http://x.example/p" and html.strip() == b"<html><body>B</body></html>"
    assert brw.cleaneval_input(b"<html></html>") == (b"<html></html>", None)


def test_guess_host_ignores_third_party_links() -> None:
    links = "".join(f"<a href='https://www.shop.example.co.uk/p/{i}'>p</a>" for i in range(3))
    links += "".join(f"<a href='https://twitter.com/share?{i}'>t</a>" for i in range(9))
    tree = lxml.html.document_fromstring(f"<html><body>{links}<a href='/rel'>r</a></body></html>")
    assert brw.guess_host(tree) == "example.co.uk"
    few = lxml.html.document_fromstring("<html><body><a href='http://a.example.com/'>a</a></body></html>")
    assert brw.guess_host(few) is None  # fewer than three links say nothing
