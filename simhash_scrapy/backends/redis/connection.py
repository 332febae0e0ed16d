"""Redis clients for simhash-scrapy (like scrapy-redis' ``connection`` module): plain or cluster.

``get_client(settings)`` builds a ``redis.asyncio`` client (``RedisCluster``
with ``SIMHASH_REDIS_CLUSTER``); ``get_sync_client(settings)`` the blocking
twin for scripts and benchmarks.  Retries use redis-py's own primitives: the
check script is never retried by the client (a retried check would find its
own page), reads are retried with ``Retry(ExponentialWithJitterBackoff)``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...core.redact import redact
from ..base import BackendError

__all__ = ["get_client", "get_sync_client", "read_retry", "probe_retry", "on_asyncio", "client_params"]


def _require() -> None:
    try:
        import redis  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendError("SIMHASH_BACKEND='redis' needs the redis package: pip install 'simhash-scrapy[redis]'") from exc


def client_params(settings: Any, asynchronous: bool = True) -> dict[str, Any]:
    """Client arguments from ``REDIS_PARAMS`` plus simhash-scrapy's fixed choices."""
    from redis.backoff import NoBackoff

    if asynchronous:
        from redis.asyncio.retry import Retry
    else:
        from redis.retry import Retry  # type: ignore[assignment]

    params: dict[str, Any] = {"socket_timeout": 10, "socket_connect_timeout": 5}
    params.update(settings.params)
    # scrapy-redis' defaults include retry_on_timeout, deprecated (and warned about) by redis-py 6+.
    params.pop("retry_on_timeout", None)
    # A sync client class from scrapy-redis cannot serve the asyncio event loop.
    params.pop("redis_cls", None)
    params["decode_responses"] = False
    params["retry"] = Retry(NoBackoff(), 0)
    if settings.cluster:
        params.pop("db", None)
    return params


def get_client(settings: Any) -> Any:
    """A ``redis.asyncio`` client (``RedisCluster`` when ``settings.cluster``), not connected yet."""
    _require()
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

    return _build(Redis, RedisCluster, settings, client_params(settings))


def get_sync_client(settings: Any) -> Any:
    """The blocking twin of ``get_client`` (benchmarks, scripts)."""
    _require()
    from redis import Redis
    from redis.cluster import RedisCluster

    return _build(Redis, RedisCluster, settings, client_params(settings, asynchronous=False))


def _build(plain: Any, cluster: Any, settings: Any, params: dict[str, Any]) -> Any:
    cls = cluster if settings.cluster else plain
    try:
        if settings.url:
            return cls.from_url(settings.url, **params)
        return cls(host=settings.host, port=settings.port, **params)
    except (TypeError, ValueError) as exc:
        # redis-py's own message names no setting ("Port could not be cast to integer value as 'x'").
        names = "SIMHASH_REDIS_URL / REDIS_URL or REDIS_PARAMS" if settings.url else "REDIS_HOST / REDIS_PORT or REDIS_PARAMS"
        raise ValueError(
            f"{names}: redis-py cannot make a client for {settings.describe()}: {redact(str(exc), settings.secrets)}"
        ) from None


def read_retry() -> Any:
    """Retry policy for reads (idempotent): 3 retries, jittered exponential back-off up to 1 s."""
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.exceptions import ConnectionError, TimeoutError

    # (redis's annotation names RedisError subclasses only; Retry catches any exception class.)
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), 3, supported_errors=(ConnectionError, TimeoutError, OSError))  # type: ignore[arg-type]


def probe_retry(heartbeat: float) -> Any:
    """Retry policy of the probe that waits for a lost Redis: forever, back-off capped at one heartbeat."""
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.exceptions import ConnectionError, TimeoutError

    return Retry(
        ExponentialWithJitterBackoff(base=min(0.05, heartbeat), cap=heartbeat), -1,
        supported_errors=(ConnectionError, TimeoutError, OSError),  # type: ignore[arg-type]
    )


def on_asyncio(coro: Any) -> Any:
    """Await ``coro`` (which uses redis.asyncio) from an asyncio task or a Twisted-driven coroutine.

    Scrapy runs component coroutines as asyncio tasks under the asyncio reactor;
    a coroutine driven by Twisted (``Deferred.fromCoroutine``) can only await
    Deferreds, so there the work becomes an asyncio task wrapped in a Deferred.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        coro.close()
        raise BackendError(
            "the Redis backend needs an asyncio event loop: use Scrapy's asyncio reactor (TWISTED_REACTOR = "
            "'twisted.internet.asyncioreactor.AsyncioSelectorReactor', the default since Scrapy 2.13)"
        ) from None
    if asyncio.current_task() is not None:
        return coro
    from twisted.internet.defer import Deferred

    return Deferred.fromFuture(asyncio.ensure_future(coro))
