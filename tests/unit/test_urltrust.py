"""Trust earned per rule kind (core.urlrules.urltrust): how widely exploration still tests a URL rule."""

from __future__ import annotations

from simhash_scrapy.core.urlrules.urlrewrite import Rule
from simhash_scrapy.core.urlrules.urlrules import EXPLORE_FIRST, UrlRuleLearner
from simhash_scrapy.core.urlrules.urltrust import SAFE_PAGES, SAFE_VALUES, earned, explore_scope

B = "http://example.test"


def param_rule(support: int, values: int, counter: int = 0) -> Rule:
    rule = Rule("example.test", "param", name="utm")
    rule.support, rule.counter = support, counter
    rule.values.update(f"utm={v}" for v in range(values))
    return rule


def test_a_parameter_earns_its_stratum_with_enough_values_and_pages() -> None:
    assert earned(param_rule(SAFE_PAGES, SAFE_VALUES), listing=False)
    assert explore_scope(param_rule(SAFE_PAGES, SAFE_VALUES), "/news-#", False) == "[pages]"
    # Too few values, too few pages: each kind of page is still tested.
    assert not earned(param_rule(SAFE_PAGES * 5, SAFE_VALUES - 1), listing=False)
    assert not earned(param_rule(SAFE_PAGES - 1, SAFE_VALUES), listing=False)
    assert explore_scope(param_rule(SAFE_PAGES - 1, SAFE_VALUES), "/news-#", False) == "/news-#"


def test_evidence_of_other_pages_earns_nothing_on_list_pages() -> None:
    rule = param_rule(SAFE_PAGES * 3, SAFE_VALUES)
    assert not earned(rule, listing=True)
    assert explore_scope(rule, "/*/", True) == "/*/"
    rule.list_support = SAFE_PAGES
    rule.list_values.update(f"utm={v}" for v in range(SAFE_VALUES))
    assert earned(rule, listing=True) and explore_scope(rule, "/*/", True) == "[lists]"


def test_one_counter_example_or_contradiction_loses_it() -> None:
    assert not earned(param_rule(SAFE_PAGES * 10, SAFE_VALUES * 2, counter=1), listing=False)
    rule = param_rule(SAFE_PAGES, SAFE_VALUES)
    rule.contradicted = True
    assert not earned(rule, listing=False)


def test_a_value_rule_needs_pages_and_a_path_rule_never_earns() -> None:
    value = Rule("example.test", "value", name="sort", value="sort=date")
    value.support = SAFE_PAGES - 1
    assert not earned(value, listing=False)
    value.support = SAFE_PAGES
    assert earned(value, listing=False)
    path = Rule("example.test", "path", at=0, old=("en",), new=())
    path.support = SAFE_PAGES * 100
    assert not earned(path, listing=False)
    assert explore_scope(path, "/news-#", False) == "/news-#"


def test_learner_explores_an_earned_parameter_per_stratum_not_per_kind() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    for i in range(SAFE_PAGES + 2):  # utm with a new value on each page: never changed the content
        learner.observe(f"{B}/news-{i}")
        learner.observe(f"{B}/news-{i}?utm={i}", duplicate_of=f"{B}/news-{i}")
    for i in range(40):
        learner.observe(f"{B}/shop/product-{i}")
        learner.observe(f"{B}/docs/page-{i}.html")
    rule = next(r for r in learner.rules(trusted_only=True) if r.kind == "param" and r.prefix == "/")
    assert earned(rule, listing=False)
    decisions = []
    for i in range(20):  # products: a kind of page the rule was never verified on
        prediction = learner.predict(f"{B}/shop/product-{i}?utm=x{i}")
        assert prediction is not None and prediction.target_kind == "/*/product-#"
        explored = learner.explore(prediction, 0.05)
        decisions.append(explored)
        if explored:
            assert learner.verify(prediction, f"{B}/shop/product-{i}") is True
    # EXPLORE_FIRST verifications for the stratum, not for each new kind of page.
    assert decisions[:EXPLORE_FIRST] == [True] * EXPLORE_FIRST
    prediction = learner.predict(f"{B}/docs/page-3.html?utm=y")
    assert prediction is not None and prediction.target_kind == "/*/page-#.html"
    assert learner.explore(prediction, 0.05) is False  # a new kind, but the stratum already verified it


def test_learner_keeps_exploring_a_path_rule_on_each_kind() -> None:
    learner = UrlRuleLearner(min_support=3, min_precision=0.5)
    for i in range(SAFE_PAGES * 2):
        learner.observe(f"{B}/shop/product-{i}")
        learner.observe(f"{B}/en/shop/product-{i}", duplicate_of=f"{B}/shop/product-{i}")
    for i in range(4):
        learner.observe(f"{B}/news-{i}")
    for i in range(EXPLORE_FIRST + 3):
        prediction = learner.predict(f"{B}/en/shop/product-{100 + i}") or learner.predict(f"{B}/en/shop/product-{i}")
        if prediction is not None and learner.explore(prediction, 0.05):
            learner.verify(prediction, prediction.target)
    prediction = learner.predict(f"{B}/en/news-1")
    assert prediction is not None
    assert learner.explore(prediction, 0.05) is True  # a new kind of page: tested
