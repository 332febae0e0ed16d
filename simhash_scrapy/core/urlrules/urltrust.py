"""Trust a URL rule earns per rule kind: how widely exploration must still test it.

``UrlRuleLearner.explore`` downloads the first ``EXPLORE_FIRST`` predictions
of each (rule, scope) and then a share of them.  The scope starts as the
``page_kind`` of the target (each kind of page tests each rule: the guard
that caught ``/en/… -> /…`` on real translations, issue 23).  A *parameter*
rule can earn a wider scope from verified evidence alone: a parameter that
never changed the content across ``SAFE_VALUES`` distinct values and
``SAFE_PAGES`` crawled pages, with no counter-evidence, on one stratum (list
pages, or other pages) is tested per stratum, not per kind of page: a noise
parameter is noise on every article shape, while the stratum keeps real
pagination (list pages) apart.  A *value* rule (one default value) earns it
with ``SAFE_PAGES`` pages.  Path rules never do: a path prefix says nothing
about sections it was not verified on, so they stay tested per kind of page.
A counter-example wipes the evidence (``UrlRuleLearner._check``), so the scope
falls back to the kind of page at once.
"""

from __future__ import annotations

from .urlrewrite import Rule

#: Distinct values a parameter rule needs, with no counter-evidence, to be tested per stratum.
SAFE_VALUES = 4
#: Confirming crawled pages a parameter or value rule needs, with no counter-evidence, for the same.
SAFE_PAGES = 8


def earned(rule: Rule, listing: bool) -> bool:
    """Has ``rule`` earned, on list pages (``listing``) or on other pages, trust beyond each kind of page?"""
    if rule.kind == "path" or rule.contradicted:
        return False
    if listing:
        support, counter, values = rule.list_support, rule.list_counter, rule.list_values
    else:
        support, counter, values = rule.support, rule.counter, rule.values
    if counter or support < SAFE_PAGES:
        return False
    return rule.kind == "value" or len(values) >= SAFE_VALUES


def explore_scope(rule: Rule, kind: str, listing: bool) -> str:
    """The scope whose predictions ``explore`` counts together for ``rule``: the target's kind of page,
    or its stratum once the rule earned it."""
    if earned(rule, listing):
        return "[lists]" if listing else "[pages]"
    return kind
