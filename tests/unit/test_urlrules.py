"""core/urlrules/urlrules.py: the URL-rule learner on its own (evidence, trust, prediction,
exploration, revocation, the persisted blob); the crawls that use it are tests/e2e/test_url_rules.py."""

from __future__ import annotations

import json

import pytest

from simhash_scrapy.core.urlrules.urlrules import (
    EXPLORE_FIRST,
    UrlRuleLearner,
    wilson_lower_bound,
)

B = "http://site.test"


def learn_dust(learner: UrlRuleLearner, pages: range) -> None:
    """Articles, each with a tracking and a print variant found to be duplicates."""
    for i in pages:
        learner.observe(f"{B}/news/{i}.html")
        learner.observe(f"{B}/news/{i}.html?utm_source=feed{i}&utm_medium=rss", duplicate_of=f"{B}/news/{i}.html")
        learner.observe(f"{B}/print/news/{i}.html", duplicate_of=f"{B}/news/{i}.html")


def noisy_articles(learner: UrlRuleLearner, count: int, prefix: str = "") -> None:
    """Articles whose links carry a ``?page=`` the article ignores: duplicates found by the crawl."""
    for i in range(count):
        learner.observe(f"{B}{prefix}/news-{i}")
        for k in (2, 3):
            learner.observe(f"{B}{prefix}/news-{i}?page={k}", duplicate_of=f"{B}{prefix}/news-{i}")


def test_wilson_lower_bound() -> None:
    assert wilson_lower_bound(0, 0) == 0.0
    assert 0.5 < wilson_lower_bound(10, 10) < 0.9
    assert wilson_lower_bound(100, 100) > wilson_lower_bound(10, 10)
    assert wilson_lower_bound(90, 100) < 0.9


def test_rules_generalise_to_pages_never_seen() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    learn_dust(learner, range(6))
    trusted = {r.describe() for r in learner.rules(trusted_only=True)}
    assert "/print/… -> /…" in trusted
    assert "drop ?utm_source=*" in trusted
    # Page 100 was never involved in a pair: only scheduled.
    learner.scheduled(f"{B}/news/100.html")
    prediction = learner.predict(f"{B}/print/news/100.html?utm_source=x&utm_medium=rss")
    assert prediction is not None and prediction.target == f"{B}/news/100.html"
    assert {r.kind for r in prediction.rules} == {"path", "param", "value"}
    # utm_medium was only ever confirmed with one value: dropping any value of it is not trusted.
    assert "drop ?utm_medium=rss" in trusted and "drop ?utm_medium=*" not in trusted
    assert learner.predict(f"{B}/print/news/100.html?utm_source=x&utm_medium=other") is None
    # The canonical form itself, and URLs whose rewritten form nobody crawled, are not predicted.
    assert learner.predict(f"{B}/news/100.html") is None
    assert learner.predict(f"{B}/print/news/101.html") is None
    # Another host learns nothing from this one.
    assert learner.predict("http://other.test/print/news/100.html") is None


def test_enough_support_is_needed() -> None:
    learner = UrlRuleLearner(min_support=5, min_precision=0.5)
    learn_dust(learner, range(4))
    assert learner.rules(trusted_only=True) == []
    learn_dust(learner, range(4, 5))
    assert learner.rules(trusted_only=True)


def test_counter_evidence_keeps_a_meaningful_parameter_untrusted() -> None:
    """page=1 is a default (duplicate of the listing); other pages differ: only the value rule is trusted."""
    learner = UrlRuleLearner(min_support=3, min_precision=0.6)
    for section in ("a", "b", "c", "d", "e"):
        learner.observe(f"{B}/{section}/list")
        for page in range(2, 6):
            learner.observe(f"{B}/{section}/list?page={page}")  # unique content
        learner.observe(f"{B}/{section}/list?page=1", duplicate_of=f"{B}/{section}/list")
    rules = {r.describe(): r for r in learner.rules()}
    assert rules["drop ?page=*"].counter >= 16 and not rules["drop ?page=*"].trusted
    assert rules["drop ?page=1"].trusted
    learner.scheduled(f"{B}/z/list")
    assert learner.predict(f"{B}/z/list?page=1") is not None
    assert learner.predict(f"{B}/z/list?page=2") is None


def test_counter_evidence_counts_in_either_crawl_order() -> None:
    """The unique page crawled before the rule existed still counts against it."""
    learner = UrlRuleLearner(min_support=2, min_precision=0.5)
    learner.observe(f"{B}/item?id=1")
    learner.observe(f"{B}/item?id=2")
    learner.observe(f"{B}/item?id=3")
    learner.observe(f"{B}/item")
    learner.observe(f"{B}/x?id=9", duplicate_of=f"{B}/x")
    learner.observe(f"{B}/y?id=8", duplicate_of=f"{B}/y")
    rule = next(r for r in learner.rules() if r.describe() == "drop ?id=*")
    assert rule.support == 2 and rule.counter == 3 and not rule.trusted


def test_verification_contradiction_distrusts_at_once() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    learn_dust(learner, range(10))
    learner.observe(f"{B}/news/50.html")
    prediction = learner.predict(f"{B}/print/news/50.html")
    assert prediction is not None
    # Downloaded anyway and found to be its own, different page.
    assert learner.verify(prediction, None) is False
    rule = next(r for r in learner.rules() if r.kind == "path")
    assert rule.contradicted and not rule.trusted
    assert learner.predict(f"{B}/print/news/50.html") is None
    # A confirmation keeps it.
    learner.observe(f"{B}/news/51.html")
    other = learner.predict(f"{B}/news/51.html?utm_source=a")
    assert other is not None and learner.verify(other, f"{B}/news/51.html") is True


def test_session_ids_with_different_values_and_path_suffix_rules() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    for i in range(5):
        learner.observe(f"{B}/doc/{i}/?sid=a{i}")
        learner.observe(f"{B}/doc/{i}/?sid=b{i}", duplicate_of=f"{B}/doc/{i}/?sid=a{i}")
        learner.observe(f"{B}/doc/{i}/index.html?sid=c{i}", duplicate_of=f"{B}/doc/{i}/?sid=a{i}")
    learner.observe(f"{B}/doc/9/?sid=zz")
    prediction = learner.predict(f"{B}/doc/9/index.html?sid=other")
    assert prediction is not None and prediction.target == f"{B}/doc/9/?sid=zz"


def test_rel_canonical_declarations_teach() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    for i in range(4):
        learner.observe(f"{B}/amp/story/{i}", declared=f"{B}/story/{i}")
    learner.scheduled(f"{B}/story/77")
    assert learner.predict(f"{B}/amp/story/77") is not None


def test_dumps_and_merge_keep_the_evidence() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    learn_dust(learner, range(5))
    other = UrlRuleLearner(min_support=3, min_precision=0.5)
    assert other.merge(learner.dumps()) == len(learner.rules())
    assert [(r.describe(), r.support, r.trusted) for r in other.rules()] == [
        (r.describe(), r.support, r.trusted) for r in learner.rules()
    ]
    # Merging twice does not double the counts (maximum, not sum).
    other.merge(learner.dumps())
    assert max(r.support for r in other.rules()) == max(r.support for r in learner.rules())
    with pytest.raises(ValueError):
        other.merge(b"garbage")


def test_a_parameter_confirmed_with_one_value_only_is_not_dropped_for_other_values() -> None:
    """Many ``page=1`` duplicates before any ``page=2`` was crawled: only the value rule is trusted."""
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    for section in range(10):
        learner.observe(f"{B}/s{section}/")
        learner.observe(f"{B}/s{section}/?page=1", duplicate_of=f"{B}/s{section}/")
    learner.scheduled(f"{B}/s99/")
    assert learner.predict(f"{B}/s99/?page=1") is not None
    assert learner.predict(f"{B}/s99/?page=2") is None


def test_the_canonical_form_is_never_skipped_even_after_its_variant() -> None:
    """A print page seen first must not stand in for the page itself (it may lack its links)."""
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    learn_dust(learner, range(6))
    learner.observe(f"{B}/print/news/60.html")
    assert learner.predict(f"{B}/news/60.html") is None
    learner.scheduled(f"{B}/news/60.html")
    # Once the canonical URL is known, the predictions name it rather than the variant seen first.
    prediction = learner.predict(f"{B}/news/60.html?utm_source=a&utm_medium=rss")
    assert prediction is not None and prediction.target == f"{B}/news/60.html"


def test_pagination_on_list_pages_needs_evidence_from_list_pages() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.7)
    noisy_articles(learner, 12)
    noisy_articles(learner, 12, "/shop")
    rules = {r.describe(): r for r in learner.rules()}
    assert rules["drop ?page=*"].on_pages and not rules["drop ?page=*"].on_lists
    assert rules["drop ?page=* under /shop/"].on_pages
    # The list page: crawled, then its page 2 (another content) and a default page 1.
    learner.observe(f"{B}/shop/", listing=True)
    learner.observe(f"{B}/shop/?page=2", listing=True)
    learner.observe(f"{B}/shop/?page=1", duplicate_of=f"{B}/shop/", listing=True)
    shop = rules["drop ?page=* under /shop/"]
    assert (shop.list_support, shop.list_counter) == (1, 1) and not shop.on_lists
    assert shop.support == 24 and shop.on_pages  # the articles' evidence is kept apart, and still holds there
    assert learner.predict(f"{B}/shop/?page=3") is None  # a list page: never skipped on the articles' word
    assert learner.predict(f"{B}/shop/news-3?page=7") is not None  # an article: skipped
    # A target never crawled, of a kind never crawled: as strict as a list page.
    learner.scheduled(f"{B}/blog/")
    assert learner.predict(f"{B}/blog/?page=2") is None
    # Once a page of that kind turns out to be an article, its kind is known.
    learner.scheduled(f"{B}/news-99")
    assert learner.predict(f"{B}/news-99?page=5") is not None
    # Evidence from list pages makes a value rule trusted on list pages.
    for section in "abcdefgh":  # 8 confirmations: a lower bound of 0.75
        learner.observe(f"{B}/{section}/", listing=True)
        learner.observe(f"{B}/{section}/?page=1", duplicate_of=f"{B}/{section}/", listing=True)
    learner.scheduled(f"{B}/z/")
    page1 = learner.predict(f"{B}/z/?page=1")
    assert page1 is not None and page1.listing and {r.describe() for r in page1.rules} == {"drop ?page=1"}
    assert learner.predict(f"{B}/z/?page=2") is None


def test_revoking_a_rule_revokes_its_parameter_and_prefix() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    noisy_articles(learner, 8)
    noisy_articles(learner, 8, "/shop")
    for i in range(8):
        learner.observe(f"{B}/news-{i}?utm_source=a{i}", duplicate_of=f"{B}/news-{i}")
    rules = {r.describe(): r for r in learner.rules()}
    broad, narrow, value = rules["drop ?page=*"], rules["drop ?page=* under /shop/"], rules["drop ?page=2"]
    utm = rules["drop ?utm_source=*"]
    assert broad.trusted and narrow.trusted and value.trusted and utm.trusted
    # Exploration downloads a predicted duplicate and finds another content.
    learner.observe(f"{B}/news-50")
    prediction = learner.predict(f"{B}/news-50?page=9")
    assert prediction is not None and [r.describe() for r in prediction.rules] == ["drop ?page=*"]
    assert learner.verify(prediction, None) is False
    assert learner.contradictions == [prediction]
    assert broad.contradicted and not broad.trusted
    # The narrower rule and the value rules of the parameter: no trust and no support left, counter kept.
    for rule in (narrow, value, rules["drop ?page=3 under /shop/"]):
        assert not rule.trusted and rule.support == 0 and rule.revoked == 1 and not rule.contradicted
    assert utm.trusted and utm.support == 8  # another parameter, no prefix: untouched
    assert learner.predict(f"{B}/shop/news-1?page=5") is None
    # New evidence earns the narrower rule its trust back (it was not contradicted itself).
    for i in range(8, 12):
        learner.observe(f"{B}/shop/news-{i}")
        learner.observe(f"{B}/shop/news-{i}?page={i}", duplicate_of=f"{B}/shop/news-{i}")
    assert narrow.trusted and not broad.trusted
    assert learner.predict(f"{B}/shop/news-1?page=5") is not None


def test_losing_trust_by_counter_evidence_revokes_too() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.7)
    noisy_articles(learner, 4, "/shop")
    rules = {r.describe(): r for r in learner.rules()}
    narrow, broad = rules["drop ?page=* under /shop/"], rules["drop ?page=*"]
    assert narrow.trusted and broad.trusted
    # Articles elsewhere whose ?page= matters: the broad rule's bound falls.
    for i in range(4):
        learner.observe(f"{B}/forum-{i}")
        learner.observe(f"{B}/forum-{i}?page=2")
    assert not broad.trusted and not broad.contradicted
    assert not narrow.trusted and narrow.support == 0 and narrow.revoked >= 1
    assert learner.revocations >= 1


def test_a_path_rule_revoked_takes_its_prefix_along() -> None:
    learner = _shop_mirrored()
    for i in range(6):
        learner.observe(f"{B}/en/x/q{i}", duplicate_of=f"{B}/fr/q{i}")
    rules = {r.describe(): r for r in learner.rules()}
    en, en_x = rules["/en/… -> /…"], rules["/en/x/… -> /fr/…"]
    assert en.trusted and en_x.trusted
    learner.observe(f"{B}/shop/p77")
    prediction = learner.predict(f"{B}/en/shop/p77")
    assert prediction is not None
    assert learner.verify(prediction, None) is False
    assert en.contradicted and not en_x.trusted and en_x.support == 0


def _shop_mirrored() -> UrlRuleLearner:
    """A learner that saw six products of /shop/ and their copies under /en/shop/."""
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    for i in range(6):
        learner.observe(f"{B}/shop/p{i}")
        learner.observe(f"{B}/en/shop/p{i}", duplicate_of=f"{B}/shop/p{i}")
    return learner


def test_a_section_rule_outlives_its_broader_rule_unless_its_own_section_contradicts_it() -> None:
    # /en/ mirrors the shop and translates the news: /en/… -> /… meets the translations, the rule within
    # /en/shop/ never does and keeps its support; a counter-example inside /en/shop/ takes both.
    learner = _shop_mirrored()
    rules = {r.describe(): r for r in learner.rules()}
    en, en_shop = rules["/en/… -> /…"], rules["/en/shop/… -> /shop/…"]
    assert en.trusted and en_shop.trusted
    learner.observe(f"{B}/news/3")
    prediction = learner.predict(f"{B}/en/news/3")
    assert prediction is not None and learner.verify(prediction, None) is False  # a translation
    assert en.contradicted and not en.trusted
    assert en_shop.trusted and en_shop.support == 6 and not en_shop.contradicted
    assert learner.predict(f"{B}/en/news/4") is None
    learner.observe(f"{B}/shop/p9")
    prediction = learner.predict(f"{B}/en/shop/p9")
    assert prediction is not None and learner.verify(prediction, None) is False  # /en/shop/ differs too
    assert en_shop.contradicted and not learner.rules(trusted_only=True)


def test_a_contradiction_in_a_section_blames_the_broader_rule_too() -> None:
    learner = _shop_mirrored()
    learner.observe(f"{B}/shop/p9")
    prediction = learner.predict(f"{B}/en/shop/p9")
    assert prediction is not None and learner.verify(prediction, None) is False
    assert {r.describe() for r in learner.rules() if r.contradicted} == {"/en/… -> /…", "/en/shop/… -> /shop/…"}


def test_exploration_tests_each_rule_on_each_kind_of_page() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    for i in range(6):
        learner.observe(f"{B}/shop/product-{i}")
        learner.observe(f"{B}/en/shop/product-{i}", duplicate_of=f"{B}/shop/product-{i}")
    for i in range(60):
        learner.observe(f"{B}/shop/product-{100 + i}")
        learner.observe(f"{B}/news-{i}")
    share = 0.05
    # Products: explored until EXPLORE_FIRST verifications confirmed the rule there, then a share.
    decisions = []
    for i in range(100, 160):
        prediction = learner.predict(f"{B}/en/shop/product-{i}")
        assert prediction is not None and prediction.target_kind == "/*/product-#"
        explored = learner.explore(prediction, share)
        decisions.append(explored)
        if explored:
            assert learner.verify(prediction, f"{B}/shop/product-{i}") is True
    assert decisions[:EXPLORE_FIRST] == [True] * EXPLORE_FIRST
    assert sum(decisions) == 3 and decisions[40]  # then 5 % of them: the 41st keeps testing the kind
    # The first /en/news-N is a new kind of page for the rule: downloaded, and it is a translation.
    prediction = learner.predict(f"{B}/en/news-3")
    assert prediction is not None and prediction.target_kind == "/news-#"
    assert learner.explore(prediction, share) is True
    assert learner.verify(prediction, None) is False  # its own content
    assert learner.predict(f"{B}/en/news-4") is None
    # The rule within /en/shop/, never contradicted there, keeps predicting the products (issue 37).
    still = learner.predict(f"{B}/en/shop/product-101")
    assert still is not None and [r.describe() for r in still.rules] == ["/en/shop/… -> /shop/…"]
    # Exploration 0: never.
    assert learner.explore(prediction, 0) is False


def test_a_verification_waits_for_its_target() -> None:
    """The explored page arrives before the page it was predicted to duplicate."""
    learner = _shop_mirrored()
    learner.scheduled(f"{B}/news/1")
    learner.scheduled(f"{B}/news/2")
    first = learner.predict(f"{B}/en/news/1")
    second = learner.predict(f"{B}/en/news/2")
    assert first is not None and second is not None
    learner.observe(f"{B}/en/news/1")  # a translation: unique
    assert learner.verify(first, None) is None
    learner.observe(f"{B}/en/news/2")  # will turn out a duplicate
    assert learner.verify(second, None) is None
    assert learner.contradictions == []
    learner.observe(f"{B}/news/2", f"{B}/en/news/2", f"{B}/en/news/2")  # its target: the same content
    assert learner.contradictions == [] and learner.rules(trusted_only=True)
    learner.observe(f"{B}/news/1")  # its target: another content
    assert learner.contradictions == [first]
    assert [r.describe() for r in learner.rules(trusted_only=True)] == ["/en/shop/… -> /shop/…"]


def test_revocations_survive_a_merge_and_old_blobs_still_load() -> None:
    import zlib

    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    noisy_articles(learner, 8)
    noisy_articles(learner, 8, "/shop")
    before = learner.dumps()
    learner.observe(f"{B}/news-50")
    prediction = learner.predict(f"{B}/news-50?page=9")
    assert prediction is not None and learner.verify(prediction, None) is False
    narrow = next(r for r in learner.rules() if r.describe() == "drop ?page=* under /shop/")
    # Merging what was saved before the revocation (another worker, an earlier save) brings nothing back.
    learner.merge(before)
    assert narrow.support == 0 and not narrow.trusted
    # A fresh worker loading the saved rules sees the revocation too.
    other = UrlRuleLearner(min_support=3, min_precision=0.5)
    other.merge(learner.dumps())
    other.merge(before)
    copied = {r.describe(): r for r in other.rules()}
    assert copied["drop ?page=*"].contradicted and copied["drop ?page=* under /shop/"].support == 0
    assert not other.rules(trusted_only=True)
    # A version-1 blob (before issue 23): read as before, no list-page evidence.
    v1 = b"SHUR1" + zlib.compress(json.dumps({"version": 1, "rules": [
        ["site.test", "param", "utm_source", "", "/", 0, [], [], 9, 0, 0, ["utm_source=a", "utm_source=b"]],
    ]}).encode())
    old = UrlRuleLearner(min_support=3, min_precision=0.5)
    assert old.merge(v1) == 1
    (rule,) = old.rules()
    assert rule.trusted and rule.on_pages and not rule.on_lists and rule.revoked == 0


def test_a_contradiction_blames_the_rules_of_the_request_not_those_of_its_target() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    noisy_articles(learner, 6)
    for i in range(6):
        learner.observe(f"{B}/shop/p{i}")
        learner.observe(f"{B}/en/shop/p{i}", duplicate_of=f"{B}/shop/p{i}")
    learner.observe(f"{B}/news-70?page=2")  # a variant crawled first: the target of the prediction
    prediction = learner.predict(f"{B}/en/news-70")
    assert prediction is not None and prediction.target == f"{B}/news-70?page=2"
    assert [r.describe() for r in prediction.fired] == ["/en/… -> /…"]
    assert {r.describe() for r in prediction.rules} == {"/en/… -> /…", "drop ?page=*"}
    assert learner.verify(prediction, None) is False  # a translation
    rules = {r.describe(): r for r in learner.rules()}
    assert rules["/en/… -> /…"].contradicted
    assert rules["drop ?page=*"].trusted and not rules["drop ?page=*"].contradicted
