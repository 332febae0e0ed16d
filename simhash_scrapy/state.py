"""The dedup state of one crawler, shared by ``SimhashMiddleware`` and ``SimhashPipeline``.

One ``DedupState`` exists per crawler: a Scrapy extension the add-on enables, which the components find
with ``DedupState.for_crawler`` (``crawler.get_extension``).  It holds
the validated config, the backend (index, members, clusters), the counters
behind the ``simhash/*`` stats, the periodic progress line, and writes the
cluster report when the spider closes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.exceptions import CloseSpider
from scrapy.http import TextResponse

from . import _compat
from .backends import BackendError, ClusterMember, PageRecord, Verdict, create_backend
from .config import SimhashConfig, from_crawler
from .core.analysis import Analysis
from .core.cluster.clustering import Outcome
from .core.cluster.identity import IdentitySignals, identity_signals, may_declare
from .core.cluster.kept_apart import KeptApart
from .core.detector import crawl_scope
from .core.cluster.viewidentity import AddressIdentities
from .core.records import page_record, record_again, record_scope
from .core.cluster.representative import ClusterBook, Placement
from .core.report.report import (
    check_format_available,
)
from .core.redact import LOG_REDACTION, redact
from .core.ruling import Ruling, describe_rule, rule_item, rule_page, verdict_stats
from .core.report.report_path import expand_report_path, report_params
from .core.extract.text import parse_html
from .closing import write_crawl_report
from .startup import check_report_folder, warn_at_startup
from . import workers
from .workers import DaemonExecutor, cut_at_deadline

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler


__all__ = ["DedupState", "Fetch", "STATE_PRIORITY"]

logger = logging.getLogger(__name__)
logger.addFilter(LOG_REDACTION)  # no password of a page URL in a log line (core.redact)
_T = TypeVar("_T")

#: Worker threads that fingerprint pages off the event loop (``SIMHASH_THREADS``).
THREAD_WORKERS = 2
#: Pages (bytes) at least this big are fingerprinted in a worker thread when
#: ``SIMHASH_THREADS`` is on; smaller ones inline.
THREAD_MIN_BYTES = 64 * 1024
#: Pages declaring an identity whose check is awaited at most (``DedupState._declared``).
_DECLARED_PENDING = 10_000

def _root_of(response: Any) -> Any:
    """The parsed page: Scrapy's own parse (cached on the response, the spider reuses it), else lxml's."""
    if isinstance(response, TextResponse):
        return response.selector.root
    return parse_html(response.body)


# ------------------------------------------------------------------------ state
class _SettingError(ValueError):
    """A ``SIMHASH_*`` setting that cannot be used (its message names it)."""


#: The state of a crawler whose components are listed by hand, without the add-on (no extension).
_BY_HAND: WeakKeyDictionary[Crawler, DedupState] = WeakKeyDictionary()
#: Position in ``EXTENSIONS`` (the add-on's; an extension's order matters little: it only connects signals).
STATE_PRIORITY = 0

@dataclass(frozen=True)
class Fetch:
    """A downloaded page as the downloader middleware hands it to the state (``DedupState.judge``): the Scrapy
    request and response, and what the middleware read from them for the page's record."""

    request: Any
    response: Any
    referer: str | None = None
    depth: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    #: The URL the page names as canonical (``rel=canonical``, ``Link``, a redirect), else ``None``.
    canonical_link: str | None = None
    #: The user asked for this page whatever happened before (``replay.forced``): flagged, never dropped.
    forced: bool = False
    #: A 304 answer reaches the request's callback (``SimhashMiddleware._handles_304``).
    passes_304: bool = True


class DedupState:
    """Config, backend, counters, progress line and report of one crawler."""

    def __init__(self, crawler: Crawler, config: SimhashConfig | None = None) -> None:
        self.crawler = crawler
        #: Why simhash-scrapy could not start (pages then pass unchecked while the crawl closes).
        self.error: str | None = None
        try:
            self.config = config if config is not None else from_crawler(crawler)
            if self.config.report_format is not None:
                check_format_available(self.config.report_format, name="SIMHASH_REPORT_FORMAT")
            self.backend = create_backend(crawler, self.config)
        except ValueError as exc:
            # A wrong SIMHASH_* value.  Raised from a component's from_crawler it would reach the
            # user as a 40-line traceback with the message at its end; instead the spider opens,
            # logs this one line naming the setting, and closes (finish_reason "simhash_error").
            self.error = redact(str(exc))
            self.config = SimhashConfig.from_settings({})
            self.backend = create_backend(crawler, self.config)
        # First-run warnings (startup.py): unknown names, half-configured components, priorities.
        warn_at_startup(crawler.settings, None if self.error is not None else self.config)
        self.stats = crawler.stats
        self.log_interval = crawler.settings.getfloat("LOGSTATS_INTERVAL", 60.0)
        #: What ``core.analysis`` computes for a crawled page, built once: the source text, the second
        #: simhash and the sentence sketch only where clustering steps 5-7 use them (template learning,
        #: a backend with extra queries); an item is checked by steps 1-4, so it gets none of them.
        extra = self.backend.extra_queries
        self.page_analysis = replace(
            self.config.analysis,
            keep_source=self.config.templates and extra,  # (the backend learns host templates: core.detector)
            second=self.config.second_simhash and extra,
            sketch=self.config.containment and extra,
        )
        self.item_analysis = replace(self.page_analysis, keep_source=False, second=False, sketch=False)
        #: Pages fingerprinted and near-duplicate pages found in this run.
        self.pages = 0
        self.near_duplicates = 0
        #: The same for items fingerprinted by the pipeline.
        self.items = 0
        self.item_near_duplicates = 0
        self.spider: Spider | None = None
        self.report_path: Path | None = None
        self.opened = False
        self.closed = False
        self._shown = False
        self._task: Any = None
        self._executor: DaemonExecutor | None = None
        #: Extensions of the state (the URL rules): called with (request, response, verdict)
        #: for every checked page; awaited after the backend opened / before the report is written;
        #: ``report_extra`` entries are added to the report summary.
        self.page_listeners: list[Callable[[Any, Any, Verdict], None]] = []
        self.open_hooks: list[Callable[[], Any]] = []
        self.close_hooks: list[Callable[[], Any]] = []
        self.report_extra: dict[str, Any] = {}
        #: When this crawl started, and the pages of the record that answered 404 / 410 (``core.report.changes``).
        self.crawl_started = time.time()
        self.gone: list[tuple[str, str, int]] = []
        #: The clusters this crawl saw, member by member (representative, positions: ``place``).
        self.book = ClusterBook(self.config.representative)
        #: Pages declaring an identity (``core.cluster.identity``): final scope -> (plain scope, declared values),
        #: read by ``check``; and the count of the pairs their scopes kept apart (``core.cluster.kept_apart``).
        self._declared: dict[str, tuple[str, dict[str, set[str]]]] = {}
        #: The identity each address's pages declared, for its views that declare none (``core.cluster.viewidentity``).
        self.view_identities = AddressIdentities()
        self.kept_apart = KeptApart(self.config.max_distance, self.config.blocks)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DedupState:
        """The extension Scrapy builds (``EXTENSIONS``: the add-on enables it); raises ``NotConfigured``."""
        return cls(crawler)

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> DedupState:
        """The state of ``crawler``, for its components' ``from_crawler``: the extension Scrapy built (the
        add-on enables it), else, for components listed by hand without it, one made on first use and kept
        for the crawler's other components (raises ``NotConfigured``)."""
        try:
            state = crawler.get_extension(cls)
        except RuntimeError:  # (a crawler whose settings are not applied yet: no extensions)
            state = None
        if state is None:
            state = _BY_HAND.get(crawler)
            if state is None:
                state = _BY_HAND[crawler] = cls(crawler)
        return state

    # ------------------------------------------------------------- helpers
    def scope_for(self, url: str, items: bool = False, response: Any = None) -> str:
        """The index a page (or an item) of ``url`` belongs to.

        With ``SIMHASH_DISTINCT_SELECTORS``, a page's ``response`` adds the
        digest of its protected text (``core.cluster.distinct.scope_key``), counted as
        ``simhash/distinct/pages`` (or ``simhash/distinct/unmatched`` when no
        selector matched: the plain scope); with ``SIMHASH_IDENTITY_SIGNALS``,
        the digest of the identity it declares (``core.cluster.identity``), counted as
        ``simhash/identity/pages`` and per signal, or, when it declares none, the one its address's pages
        declared (``core.cluster.viewidentity``: a print view), counted as ``simhash/identity/inherited``.
        """
        scope = record_scope(self.config.scope, url, self.spider.name if self.spider is not None else "", items)
        if items:
            return scope
        distinct = self.config.distinct
        if response is None or (distinct is None and not self.config.identity_signals):
            return scope
        digest = None
        if distinct is not None:
            digest = distinct.digest(_root_of(response))
            self.inc("simhash/distinct/unmatched" if digest is None else "simhash/distinct/pages")
        declared = self._identity(response, url) if self.config.identity_signals else None
        key, inherited = crawl_scope(
            scope, url, digest, None if declared is None else declared.digest(),
            self.view_identities if self.config.identity_signals else None,
        )  # fmt: skip
        if inherited:
            self.inc("simhash/identity/inherited")
        if declared is not None:
            if len(self._declared) >= _DECLARED_PENDING:
                self._declared.clear()  # (pages checked long ago, or never: a skipped page)
            self._declared[key] = (scope, declared.values)
        return key

    def _identity(self, response: Any, url: str) -> IdentitySignals | None:
        """The identity the page declares (``core.cluster.identity``; ``None``: none), counted in ``simhash/identity/*``;
        the page's tree is asked for only when its bytes name a signal (then Scrapy's parse, which the
        spider's selectors share); ``url``: the page's address (the product options it names)."""
        if not may_declare(response.body, url):
            return None
        signals = identity_signals(lambda: _root_of(response), response.body, url)
        if signals.bad_jsonld:
            self.inc("simhash/identity/unreadable_jsonld", signals.bad_jsonld)
        kinds = signals.kinds()
        if not kinds:
            return None
        self.inc("simhash/identity/pages")
        for kind in kinds:
            self.inc(f"simhash/identity/{kind}")
        return signals

    def _count_kept_apart(self, record: PageRecord, verdict: Verdict) -> None:
        """A page declaring an identity that became canonical in its scope: whether the signals kept it apart
        from an earlier page declaring another (``core.cluster.kept_apart``): ``simhash/identity/kept_apart`` and
        ``simhash/identity/kept_apart/<signal>`` for each signal whose values differ."""
        declared = self._declared.get(record.scope)
        if declared is None or verdict.outcome is not Outcome.UNIQUE or record.exact:
            return
        differ = self.kept_apart.check(declared[0], record.fingerprint, record.edit_keys, declared[1])
        if differ:
            self.inc("simhash/identity/kept_apart")
            for kind in differ:
                self.inc(f"simhash/identity/kept_apart/{kind}")

    def identity_of(self, request: Any) -> str:
        """What makes two fetches "the same page": Scrapy's request fingerprint (hex).

        It follows the project's ``REQUEST_FINGERPRINTER_CLASS``, so the user's
        URL canonicalisation decides; without a fingerprinter, the URL.
        """
        fingerprinter = getattr(self.crawler, "request_fingerprinter", None)
        if fingerprinter is None:
            return request.url
        return fingerprinter.fingerprint(request).hex()

    def inc(self, name: str, count: int = 1) -> None:
        self.stats.inc_value(name, count)

    def skip(self, reason: str, items: bool = False) -> None:
        self.inc(f"simhash/items/skipped/{reason}" if items else f"simhash/skipped/{reason}")

    def log_cut(self, url: str | None, items: bool = False) -> None:
        """The log line of a page (or item) whose analysis was cut (``core.deadline.TooSlow``)."""
        logger.warning(
            "simhash-scrapy: the analysis of %(what)s %(url)s took over %(seconds)g s of CPU and was cut; "
            "it goes on unchecked (simhash/%(prefix)sskipped/too_slow)",
            {"what": "the item from" if items else "the page", "url": url, "seconds": workers.ANALYSIS_MAX_SECONDS,
             "prefix": "items/" if items else ""},
            extra={"spider": self.spider},
        )

    async def run_analysis(self, func: Callable[..., _T], *args: Any, size: int = 0, slow: bool = False) -> _T:
        """Run ``func(*args)`` in a worker thread or inline (``SIMHASH_THREADS``).

        With threads on, work on inputs of at least ``THREAD_MIN_BYTES``
        (``size``), or that may take long (``slow``: see ``core.analysis.may_take_long``),
        runs in a worker thread, so no page blocks the event loop for long
        (counted in ``simhash/analysed_off_loop``); smaller inputs run inline,
        where the hand-off to a thread would cost more than it saves (see
        ``benchmarks/thread_vs_inline.py``).  Threads need an asyncio loop
        (the asyncio reactor, or Scrapy without a reactor); under another
        Twisted reactor the work runs inline.  In a worker thread, a page past
        ``workers.ANALYSIS_MAX_SECONDS`` of CPU raises ``core.deadline.TooSlow``
        (the callers count it: ``too_slow``).
        """
        if self.config.threads and (slow or size >= THREAD_MIN_BYTES):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                if self._executor is None:
                    self._executor = DaemonExecutor(THREAD_WORKERS, "simhash")
                future = loop.run_in_executor(self._executor, cut_at_deadline, func, *args)
                self.inc("simhash/analysed_off_loop")
                if asyncio.current_task() is None:
                    # Called from a Twisted-driven coroutine (Deferred.fromCoroutine):
                    # it can await Deferreds, not asyncio futures.
                    from twisted.internet.defer import Deferred

                    return await Deferred.fromFuture(future)
                return await future
        return func(*args)

    async def check(self, record: PageRecord, items: bool = False, not_modified: bool = False) -> Verdict:
        """Query-and-record one fingerprinted page (or item) and count its outcome (``core.ruling.verdict_stats``:
        ``simhash/fingerprinted`` or, for a 304 answer checked again as it was recorded (``not_modified``),
        ``simhash/not_modified``, then ``simhash/<outcome>``, ...; items under ``simhash/items/``)."""
        verdict = await self.backend.check(record)
        if self._declared and not items:
            self._count_kept_apart(record, verdict)
        for name in verdict_stats(verdict, record.exact, items, not_modified):
            self.inc(name)
        if not not_modified:
            if items:
                self.items += 1
            else:
                self.pages += 1
        if verdict.outcome is Outcome.NEAR_DUPLICATE:
            if items:
                self.item_near_duplicates += 1
            else:
                self.near_duplicates += 1
        return verdict

    # ------------------------------------------------------------- one page, one answer
    async def judge(self, fetch: Fetch, answer: Analysis) -> Ruling:
        """The one call of the downloader middleware for a fingerprinted page: its record (scope, identity,
        ``core.records.page_record``) checked, placed in its cluster, counted and ruled on (``core.ruling``)."""
        response = fetch.response
        record = page_record(
            answer,
            url=response.url,
            scope=self.scope_for(response.url, response=response),
            referer=fetch.referer,
            depth=fetch.depth,
            identity=self.identity_of(fetch.request),
            seen=time.time(),
            etag=fetch.etag,
            last_modified=fetch.last_modified,
            canonical_link=fetch.canonical_link,
        )
        return await self._rule(fetch, record)

    async def judge_again(self, fetch: Fetch, scope: str | None = None) -> Ruling:
        """The same for a 304 answer to a conditional re-crawl: the identity's record checked again as it
        was recorded, in the scope it was recorded in (``core.records.record_again``; ``LookupError`` when the
        record is gone).  ``scope``: where ``recorded`` found the record whose validators were sent (the scope
        is not worked out again: another page of the address may have declared another identity meanwhile)."""
        url = fetch.response.url
        identity = self.identity_of(fetch.request)
        scope, previous = await self._recorded(url, identity, scope)
        if previous is None:  # the record went away since the request was sent (a flushed Redis key)
            raise LookupError("its record is gone")
        record = record_again(
            previous, url=url, scope=scope, referer=fetch.referer, depth=fetch.depth, identity=identity,
            seen=time.time(), etag=fetch.etag, last_modified=fetch.last_modified,
        )  # fmt: skip
        return await self._rule(fetch, record, not_modified=True)

    async def _rule(self, fetch: Fetch, record: PageRecord, not_modified: bool = False) -> Ruling:
        verdict = await self.check(record, not_modified=not_modified)
        # Placed as a downloaded page is: a member kept (SIMHASH_KEEP_PER_CLUSTER) stays kept after a 304.
        placement = await self.place(record, verdict)
        ruling = rule_page(
            self.config, verdict, placement, fingerprint=record.fingerprint, exact=record.exact,
            forced=fetch.forced, not_modified=not_modified, passes_304=fetch.passes_304,
        )  # fmt: skip
        for listener in self.page_listeners:
            listener(fetch.request, fetch.response, verdict)
        self._count_and_log(ruling, "page", fetch.response.url, record.exact)
        return ruling

    async def judge_item(self, answer: Analysis, url: str, flagged: bool = False, shown: str | None = None) -> Ruling:
        """The one call of the item pipeline for a fingerprinted item (``url``: its URL field, or a name the
        pipeline made; ``shown``: what the log line calls it, else ``url``): checked in the items' index,
        counted and ruled on (``core.ruling.rule_item``)."""
        record = page_record(answer, url=url, scope=self.scope_for(url, items=True), seen=time.time())
        ruling = rule_item(self.config, await self.check(record, items=True), record.exact, flagged)
        self._count_and_log(ruling, "item", shown or url, record.exact)
        return ruling

    def _count_and_log(self, ruling: Ruling, what: str, url: str, exact: bool) -> None:
        for name in ruling.stats:
            self.inc(name)
        if ruling.logged is not None:
            self.log_duplicate(what, url, ruling.verdict, ruling.logged, exact=exact)

    async def place(self, record: PageRecord, verdict: Verdict) -> Placement | None:
        """Where a near-duplicate page stands in its cluster (``core.cluster.representative.ClusterBook``), else ``None``.

        Counts ``simhash/canonical/replaced`` when the page became its
        cluster's representative (``SIMHASH_REPRESENTATIVE = "best"``).  A
        cluster first met here starts from the members the backend recorded
        (``DedupBackend.cluster_members``: the memory and persistent backends;
        with Redis, from the pages this process checked).
        """
        if not verdict.is_duplicate or verdict.canonical_url is None:
            return None
        anchor = verdict.canonical_identity or verdict.canonical_url
        if not self.book.known(record.scope, anchor):
            # A cluster this process has not seen: start from what the backend recorded (a resumed
            # store), this page included when it was recorded before: a page re-checked in a later
            # crawl keeps its place (its first-crawled order) and, if it was the representative
            # already, did not "replace" anyone now.
            recorded = await self.backend.cluster_members(record.scope, anchor)
            if recorded:
                self.book.seed(record.scope, anchor, [(m.key, m.url, m.canonical_link) for m in recorded])
        placement = self.book.place(
            record.scope,
            anchor,
            verdict.canonical_url,
            verdict.canonical_link,
            record.key,
            record.url,
            record.canonical_link,
        )
        if placement.replaced:
            self.inc("simhash/canonical/replaced")
        if self.config.keep_per_cluster > 1:
            shared = await self.backend.position(record.scope, anchor, record.key)
            if shared is not None:
                placement = replace(placement, position=shared)
        return placement

    def describe_rule(self, verdict: Verdict, exact: bool = False) -> str:
        """The rule that matched a near-duplicate, and k: ``"simhash within k=4, distance 3"`` (``core.cluster.clustering.Rule``)."""
        return describe_rule(verdict, exact, self.config.max_distance)

    def log_duplicate(self, what: str, url: str, verdict: Verdict, outcome: str, exact: bool = False) -> None:
        """Log a near-duplicate at SIMHASH_LOG_LEVEL: all of them with SIMHASH_DEBUG, else the first one.

        The line names the rule that matched and k (``exact``: a short page, matched by its digest).
        """
        if self._shown and not self.config.debug:
            return
        msg = "%(outcome)s near-duplicate %(what)s %(url)s: duplicates %(canonical)s (%(rule)s)"
        if not self.config.debug:
            msg += " - no more near-duplicates will be shown (set SIMHASH_DEBUG = True to show all)"
        self._shown = True
        logger.log(
            self.config.log_level,
            msg,
            {
                "outcome": outcome,
                "what": what,
                "url": url,
                "canonical": verdict.canonical_url,
                "rule": self.describe_rule(verdict, exact),
            },
            extra={"spider": self.spider},
        )

    # ------------------------------------------------------------- signals
    async def spider_opened(self, spider: Spider) -> None:
        self.spider = spider
        self.crawl_started = time.time()
        try:
            if self.error is not None:
                raise _SettingError(self.error)
            if self.config.report_uri is not None:
                self.report_path = expand_report_path(
                    self.config.report_uri,
                    report_params(spider, datetime.now(tz=timezone.utc)),
                    name="SIMHASH_REPORT_URI",
                )
                check_report_folder(self.report_path, name="SIMHASH_REPORT_URI")
            await self.backend.open(spider.name)
        except Exception as exc:
            self.error = redact(
                # A setting's error (ValueError) names the setting first; others say what they are.
                str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}", self.config.redis.secrets
            )
            logger.error(
                "simhash-scrapy cannot start, closing the spider: %(error)s",
                {"error": self.error},
                extra={"spider": spider},
            )
            self.stats.set_value("simhash/error", self.error)
            if _compat.CLOSE_SPIDER_FROM_OPENED:
                raise CloseSpider("simhash_error") from exc
            _compat.close_spider_soon(self.crawler, spider, "simhash_error")
            return
        self.opened = True
        if self.config.identity_signals and self.config.distinct is None:
            self.view_identities.replay(self.backend.restored_pages())  # (a resumed crawl goes on as it was)
        await self._run_hooks(self.open_hooks, spider)
        if self.backend.initial:
            self.stats.set_value("simhash/initial", self.backend.initial)
        if self.log_interval > 0:
            self._task = _compat.looping_call(self.log_progress)
            self._task.start(self.log_interval, now=False)

    def log_progress(self) -> None:
        share = 100.0 * self.near_duplicates / self.pages if self.pages else 0.0
        msg = "Simhash: fingerprinted %(pages)d pages, %(dups)d near-duplicates (%(share).1f%%)"
        args: dict[str, Any] = {"pages": self.pages, "dups": self.near_duplicates, "share": share}
        if self.items:
            msg += "; %(items)d items, %(item_dups)d near-duplicates"
            args.update(items=self.items, item_dups=self.item_near_duplicates)
        logger.info(msg, args, extra={"spider": self.spider})

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        if self._task is not None and self._task.running:
            self._task.stop()
        try:
            if self.opened:
                await self._run_hooks(self.close_hooks, spider)
                await write_crawl_report(self, spider, reason)
        except Exception:
            logger.exception("simhash-scrapy: error while finishing the crawl", extra={"spider": spider})
        finally:
            try:
                await self.backend.close()
            except Exception:
                logger.exception("simhash-scrapy: error while closing the backend", extra={"spider": spider})
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None

    async def _run_hooks(self, hooks: list[Callable[[], Any]], spider: Spider) -> None:
        for hook in hooks:
            try:
                await hook()
            except Exception:
                logger.exception("simhash-scrapy: error in %(hook)r", {"hook": hook}, extra={"spider": spider})

    async def previous(self, request: Any) -> ClusterMember | None:
        """The record of ``request``'s page (its scope by URL, its identity), for its validators (conditional
        re-crawls)."""
        return (await self.recorded(request))[1]

    async def recorded(self, request: Any) -> tuple[str, ClusterMember | None]:
        """``(scope, record)`` of ``request``'s page: the first of its ``recorded_scopes`` holding its record."""
        return await self._recorded(request.url, self.identity_of(request))

    def recorded_scopes(self, url: str) -> list[str]:
        """The scopes a page of ``url`` may have been checked in, known before it is downloaded: with
        ``SIMHASH_IDENTITY_SIGNALS`` (and no ``SIMHASH_DISTINCT_SELECTORS``), the scope of the identity its
        address's pages declared (``core.cluster.viewidentity``: a product page, its tracking copies and print
        views), then its plain scope.  A page whose URL names a product option, or whose address declared two
        identities, is looked for in its plain scope only (not found: downloaded without validators)."""
        scope = self.scope_for(url)
        if not self.config.identity_signals or self.config.distinct is not None:
            return [scope]
        declared = self.view_identities.declared(scope, url)
        return [scope] if declared is None else [crawl_scope(scope, url, None, declared)[0], scope]

    async def _recorded(
        self, url: str, identity: str, scope: str | None = None
    ) -> tuple[str, ClusterMember | None]:
        """``(scope, record)`` of the page ``identity`` of ``url``: the first of its ``recorded_scopes`` that holds
        its record, else ``(plain scope, None)``; looked for in ``scope`` only when given (where the record whose
        validators were sent was found: ``judge_again``, ``page_gone``)."""
        scopes = self.recorded_scopes(url) if scope is None else [scope]
        for scope in scopes:
            previous = await self.backend.previous(scope, identity)
            if previous is not None:
                return scope, previous
        return scopes[-1], None

    async def save_replay(self, request: Any, url: str, data: bytes) -> None:
        """Keep the blob of the requests the page of ``request`` (answered from ``url``) yielded
        (``simhash_scrapy.replay``), under the page's scope and identity as ``previous`` reads them."""
        await self.backend.save_replay(self.scope_for(url), self.identity_of(request), data)

    async def load_replay(self, request: Any, url: str) -> bytes | None:
        """The blob ``save_replay`` kept for the page of ``request`` (answered from ``url``); ``None``: none."""
        return await self.backend.load_replay(self.scope_for(url), self.identity_of(request))

    async def page_gone(self, request: Any, response: Any, scope: str | None = None) -> bool:
        """Whether a 404 / 410 answer is of a page the record knew: then it is listed as gone
        (``core.report.changes``, ``simhash/gone``); not when the backend cannot say (the page is skipped as
        any 404 is).  ``scope``: where the record whose validators were sent was found (as ``judge_again``)."""
        try:
            scope, previous = await self._recorded(response.url, self.identity_of(request), scope)
        except BackendError:
            return False
        if previous is None:
            return False
        self.gone.append((previous.url, scope, response.status))
        self.inc("simhash/gone")
        return True
