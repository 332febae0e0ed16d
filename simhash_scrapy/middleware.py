"""``SimhashMiddleware``: a downloader middleware that drops or flags near-duplicate pages.

It sits below ``RetryMiddleware`` (550) by default (``MIDDLEWARE_PRIORITY``),
so ``process_response`` sees final responses: decompressed, after retries,
meta refreshes and redirects.

Conditional re-crawls (``SIMHASH_CONDITIONAL``, on with a store: ``SIMHASH_DIR``,
``JOBDIR`` or Redis): ``process_request`` sends the ``ETag`` / ``Last-Modified``
recorded for the request's identity as ``If-None-Match`` / ``If-Modified-Since``;
a 304 answer is checked again as it was recorded (``unchanged``, counted
``simhash/not_modified``).  It has no body, so it reaches the callback only where
the request or spider handles status 304 the usual Scrapy way
(``handle_httpstatus_list``, ``HTTPERROR_ALLOWED_CODES``, ...); elsewhere it
ends as ``NotModifiedPage`` (an ``IgnoreRequest``, as a page dropped as unchanged
does), never as an ``HttpError``.  Not sent: with Scrapy's HTTP cache on (it makes
its own conditional requests), for ``dont_filter`` requests, requests that carry
their own validators, non-GET requests, and ``meta["simhash_conditional"] = False``.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse
from scrapy.spidermiddlewares.depth import DepthMiddleware
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object
from scrapy.utils.response import get_base_url

from .backends import BackendError
from .core.analysis import SLOW_DEPTH, Analysis, analyse_html, analyse_tree, may_take_long, tree_may_take_long
from .core.deadline import TooSlow
from .core.redact import LOG_REDACTION, redact
from .core.ruling import Action, Ruling
from .core.cluster.representative import absolute, html_canonical, link_header_canonical, redirect_named
from .core.skip import media_type, skip_reason
from .core.extract.text import charset_of, shared_parse_usable
from .replay import DROPPED, SimhashReplayMiddleware, forced, keep, keeps, may_replay, refetch, replay
from .state import DedupState, Fetch

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = [
    "UnchangedPage", "EditedPage", "NotModifiedPage", "SimhashMiddleware", "NearDuplicate", "MIDDLEWARE_PRIORITY",
    "FLAG", "NOT_MODIFIED_FLAG"]

logger = logging.getLogger(__name__)
logger.addFilter(LOG_REDACTION)  # no password of a page URL in a log line (core.redact)

#: Default position in ``DOWNLOADER_MIDDLEWARES`` (below RetryMiddleware's 550).
MIDDLEWARE_PRIORITY = 540
#: Pages up to this size are fingerprinted from Scrapy's own parse (``response.selector``),
#: which the spider reuses; parsing takes ~15 ms per MB, acceptable on the event loop.
SHARED_PARSE_MAX_BYTES = 1024 * 1024
#: How much of the start of a page not parsed on the event loop is parsed for its rel=canonical tag.
CANONICAL_HEAD_BYTES = 64 * 1024
_BODY_TAG = re.compile(rb"<body[\s>/]", re.IGNORECASE)
#: Added to ``response.flags`` of a near-duplicate that goes on to the spider.
FLAG = "near-duplicate"
#: Added to ``response.flags`` of a 304 answer to a conditional re-crawl that goes on to the spider.
NOT_MODIFIED_FLAG = "not-modified"
#: ``request.meta`` key (internal) marking a request this middleware sent validators with: the scope of their record.
_SENT = "_simhash_validators"
_VALIDATORS = (b"If-None-Match", b"If-Modified-Since")
#: Answers that say a page the record knows is gone (``core.report.changes``).
GONE_STATUSES = (404, 410)


def _sent_scope(request: Request) -> str | None:
    """The scope whose record's validators ``request`` carries (``None``: none sent)."""
    scope = request.meta.get(_SENT)
    return scope if isinstance(scope, str) else None


class NearDuplicate(IgnoreRequest):
    """Raised (drop mode) for a near-duplicate page: the response never reaches the spider.

    Request errbacks receive it; ``url``, ``canonical_url`` and ``distance`` say which page it duplicates,
    ``rule`` which rule matched it, with k (``DedupState.describe_rule``); ``representative`` the
    cluster's representative URL after this page (``url`` itself when this page became it: an errback
    that wants that page can request it again with ``dont_filter=True``, which passes it flagged).
    """

    #: The cluster's representative URL after this page was checked (``None`` when not known).
    representative: str | None = None

    def __init__(self, url: str, canonical_url: str, distance: int, rule: str | None = None) -> None:
        super().__init__(redact(f"Near-duplicate of {canonical_url} ({rule or f'distance {distance}'}): {url}"))
        self.rule = rule
        self.url = url
        self.canonical_url = canonical_url
        self.distance = distance


class UnchangedPage(IgnoreRequest):
    """Raised for a re-crawled page whose content is unchanged, with ``SIMHASH_UNCHANGED = "drop"``."""

    def __init__(self, url: str) -> None:
        super().__init__(redact(f"Unchanged since the last crawl: {url}"))
        self.url = url


class EditedPage(IgnoreRequest):
    """Raised for a re-crawled page whose text was edited within k, with ``SIMHASH_EDITED = "drop"``."""

    def __init__(self, url: str) -> None:
        super().__init__(redact(f"Edited since the last crawl (within the distance limit): {url}"))
        self.url = url


class NotModifiedPage(UnchangedPage):
    """A 304 answer to a conditional re-crawl, for a request whose spider does not handle status 304
    (or with ``SIMHASH_UNCHANGED = "drop"``): it has no body, so it ends here, counted as unchanged."""

    def __init__(self, url: str) -> None:
        IgnoreRequest.__init__(self, redact(f"Not modified since the last crawl (HTTP 304): {url}"))
        self.url = url


class UncheckedPage(IgnoreRequest):
    """Raised for a page the dedup backend could not check while it is fail-closed.

    ``SIMHASH_REDIS_FAIL_OPEN = False``: pages nobody checked never reach the
    spider (counted as ``simhash/skipped/backend_error``; the spider is closing).
    """

    def __init__(self, url: str, error: str) -> None:
        super().__init__(redact(f"Not checked for near-duplicates (fail-closed backend error): {url}: {error}"))
        self.url = url


def _header(response: Response, name: bytes) -> str | None:
    """A response header as text (validators are kept verbatim), else ``None``."""
    raw = response.headers.get(name)
    return raw.decode("latin-1") if raw else None


def _canonical_link(response: Response, slow: bool | None = None) -> str | None:
    """The URL the page names as canonical: a ``Link: <…>; rel="canonical"`` header first, else the
    ``<link rel="canonical">`` tag of an HTML page, from the parse Scrapy shares with the spider.  A page
    that parse is not used for (over ``SHARED_PARSE_MAX_BYTES``, or whose analysis may take long: it is
    analysed off the event loop) is not parsed whole on the event loop for it: only its head is (up to its
    ``<body>`` tag, at most ``CANONICAL_HEAD_BYTES``), where the tag belongs.  ``slow``: ``may_take_long`` of
    the body when the caller has it (it counts the body's tags)."""
    values = [v.decode("latin-1") for v in response.headers.getlist(b"Link")]
    target = link_header_canonical(values) if values else None
    if target is not None:
        return absolute(target, response.url)
    if not isinstance(response, HtmlResponse):
        return None
    body = response.body
    if len(body) > SHARED_PARSE_MAX_BYTES or (may_take_long(body) if slow is None else slow):
        head = body[:CANONICAL_HEAD_BYTES]
        found = _BODY_TAG.search(head)
        response = response.replace(body=head[: found.start()] if found else head)
    return html_canonical(response.selector.root, get_base_url(response))


def _spider_middleware_enabled(crawler: Crawler, cls: type = DepthMiddleware) -> bool:
    try:
        for mw in build_component_list(crawler.settings.getwithbase("SPIDER_MIDDLEWARES")):
            found = load_object(mw) if isinstance(mw, str) else mw
            if isinstance(found, type) and issubclass(found, cls):
                return True
    except Exception:  # a broken entry is Scrapy's to report
        return False
    return False


class SimhashMiddleware:
    """Fingerprint each HTML response and drop (or flag) pages near an earlier one."""

    def __init__(self, state: DedupState, start_depth: int | None = None, crawler: Crawler | None = None) -> None:
        self.state = state
        self.config = state.config
        self.crawler = crawler
        settings = crawler.settings if crawler is not None else None
        #: Send validators: with a store kept across crawls (``SIMHASH_DIR``, ``JOBDIR``, Redis or a
        #: custom backend); Scrapy's HTTP cache makes its own conditional requests: then only for
        #: requests it does not cache (``meta["dont_cache"]``).
        config = state.config
        self.conditional = config.conditional and (config.persistent or config.backend != "memory")
        #: A record kept across crawls: a 404 / 410 of a page it knows is listed as gone.
        self.recurring = config.persistent or config.backend != "memory"
        self.http_cache = bool(settings is not None and settings.getbool("HTTPCACHE_ENABLED"))
        #: A 304 schedules again the requests its page yielded last time (``simhash_scrapy.replay``): only
        #: where ``SimhashReplayMiddleware`` keeps them (the add-on enables it); else a 304 ends there.
        self.replay = (
            self.conditional and config.replay and crawler is not None
            and _spider_middleware_enabled(crawler, SimhashReplayMiddleware)
        )  # fmt: skip
        #: Depth recorded for requests without meta["depth"]: 0 when DepthMiddleware
        #: is enabled (it sets "depth" on every request a callback yields, so such a
        #: request is a start request), else None (unknown).
        self.start_depth = start_depth

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashMiddleware:
        state = DedupState.for_crawler(crawler)
        return cls(state, start_depth=0 if _spider_middleware_enabled(crawler) else None, crawler=crawler)

    # ------------------------------------------------------- conditional re-crawls
    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        """Send the identity's recorded validators (see the module docstring); never answers the request."""
        meta = request.meta
        if meta.pop(_SENT, None):  # sent with an earlier try (retry, redirect): decided again
            for name in _VALIDATORS:
                request.headers.pop(name, None)
        state = self.state
        if (
            not self.conditional
            or not state.opened
            or state.error is not None
            or request.method != "GET"
            or request.dont_filter
            or (self.http_cache and not meta.get("dont_cache"))
            or meta.get("simhash_conditional", True) is False
            or meta.get("simhash_enabled", True) is False
            or any(name in request.headers for name in _VALIDATORS)
        ):
            return None
        scope, previous = await state.recorded(request)
        if previous is None or (previous.etag is None and previous.last_modified is None):
            return None
        sent = False
        for name, value in ((b"If-None-Match", previous.etag), (b"If-Modified-Since", previous.last_modified)):
            try:  # the bytes the server sent (kept as latin-1 text): not re-encoded as UTF-8 by Scrapy's Headers
                raw = value.encode("latin-1") if value is not None else None
            except UnicodeEncodeError:
                raw = None
            if raw:
                request.headers[name] = raw
                sent = True
        if not sent:
            return None
        meta[_SENT] = scope  # (a non-empty string) the 304 or 404 is judged where these validators came from
        state.inc("simhash/conditional")
        return None

    def _handles_304(self, request: Request, spider: Spider | None) -> bool:
        """Whether Scrapy's HttpErrorMiddleware lets a 304 through to this request's callback."""
        meta = request.meta
        if meta.get("handle_httpstatus_all", False):
            return True
        if "handle_httpstatus_list" in meta:
            return 304 in meta["handle_httpstatus_list"]
        if self.crawler is None:
            return False
        settings = self.crawler.settings
        if settings.getbool("HTTPERROR_ALLOW_ALL"):
            return True
        spider = spider if spider is not None else self.state.spider
        allowed = getattr(spider, "handle_httpstatus_list", None)
        if allowed is None:
            allowed = settings.getlist("HTTPERROR_ALLOWED_CODES")
        return 304 in allowed  # as HttpErrorMiddleware compares (a "304" string allows nothing there either)

    async def _not_modified(self, request: Request, response: Response, spider: Spider | None) -> Response | Request:
        """A 304 answer to our validators: the identity's record, checked again as it was (``unchanged``);
        with ``SIMHASH_REPLAY``, the requests its page yielded last time are scheduled again, or, when none
        were kept, the page is requested again without validators (``simhash_scrapy.replay``)."""
        state = self.state
        if self.replay and may_replay(state, request) and not await replay(state, self.crawler, request, response):
            state.inc("simhash/replay/refetched")
            return refetch(request, _VALIDATORS)
        try:
            ruling = await state.judge_again(
                self._fetch(request, response, passes_304=self._handles_304(request, spider)), _sent_scope(request)
            )
        except BackendError as exc:
            state.skip("backend_error")
            raise UncheckedPage(response.url, str(exc)) from None
        except Exception:
            # Not recorded, but still a 304: it goes where a 304 goes, never to the spider as an error.
            logger.exception(
                "simhash-scrapy: cannot record the 304 answer for %(url)s", {"url": response.url},
                extra={"spider": state.spider},
            )
            state.skip("error")
            request.meta["simhash_skipped"] = "error"
            request.meta["simhash_not_modified"] = True
            if not self._handles_304(request, spider):
                raise NotModifiedPage(response.url) from None
            return response
        request.meta["simhash_not_modified"] = True
        response = self._apply(request, response, ruling)
        if NOT_MODIFIED_FLAG not in response.flags:
            response.flags.append(NOT_MODIFIED_FLAG)
        return response

    def _skip_reason(self, request: Request, response: Response) -> str | None:
        if request.meta.get("simhash_enabled", True) is False:
            return "opted_out"
        config = self.config
        return skip_reason(
            response.status,
            media_type(response.headers.get(b"Content-Type")),
            response.body,
            config.http_statuses,
            config.content_types,
            config.max_bytes,
            html_class=isinstance(response, HtmlResponse),
        )

    async def _analyse(self, response: Response, slow: bool | None = None) -> Analysis:
        """Fingerprint a response; reuse Scrapy's own parse of it when that is cheap to share.

        The spider's ``response.css()`` / ``xpath()`` / link extractors parse the
        page through ``response.selector``, which Scrapy caches on the response.
        Parsing it here once, and fingerprinting a copy of that tree, saves a
        second parse of every page the spider also reads.  That work runs
        inline: the parse happens on the event loop anyway (the spider would
        do it there), and handing the rest to a thread measured slower
        (``benchmarks/crawl_overhead.py``).  Pages over
        ``SHARED_PARSE_MAX_BYTES`` (and HTML in non-HTML responses) are parsed
        by the plugin itself, in a worker thread when ``SIMHASH_THREADS`` is on,
        so they never block the event loop for long; so are pages whose analysis may
        take long (``core.analysis.may_take_long``: many tags, deep nesting), whatever their size.
        ``slow``: ``may_take_long(response.body)`` when the caller has it.
        """
        state = self.state
        body = response.body
        size = len(body)
        # What the library is given for these bytes: the HTTP charset (fingerprint_html(body, charset)).
        declared = charset_of(response.headers.get(b"Content-Type"))
        # Markup that may take long to analyse goes to a worker thread, never the shared parse.
        slow = may_take_long(body) if slow is None else slow
        if isinstance(response, HtmlResponse) and size <= SHARED_PARSE_MAX_BYTES and not slow:
            root = response.selector.root
            slow = tree_may_take_long(root)
            if not slow and shared_parse_usable(
                root, body, declared, response.encoding, response.text, depth_checked=SLOW_DEPTH
            ):
                # The raw bytes only serve ASCII-based hints; UTF-16/32 bodies get the full checks.
                raw = None if response.encoding.lower().replace("_", "-").startswith(("utf-16", "utf-32")) else body
                return analyse_tree(root, raw, state.page_analysis)
        return await state.run_analysis(analyse_html, body, declared, state.page_analysis, size=size, slow=slow)

    async def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response | Request:
        state = self.state
        meta = request.meta
        if response.status == 304 and meta.get(_SENT) and state.error is None:
            return await self._not_modified(request, response, spider)
        recurring = response.status in GONE_STATUSES and self.recurring and state.error is None
        if recurring and await state.page_gone(request, response, _sent_scope(request)):  # a page the record knows: listed as gone
            meta["simhash_gone"] = True
        reason = "unavailable" if state.error is not None else self._skip_reason(request, response)
        if reason is None:
            try:
                slow = may_take_long(response.body)  # (one count of the body's tags, for both)
                answer = await self._analyse(response, slow)
                reason = answer.skip_reason
                if reason is None:
                    fetch = self._fetch(request, response, canonical_link=self._canonical(request, response, slow))
                    ruling = await state.judge(fetch, answer)
            except BackendError as exc:
                # Fail-closed: the backend could not check the page, so it must not pass.
                state.skip("backend_error")
                logger.warning(
                    "simhash-scrapy: %(error)s; dropping %(url)s",
                    {"error": exc, "url": response.url},
                    extra={"spider": state.spider},
                )
                raise UncheckedPage(response.url, str(exc)) from None
            except TooSlow:
                state.log_cut(response.url)
                reason = "too_slow"
            except Exception:
                logger.exception(
                    "simhash-scrapy: cannot fingerprint %(url)s; the page goes on unchecked",
                    {"url": response.url},
                    extra={"spider": state.spider},
                )
                reason = "error"
        if reason is not None:
            state.skip(reason)
            meta["simhash_skipped"] = reason
            return response
        try:
            return self._apply(request, response, ruling)
        except IgnoreRequest:
            if self.replay and keeps(state, request, response):  # no callback sees it: it yields nothing
                await keep(state, request, response, DROPPED)
            raise

    def _fetch(self, request: Request, response: Response, canonical_link: str | None = None,
               passes_304: bool = True) -> Fetch:  # fmt: skip
        """What the state is given for a page: the request and response, with what this middleware reads
        from them (referer, depth, validators, the URL the page names as canonical)."""
        referer = request.headers.get(b"Referer")
        return Fetch(
            request,
            response,
            referer=referer.decode("utf-8", "replace") if referer else None,
            depth=request.meta.get("depth", self.start_depth),
            etag=_header(response, b"ETag"),
            last_modified=_header(response, b"Last-Modified"),
            canonical_link=canonical_link,
            forced=forced(request),
            passes_304=passes_304,
        )

    @staticmethod
    def _canonical(request: Request, response: Response, slow: bool) -> str | None:
        return _canonical_link(response, slow) or redirect_named(response.url, request.meta.get("redirect_urls") or ())

    def _apply(self, request: Request, response: Response, ruling: Ruling) -> Response:
        """Set the page's meta keys, then drop, flag or pass it, as the state's ruling says (``core.ruling``)."""
        meta = request.meta
        meta.update(ruling.meta)
        action = ruling.action
        if action is Action.DROP:
            verdict = ruling.verdict
            assert verdict.canonical_url is not None and verdict.distance is not None
            exc = NearDuplicate(response.url, verdict.canonical_url, verdict.distance, ruling.rule)
            exc.representative = ruling.representative
            raise exc
        if action is Action.FLAG and FLAG not in response.flags:
            response.flags.append(FLAG)
        elif action is Action.DROP_UNCHANGED:
            if meta.get("simhash_not_modified"):
                raise NotModifiedPage(response.url)
            raise UnchangedPage(response.url)
        elif action is Action.DROP_EDITED:
            raise EditedPage(response.url)
        return response
