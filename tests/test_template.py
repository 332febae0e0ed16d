"""Cross-page template learning (simhash_scrapy.template)."""

from __future__ import annotations

import pytest

from simhash_scrapy import fingerprint, hamming_distance
from simhash_scrapy.template import TemplateLearner, host_of

WIDGET = "Trending now\nTen tips for faster loops\nUnderstanding descriptors in depth\nPackaging for beginners"


def article(i: int) -> str:
    return "\n".join(
        f"Article {i} paragraph {j}: the configparser module reads option files number {i * 10 + j}." for j in range(4)
    )


def test_lines_recurring_on_many_pages_of_a_host_are_removed() -> None:
    learner = TemplateLearner(min_pages=3, share=0.0)
    host = "blog.example"
    for i in range(3):
        assert learner.clean(host, f"{article(i)}\n{WIDGET}") == f"{article(i)}\n{WIDGET}"  # nothing learned yet
        learner.observe(host, f"{article(i)}\n{WIDGET}")
    assert learner.clean(host, f"{article(9)}\n{WIDGET}") == article(9)
    assert learner.is_template(host, "Trending now") and not learner.is_template(host, article(9).split("\n")[0])
    # another host has learned nothing
    assert learner.clean("other.example", f"{article(9)}\n{WIDGET}") == f"{article(9)}\n{WIDGET}"


def test_cleaning_brings_different_short_pages_apart() -> None:
    learner = TemplateLearner(min_pages=3, share=0.0)
    for i in range(5):
        learner.observe("h", f"Short note {i} about option files.\n{WIDGET}")
    a, b = (learner.clean("h", f"Short note {i} on a different topic number {i}.\n{WIDGET}") for i in (7, 8))
    assert "Trending" not in a + b
    raw = [fingerprint(f"Short note {i} on a different topic number {i}.\n{WIDGET}") for i in (7, 8)]
    assert hamming_distance(fingerprint(a), fingerprint(b)) > hamming_distance(*raw)


def test_copies_of_one_article_are_not_template() -> None:
    learner = TemplateLearner(min_pages=3, share=0.0)
    host = "shop.example"
    text = f"{article(1)}\n{WIDGET}"
    learner.observe(host, text)  # the first copy counts
    for _ in range(20):  # 20 session-id copies, each a near-duplicate of the first
        learner.observe(host, text, duplicate=True)
    assert learner.pages(host) == 1
    assert learner.clean(host, text) == text


def test_share_of_pages_sets_the_threshold() -> None:
    learner = TemplateLearner(min_pages=2, share=0.5)
    for i in range(10):
        learner.observe("h", f"{article(i)}\nSeen on three pages" if i < 3 else article(i))
    assert learner.threshold("h") == 5
    assert not learner.is_template("h", "Seen on three pages")


def test_refit_gives_early_pages_cleaned_with_what_is_known_later() -> None:
    learner = TemplateLearner(min_pages=3, share=0.0, early_pages=2)
    assert learner.refit("h") == []
    for i in range(4):
        learner.observe("h", f"{article(i)}\n{WIDGET}", key=f"/p{i}")
    refit = dict(learner.refit("h"))
    assert set(refit) == {"/p0", "/p1"}  # only the first early_pages pages are kept
    assert refit["/p0"] == article(0)
    learner.forget_early("h")
    assert learner.refit("h") == []


def test_memory_is_bounded() -> None:
    learner = TemplateLearner(min_pages=2, max_lines=50, max_hosts=3)
    for i in range(40):
        learner.observe("h", f"{WIDGET}\n{article(i)}")
    assert len(learner._hosts["h"].counts) <= 50
    assert learner.is_template("h", "Trending now")  # frequent lines survive pruning
    for host in ("a", "b", "c", "d"):
        learner.observe(host, WIDGET)
    assert learner.pages("h") == 0 and learner.pages("d") == 1  # least recently used host forgotten


@pytest.mark.parametrize(("kwargs", "name"), [({"min_pages": 1}, "min_pages"), ({"share": 1.5}, "share")])
def test_bad_arguments_name_themselves(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        TemplateLearner(**kwargs)


def test_host_of() -> None:
    assert host_of("http://Docs.Example:8080/a?b=1") == "docs.example:8080"
    assert host_of("not a url") == "not a url"
