"""The Scrapy adapter of the settings table: a crawl's ``SimhashConfig``.

The settings themselves (names, types, parsers, defaults, documentation) are
one table, ``core.settings.settings.SETTINGS``, and the typed configs it builds are in
``core.settings.config`` (no Scrapy: backends and scripts build them from mappings).
This module adds what only a Scrapy crawl has:

* ``SIMHASH_ENABLED = False`` raises ``NotConfigured`` so Scrapy leaves the components out;
* a relative ``SIMHASH_DIR`` is resolved under the project's ``.scrapy`` folder (``data_path``),
  as Scrapy's own HTTP cache is;
* the ``simhash_reset`` spider argument (``-a simhash_reset=1``) is ``SIMHASH_RESET`` too.

Values may come from ``settings.py`` (Python objects) or from the command line
(``-s SIMHASH_MAX_DISTANCE=4``: strings), so numbers, booleans and lists are
accepted in both forms; a bad value raises ``ValueError`` whose first line
names the setting.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.project import data_path

from .core import defaults
from .core.settings.config import RedisConfig, SimhashConfig, report_format_for
from .core.settings.settings import (
    ACTIONS,
    ITEM_FORMATS,
    NAMES,
    REPORT_FORMATS,
    SCOPES,
    TEXT_MODES,
    UNCHANGED_ACTIONS,
    URL_RULES_MODES,
    Lookup,
    setting,
    unknown_settings,
)
from .core.settings.values import parse_bool

__all__ = [
    "from_settings",
    "from_crawler",
    "url_rules_mode",
    "SETTINGS",
    "unknown_settings",
    "SimhashConfig",
    "RedisConfig",
    "report_format_for",
    "UNCHANGED_ACTIONS",
    "DEFAULT_TEXT_MODE",
    "TEXT_MODES",
    "ACTIONS",
    "SCOPES",
    "REPORT_FORMATS",
    "ITEM_FORMATS",
    "URL_RULES_MODES",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_CONTENT_TYPES",
    "DEFAULT_HTTP_STATUSES",
]

#: Every ``SIMHASH_*`` setting simhash-scrapy reads: the names of the table (``core.settings.settings``).
SETTINGS = NAMES
DEFAULT_TEXT_MODE = defaults.TEXT_MODE
DEFAULT_MAX_BYTES = defaults.MAX_BYTES
DEFAULT_CONTENT_TYPES = defaults.CONTENT_TYPES
DEFAULT_HTTP_STATUSES = defaults.HTTP_STATUSES
#: The spider argument that is ``SIMHASH_RESET`` too (``scrapy crawl NAME -a simhash_reset=1``).
RESET_ARGUMENT = "simhash_reset"


def from_settings(settings: Lookup) -> SimhashConfig:
    """The crawl's ``SimhashConfig`` from a Scrapy ``Settings`` object (or a mapping).

    Raises ``NotConfigured`` when ``SIMHASH_ENABLED`` is false and ``ValueError`` (naming the
    setting) for a bad value.
    """
    if not enabled(settings):
        raise NotConfigured("simhash-scrapy is disabled (SIMHASH_ENABLED = False)")
    config = SimhashConfig.from_settings(settings)
    if config.store_dir is not None and not Path(config.store_dir).is_absolute():
        # Relative to the project's .scrapy folder, as Scrapy's own HTTP cache is.
        config = replace(config, store_dir=data_path(config.store_dir))
    return config


def from_crawler(crawler: Any) -> SimhashConfig:
    """``from_settings(crawler.settings)``, with the spider's ``simhash_reset`` argument (``-a simhash_reset=1``)."""
    config = from_settings(crawler.settings)
    value = getattr(getattr(crawler, "spider", None), RESET_ARGUMENT, None)
    if value is not None and not config.reset and parse_bool(f"-a {RESET_ARGUMENT}", value):
        config = replace(config, reset=True)
    return config


def enabled(settings: Lookup) -> bool:
    """``SIMHASH_ENABLED`` parsed (the add-on reads it too, to enable the state only when it is on)."""
    return bool(setting("SIMHASH_ENABLED").read(settings))


def url_rules_mode(settings: Lookup) -> str:
    """``SIMHASH_URL_RULES`` parsed: ``"off"``, ``"learn"`` or ``"skip"`` (the add-on reads it too, to add
    ``UrlRulesMiddleware`` only when rules are on; a bad value is the same error there)."""
    mode: str = setting("SIMHASH_URL_RULES").read(settings)
    return mode
