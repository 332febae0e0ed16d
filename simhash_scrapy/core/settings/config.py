"""The typed configs built from the settings table (``core.settings.settings``): ``SimhashConfig`` and ``RedisConfig``.

``SimhashConfig.from_settings(settings)`` reads every setting of the table
whose ``field`` is one of its own (and ``RedisConfig.from_settings`` the
``redis.*`` ones) from a plain mapping or a Scrapy ``Settings`` object, then
checks what no single setting can (``SIMHASH_BLOCKS`` against
``SIMHASH_MAX_DISTANCE``, the CSS of ``SIMHASH_DISTINCT_SELECTORS``) and
derives ``SIMHASH_REPORT_FORMAT`` from the URI when it is not set.  A bad value
raises ``ValueError`` whose first line names the setting.  The field defaults
are the table's.

No Scrapy import: backends, commands and scripts build these from plain
mappings.  The Scrapy adapter (``simhash_scrapy.config``) adds what only a
crawl has: ``SIMHASH_ENABLED`` (``NotConfigured``), a relative ``SIMHASH_DIR``
under the project's ``.scrapy`` folder, the ``simhash_reset`` spider argument.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

from ..analysis import AnalysisOptions
from ..cluster.distinct import DistinctSelectors
from ..features.features import FeatureConfig
from ..index.index import MAX_TABLES, BlockPermutedIndex
from ..redact import redact, secrets_in
from .settings import REPORT_EXTENSION_FORMATS, SETTINGS, Lookup, setting_names, setting_of

__all__ = ["SimhashConfig", "RedisConfig", "report_format_for"]

def _default(name: str) -> Any:
    """The table's default of a config field (a dataclass field default)."""
    return setting_of(name).default


def _read(settings: Lookup, prefix: str) -> dict[str, Any]:
    """``{field: value}`` of the table's settings with a field ``prefix + name`` (``prefix``: "" or "redis.")."""
    values = {}
    for row in SETTINGS:
        if row.field is not None and row.field.startswith(prefix) and "." not in row.field[len(prefix):]:
            values[row.field[len(prefix):]] = row.read(settings)
    return values


#: An extension that names a file type (``.pdf``, ``.txt``, ``.xlsx``), as opposed to a dot in a name or in a
#: ``%(time)s`` value: a report written there in another format would be silently mislabelled.
_FILE_TYPE = re.compile(r"\.[a-z][a-z0-9]{0,4}")


def report_format_for(uri: str, setting: str = "SIMHASH_REPORT_URI") -> str:
    """The report format implied by ``uri``'s extension: ``jsonl`` when it has none; a ``ValueError``
    naming ``setting`` when it names another file type (``r.pdf`` would hold JSON Lines otherwise)."""
    path = urlparse(uri).path if "://" in uri else uri
    ext = posixpath.splitext(path.replace("\\", "/"))[1].lower()
    if ext in REPORT_EXTENSION_FORMATS:
        return REPORT_EXTENSION_FORMATS[ext]
    if _FILE_TYPE.fullmatch(ext):
        known = ", ".join(REPORT_EXTENSION_FORMATS)
        raise ValueError(
            f"{setting}: {uri!r} ends in {ext}, which is no report format: end the name with one of {known} "
            f"(JSON Lines, CSV, HTML), or name the format with SIMHASH_REPORT_FORMAT"
        )
    return "jsonl"


@dataclass(frozen=True)
class RedisConfig:
    """The Redis backend's settings (scrapy-redis names where they exist: ``REDIS_URL``, ...)."""

    url: str | None = _default("redis.url")
    host: str = _default("redis.host")
    port: int = _default("redis.port")
    params: Mapping[str, Any] = field(default_factory=lambda: dict(_default("redis.params")))
    key_template: str = _default("redis.key_template")
    persist: bool = _default("redis.persist")
    flush_on_start: bool = _default("redis.flush_on_start")
    ttl: float = _default("redis.ttl")
    fail_open: bool = _default("redis.fail_open")
    cluster: bool = _default("redis.cluster")
    heartbeat: float = _default("redis.heartbeat")
    capacity: int = _default("redis.capacity")
    shards: int = _default("redis.shards")
    table_blocks: int = _default("redis.table_blocks")
    bucket_bits: int = _default("redis.bucket_bits")
    global_cache: int = _default("redis.global_cache")
    bucket_cache: int = _default("redis.bucket_cache")
    module: bool | str = _default("redis.module")

    @property
    def secrets(self) -> tuple[str, ...]:
        """The passwords in the URL and ``REDIS_PARAMS`` (for ``core.redact.redact``)."""
        return secrets_in(self.url, self.params)

    def __repr__(self) -> str:
        # The dataclass repr with the passwords masked: a config printed anywhere (a traceback's
        # locals, a worker process's error, ``repr(SimhashConfig)``) never shows them.
        items = ", ".join(f"{f.name}={redact(getattr(self, f.name), self.secrets)!r}" for f in fields(self))
        return f"{type(self).__name__}({items})"

    def key(self, spider_name: str) -> str:
        """The key prefix of a spider (``SIMHASH_REDIS_KEY``)."""
        return self.key_template % {"spider": spider_name, "name": spider_name}

    def describe(self) -> str:
        """Where Redis is, for messages (the password masked)."""
        if self.url:
            return str(redact(self.url, self.secrets))
        return f"redis://{self.host}:{self.port}"

    @classmethod
    def from_settings(cls, settings: Lookup) -> RedisConfig:
        """The ``redis.*`` settings of the table read from ``settings`` (a mapping or Scrapy ``Settings``)."""
        return cls(**_read(settings, "redis."))

    @classmethod
    def of(cls, settings: RedisConfig | Lookup) -> RedisConfig:
        """``settings`` when it is a ``RedisConfig``, else the one read from it."""
        return settings if isinstance(settings, RedisConfig) else cls.from_settings(settings)


@lru_cache(maxsize=16)  # compiled once per list (the config stays picklable: nothing compiled is kept on it)
def _distinct_selectors(selectors: tuple[str, ...]) -> DistinctSelectors:
    """``SIMHASH_DISTINCT_SELECTORS`` translated as ``response.css`` does (parsel: ``::text``, ``::attr(x)``)."""
    from cssselect import SelectorError
    from parsel.csstranslator import HTMLTranslator

    name = setting_of("distinct_selectors").name
    translator = HTMLTranslator()
    xpaths = []
    for css in selectors:
        try:
            xpaths.append(translator.css_to_xpath(css))
        except (SelectorError, ValueError, TypeError) as exc:
            raise ValueError(
                f"{name}: {css!r} is not a valid CSS selector ({exc}); "
                f"give CSS selectors such as ['.price', '.sku', '[itemprop=sku]::attr(content)']"
            ) from None
    try:
        return DistinctSelectors(selectors, xpaths)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _check_blocks(max_distance: int, blocks: int | None) -> None:
    """``SIMHASH_BLOCKS`` must give an index layout for ``SIMHASH_MAX_DISTANCE``."""
    try:
        BlockPermutedIndex(max_distance, blocks)
    except ValueError as exc:
        raise ValueError(
            f"{setting_of('blocks').name}={blocks!r} does not fit {setting_of('max_distance').name}={max_distance}: "
            f"{exc} (accepted: None for the default layout, an integer from {max_distance + 1} to 64 with "
            f"C(blocks, max_distance) <= {MAX_TABLES} tables, or from {-(-(max_distance + 1) // 3)} to "
            f"{max_distance} (each block matched within max_distance // blocks <= 2 bits))"
        ) from None


@dataclass(frozen=True)
class SimhashConfig:
    """The validated settings of one crawler (the table, ``core.settings.settings``; docs: ``reference/settings.md``)."""

    action: str = _default("action")
    max_distance: int = _default("max_distance")
    blocks: int | None = _default("blocks")
    text_mode: str = _default("text_mode")
    word_ngram: int = _default("word_ngram")
    char_ngram: int = _default("char_ngram")
    weighting: str = _default("weighting")
    cjk_ngram: int = _default("cjk_ngram")
    min_tokens: int = _default("min_tokens")
    one_edit_below: int = _default("one_edit_below")
    max_bytes: int = _default("max_bytes")
    http_statuses: frozenset[int] = _default("http_statuses")
    content_types: frozenset[str] = _default("content_types")
    scope: str = _default("scope")
    #: ``SIMHASH_UNCHANGED``: what a re-crawl does with an unchanged page.
    unchanged: str = _default("unchanged")
    #: ``SIMHASH_EDITED``: what a re-crawl does with an edited page (other text, within k).
    edited: str = _default("edited")
    #: ``SIMHASH_CONDITIONAL``: send ``If-None-Match`` / ``If-Modified-Since`` on re-crawls.
    conditional: bool = _default("conditional")
    #: ``SIMHASH_REPLAY``: a 304 schedules the requests its page yielded when last downloaded.
    replay: bool = _default("replay")
    #: ``SIMHASH_TEMPLATES``: cross-page template learning (``core.cluster.sitetemplate``).
    templates: bool = _default("templates")
    #: ``SIMHASH_SECOND_SIMHASH``: a second, independent simhash as a verified query (``core.features.second``).
    second_simhash: bool = _default("second_simhash")
    #: ``SIMHASH_CONTAINMENT``: sentence sketches and the containment step (``core.cluster.containment``).
    containment: bool = _default("containment")
    #: ``SIMHASH_REPRESENTATIVE``: ``"best"`` or ``"first"`` (``core.cluster.representative``).
    representative: str = _default("representative")
    #: ``SIMHASH_KEEP_PER_CLUSTER``: the first N members of a cluster pass.
    keep_per_cluster: int = _default("keep_per_cluster")
    report_uri: str | None = _default("report_uri")
    report_format: str | None = _default("report_format")
    debug: bool = _default("debug")
    log_level: int = _default("log_level")
    item_field: str | None = _default("item_field")
    item_url_field: str = _default("item_url_field")
    item_format: str = _default("item_format")
    item_action: str = _default("item_action")
    backend: str = _default("backend")
    threads: bool = _default("threads")
    #: ``SIMHASH_DIR``: the folder of per-spider stores kept across crawls (in a crawl, a relative
    #: setting is resolved under the project's ``.scrapy`` folder by ``simhash_scrapy.config``), else ``None``.
    store_dir: str | None = _default("store_dir")
    #: ``JOBDIR`` (Scrapy's own setting): the job's folder, else ``None``.
    jobdir: str | None = _default("jobdir")
    #: ``SIMHASH_RESET`` (or the ``simhash_reset`` spider argument): start the store afresh.
    reset: bool = _default("reset")
    #: ``SIMHASH_FLUSH_INTERVAL``: seconds between writes of the store to the OS.
    flush_interval: float = _default("flush_interval")
    redis: RedisConfig = field(default_factory=RedisConfig)
    #: ``SIMHASH_URL_RULES*``: learned URL rules (``simhash_scrapy.urlrules``).
    url_rules: str = _default("url_rules")
    url_rules_min_support: int = _default("url_rules_min_support")
    url_rules_min_precision: float = _default("url_rules_min_precision")
    url_rules_explore: float = _default("url_rules_explore")
    url_rules_canonical: bool = _default("url_rules_canonical")
    #: ``SIMHASH_DISTINCT_SELECTORS``: CSS selectors whose text must also be equal (``core.cluster.distinct``).
    distinct_selectors: tuple[str, ...] = _default("distinct_selectors")
    #: ``SIMHASH_IDENTITY_SIGNALS``: pages declaring different identities are kept apart (``core.cluster.identity``).
    identity_signals: bool = _default("identity_signals")
    features: FeatureConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "features",
            FeatureConfig(
                word_ngram=self.word_ngram,
                char_ngram=self.char_ngram,
                weighting=self.weighting,
                cjk_ngram=self.cjk_ngram,
            ),
        )

    # ------------------------------------------------------------ derived
    @property
    def distinct(self) -> DistinctSelectors | None:
        """``SIMHASH_DISTINCT_SELECTORS`` compiled (``core.cluster.distinct``), or ``None`` when it lists none."""
        if not self.distinct_selectors:
            return None
        return _distinct_selectors(self.distinct_selectors)

    @property
    def main_content(self) -> bool:
        """``True`` when only the main content is fingerprinted (``SIMHASH_TEXT_MODE = "main"``)."""
        return self.text_mode == "main"

    @property
    def keep_text(self) -> bool:
        """Whether page texts are kept for the report (the HTML report shows diffs)."""
        return self.report_format == "html"

    @property
    def analysis(self) -> AnalysisOptions:
        """What ``core.analysis`` needs to fingerprint a page as this crawl does."""
        return AnalysisOptions(
            main_content=self.main_content,
            features=self.features,
            min_tokens=self.min_tokens,
            one_edit_below=self.one_edit_below,
            keep_text=self.keep_text,
            keep_source=self.templates,
            second=self.second_simhash,
            sketch=self.containment,
        )

    @property
    def persistent(self) -> bool:
        """Whether the in-process index is kept on disk (``SIMHASH_DIR`` or ``JOBDIR``)."""
        return self.store_dir is not None or self.jobdir is not None

    # ------------------------------------------------------------ parsing
    @classmethod
    def from_settings(cls, settings: Lookup) -> SimhashConfig:
        """Read and validate every setting of the table (a plain mapping or a Scrapy ``Settings`` object).

        Raises ``ValueError`` whose first line names the setting.  ``SIMHASH_ENABLED`` and what
        needs the Scrapy project are the adapter's (``simhash_scrapy.config.from_settings``).
        """
        values = _read(settings, "")
        _check_blocks(values["max_distance"], values["blocks"])
        if values["report_format"] is None and values["report_uri"]:
            values["report_format"] = report_format_for(str(values["report_uri"]))
        _distinct_selectors(values["distinct_selectors"])  # an invalid selector is an error now, not at the first page
        values["redis"] = RedisConfig.from_settings(settings)
        try:
            return cls(**values)
        except ValueError as exc:  # FeatureConfig: already checked above, kept as a safety net
            raise ValueError(f"{setting_names('features')}: {exc}") from None
