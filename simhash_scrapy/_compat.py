"""Scrapy version flags, in one place (supported: Scrapy 2.13 to 2.19)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import scrapy
from packaging.version import Version

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

__all__ = [
    "SCRAPY_VERSION",
    "HAS_CLOSE_SPIDER_ASYNC",
    "CLOSE_SPIDER_FROM_OPENED",
    "looping_call",
    "close_spider_soon",
]

SCRAPY_VERSION = Version(scrapy.__version__)

#: ``ExecutionEngine.close_spider_async(reason=...)`` exists (2.14+); before,
#: ``ExecutionEngine.close_spider(spider, reason)`` (deprecated since 2.14).
HAS_CLOSE_SPIDER_ASYNC = SCRAPY_VERSION >= Version("2.14")

#: Raising ``CloseSpider`` from a ``spider_opened`` handler aborts the crawl
#: cleanly (2.18+); before, the exception is only logged.
CLOSE_SPIDER_FROM_OPENED = SCRAPY_VERSION >= Version("2.18")


def looping_call(func: Callable[[], object]) -> Any:
    """A looping call with ``start(interval, now=...)``, ``stop()`` and ``running``.

    2.14+: ``scrapy.utils.asyncio.create_looping_call`` (works without a
    Twisted reactor too); 2.13: Twisted's ``LoopingCall``.
    """
    try:
        from scrapy.utils.asyncio import create_looping_call
    except ImportError:
        from twisted.internet.task import LoopingCall

        return LoopingCall(func)
    return create_looping_call(func)


def close_spider_soon(crawler: Crawler, spider: Spider, reason: str) -> None:
    """Ask the engine to close the spider once it runs (Scrapy < 2.18).

    ``spider_opened`` comes before the engine starts; a close requested before
    ``engine.running`` ends in ``crawler.stop()`` -> "RuntimeError: Engine not
    running", logged with a traceback after the close.  So, while the crawl is
    starting, wait for the engine (it runs within a few event-loop turns; give
    up after about 1 s).  Outside a running crawl (tests) nothing waits.
    """
    from twisted.internet import reactor

    tries = [0]

    def close() -> None:
        engine = crawler.engine
        starting = engine is not None and not engine.running and getattr(crawler, "crawling", False) is True
        if starting and tries[0] < 100:
            tries[0] += 1
            reactor.callLater(0.01, close)  # type: ignore[arg-type]
            return
        if HAS_CLOSE_SPIDER_ASYNC:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason=reason))
        else:
            engine.close_spider(spider, reason)

    reactor.callLater(0, close)  # type: ignore[arg-type]
