"""The Redis backend's settings (moves into ``config.py`` as a typed sub-config on main)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["RedisSettings"]


def _get_bool(settings: Any, name: str, default: bool) -> bool:
    value = settings.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name} must be a boolean (True/False, 1/0), got {value!r}")


class RedisSettings:
    """The Redis backend's settings, read and validated once."""

    def __init__(self, settings: BaseSettings | Mapping[str, Any]) -> None:
        get = settings.get
        self.url: str | None = get("SIMHASH_REDIS_URL") or get("REDIS_URL") or None
        self.host: str = get("REDIS_HOST") or "localhost"
        port = get("REDIS_PORT") or 6379
        try:
            self.port = int(port)
        except (TypeError, ValueError):
            raise ValueError(f"REDIS_PORT must be a port number, got {port!r}") from None
        params = get("REDIS_PARAMS") or {}
        if isinstance(params, str):
            try:
                params = json.loads(params)
            except ValueError:
                raise ValueError(f"REDIS_PARAMS must be a dict (or JSON object), got {params!r}") from None
        if not isinstance(params, Mapping):
            raise ValueError(f"REDIS_PARAMS must be a dict of redis client arguments, got {params!r}")
        self.params: dict[str, Any] = dict(params)
        self.key_template: str = get("SIMHASH_REDIS_KEY") or "%(spider)s:simhash"
        try:
            self.key_template % {"spider": "x"}
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(
                f"SIMHASH_REDIS_KEY must be a string with %(spider)s, e.g. '%(spider)s:simhash', "
                f"got {self.key_template!r} ({exc})"
            ) from None
        # Same defaults as scrapy-redis' scheduler: without SCHEDULER_PERSIST the state is
        # deleted when the crawl ends; with SCHEDULER_FLUSH_ON_START it is deleted when it starts.
        self.persist = _get_bool(
            settings, "SIMHASH_REDIS_PERSIST", _get_bool(settings, "SCHEDULER_PERSIST", False)
        )
        self.flush_on_start = _get_bool(
            settings, "SIMHASH_REDIS_FLUSH_ON_START", _get_bool(settings, "SCHEDULER_FLUSH_ON_START", False)
        )
        ttl = get("SIMHASH_REDIS_TTL")
        try:
            self.ttl = 0.0 if ttl in (None, "", "None", "none") else float(ttl)
        except (TypeError, ValueError):
            self.ttl = -1.0
        if not self.ttl >= 0:
            raise ValueError(f"SIMHASH_REDIS_TTL must be a number of seconds >= 0 (0: keys never expire), got {ttl!r}")
        self.fail_open = _get_bool(settings, "SIMHASH_REDIS_FAIL_OPEN", True)
        self.cluster = _get_bool(settings, "SIMHASH_REDIS_CLUSTER", False)
        heartbeat = get("SIMHASH_REDIS_HEARTBEAT")
        try:
            self.heartbeat = 1.0 if heartbeat in (None, "") else float(heartbeat)
        except (TypeError, ValueError):
            self.heartbeat = -1.0
        if not 0.05 <= self.heartbeat <= 60:
            raise ValueError(f"SIMHASH_REDIS_HEARTBEAT must be a number of seconds from 0.05 to 60, got {heartbeat!r}")
        capacity = get("SIMHASH_REDIS_CAPACITY")
        try:
            self.capacity = 10_000_000 if capacity in (None, "") else int(capacity)
        except (TypeError, ValueError):
            self.capacity = 0
        if self.capacity < 1:
            raise ValueError(f"SIMHASH_REDIS_CAPACITY must be a positive number of pages per scope, got {capacity!r}")

    def key(self, spider_name: str) -> str:
        return self.key_template % {"spider": spider_name, "name": spider_name}

    def describe(self) -> str:
        from .connection import redact

        if self.url:
            return redact(self.url)
        return f"redis://{self.host}:{self.port}"
