"""Replayed requests: a page answered 304 yields again the requests it yielded when last downloaded.

A conditional re-crawl (``SIMHASH_CONDITIONAL``) gets 304 answers with no body, so without help the crawl
stops at the first 304s: their links are never followed.  With ``SIMHASH_REPLAY`` (on by default):

* ``SimhashReplayMiddleware``, a spider middleware placed last before the engine (``REPLAY_PRIORITY``, after
  Scrapy's depth, referer and URL-length middlewares and the project's own), sees the requests a downloaded
  page's callback yielded, as the engine receives them.  For a page that may be answered 304 next time (it
  came with an ``ETag`` or ``Last-Modified``, and its request would carry them), it keeps them by the page's
  identity: serialised as Scrapy's disk queues do (``Request.to_dict``, callbacks by name; pickled, zlib),
  in ``<store>.replay`` (``backends.replay_file``) or in Redis (``load_replay`` / ``save_replay``).  A request
  that cannot be serialised (a callback that is not a spider method) is not kept, nor are the others of that
  page: ``simhash/replay/unserialisable``; the next 304 of that page then asks for the page again.
* ``SimhashMiddleware`` (the downloader middleware), on a 304 answer to its validators, loads them and
  schedules them again (``crawler.engine.crawl``: the scheduler's duplicate filter applies, as to any
  request), depth recounted from the 304's depth (``DEPTH_LIMIT`` applies).  A 304 whose requests were not
  kept (a page recorded before, a damaged row) is requested again without validators
  (``simhash/replay/refetched``), so nothing is lost: at worst a page is downloaded.

Items are not replayed: a 304 gives no items, as before (``SIMHASH_UNCHANGED``).
"""

from __future__ import annotations

import logging
import pickle
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.request import request_from_dict

from .backends.replay_file import ReplayFileError
from .core.redact import LOG_REDACTION
from .state import DedupState

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["DROPPED", "REFETCH", "keep", "keeps", "REPLAY_PRIORITY", "forced", "refetch", "replay", "SimhashReplayMiddleware", "decode_requests", "encode_requests", "may_replay"]

logger = logging.getLogger(__name__)
logger.addFilter(LOG_REDACTION)  # no password of a page URL in a log line (core.redact)

#: Default position in ``SPIDER_MIDDLEWARES``: after every built-in one (the start middleware is 25,
#: HttpErrorMiddleware 50), so the requests kept are the ones the engine received.
REPLAY_PRIORITY = 10
#: First byte of a replay blob (its format).
_VERSION = b"\x01"
#: The blob of a page the downloader middleware dropped (a near-duplicate in drop mode, ``SIMHASH_UNCHANGED =
#: "drop"``): it reached no callback, so a 304 of it replays nothing.
DROPPED = b"\x00"
#: ``request.meta`` key (internal) of a page requested again without validators after a 304 whose requests
#: were not kept: it is ``dont_filter`` (the duplicate filter saw it), but decided as the request it replaces.
REFETCH = "_simhash_refetch"


def forced(request: Request) -> bool:
    """Whether the user asked for this page whatever happened before (``dont_filter``, not a refetch)."""
    return request.dont_filter and not request.meta.get(REFETCH)


def refetch(request: Request, validators: Iterable[bytes]) -> Request:
    """``request`` again, without validators, past the duplicate filter (see ``REFETCH``)."""
    again = request.replace(dont_filter=True)
    for name in validators:
        again.headers.pop(name, None)
    again.meta[REFETCH] = True
    return again


def encode_requests(requests: list[Request], spider: Spider | None) -> bytes | None:
    """The blob kept for a page: its requests as ``Request.to_dict`` dicts, or ``None`` when one cannot be."""
    try:
        dicts = [request.to_dict(spider=spider) for request in requests]
        return _VERSION + zlib.compress(pickle.dumps(dicts, protocol=4), 6)
    except (ValueError, TypeError, AttributeError, pickle.PicklingError):
        return None


def decode_requests(data: bytes, spider: Spider | None) -> list[Request]:
    """The requests of a blob (``ValueError`` when it is not one, or a callback is gone from the spider)."""
    if not data.startswith(_VERSION):
        raise ValueError("unknown replay blob format")
    try:
        dicts = pickle.loads(zlib.decompress(data[1:]))  # noqa: S301 - our own file, as Scrapy's JOBDIR queues
        return [request_from_dict(d, spider=spider) for d in dicts]
    except (zlib.error, pickle.UnpicklingError, EOFError, AttributeError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read the kept requests: {exc}") from None


def may_replay(state: DedupState, request: Request, forced_too: bool = False) -> bool:
    """Whether a 304 answer to ``request`` could be given (the middleware would send validators); ``forced_too``:
    or to a later request of the same page (a ``dont_filter`` start page, linked from other pages)."""
    meta = request.meta
    return (
        state.config.replay
        and request.method == "GET"
        and (forced_too or not forced(request))
        and meta.get("simhash_conditional", True) is not False
        and meta.get("simhash_enabled", True) is not False
    )


def keeps(state: DedupState, request: Request, response: Response) -> bool:
    """Whether the requests ``response`` yields are kept: a fingerprinted page that may be answered 304."""
    if response.status == 304 or state.error is not None or request.meta.get("simhash") is None:
        return False
    if not (response.headers.get(b"ETag") or response.headers.get(b"Last-Modified")):
        return False
    return may_replay(state, request, forced_too=True)


async def keep(state: DedupState, request: Request, response: Response, data: bytes) -> None:
    """Keep a page's blob (``encode_requests``, ``DROPPED``); a failure is logged (it costs a download)."""
    try:
        await state.save_replay(request, response.url, data)
    except Exception as exc:  # noqa: BLE001 - a lost blob only costs a download next time
        logger.warning("simhash: cannot keep the requests of %s: %s", response.url, exc,
                       extra={"spider": state.spider})  # fmt: skip
        return
    state.inc("simhash/replay/kept")


class SimhashReplayMiddleware:
    """Keep the requests a downloaded page yielded, for a later 304 of that page (see the module docstring)."""

    def __init__(self, state: DedupState, crawler: Crawler | None = None) -> None:
        self.state = state
        self.crawler = crawler
        config = state.config
        self.enabled = config.replay and config.conditional and (config.persistent or config.backend != "memory")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashReplayMiddleware:
        return cls(DedupState.for_crawler(crawler), crawler)

    def _keeps(self, response: Response) -> bool:
        request = getattr(response, "request", None)
        return self.enabled and request is not None and keeps(self.state, request, response)

    async def _keep(self, response: Response, requests: list[Request]) -> None:
        state = self.state
        spider = self.crawler.spider if self.crawler is not None else state.spider
        data = encode_requests(requests, spider)
        if data is None:
            state.inc("simhash/replay/unserialisable")
            data = b""  # an empty blob: a 304 of this page asks for it again
        assert response.request is not None  # (_keeps)
        await keep(state, response.request, response, data)

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Spider | None = None) -> Iterator[Any]:
        if not self._keeps(response):
            yield from result
            return
        requests: list[Request] = []
        for entry in result:
            if isinstance(entry, Request):
                requests.append(entry)
            yield entry
        from scrapy.utils.defer import deferred_from_coro

        deferred_from_coro(self._keep(response, requests))

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        if not self._keeps(response):
            async for entry in result:
                yield entry
            return
        requests: list[Request] = []
        async for entry in result:
            if isinstance(entry, Request):
                requests.append(entry)
            yield entry
        await self._keep(response, requests)


async def replay(state: DedupState, crawler: Crawler | None, request: Request, response: Response) -> bool:
    """Schedule again the requests kept for the page of a 304 answer; ``False`` when none are kept."""
    spider = crawler.spider if crawler is not None else state.spider
    try:
        data = await state.load_replay(request, response.url)
        requests = decode_requests(data, spider) if data and data != DROPPED else None
    except (ReplayFileError, ValueError) as exc:
        state.inc("simhash/replay/damaged")
        logger.error("simhash: %s; %s is requested again", exc, response.url, extra={"spider": state.spider})
        return False
    except Exception as exc:  # noqa: BLE001 - a backend that cannot answer now (Redis): the page is downloaded
        logger.warning("simhash: cannot read the requests kept for %s (%s); it is requested again", response.url,
                       exc, extra={"spider": state.spider})  # fmt: skip
        return False
    if data == DROPPED:  # dropped last time: it reached no callback, so it yielded nothing
        state.inc("simhash/replay/pages")
        return True
    if requests is None or crawler is None or crawler.engine is None:
        return False
    settings = crawler.settings
    depth = request.meta.get("depth")
    limit = settings.getint("DEPTH_LIMIT")
    scheduled = 0
    for replayed in requests:
        if "depth" in replayed.meta and depth is not None:
            replayed.meta["depth"] = depth + 1
            if limit and depth + 1 > limit:
                continue
        crawler.engine.crawl(replayed)
        scheduled += 1
    state.inc("simhash/replay/pages")
    state.inc("simhash/replay/requests", scheduled)
    return True
