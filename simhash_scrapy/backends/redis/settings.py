"""The Redis backend's view of its settings: ``config.RedisConfig`` (the one settings layer) plus key naming."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.redact import redact

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from ...config import RedisConfig

__all__ = ["RedisSettings"]


class RedisSettings:
    """``RedisConfig`` (parsed once by ``config.py``) with the helpers the backend needs."""

    def __init__(self, settings: RedisConfig | BaseSettings | Mapping[str, Any]) -> None:
        from ...config import RedisConfig

        config = settings if isinstance(settings, RedisConfig) else RedisConfig.from_settings(settings)
        self.config = config
        self.url = config.url
        self.host = config.host
        self.port = config.port
        self.params: dict[str, Any] = dict(config.params)
        self.key_template = config.key_template
        self.persist = config.persist
        self.flush_on_start = config.flush_on_start
        self.ttl = config.ttl
        self.fail_open = config.fail_open
        self.cluster = config.cluster
        self.heartbeat = config.heartbeat
        self.capacity = config.capacity
        self.shards = config.shards
        #: The passwords of the URL and REDIS_PARAMS: masked in every message (``core.redact``).
        self.secrets = config.secrets

    def key(self, spider_name: str) -> str:
        return self.key_template % {"spider": spider_name, "name": spider_name}

    def describe(self) -> str:
        """Where Redis is, for messages (the password masked)."""
        if self.url:
            return redact(self.url, self.secrets)
        return f"redis://{self.host}:{self.port}"
