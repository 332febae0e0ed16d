"""``UrlRulesMiddleware``: learn URL rules from the duplicates found, skip predicted duplicates before download.

Enabled by the add-on when ``SIMHASH_URL_RULES`` is ``"learn"`` or
``"skip"`` (docs: ``guides/url-rules.md``).  It feeds ``core.urlrules.urlrules.UrlRuleLearner``
with every verdict ``SimhashMiddleware`` reaches (through
``DedupState.page_listeners``), with ``<link rel="canonical">`` declarations
read from Scrapy's own parse, and with every scheduled request.  In
``"skip"`` mode its ``process_request`` stops a request whose URL a trusted
rule rewrites to a URL already crawled or scheduled: it raises
``PredictedDuplicate`` (an ``IgnoreRequest``; errbacks receive it), except
for the predictions ``UrlRuleLearner.explore`` picks (the first ones of each
rule on each kind of page, then a share ``SIMHASH_URL_RULES_EXPLORE``), which
are downloaded to verify the rules (a contradicted rule loses trust at once,
and takes its related rules with it).  Each page's links tell the learner
whether it is a list page (``core.urlrules.urlrules.is_listing``).  ``dont_filter``
requests and requests with ``meta["simhash_enabled"] = False`` are never
skipped.

The rules live in the backend (``load_extra``/``save_extra``): loaded when
the spider opens, merged and saved every ``URL_RULES_SAVE_INTERVAL`` seconds
and at close, so a resumed job (``JOBDIR``), the next crawl (``SIMHASH_DIR``)
and the other workers on one Redis start with them.  The report lists them.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse
from scrapy.utils.response import get_base_url

from .backends.memory import MemoryBackend
from .core import defaults
from .core.cluster.clustering import Outcome
from .core.cluster.representative import html_canonical
from .core.redact import LOG_REDACTION, redact
from .core.urlrules.urlrules import Prediction, UrlRuleLearner, is_listing, url_key
from .state import DedupState

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from .backends import Verdict

__all__ = ["UrlRulesMiddleware", "PredictedDuplicate", "URL_RULES_MIDDLEWARE_PRIORITY"]

logger = logging.getLogger(__name__)
logger.addFilter(LOG_REDACTION)  # no password of a page URL in a log line (core.redact)

#: Position in ``DOWNLOADER_MIDDLEWARES``: early, so a skipped request costs no other middleware's work.
URL_RULES_MIDDLEWARE_PRIORITY = 50


class PredictedDuplicate(IgnoreRequest):
    """Raised (``SIMHASH_URL_RULES = "skip"``) for a request predicted to duplicate a crawled or scheduled URL.

    ``url``, ``canonical_url`` (the URL it is predicted to duplicate) and
    ``rules`` (readable rule descriptions) say why; errbacks receive it.
    """

    def __init__(self, url: str, canonical_url: str, rules: str) -> None:
        super().__init__(redact(f"Predicted duplicate of {canonical_url} by URL rule(s) {rules}: {url}"))
        self.url = url
        self.canonical_url = canonical_url
        self.rules = rules


def page_links(response: Response) -> list[str]:
    """The ``<a href>`` values of an HTML response, as written (from Scrapy's parse)."""
    if not isinstance(response, HtmlResponse):
        return []
    try:
        return [a.get("href") or "" for a in response.selector.root.iter("a")]
    except Exception:  # noqa: BLE001 - a broken page teaches nothing
        return []


def declared_canonical(response: Response) -> str | None:
    """The absolute ``<link rel="canonical">`` URL of an HTML response (from Scrapy's parse; the core's one
    reader of the tag, ``core.cluster.representative.html_canonical``), else ``None``."""
    if not isinstance(response, HtmlResponse):
        return None
    try:
        return html_canonical(response.selector.root, get_base_url(response))
    except Exception:  # noqa: BLE001 - a broken page teaches nothing
        return None


class UrlRulesMiddleware:
    """Learn URL rules per host; in skip mode, do not download predicted duplicates."""

    def __init__(self, crawler: Crawler, state: DedupState) -> None:
        config = state.config
        self.crawler = crawler
        self.state = state
        self.skip = config.url_rules == "skip"
        self.explore = config.url_rules_explore
        self.canonical = config.url_rules_canonical
        self.learner = UrlRuleLearner(config.url_rules_min_support, config.url_rules_min_precision)
        #: Explored predicted duplicates, by URL key, until their verdict arrives.
        self._explored: dict[str, Prediction] = {}
        self._last_scheduled: str | None = None
        self._last_save = time.monotonic()
        self._saving = False
        self._loaded = 0
        state.page_listeners.append(self.page_checked)
        state.open_hooks.append(self.opened)
        state.close_hooks.append(self.closing)
        crawler.signals.connect(self.request_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(self.request_dropped, signal=signals.request_dropped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UrlRulesMiddleware:
        state = DedupState.for_crawler(crawler)
        if state.config.url_rules == "off":
            raise NotConfigured("SIMHASH_URL_RULES is 'off'")
        return cls(crawler, state)

    # ------------------------------------------------------------ schedule
    def request_scheduled(self, request: Request, spider: Spider | None = None) -> None:
        self._last_scheduled = request.url if self.learner.scheduled(request.url) else None

    def request_dropped(self, request: Request, spider: Spider | None = None) -> None:
        # The dupefilter refused it: it will not be downloaded, so it must not protect its variants.
        if request.url == self._last_scheduled:
            self.learner.forget(request.url)

    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if not self.skip or request.dont_filter:
            return None
        meta = request.meta
        if meta.get("simhash_enabled", True) is False or "simhash_predicted_duplicate_of" in meta:
            return None
        prediction = self.learner.predict(request.url)
        if prediction is None:
            return None
        stats = self.state
        if self.learner.explore(prediction, self.explore):
            # Downloaded anyway: its verdict checks the rules (page_checked).
            meta["simhash_predicted_duplicate_of"] = prediction.target
            self._explored[url_key(request.url)] = prediction
            stats.inc("simhash/requests/explored")
            if self.state.config.debug:
                logger.debug(
                    "Exploring predicted duplicate %(url)s of %(target)s (URL rules: %(rules)s): downloaded to check them",
                    {"url": request.url, "target": prediction.target, "rules": prediction.rule_names},
                    extra={"spider": spider},
                )
            return None
        self.learner.forget(request.url)
        for rule in prediction.rules:
            rule.skipped += 1
        stats.inc("simhash/requests/skipped")
        for kind in {rule.kind for rule in prediction.rules}:
            stats.inc(f"simhash/requests/skipped/{kind}")
        if self.state.config.debug:
            logger.debug(
                "Skipped predicted duplicate %(url)s of %(target)s (URL rules: %(rules)s)",
                {"url": request.url, "target": prediction.target, "rules": prediction.rule_names},
                extra={"spider": spider},
            )
        raise PredictedDuplicate(request.url, prediction.target, prediction.rule_names)

    # ------------------------------------------------------------ learning
    def page_checked(self, request: Request, response: Response, verdict: Verdict) -> None:
        """Learn from one verdict of ``SimhashMiddleware`` (a listener of the dedup state)."""
        if verdict.outcome is Outcome.UNCHECKED:
            return
        try:
            cluster = verdict.canonical_url
            declared = declared_canonical(response) if self.canonical else None
            aliases = [request.url] if request.url != response.url else []
            aliases.extend(request.meta.get("redirect_urls", ()))
            self.learner.observe(response.url, cluster, cluster, declared, aliases,
                                 listing=is_listing(page_links(response)))
            if self._explored:
                prediction = self._explored.pop(url_key(request.url), None)
                if prediction is not None:
                    self.learner.verify(prediction, cluster)
            # Contradictions found now, or when the target of an earlier explored page arrived.
            contradictions, self.learner.contradictions = self.learner.contradictions, []
            for prediction in contradictions:
                self.state.inc("simhash/url_rules/contradicted")
                logger.warning(
                    "simhash: URL rule(s) %(rules)s contradicted: %(url)s differs from %(target)s; no longer trusted "
                    "(nor the rules on the same parameter or prefix)",
                    {"rules": prediction.fired_names, "url": prediction.url, "target": prediction.target},
                    extra={"spider": self.state.spider},
                )
        except Exception:
            logger.exception("simhash: URL rule learning failed for %(url)s", {"url": response.url},
                             extra={"spider": self.state.spider})
            return
        if time.monotonic() - self._last_save >= defaults.URL_RULES_SAVE_INTERVAL and not self._saving:
            from scrapy.utils.defer import deferred_from_coro

            self._last_save = time.monotonic()
            deferred_from_coro(self._save_logged())

    # ------------------------------------------------------------ persistence
    async def opened(self) -> None:
        backend = self.state.backend
        data = await backend.load_extra(defaults.URL_RULES_EXTRA)
        try:
            self._loaded = self.learner.merge(data)
        except ValueError as exc:
            logger.warning("simhash: ignoring the saved URL rules: %s", exc, extra={"spider": self.state.spider})
        if isinstance(backend, MemoryBackend) and backend.initial:
            # Pages of the resumed job / the earlier crawl: their URLs and variants are known.
            for member in await backend.members():
                self.learner.remember(member.url, member.canonical_url)
        if self._loaded:
            trusted = len(self.learner.rules(trusted_only=True))
            self.state.stats.set_value("simhash/url_rules/loaded", self._loaded)
            logger.info("simhash: loaded %d URL rules (%d trusted)", self._loaded, trusted,
                        extra={"spider": self.state.spider})

    async def _save(self) -> None:
        self._saving = True
        try:
            backend = self.state.backend
            # Merge what others saved (Redis workers, a concurrent save): counts take the maximum.
            try:
                self.learner.merge(await backend.load_extra(defaults.URL_RULES_EXTRA))
            except ValueError:
                pass
            await backend.save_extra(defaults.URL_RULES_EXTRA, self.learner.dumps())
        finally:
            self._saving = False

    async def _save_logged(self) -> None:
        try:
            await self._save()
        except Exception:
            logger.exception("simhash: cannot save the URL rules", extra={"spider": self.state.spider})

    async def closing(self) -> None:
        await self._save()
        rules = self.learner.rules()
        trusted = [r for r in rules if r.trusted]
        stats = self.state.stats
        stats.set_value("simhash/url_rules/candidates", len(rules))
        stats.set_value("simhash/url_rules/trusted", len(trusted))
        stats.set_value("simhash/url_rules/pairs", self.learner.pairs)
        if self.learner.revocations:
            stats.set_value("simhash/url_rules/revoked", self.learner.revocations)
        self.state.report_extra["rules"] = self.learner.report()
        if trusted:
            logger.info(
                "simhash: %(n)d trusted URL rules, e.g. %(examples)s",
                {"n": len(trusted), "examples": "; ".join(f"{r.host} {r.describe()}" for r in trusted[:3])},
                extra={"spider": self.state.spider},
            )
