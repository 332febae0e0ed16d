"""The Redis backend (``SIMHASH_BACKEND = "redis"``), shared by every worker of a distributed crawl.

Modules: ``connection`` (clients, retries), ``settings``, ``layout`` (key
layout and binary formats), ``replica`` (a worker's local copy of the
canonical log), ``export`` (members, counts, flush), ``backend``
(``RedisBackend``), and the Lua scripts ``*.lua`` (package data).
"""

from __future__ import annotations

from typing import Any

from ...core.settings.config import RedisConfig, SimhashConfig
from .backend import RedisBackend
from .layout import Keys, layout_string
from .settings import RedisSettings

__all__ = ["RedisBackend", "RedisConfig", "RedisSettings", "Keys", "layout_string", "read_members"]


async def read_members(settings: Any, spider_name: str) -> list[Any]:
    """Every page recorded under a spider's Redis key (for ``scrapy simhash report`` and scripts).

    Reads only: it neither registers as a worker nor flushes anything.  A failed read raises.
    """
    backend = RedisBackend(SimhashConfig(), RedisConfig.of(settings))
    await backend.attach(spider_name)
    try:
        return await backend.read_members()
    finally:
        await backend.close()
