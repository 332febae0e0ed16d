"""``SimhashConfig``: every ``SIMHASH_*`` setting, read and validated once.

``SimhashConfig.from_settings(settings)`` is called once per crawler (by the
shared dedup state).  A bad value raises ``ValueError`` whose message names the
setting, the value and the accepted values; ``SIMHASH_ENABLED = False`` raises
``NotConfigured`` so Scrapy leaves the components out.

Values may come from ``settings.py`` (Python objects) or from the command line
(``-s SIMHASH_MAX_DISTANCE=4``: strings), so numbers, booleans and lists are
accepted in both forms.
"""

from __future__ import annotations

import difflib
import json
import logging
import posixpath
from pathlib import Path
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

from scrapy.exceptions import NotConfigured
from scrapy.utils.project import data_path

from ._values import (
    parse_bool,
    parse_choice,
    parse_folder,
    parse_fraction,
    parse_int,
    parse_list,
    parse_log_level,
    parse_number,
    parse_optional_str,
)
from .backends import BACKENDS
from .core import defaults
from .core.analysis import AnalysisOptions
from .core.distinct import DistinctSelectors
from .core.edits import MAX_KEYS as MAX_EDIT_KEYS
from .core.features import WEIGHTINGS, FeatureConfig
from .core.index import MAX_TABLES, BlockPermutedIndex
from .core.redact import redact, secrets_in
from .core.representative import REPRESENTATIVES

__all__ = [
    "SETTINGS",
    "unknown_settings",
    "SimhashConfig",
    "RedisConfig",
    "UNCHANGED_ACTIONS",
    "DEFAULT_TEXT_MODE",
    "TEXT_MODES",
    "ACTIONS",
    "SCOPES",
    "REPORT_FORMATS",
    "ITEM_FORMATS",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_CONTENT_TYPES",
    "DEFAULT_HTTP_STATUSES",
]

#: Default of ``SIMHASH_TEXT_MODE`` (defined in ``core.defaults``).
DEFAULT_TEXT_MODE = defaults.TEXT_MODE
TEXT_MODES = ("main", "visible")
ACTIONS = ("drop", "flag")
SCOPES = ("spider", "domain")
REPORT_FORMATS = ("jsonl", "csv", "html")
ITEM_FORMATS = ("auto", "html", "text")
UNCHANGED_ACTIONS = ("pass", "drop_items", "drop")
URL_RULES_MODES = ("off", "learn", "skip")
DEFAULT_MAX_BYTES = defaults.MAX_BYTES
DEFAULT_CONTENT_TYPES = defaults.CONTENT_TYPES
DEFAULT_HTTP_STATUSES = defaults.HTTP_STATUSES
#: The URL schemes redis-py accepts.
_REDIS_SCHEMES = ("redis", "rediss", "unix")
# Report file extension -> format, used when SIMHASH_REPORT_FORMAT is not set.
_EXTENSION_FORMATS = {".jsonl": "jsonl", ".jl": "jsonl", ".json": "jsonl", ".csv": "csv", ".html": "html", ".htm": "html"}


#: Every ``SIMHASH_*`` setting simhash-scrapy reads (README, "Settings"): the one list the
#: start-up check of unknown names (``unknown_settings``) and the tests compare against.
SETTINGS = (
    "SIMHASH_ENABLED", "SIMHASH_ACTION", "SIMHASH_MAX_DISTANCE", "SIMHASH_BLOCKS", "SIMHASH_TEXT_MODE",
    "SIMHASH_WORD_NGRAM", "SIMHASH_CHAR_NGRAM", "SIMHASH_WEIGHTING", "SIMHASH_CJK_NGRAM", "SIMHASH_MIN_TOKENS",
    "SIMHASH_ONE_EDIT_BELOW", "SIMHASH_MAX_BYTES", "SIMHASH_HTTP_STATUSES", "SIMHASH_CONTENT_TYPES",
    "SIMHASH_SCOPE", "SIMHASH_UNCHANGED", "SIMHASH_EDITED", "SIMHASH_CONDITIONAL", "SIMHASH_TEMPLATES", "SIMHASH_SECOND_SIMHASH", "SIMHASH_REPORT_URI", "SIMHASH_REPORT_FORMAT", "SIMHASH_DEBUG",
    "SIMHASH_LOG_LEVEL", "SIMHASH_ITEM_FIELD", "SIMHASH_ITEM_URL_FIELD", "SIMHASH_ITEM_FORMAT",
    "SIMHASH_ITEM_ACTION", "SIMHASH_BACKEND", "SIMHASH_THREADS", "SIMHASH_DIR", "SIMHASH_RESET",
    "SIMHASH_FLUSH_INTERVAL", "SIMHASH_REDIS_URL", "SIMHASH_REDIS_KEY", "SIMHASH_REDIS_PERSIST",
    "SIMHASH_REDIS_FLUSH_ON_START", "SIMHASH_REDIS_TTL", "SIMHASH_REDIS_FAIL_OPEN", "SIMHASH_REDIS_CLUSTER",
    "SIMHASH_REDIS_HEARTBEAT", "SIMHASH_REDIS_CAPACITY", "SIMHASH_REDIS_SHARDS", "SIMHASH_URL_RULES",
    "SIMHASH_URL_RULES_MIN_SUPPORT", "SIMHASH_URL_RULES_MIN_PRECISION", "SIMHASH_URL_RULES_EXPLORE",
    "SIMHASH_URL_RULES_CANONICAL", "SIMHASH_DISTINCT_SELECTORS", "SIMHASH_REPRESENTATIVE", "SIMHASH_KEEP_PER_CLUSTER",
)


def unknown_settings(names: Any) -> list[tuple[str, str | None]]:
    """The ``SIMHASH_*`` names among ``names`` that simhash-scrapy does not read, each with the closest
    known one (``difflib``; ``None`` when none is close), sorted by name.

    A typo is otherwise silently ignored (Scrapy keeps any setting name).  A warning, not an
    error: Scrapy itself accepts unknown names, and another plugin may use the prefix too.
    """
    prefix = "SIMHASH_"
    unknown = []
    for name in sorted({n for n in names if isinstance(n, str) and n.startswith(prefix)}):
        if name not in SETTINGS:
            # Compared without the prefix every name shares (it would make any two names look close).
            close = difflib.get_close_matches(name[len(prefix):], [s[len(prefix):] for s in SETTINGS], n=1, cutoff=0.6)
            unknown.append((name, prefix + close[0] if close else None))
    return unknown


def url_rules_mode(settings: Any) -> str:
    """``SIMHASH_URL_RULES`` parsed: ``"off"``, ``"learn"`` or ``"skip"`` (the add-on reads it too, to add
    ``UrlRulesMiddleware`` only when rules are on; a bad value is the same error there)."""
    value = settings.get("SIMHASH_URL_RULES")
    return parse_choice("SIMHASH_URL_RULES", defaults.URL_RULES if value is None else value, URL_RULES_MODES)


def report_format_for(uri: str) -> str:
    """The report format implied by ``uri``'s extension (``jsonl`` when there is none we know)."""
    path = urlparse(uri).path if "://" in uri else uri
    ext = posixpath.splitext(path.replace("\\", "/"))[1].lower()
    return _EXTENSION_FORMATS.get(ext, "jsonl")


@dataclass(frozen=True)
class RedisConfig:
    """The Redis backend's settings (scrapy-redis names where they exist: ``REDIS_URL``, ...)."""

    url: str | None = None
    host: str = defaults.REDIS_HOST
    port: int = defaults.REDIS_PORT
    params: Mapping[str, Any] = field(default_factory=dict)
    key_template: str = defaults.REDIS_KEY
    persist: bool = False
    flush_on_start: bool = False
    ttl: float = defaults.REDIS_TTL
    fail_open: bool = defaults.REDIS_FAIL_OPEN
    cluster: bool = False
    heartbeat: float = defaults.REDIS_HEARTBEAT
    capacity: int = defaults.REDIS_CAPACITY
    shards: int = defaults.REDIS_SHARDS

    @property
    def secrets(self) -> tuple[str, ...]:
        """The passwords in the URL and ``REDIS_PARAMS`` (for ``core.redact.redact``)."""
        return secrets_in(self.url, self.params)

    def __repr__(self) -> str:
        # The dataclass repr with the passwords masked: a config printed anywhere (a traceback's
        # locals, a worker process's error, ``repr(SimhashConfig)``) never shows them.
        items = ", ".join(f"{f.name}={redact(getattr(self, f.name), self.secrets)!r}" for f in fields(self))
        return f"{type(self).__name__}({items})"

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | Any) -> RedisConfig:
        get = settings.get
        url = get("SIMHASH_REDIS_URL") or get("REDIS_URL") or None
        if url is not None and not isinstance(url, str):
            raise ValueError(f"SIMHASH_REDIS_URL / REDIS_URL must be a redis:// URL, got {redact(repr(url))}")
        if url is not None and urlparse(url.strip()).scheme.lower() not in _REDIS_SCHEMES:
            # redis-py's own error names no setting ("Redis URL must specify one of the following schemes").
            name = "SIMHASH_REDIS_URL" if get("SIMHASH_REDIS_URL") else "REDIS_URL"
            raise ValueError(
                f"{name} must be a redis://, rediss:// or unix:// URL (e.g. redis://localhost:6379/0), "
                f"got {redact(repr(url))}"
            )
        port_value = get("REDIS_PORT") or defaults.REDIS_PORT
        try:
            port = int(port_value)
        except (TypeError, ValueError):
            raise ValueError(f"REDIS_PORT must be a port number, got {port_value!r}") from None
        params = get("REDIS_PARAMS") or {}
        if isinstance(params, str):
            try:
                params = json.loads(params)
            except ValueError:
                raise ValueError(f"REDIS_PARAMS must be a dict (or JSON object), got {redact(repr(params))}") from None
        if not isinstance(params, Mapping):
            raise ValueError(f"REDIS_PARAMS must be a dict of redis client arguments, got {redact(repr(params))}")
        key_template = get("SIMHASH_REDIS_KEY") or defaults.REDIS_KEY
        try:
            key_template % {"spider": "x"}
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(
                f"SIMHASH_REDIS_KEY must be a string with %(spider)s, e.g. '%(spider)s:simhash', "
                f"got {key_template!r} ({exc})"
            ) from None
        # Same defaults as scrapy-redis' scheduler: without SCHEDULER_PERSIST the state is
        # deleted when the crawl ends; with SCHEDULER_FLUSH_ON_START it is deleted when it starts.
        persist = parse_bool("SIMHASH_REDIS_PERSIST", get("SIMHASH_REDIS_PERSIST"),
                        parse_bool("SCHEDULER_PERSIST", get("SCHEDULER_PERSIST")))
        flush_on_start = parse_bool("SIMHASH_REDIS_FLUSH_ON_START", get("SIMHASH_REDIS_FLUSH_ON_START"),
                               parse_bool("SCHEDULER_FLUSH_ON_START", get("SCHEDULER_FLUSH_ON_START")))
        ttl_value = get("SIMHASH_REDIS_TTL")
        try:
            ttl = parse_number("SIMHASH_REDIS_TTL", ttl_value, defaults.REDIS_TTL)
        except ValueError:
            raise ValueError(
                f"SIMHASH_REDIS_TTL must be a number of seconds >= 0 (0: keys never expire), got {ttl_value!r}"
            ) from None
        return cls(
            url=url,
            host=get("REDIS_HOST") or defaults.REDIS_HOST,
            port=port,
            params=dict(params),
            key_template=key_template,
            persist=persist,
            flush_on_start=flush_on_start,
            ttl=ttl,
            fail_open=parse_bool("SIMHASH_REDIS_FAIL_OPEN", get("SIMHASH_REDIS_FAIL_OPEN"), defaults.REDIS_FAIL_OPEN),
            cluster=parse_bool("SIMHASH_REDIS_CLUSTER", get("SIMHASH_REDIS_CLUSTER")),
            heartbeat=_redis_heartbeat(get("SIMHASH_REDIS_HEARTBEAT")),
            capacity=parse_int("SIMHASH_REDIS_CAPACITY", get("SIMHASH_REDIS_CAPACITY", defaults.REDIS_CAPACITY), 1),
            shards=parse_int("SIMHASH_REDIS_SHARDS", get("SIMHASH_REDIS_SHARDS", defaults.REDIS_SHARDS), 1, 1024),
        )


def _redis_heartbeat(value: Any) -> float:
    heartbeat = parse_number("SIMHASH_REDIS_HEARTBEAT", value, defaults.REDIS_HEARTBEAT, 0.05)
    if heartbeat > 60:
        raise ValueError(f"SIMHASH_REDIS_HEARTBEAT must be a number of seconds from 0.05 to 60, got {value!r}")
    return heartbeat


@lru_cache(maxsize=16)  # compiled once per list (the config stays picklable: nothing compiled is kept on it)
def _distinct_selectors(selectors: tuple[str, ...]) -> DistinctSelectors:
    """``SIMHASH_DISTINCT_SELECTORS`` translated as ``response.css`` does (parsel: ``::text``, ``::attr(x)``)."""
    from cssselect import SelectorError
    from parsel.csstranslator import HTMLTranslator

    translator = HTMLTranslator()
    xpaths = []
    for css in selectors:
        try:
            xpaths.append(translator.css_to_xpath(css))
        except (SelectorError, ValueError, TypeError) as exc:
            raise ValueError(
                f"SIMHASH_DISTINCT_SELECTORS: {css!r} is not a valid CSS selector ({exc}); "
                f"give CSS selectors such as ['.price', '.sku', '[itemprop=sku]::attr(content)']"
            ) from None
    try:
        return DistinctSelectors(selectors, xpaths)
    except ValueError as exc:
        raise ValueError(f"SIMHASH_DISTINCT_SELECTORS: {exc}") from None


@dataclass(frozen=True)
class SimhashConfig:
    """The validated ``SIMHASH_*`` settings of one crawler (README, "Settings")."""

    action: str = defaults.ACTION
    max_distance: int = defaults.MAX_DISTANCE
    blocks: int | None = defaults.BLOCKS
    text_mode: str = defaults.TEXT_MODE
    word_ngram: int = defaults.WORD_NGRAM
    char_ngram: int = defaults.CHAR_NGRAM
    weighting: str = defaults.WEIGHTING
    cjk_ngram: int = defaults.CJK_NGRAM
    min_tokens: int = defaults.MIN_TOKENS
    one_edit_below: int = defaults.ONE_EDIT_BELOW
    max_bytes: int = defaults.MAX_BYTES
    http_statuses: frozenset[int] = frozenset(defaults.HTTP_STATUSES)
    content_types: frozenset[str] = frozenset(defaults.CONTENT_TYPES)
    scope: str = defaults.SCOPE
    unchanged: str = defaults.UNCHANGED
    #: ``SIMHASH_EDITED``: what a re-crawl does with an edited page (other text, within k).
    edited: str = defaults.EDITED
    #: ``SIMHASH_CONDITIONAL``: send ``If-None-Match`` / ``If-Modified-Since`` on re-crawls.
    conditional: bool = defaults.CONDITIONAL
    #: ``SIMHASH_TEMPLATES``: cross-page template learning (``core.sitetemplate``).
    templates: bool = defaults.TEMPLATES
    #: ``SIMHASH_SECOND_SIMHASH``: a second, independent simhash as a verified query (``core.second``).
    second_simhash: bool = defaults.SECOND_SIMHASH
    #: ``SIMHASH_REPRESENTATIVE``: ``"best"`` or ``"first"`` (``core.representative``).
    representative: str = defaults.REPRESENTATIVE
    #: ``SIMHASH_KEEP_PER_CLUSTER``: the first N members of a cluster pass.
    keep_per_cluster: int = defaults.KEEP_PER_CLUSTER
    report_uri: str | None = None
    report_format: str | None = None
    debug: bool = False
    log_level: int = logging.DEBUG
    item_field: str | None = None
    item_url_field: str = defaults.ITEM_URL_FIELD
    item_format: str = defaults.ITEM_FORMAT
    item_action: str = defaults.ACTION
    backend: str = defaults.BACKEND
    threads: bool = defaults.THREADS
    #: ``SIMHASH_DIR``: the folder of per-spider stores kept across crawls (a relative
    #: setting is resolved under the project's ``.scrapy`` folder), else ``None``.
    store_dir: str | None = None
    #: ``JOBDIR`` (Scrapy's own setting): the job's folder, else ``None``.
    jobdir: str | None = None
    #: ``SIMHASH_RESET``: start the store afresh.
    reset: bool = False
    #: ``SIMHASH_FLUSH_INTERVAL``: seconds between writes of the store to the OS.
    flush_interval: float = defaults.FLUSH_INTERVAL
    redis: RedisConfig = field(default_factory=RedisConfig)
    #: ``SIMHASH_URL_RULES*``: learned URL rules (``simhash_scrapy.urlrules``).
    url_rules: str = defaults.URL_RULES
    url_rules_min_support: int = defaults.URL_RULES_MIN_SUPPORT
    url_rules_min_precision: float = defaults.URL_RULES_MIN_PRECISION
    url_rules_explore: float = defaults.URL_RULES_EXPLORE
    url_rules_canonical: bool = defaults.URL_RULES_CANONICAL
    #: ``SIMHASH_DISTINCT_SELECTORS``: CSS selectors whose text must also be equal (``core.distinct``).
    distinct_selectors: tuple[str, ...] = defaults.DISTINCT_SELECTORS
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
        """``SIMHASH_DISTINCT_SELECTORS`` compiled (``core.distinct``), or ``None`` when it lists none."""
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
        )

    @property
    def persistent(self) -> bool:
        """Whether the in-process index is kept on disk (``SIMHASH_DIR`` or ``JOBDIR``)."""
        return self.store_dir is not None or self.jobdir is not None

    # ------------------------------------------------------------ parsing
    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | Any) -> SimhashConfig:
        """Read and validate every ``SIMHASH_*`` setting.

        ``settings`` is a Scrapy ``Settings`` object or a plain mapping.
        Raises ``NotConfigured`` when ``SIMHASH_ENABLED`` is false and
        ``ValueError`` (naming the setting) for a bad value.
        """

        def get(name: str, default: Any = None) -> Any:
            value = settings.get(name)
            return default if value is None else value

        if not parse_bool("SIMHASH_ENABLED", get("SIMHASH_ENABLED"), True):
            raise NotConfigured("simhash-scrapy is disabled (SIMHASH_ENABLED = False)")

        action = parse_choice("SIMHASH_ACTION", get("SIMHASH_ACTION", defaults.ACTION), ACTIONS)
        max_distance = parse_int("SIMHASH_MAX_DISTANCE", get("SIMHASH_MAX_DISTANCE", defaults.MAX_DISTANCE), 0, 63)
        raw_blocks = settings.get("SIMHASH_BLOCKS")
        blocks = None if raw_blocks in (None, "", "None", "none") else parse_int("SIMHASH_BLOCKS", raw_blocks, 1, 64)
        try:
            BlockPermutedIndex(max_distance, blocks)
        except ValueError as exc:
            raise ValueError(
                f"SIMHASH_BLOCKS={blocks!r} does not fit SIMHASH_MAX_DISTANCE={max_distance}: {exc} "
                f"(accepted: None for the default layout, an integer from {max_distance + 1} to 64 with "
                f"C(blocks, max_distance) <= {MAX_TABLES} tables, or from {-(-(max_distance + 1) // 3)} to "
                f"{max_distance} (each block matched within max_distance // blocks <= 2 bits))"
            ) from None

        text_mode = parse_choice("SIMHASH_TEXT_MODE", get("SIMHASH_TEXT_MODE", defaults.TEXT_MODE), TEXT_MODES)
        word_ngram = parse_int("SIMHASH_WORD_NGRAM", get("SIMHASH_WORD_NGRAM", defaults.WORD_NGRAM), 1)
        char_ngram = parse_int("SIMHASH_CHAR_NGRAM", get("SIMHASH_CHAR_NGRAM", defaults.CHAR_NGRAM), 0)
        weighting = parse_choice("SIMHASH_WEIGHTING", get("SIMHASH_WEIGHTING", defaults.WEIGHTING), WEIGHTINGS)
        cjk_ngram = parse_int("SIMHASH_CJK_NGRAM", get("SIMHASH_CJK_NGRAM", defaults.CJK_NGRAM), 1)
        min_tokens = parse_int("SIMHASH_MIN_TOKENS", get("SIMHASH_MIN_TOKENS", defaults.MIN_TOKENS), 1)
        # n + 1 keys a page: the cap keeps a page's keys (and a Redis record's) small.
        one_edit_below = parse_int(
            "SIMHASH_ONE_EDIT_BELOW", get("SIMHASH_ONE_EDIT_BELOW", defaults.ONE_EDIT_BELOW), 0, MAX_EDIT_KEYS - 1
        )
        max_bytes = parse_int("SIMHASH_MAX_BYTES", get("SIMHASH_MAX_BYTES", defaults.MAX_BYTES), 1)
        statuses = parse_list("SIMHASH_HTTP_STATUSES", get("SIMHASH_HTTP_STATUSES", DEFAULT_HTTP_STATUSES))
        http_statuses = frozenset(parse_int("SIMHASH_HTTP_STATUSES (each status)", s, 100, 599) for s in statuses)
        if not http_statuses:
            raise ValueError("SIMHASH_HTTP_STATUSES must list at least one HTTP status (100..599), got an empty list")

        types = parse_list("SIMHASH_CONTENT_TYPES", get("SIMHASH_CONTENT_TYPES", DEFAULT_CONTENT_TYPES))
        content_types = set()
        for value in types:
            if not isinstance(value, str) or value.count("/") != 1 or not all(value.split("/")):
                raise ValueError(
                    f"SIMHASH_CONTENT_TYPES must list media types such as 'text/html', got {value!r} in {types!r}"
                )
            content_types.add(value.strip().lower())
        if not content_types:
            raise ValueError("SIMHASH_CONTENT_TYPES must list at least one media type, e.g. ['text/html']")

        scope = parse_choice("SIMHASH_SCOPE", get("SIMHASH_SCOPE", defaults.SCOPE), SCOPES)
        unchanged = parse_choice("SIMHASH_UNCHANGED", get("SIMHASH_UNCHANGED", defaults.UNCHANGED), UNCHANGED_ACTIONS)
        edited = parse_choice("SIMHASH_EDITED", get("SIMHASH_EDITED", defaults.EDITED), UNCHANGED_ACTIONS)
        conditional = parse_bool("SIMHASH_CONDITIONAL", get("SIMHASH_CONDITIONAL"), defaults.CONDITIONAL)
        templates = parse_bool("SIMHASH_TEMPLATES", get("SIMHASH_TEMPLATES"), defaults.TEMPLATES)
        second_simhash = parse_bool("SIMHASH_SECOND_SIMHASH", get("SIMHASH_SECOND_SIMHASH"), defaults.SECOND_SIMHASH)
        representative = parse_choice(
            "SIMHASH_REPRESENTATIVE", get("SIMHASH_REPRESENTATIVE", defaults.REPRESENTATIVE), REPRESENTATIVES
        )
        keep_per_cluster = parse_int(
            "SIMHASH_KEEP_PER_CLUSTER", get("SIMHASH_KEEP_PER_CLUSTER", defaults.KEEP_PER_CLUSTER), 1
        )

        report_uri = parse_optional_str("SIMHASH_REPORT_URI", settings.get("SIMHASH_REPORT_URI"))
        if report_uri is not None:
            scheme = urlparse(report_uri).scheme.lower()
            # A one-letter scheme is a Windows drive ("C:\reports\x.jsonl").
            if scheme not in ("", "file") and len(scheme) != 1:
                raise ValueError(
                    f"SIMHASH_REPORT_URI must be a local path or a file:// URI, got {report_uri!r} "
                    f"(scheme {scheme!r} is not supported)"
                )
        raw_format = settings.get("SIMHASH_REPORT_FORMAT")
        if raw_format in (None, ""):
            report_format = report_format_for(report_uri) if report_uri else None
        else:
            report_format = parse_choice("SIMHASH_REPORT_FORMAT", raw_format, REPORT_FORMATS)

        debug = parse_bool("SIMHASH_DEBUG", get("SIMHASH_DEBUG"))
        log_level = parse_log_level("SIMHASH_LOG_LEVEL", get("SIMHASH_LOG_LEVEL", defaults.LOG_LEVEL))

        item_field = parse_optional_str("SIMHASH_ITEM_FIELD", settings.get("SIMHASH_ITEM_FIELD"))
        item_url_field = parse_optional_str("SIMHASH_ITEM_URL_FIELD", get("SIMHASH_ITEM_URL_FIELD", defaults.ITEM_URL_FIELD))
        if item_url_field is None:
            raise ValueError("SIMHASH_ITEM_URL_FIELD must name an item field (default 'url'), got an empty value")
        item_format = parse_choice("SIMHASH_ITEM_FORMAT", get("SIMHASH_ITEM_FORMAT", defaults.ITEM_FORMAT), ITEM_FORMATS)
        item_action = parse_choice("SIMHASH_ITEM_ACTION", get("SIMHASH_ITEM_ACTION", action), ACTIONS)

        backend = get("SIMHASH_BACKEND", defaults.BACKEND)
        if isinstance(backend, type):
            backend = f"{backend.__module__}.{backend.__qualname__}"
        if not isinstance(backend, str) or not backend.strip():
            raise ValueError(
                f"SIMHASH_BACKEND must be 'memory', 'redis' or a class path such as 'myproject.backends.MyBackend', "
                f"got {backend!r}"
            )
        backend = backend.strip()
        if backend.lower() in BACKENDS:
            backend = backend.lower()
        elif "." not in backend:
            raise ValueError(
                f"SIMHASH_BACKEND must be 'memory', 'redis' or a class path such as 'myproject.backends.MyBackend', "
                f"got {backend!r}"
            )
        threads = parse_bool("SIMHASH_THREADS", get("SIMHASH_THREADS"), defaults.THREADS)
        store_dir = parse_folder("SIMHASH_DIR", settings.get("SIMHASH_DIR"), defaults.STORE_DIR)
        if store_dir is not None and not Path(store_dir).is_absolute():
            # Relative to the project's .scrapy folder, as Scrapy's own HTTP cache is.
            store_dir = data_path(store_dir)
        jobdir = parse_optional_str("JOBDIR", settings.get("JOBDIR"))
        reset = parse_bool("SIMHASH_RESET", settings.get("SIMHASH_RESET"))
        flush_interval = parse_number("SIMHASH_FLUSH_INTERVAL", settings.get("SIMHASH_FLUSH_INTERVAL"), defaults.FLUSH_INTERVAL)
        redis = RedisConfig.from_settings(settings)
        url_rules = url_rules_mode(settings)
        url_rules_min_support = parse_int(
            "SIMHASH_URL_RULES_MIN_SUPPORT", get("SIMHASH_URL_RULES_MIN_SUPPORT", defaults.URL_RULES_MIN_SUPPORT), 1
        )
        url_rules_min_precision = parse_fraction(
            "SIMHASH_URL_RULES_MIN_PRECISION", settings.get("SIMHASH_URL_RULES_MIN_PRECISION"), defaults.URL_RULES_MIN_PRECISION
        )
        url_rules_explore = parse_fraction(
            "SIMHASH_URL_RULES_EXPLORE", settings.get("SIMHASH_URL_RULES_EXPLORE"), defaults.URL_RULES_EXPLORE
        )
        url_rules_canonical = parse_bool(
            "SIMHASH_URL_RULES_CANONICAL", settings.get("SIMHASH_URL_RULES_CANONICAL"), defaults.URL_RULES_CANONICAL
        )
        distinct_selectors = []
        for css in parse_list("SIMHASH_DISTINCT_SELECTORS", get("SIMHASH_DISTINCT_SELECTORS", defaults.DISTINCT_SELECTORS)):
            if not isinstance(css, str) or not css.strip():
                raise ValueError(
                    f"SIMHASH_DISTINCT_SELECTORS must list CSS selectors such as ['.price', '.sku'], got {css!r}"
                )
            distinct_selectors.append(css.strip())
        _distinct_selectors(tuple(distinct_selectors))  # an invalid selector is an error now, not at the first page

        try:
            return cls(
                action=action,
                max_distance=max_distance,
                blocks=blocks,
                text_mode=text_mode,
                word_ngram=word_ngram,
                char_ngram=char_ngram,
                weighting=weighting,
                cjk_ngram=cjk_ngram,
                min_tokens=min_tokens,
                one_edit_below=one_edit_below,
                max_bytes=max_bytes,
                http_statuses=http_statuses,
                content_types=frozenset(content_types),
                scope=scope,
                report_uri=report_uri,
                report_format=report_format,
                debug=debug,
                log_level=log_level,
                item_field=item_field,
                item_url_field=item_url_field,
                item_format=item_format,
                item_action=item_action,
                backend=backend,
                threads=threads,
                unchanged=unchanged,
                edited=edited,
                conditional=conditional,
                templates=templates,
                second_simhash=second_simhash,
                representative=representative,
                keep_per_cluster=keep_per_cluster,
                store_dir=store_dir,
                jobdir=jobdir,
                reset=reset,
                flush_interval=flush_interval,
                redis=redis,
                url_rules=url_rules,
                url_rules_min_support=url_rules_min_support,
                url_rules_min_precision=url_rules_min_precision,
                url_rules_explore=url_rules_explore,
                url_rules_canonical=url_rules_canonical,
                distinct_selectors=tuple(distinct_selectors),
            )
        except ValueError as exc:  # FeatureConfig: already checked above, kept as a safety net
            raise ValueError(f"SIMHASH feature settings (WORD_NGRAM, CHAR_NGRAM, WEIGHTING, CJK_NGRAM): {exc}") from None
