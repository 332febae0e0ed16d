"""Dedup backends: the interface (``base``), the in-process default (``memory``).

``SIMHASH_BACKEND`` selects one: ``"memory"`` (default), ``"redis"``
(``simhash_scrapy.backends.redis.RedisBackend``) or the import path of a
``DedupBackend`` subclass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.misc import load_object

from .base import BackendError, ClusterMember, DedupBackend, PageRecord, Verdict

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ..config import SimhashConfig

__all__ = [
    "BackendError",
    "ClusterMember",
    "DedupBackend",
    "PageRecord",
    "Verdict",
    "BACKENDS",
    "create_backend",
]

#: ``SIMHASH_BACKEND`` aliases.
BACKENDS = {
    "memory": "simhash_scrapy.backends.memory.MemoryBackend",
    "redis": "simhash_scrapy.backends.redis.RedisBackend",
}


def create_backend(crawler: Crawler, config: SimhashConfig) -> DedupBackend:
    """Build the backend ``config.backend`` names (raises ``ValueError`` naming ``SIMHASH_BACKEND``)."""
    path = BACKENDS.get(config.backend, config.backend)
    if config.backend == "memory":
        # JOBDIR / SIMHASH_DIR: the in-process index, kept on disk (simhash_scrapy.backends.persistent).
        from .persistent import uses_persistence

        if uses_persistence(crawler.settings):
            path = "simhash_scrapy.backends.persistent.PersistentBackend"
    try:
        cls = load_object(path)
    except (ImportError, NameError, ValueError, AttributeError) as exc:
        hint = " (install the extra: pip install 'simhash-scrapy[redis]')" if config.backend == "redis" else ""
        raise ValueError(
            f"SIMHASH_BACKEND={config.backend!r}: cannot load {path!r}: {exc}{hint}; "
            f"use 'memory', 'redis' or the import path of a DedupBackend subclass"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, DedupBackend)):
        raise ValueError(
            f"SIMHASH_BACKEND={config.backend!r}: {path!r} is not a subclass of "
            f"simhash_scrapy.backends.DedupBackend"
        )
    return cls.from_crawler(crawler, config)
