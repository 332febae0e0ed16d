"""What the Redis backend does when Redis fails: count, log, fail open or closed, probe until it answers.

The first failed call marks Redis as down; checks then fail at once
(``UNCHECKED`` fail-open, ``BackendError`` and the spider closing fail-closed)
while a probe pings Redis with redis-py's ``Retry`` and
``ExponentialWithJitterBackoff`` (capped at one heartbeat).  When it answers,
stale pooled connections are dropped and checks go through again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ...core.redact import redact
from ..base import BackendError, Outcome, Verdict
from . import connection

__all__ = ["Outages", "ignore", "close_failure"]

logger = logging.getLogger("simhash_scrapy.backends.redis")


async def ignore(error: BaseException) -> None:
    """``Retry.call_with_retry``'s failure handler: the error is retried, nothing else to do."""


def close_failure(stats: Any, settings: Any, what: str, exc: BaseException, logged: bool) -> bool:
    """A read at close that Redis did not answer (``what``: ``members``, ``index_size``...): counted as
    ``simhash/redis/unread/<what>``, logged once a crawl (``logged``: already); returns ``True`` (logged)."""
    if stats is not None:
        stats.set_value(f"simhash/redis/unread/{what}", 1)
    if not logged:
        logger.error(
            "simhash: Redis at %s did not answer at close (%s: %s): %s not read; the report and "
            "simhash/index_size lack what Redis holds (see simhash/redis/unread/*)",
            settings.describe(), type(exc).__name__, redact(str(exc), settings.secrets), what,
        )
    return True


class Outages:
    """Mixin of ``RedisBackend``: needs ``settings``, ``stats``, ``crawler``, ``client`` and ``_closing_backend``."""

    settings: Any
    stats: Any
    crawler: Any
    client: Any
    #: ``True`` once ``RedisBackend.close`` started (it cancels the probe and waits for it).
    _closing_backend: bool

    def _init_outages(self) -> None:
        self._probe: asyncio.Task[None] | None = None
        self._closing = False
        self._down_since: float | None = None
        self._unchecked_in_outage = 0
        self._errors = 0
        self._last_error_log = 0.0
        self._close_logged = False

    def _log_close_failure(self, what: str, exc: BaseException) -> None:
        self._close_logged = close_failure(self.stats, self.settings, what, exc, self._close_logged)

    # ----------------------------------------------------------- outages
    @property
    def redis_down(self) -> bool:
        """``True`` from a failed call until the probe gets an answer from Redis again."""
        return self._down_since is not None

    def _mark_down(self, exc: BaseException) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            self._unchecked_in_outage = 0
            if not self._closing:
                self._probe = asyncio.get_running_loop().create_task(self._wait_for_redis())

    async def _wait_for_redis(self) -> None:
        """Ping Redis with back-off (capped at one heartbeat) until it answers, then let checks through."""
        retry = connection.probe_retry(self.settings.heartbeat)

        async def failed(error: BaseException) -> None:
            # ``close`` cancels this probe and waits for it, and the cancellation can be lost: a ping failing
            # in the loop turn of the cancel raises its error instead of CancelledError (redis-py's
            # ``asyncio.wait_for`` before Python 3.12, as in ``RedisBackend._beat``).  The Retry never gives
            # up, so without this the probe pinged on, and ``close`` waited, as long as Redis stayed down.
            if self._closing_backend:
                raise asyncio.CancelledError

        while True:
            try:
                await retry.call_with_retry(self.client.ping, failed)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - not a connection error (e.g. LOADING): ask again later
                await failed(exc)
                await asyncio.sleep(self.settings.heartbeat)
        pool = getattr(self.client, "connection_pool", None)
        if pool is not None:
            await pool.disconnect(inuse_connections=False)  # drop connections to the old server
        assert self._down_since is not None
        down = time.monotonic() - self._down_since
        logger.warning(
            "simhash: Redis at %s answers again after %.1f s; %d page(s) went unchecked meanwhile",
            self.settings.describe(), down, self._unchecked_in_outage,
        )
        self._down_since = None
        self._probe = None

    def _error(self, exc: BaseException) -> None:
        self._errors += 1
        if self.stats is not None:
            self.stats.inc_value("simhash/backend_errors")
        now = time.monotonic()
        if self._errors == 1 or now - self._last_error_log >= 10:
            self._last_error_log = now
            logger.error(
                "simhash: Redis error (%s: %s); %d error(s) so far. %s",
                type(exc).__name__, redact(str(exc), self.settings.secrets), self._errors,
                "Pages go through unchecked (fail-open; SIMHASH_REDIS_FAIL_OPEN = False stops the crawl instead)."
                if self.settings.fail_open
                else "Closing the spider (fail-closed: SIMHASH_REDIS_FAIL_OPEN = False).",
            )

    def _failed(self, exc: BaseException) -> Verdict:
        self._error(exc)
        if self._down_since is not None:
            self._unchecked_in_outage += 1
        if self.settings.fail_open:
            return Verdict(Outcome.UNCHECKED)
        self._stop_crawl()
        error = redact(str(exc), self.settings.secrets)
        raise BackendError(f"simhash: Redis error, page not checked (fail-closed): {error}")

    def _stop_crawl(self) -> None:
        """Fail-closed: close the spider rather than go on with pages nobody checked."""
        if self._closing or self.crawler is None or getattr(self.crawler, "spider", None) is None:
            return
        self._closing = True
        from ... import _compat

        _compat.close_spider_soon(self.crawler, self.crawler.spider, "simhash_backend_error")
