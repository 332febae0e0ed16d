"""The Redis backend's settings: ``core.settings.config.RedisConfig``, the one type (built from the settings table)."""

from __future__ import annotations

from typing import Any

from ...core.settings.config import RedisConfig

__all__ = ["RedisConfig", "RedisSettings"]


def RedisSettings(settings: RedisConfig | Any) -> RedisConfig:  # noqa: N802 - the name the benchmarks and older code use
    """The ``RedisConfig`` of ``settings`` (a Scrapy ``Settings`` object or a mapping), or ``settings`` itself
    when it is one already."""
    return RedisConfig.of(settings)
