"""URL rewrite rules: parsing URLs into comparable keys, the rule kinds, and their lookup index.

The pieces ``core.urlrules.urlrules`` learns with: ``parse_url`` splits a URL once,
``make_key`` builds the form URLs are compared in (lower-case scheme and
host, no default port, no fragment, sorted query), ``Rule`` is one rewrite
(``param``: drop a parameter; ``value``: drop one parameter value; ``path``:
replace path segments, anchored at a position or at the end) with its
evidence (parameter rules keep the evidence from list pages apart: see
``core.urlrules.urlrules``), ``page_kind`` is the coarse shape of a URL that
exploration tests each rule on, ``related`` says which rules a revoked one
takes with it, and ``RuleIndex`` finds the rules that can rewrite a URL with one
dictionary lookup per path segment and query parameter.  Pure Python.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["Rule", "RuleIndex", "parse_url", "make_key", "url_key", "site_of", "apply_one", "apply_path",
           "wilson_lower_bound", "page_kind", "related"]

#: z of the one-sided 95 % Wilson lower bound on a rule's precision.
WILSON_Z = 1.645
#: A URL is rewritten at most this many times by path rules (each one shortens it).
MAX_PATH_STEPS = 4
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def wilson_lower_bound(successes: int, total: int, z: float = WILSON_Z) -> float:
    """Lower bound of the Wilson score interval for ``successes / total`` (0 when ``total`` is 0)."""
    if total <= 0:
        return 0.0
    p = successes / total
    z2 = z * z
    centre = p + z2 / (2 * total)
    margin = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total))
    return max(0.0, (centre - margin) / (1 + z2 / total))


# ----------------------------------------------------------------------- URLs
def parse_url(url: str) -> tuple[str, str, str, list[tuple[str, str]]] | None:
    """``(scheme, host, path, [(name, token)])``; the fragment is dropped; ``None`` if not absolute."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        return None
    scheme = scheme.lower()
    rest, _, query = rest.partition("#")[0].partition("?")
    host, _, path = rest.partition("/")
    host = host.lower()
    if ":" in host:
        port = _DEFAULT_PORTS.get(scheme)
        if port is not None and host.endswith(port):
            host = host[: -len(port)]
    params = [(t.partition("=")[0], t) for t in query.split("&") if t] if query else []
    return scheme, host, "/" + path, params


def site_of(host: str) -> str:
    """The host name without the port: rules are learned per host name (a local test
    server's port changes from run to run; a rule never changes the port of a URL)."""
    if host.startswith("["):
        return host[: host.find("]") + 1] or host
    return host.partition(":")[0]


def make_key(scheme: str, host: str, path: str, tokens: Iterable[str]) -> str:
    query = "&".join(sorted(tokens))
    return f"{scheme}://{host}{path}?{query}" if query else f"{scheme}://{host}{path}"


def url_key(url: str) -> str:
    """The form URLs are compared in: lower-case scheme and host, no default port or fragment, sorted query."""
    parts = parse_url(url)
    if parts is None:
        return url
    scheme, host, path, params = parts
    return make_key(scheme, host, path, [t for _, t in params])


_DIGITS = re.compile(r"[0-9]+")


def page_kind(path: str, params: Iterable[tuple[str, str]] = ()) -> str:
    """The coarse shape of a URL: each path segment with its digit runs as ``#``, a segment
    without digits as ``*`` (its extension kept), then the sorted parameter names.

    ``/news-12`` -> ``/news-#``, ``/shop/`` -> ``/*/``, ``/shop/product-7`` ->
    ``/*/product-#``, ``/docs/s3/a17.html`` -> ``/*/s#/a#.html``,
    ``/articles/intro.html`` -> ``/*/*.html``, ``/item?id=3`` -> ``/*?id``.
    Exploration tests each trusted rule on each kind of page it skips.
    """
    out = []
    for seg in path.split("/")[1:]:
        templated, digits = _DIGITS.subn("#", seg)
        if digits or not seg:
            out.append(templated)
        else:
            dot = seg.rfind(".")
            out.append("*" + seg[dot:] if 0 < dot < len(seg) - 1 and len(seg) - dot <= 6 else "*")
    kind = "/" + "/".join(out)
    if params:
        kind += "?" + "&".join(sorted({name for name, _ in params}))
    return kind


# ---------------------------------------------------------------------- rules
class Rule:
    """One candidate rewrite rule of one host, with its evidence."""

    __slots__ = ("host", "kind", "name", "value", "prefix", "at", "old", "new",
                 "support", "counter", "contradicted", "trusted", "skipped", "values",
                 "list_support", "list_counter", "list_values", "on_pages", "on_lists", "revoked")

    def __init__(self, host: str, kind: str, name: str = "", value: str = "", prefix: str = "/",
                 at: int = 0, old: tuple[str, ...] = (), new: tuple[str, ...] = ()) -> None:
        self.host = host
        #: "param" (drop a parameter), "value" (drop one default value) or "path".
        self.kind = kind
        self.name = name
        #: The whole ``name=value`` token of a "value" rule.
        self.value = value
        #: Parameter rules apply to paths starting with this prefix.
        self.prefix = prefix
        #: Path rules: the segment position ``old`` starts at, or -1 for "the last segments".
        self.at = at
        self.old = old
        self.new = new
        #: Evidence; for "param" and "value" rules only from pages that are not list pages
        #: (the ``list_*`` fields hold the evidence from list pages).
        self.support = 0
        self.counter = 0
        self.contradicted = False
        #: Trusted on some kind of page (in the lookup index): ``on_pages or on_lists``.
        self.trusted = False
        #: Trusted where the URL it leads to is not a list page / is a list page (path rules: both alike).
        self.on_pages = False
        self.on_lists = False
        #: "param"/"value" rules: evidence where one of the two pages is a list page.
        self.list_support = 0
        self.list_counter = 0
        self.list_values: set[str] = set()
        #: Times a related rule's revocation wiped this rule's support (persisted: merges respect it).
        self.revoked = 0
        #: Requests skipped because of this rule (this process).
        self.skipped = 0
        #: "param" rules: distinct values of the parameter in confirming evidence (up to ``MIN_PARAM_VALUES``).
        self.values: set[str] = set()

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.name, self.value, self.prefix, self.at, self.old, self.new)

    @property
    def stratified(self) -> bool:
        """Parameter rules keep the evidence of list pages apart (path rules do not)."""
        return self.kind != "path"

    def trusted_for(self, listing: bool) -> bool:
        return self.on_lists if listing else self.on_pages

    @property
    def precision(self) -> float:
        good = self.support + self.list_support
        total = good + self.counter + self.list_counter
        return good / total if total else 0.0

    def lower_bound(self) -> float:
        good = self.support + self.list_support
        return wilson_lower_bound(good, good + self.counter + self.list_counter)

    def describe(self) -> str:
        """A readable form: ``drop ?utm_source (any value) under /articles/``, ``/print/… -> /…``."""
        where = "" if self.prefix == "/" else f" under {self.prefix}"
        if self.kind == "param":
            return f"drop ?{self.name}=*{where}"
        if self.kind == "value":
            return f"drop ?{self.value}{where}"
        old = "/".join(self.old)
        new = "/".join(self.new)
        if self.at == -1:
            return f"…/{old} -> …/{new}" if new or self.new else f"…/{old} -> …"
        lead = "/…" * self.at
        return f"{lead}/{old}/… -> {lead}/{new}/…".replace("//", "/")

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "rule": self.describe(),
            "kind": self.kind,
            "support": self.support + self.list_support,
            "counter": self.counter + self.list_counter,
            "list_support": self.list_support,
            "list_counter": self.list_counter,
            "precision": round(self.precision, 4),
            "lower_bound": round(self.lower_bound(), 4),
            "trusted": self.trusted,
            "on_lists": self.on_lists,
            "contradicted": self.contradicted,
            "revoked": self.revoked,
            "skipped": self.skipped,
        }

    def __repr__(self) -> str:
        lists = f" lists +{self.list_support}/-{self.list_counter}" if self.list_support or self.list_counter else ""
        trust = " trusted" + ("" if self.on_pages and self.on_lists else " on lists" if self.on_lists else " on pages")
        return f"<Rule {self.host} {self.describe()} +{self.support}/-{self.counter}{lists}{trust if self.trusted else ''}>"


def related(rule: Rule, other: Rule) -> bool:
    """Does revoking ``rule`` revoke ``other`` (a rule of the same host)?

    Parameter rules: any rule on the same parameter (broader, narrower or one
    value of it), and the rules under the same (not root) prefix.  Path rules:
    the rules anchored at the same place on the same first (or last) segment,
    except a narrower rule within one section that never met a counter-example
    of its own (``/en/… -> /…`` revoked by ``/en/news-3``, a translation, leaves
    ``/en/shop/… -> /shop/…`` trusted: every crawled URL it rewrites was
    checked against it too, issue 37); one that did goes with it.
    """
    if other is rule or other.host != rule.host:
        return False
    if rule.kind == "path":
        if other.kind != "path" or other.at != rule.at:
            return False
        if rule.at < 0:
            return other.old[-1:] == rule.old[-1:]
        return other.old[:1] == rule.old[:1] and not _clean_section_rule(rule, other)
    if other.kind == "path":
        return False
    return other.name == rule.name or (rule.prefix != "/" and other.prefix == rule.prefix)


def section_rule(rule: Rule, other: Rule) -> bool:
    """Is ``other`` the path rule ``rule`` within one more segment (``/en/shop/… -> /shop/…`` of ``/en/… -> /…``)?"""
    n = len(rule.old)
    return (
        rule.kind == other.kind == "path" and rule.at == other.at >= 0 and len(other.old) == n + 1
        and other.old[:n] == rule.old and other.new == rule.new + other.old[n:]
    )


def _clean_section_rule(rule: Rule, other: Rule) -> bool:
    """``other`` is ``rule`` within one more segment and no evidence ever contradicted it."""
    return section_rule(rule, other) and not (other.contradicted or other.counter or other.list_counter)


def apply_path(segs: list[str], rule: Rule) -> list[str] | None:
    n = len(rule.old)
    if rule.at < 0:
        if len(segs) >= n and tuple(segs[len(segs) - n :]) == rule.old:
            return segs[: len(segs) - n] + list(rule.new)
        return None
    if tuple(segs[rule.at : rule.at + n]) == rule.old:
        return segs[: rule.at] + list(rule.new) + segs[rule.at + n :]
    return None


def apply_one(rule: Rule, scheme: str, host: str, path: str, params: list[tuple[str, str]]) -> str | None:
    """The key of the URL rewritten by ``rule`` alone, or ``None`` if the rule does not change it."""
    if rule.kind == "path":
        segs = apply_path(path.split("/")[1:], rule)
        if segs is None:
            return None
        return make_key(scheme, host, "/" + "/".join(segs), [t for _, t in params])
    if not params or not path.startswith(rule.prefix):
        return None
    if rule.kind == "param":
        tokens = [t for n, t in params if n != rule.name]
    else:
        tokens = [t for _, t in params if t != rule.value]
    return None if len(tokens) == len(params) else make_key(scheme, host, path, tokens)


class RuleIndex:
    """Rules looked up by where they can match: first segment at a position, last segment, parameter."""

    __slots__ = ("start", "end", "params", "values", "paths")

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        #: ``start[i][segment]``: path rules whose ``old`` starts with that segment at position i.
        self.start: list[dict[str, list[Rule]]] = []
        self.end: dict[str, list[Rule]] = {}
        self.params: dict[str, list[Rule]] = {}
        self.values: dict[str, list[Rule]] = {}
        self.paths = False
        for rule in rules:
            self.add(rule)

    def add(self, rule: Rule) -> None:
        if rule.kind == "path":
            self.paths = True
            if rule.at < 0:
                self.end.setdefault(rule.old[-1], []).append(rule)
            else:
                while len(self.start) <= rule.at:
                    self.start.append({})
                self.start[rule.at].setdefault(rule.old[0], []).append(rule)
        elif rule.kind == "param":
            self.params.setdefault(rule.name, []).append(rule)
        else:
            self.values.setdefault(rule.value, []).append(rule)

    def __bool__(self) -> bool:
        return bool(self.paths or self.params or self.values)

    def path_rules(self, segs: list[str]) -> list[Rule]:
        """Path rules whose anchor segment matches (to be confirmed with ``_apply_path``)."""
        found: list[Rule] = []
        for i, table in enumerate(self.start[: len(segs)]):
            if table:
                rules = table.get(segs[i])
                if rules:
                    found.extend(rules)
        if self.end and segs:
            rules = self.end.get(segs[-1])
            if rules:
                found.extend(rules)
        return found

    def param_rule(self, name: str, token: str, path: str) -> Rule | None:
        for table, k in ((self.params, name), (self.values, token)):
            found = table.get(k)
            if found:
                for rule in found:
                    if path.startswith(rule.prefix):
                        return rule
        return None

    def normalise(self, scheme: str, host: str, path: str, params: list[tuple[str, str]],
                  fired: list[Rule]) -> str:
        """The key of the URL rewritten by every rule of the index (to a fixpoint); appends the rules used."""
        if self.paths:
            segs = path.split("/")[1:]
            for _ in range(MAX_PATH_STEPS):
                for rule in self.path_rules(segs):
                    rewritten = apply_path(segs, rule)
                    if rewritten is not None:
                        segs = rewritten
                        fired.append(rule)
                        break
                else:
                    break
            path = "/" + "/".join(segs)
        if not params:
            return f"{scheme}://{host}{path}"
        if self.params or self.values:
            tokens: list[str] = []
            for name, token in params:
                param_rule = self.param_rule(name, token, path)
                if param_rule is None:
                    tokens.append(token)
                elif param_rule not in fired:
                    fired.append(param_rule)
            return make_key(scheme, host, path, tokens)
        return make_key(scheme, host, path, [t for _, t in params])
