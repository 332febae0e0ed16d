"""Every setting simhash-scrapy reads, in one declarative table (``SETTINGS``).

One row (``Setting``) per setting: its name, type label and parser, default,
documentation (``doc``, ``example``, ``default_doc``), the layer that reads it,
and the field of the typed config it fills (``core.settings.config``: ``SimhashConfig``,
``RedisConfig``).  The table builds the typed configs and their error messages
(each parser names its setting on the first line), the setting names the store
and the Redis layout quote when a file or a key was made with other settings,
the did-you-mean of unknown names (``unknown_settings``), and the settings
reference of the documentation (fields ``name, type, default, default_doc,
doc, example, layer``; ``doc``, ``type`` and ``default_doc`` are Markdown with
inline code in single backticks, ``example`` is Python source).

The default values themselves are in ``core.defaults`` (shared with the
library functions); this module says which setting each one belongs to.
No Scrapy import: backends and scripts build configs from plain mappings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlparse

from .. import defaults
from .didyoumean import closest
from ..features.edits import MAX_KEYS as MAX_EDIT_KEYS
from ..features.features import WEIGHTINGS
from ..redact import redact
from ..cluster.representative import REPRESENTATIVES
from .values import (
    UNSET,
    Parser,
    boolean,
    boolean_or_auto,
    check_path,
    choice,
    folder,
    fraction,
    integer,
    is_blank,
    log_level,
    number,
    optional_text,
    parse_choice,
    parse_int,
    parse_list,
    parse_number,
    parse_optional_str,
)

__all__ = [
    "Setting",
    "SETTINGS",
    "LAYERS",
    "NAMES",
    "FEATURE_SETTINGS",
    "setting",
    "setting_of",
    "setting_names",
    "unknown_settings",
    "BACKENDS",
    "ACTIONS",
    "TEXT_MODES",
    "SCOPES",
    "REPORT_EXTENSION_FORMATS",
    "REPORT_FORMATS",
    "ITEM_FORMATS",
    "UNCHANGED_ACTIONS",
    "URL_RULES_MODES",
]

TEXT_MODES = ("main", "visible")
ACTIONS = ("drop", "flag")
SCOPES = ("spider", "domain")
REPORT_FORMATS = ("jsonl", "csv", "html")
ITEM_FORMATS = ("auto", "html", "text")
UNCHANGED_ACTIONS = ("pass", "drop_items", "drop")
URL_RULES_MODES = ("off", "learn", "skip")
#: ``SIMHASH_BACKEND``'s short names and the classes they select (``backends.backend_class``).
BACKENDS = {
    "memory": "simhash_scrapy.backends.memory.MemoryBackend",
    "redis": "simhash_scrapy.backends.redis.RedisBackend",
    "redis-global": "simhash_scrapy.backends.redis.cluster_backend.GlobalRedisBackend",
}
#: The URL schemes redis-py accepts.
_REDIS_SCHEMES = ("redis", "rediss", "unix")

#: The layers that read settings, in the order the documentation shows them: ``Setting.layer``.
#: Report file extension -> format, when ``SIMHASH_REPORT_FORMAT`` is not set (``core.settings.config.report_format_for``).
REPORT_EXTENSION_FORMATS = {
    ".jsonl": "jsonl", ".jl": "jsonl", ".json": "jsonl", ".csv": "csv", ".html": "html", ".htm": "html",
}  # fmt: skip
#: The same, as the settings reference writes it: "`.jsonl`/`.jl`/`.json`, `.csv`, `.html`/`.htm`".
_EXTENSIONS_DOC = ", ".join(
    "/".join(f"`{ext}`" for ext, fmt in REPORT_EXTENSION_FORMATS.items() if fmt == name)
    for name in dict.fromkeys(REPORT_EXTENSION_FORMATS.values())
)

LAYERS: dict[str, str] = {
    "core": "Detection: what is fingerprinted and how (the algorithm core)",
    "glue": "The crawl: what happens to near-duplicates, re-crawled pages, logs and threads",
    "pipeline": "Items: the item pipeline",
    "report": "Reports",
    "store": "Persistence: the store file kept across crawls",
    "redis": "The Redis backend (a crawl shared by several workers)",
    "url rules": "URL rules: duplicates skipped before download",
}


class Lookup(Protocol):
    """What settings are read from: a Scrapy ``Settings`` object or any mapping (``.get(name)``)."""

    def get(self, name: str, /) -> Any: ...  # pragma: no cover


@dataclass(frozen=True)
class Setting:
    """One setting: what it is, how it is parsed, its default, its documentation and who reads it."""

    #: The setting's name (``SIMHASH_*``, or a setting of Scrapy or scrapy-redis we read too).
    name: str
    #: The accepted values, for people (Markdown).
    type: str
    #: The typed value the config gets when the setting is not set (see ``fallback``).
    default: Any
    #: What the setting does (Markdown, one paragraph).
    doc: str
    #: A value as written in ``settings.py`` (Python source; the tests parse it with ``parse``).
    example: str
    #: The layer that reads it: a key of ``LAYERS``.
    layer: str
    #: ``(name, value) -> typed value`` for a value that is set (not ``None``); raises ``ValueError`` whose
    #: first line names the setting; ``UNSET`` for a blank value (then the default applies).
    parse: Parser
    #: The field of the typed config it fills (``"max_distance"``: ``SimhashConfig.max_distance``;
    #: ``"redis.ttl"``: ``RedisConfig.ttl``), or ``None`` (read by the glue only, or a fallback of another).
    field: str | None = None
    #: The default as the documentation says it, when the value alone would mislead (Markdown).
    default_doc: str = ""
    #: Another setting whose value is this one's default (``SIMHASH_ITEM_ACTION``: ``SIMHASH_ACTION``).
    fallback: str | None = None

    @property
    def ours(self) -> bool:
        """A ``SIMHASH_*`` setting (the others belong to Scrapy or scrapy-redis)."""
        return self.name.startswith("SIMHASH_")

    @property
    def default_text(self) -> str:
        """The default for the documentation: ``default_doc``, else the value as Python source."""
        if self.default_doc:
            return self.default_doc
        value = self.default
        if isinstance(value, (tuple, frozenset)):
            value = sorted(value) if isinstance(value, frozenset) else list(value)
        if isinstance(value, str):
            return "`" + json.dumps(value) + "`"
        return f"`{value!r}`"

    def read(self, settings: Lookup) -> Any:
        """This setting's typed value in ``settings`` (its fallback's, or the default, when not set)."""
        value = settings.get(self.name)
        if value is not None:
            value = self.parse(self.name, value)
            if value is not UNSET:
                return value
        if self.fallback is not None:
            return setting(self.fallback).read(settings)
        return self.default


# ------------------------------------------------------------- parsers of one setting
def _blocks(name: str, value: Any) -> int | None:
    return None if is_blank(value) else parse_int(name, value, 1, 64)


def _statuses(name: str, value: Any) -> frozenset[int]:
    statuses = frozenset(parse_int(f"{name} (each status)", s, 100, 599) for s in parse_list(name, value))
    if not statuses:
        raise ValueError(f"{name} must list at least one HTTP status (100..599), got an empty list")
    return statuses


def _media_types(name: str, value: Any) -> frozenset[str]:
    types = parse_list(name, value)
    found = set()
    for item in types:
        if not isinstance(item, str) or item.count("/") != 1 or not all(item.split("/")):
            raise ValueError(f"{name} must list media types such as 'text/html', got {item!r} in {types!r}")
        found.add(item.strip().lower())
    if not found:
        raise ValueError(f"{name} must list at least one media type, e.g. ['text/html']")
    return frozenset(found)


def _selectors(name: str, value: Any) -> tuple[str, ...]:
    """A list of CSS selectors, stripped (compiled by ``core.settings.config``, where a bad one is named too)."""
    selectors = []
    for css in parse_list(name, value):
        if not isinstance(css, str) or not css.strip():
            raise ValueError(f"{name} must list CSS selectors such as ['.price', '.sku'], got {css!r}")
        selectors.append(css.strip())
    return tuple(selectors)


def _report_uri(name: str, value: Any) -> str | None:
    uri = parse_optional_str(name, value)
    if uri is not None:
        check_path(name, uri)
        scheme = urlparse(uri).scheme.lower()
        # A one-letter scheme is a Windows drive ("C:\reports\x.jsonl").
        if scheme not in ("", "file") and len(scheme) != 1:
            raise ValueError(
                f"{name} must be a local path or a file:// URI, got {uri!r} (scheme {scheme!r} is not supported)"
            )
    return uri


def _report_format(name: str, value: Any) -> Any:
    return UNSET if value == "" else parse_choice(name, value, REPORT_FORMATS)


def _item_url_field(name: str, value: Any) -> str:
    field = parse_optional_str(name, value)
    if field is None:
        raise ValueError(f"{name} must name an item field (default 'url'), got an empty value")
    return field


def _backend(name: str, value: Any) -> str:
    if isinstance(value, type):
        value = f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, str) and value.strip():
        path = value.strip()
        if path.lower() in BACKENDS:
            return path.lower()
        if "." in path:
            return path
    raise ValueError(
        f"{name} must be 'memory', 'redis', 'redis-global' or a class path such as 'myproject.backends.MyBackend', got {value!r}"
    )


def _redis_url(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a redis:// URL, got {redact(repr(value))}")
    if not value.strip():
        return UNSET
    if urlparse(value.strip()).scheme.lower() not in _REDIS_SCHEMES:
        # redis-py's own error names no setting ("Redis URL must specify one of the following schemes").
        raise ValueError(
            f"{name} must be a redis://, rediss:// or unix:// URL (e.g. redis://localhost:6379/0), "
            f"got {redact(repr(value))}"
        )
    return value


def _host(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a host name, got {value!r}")
    return value if value.strip() else UNSET


def _port(name: str, value: Any) -> Any:
    if value == "" or value == 0:
        return UNSET
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a port number, got {value!r}") from None


def _params(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"{name} must be a dict (or JSON object), got {redact(repr(value))}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict of redis client arguments, got {redact(repr(value))}")
    return dict(value)


def _key_template(name: str, value: Any) -> Any:
    if value == "":
        return UNSET
    try:
        value % {"spider": "x"}
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(
            f"{name} must be a string with %(spider)s, e.g. '%(spider)s:simhash', got {value!r} ({exc})"
        ) from None
    return value


def _ttl(name: str, value: Any) -> Any:
    if is_blank(value):
        return UNSET
    try:
        return parse_number(name, value, 0.0)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds >= 0 (0: keys never expire), got {value!r}") from None


def _heartbeat(name: str, value: Any) -> Any:
    if is_blank(value):
        return UNSET
    heartbeat = parse_number(name, value, 0.0, 0.05)
    if heartbeat > 60:
        raise ValueError(f"{name} must be a number of seconds from 0.05 to 60, got {value!r}")
    return heartbeat


def _one_of(choices: Iterable[str]) -> str:
    """The type label of a choice: ``"a"`` | ``"b"``."""
    return " | ".join(f'`"{c}"`' for c in choices)


# ------------------------------------------------------------------------ the table
S = Setting
#: Every setting simhash-scrapy reads, in the order of the documentation.
SETTINGS: tuple[Setting, ...] = (
    # ------------------------------------------------------------ detection (core)
    S("SIMHASH_ENABLED", "bool", True, "`False` disables both components", "False", "glue", boolean),
    S("SIMHASH_MAX_DISTANCE", "int 0..63", defaults.MAX_DISTANCE,
      "k: pages whose fingerprints differ in at most k of 64 bits are near-duplicates",
      "3", "core", integer(0, 63), "max_distance"),
    S("SIMHASH_BLOCKS", "int 1..64 or `None`", defaults.BLOCKS,
      "blocks of the in-process block-permuted index. B > k: C(B, k) tables, each block matched exactly (more "
      "blocks: fewer candidates per query, more tables, at most 5000); B <= k: B tables, each block matched within "
      "floor(k/B) <= 2 bits by probing neighbour buckets. The Redis backend keeps its own layout (B > k)",
      "6", "core", _blocks, "blocks",
      default_doc="`None` (3 at k = 4, else k + 1: `simhash_scrapy.core.defaults.default_blocks`)"),
    S("SIMHASH_TEXT_MODE", _one_of(TEXT_MODES), defaults.TEXT_MODE,
      "fingerprint the main content only (navigation, headers, footers and link lists removed) or all visible text",
      '"visible"', "core", choice(TEXT_MODES), "text_mode"),
    S("SIMHASH_WORD_NGRAM", "int >= 1", defaults.WORD_NGRAM, "features are word n-grams (shingles)",
      "3", "core", integer(1), "word_ngram"),
    S("SIMHASH_CHAR_NGRAM", "int >= 0", defaults.CHAR_NGRAM, "if > 0, character n-grams replace word n-grams",
      "4", "core", integer(0), "char_ngram"),
    S("SIMHASH_WEIGHTING", _one_of(WEIGHTINGS), defaults.WEIGHTING,
      'feature weight: 1 + 6 ln(tf), 1 + ln(tf), term frequency, or 1 (see [Weights](../quality.md#weights-why-1-6-ln-tf-figures-from-the-tuning-half))',
      '"sublinear"', "core", choice(WEIGHTINGS), "weighting",
      default_doc="`\"log\"` (the core's `FeatureConfig` default)"),
    S("SIMHASH_CJK_NGRAM", "int >= 1", defaults.CJK_NGRAM,
      "character n-grams for scripts written without spaces (Chinese, Japanese, Thai...)",
      "3", "core", integer(1), "cjk_ngram"),
    S("SIMHASH_MIN_TOKENS", "int >= 1", defaults.MIN_TOKENS,
      "pages with fewer tokens (but at least one) are short pages, compared by exact text",
      "50", "core", integer(1), "min_tokens", default_doc="`30` (`simhash_scrapy.MIN_TOKENS`)"),
    # n + 1 keys a page: the cap keeps a page's keys (and a Redis record's) small.
    S("SIMHASH_ONE_EDIT_BELOW", f"int 0..{MAX_EDIT_KEYS - 1}", defaults.ONE_EDIT_BELOW,
      f"pages of {defaults.ONE_EDIT_MIN_TOKENS} (or `SIMHASH_MIN_TOKENS`, if higher) up to this many tokens (exclusive) "
      "are also near-duplicates "
      'when their token sequences are one token apart ([The canonical rule](../guides/how-it-works.md#the-canonical-rule)); `0` turns the rule off',
      "0", "core", integer(0, MAX_EDIT_KEYS - 1), "one_edit_below"),
    S("SIMHASH_MAX_BYTES", "int >= 1", defaults.MAX_BYTES, "larger bodies are skipped as `too_large`",
      "2_000_000", "core", integer(1), "max_bytes", default_doc="`10485760` (10 MiB)"),
    S("SIMHASH_HTTP_STATUSES", "list of int", frozenset(defaults.HTTP_STATUSES),
      "statuses that are fingerprinted; others are skipped as `status`",
      "[200, 203]", "core", _statuses, "http_statuses", default_doc="all 2xx (200..299)"),
    S("SIMHASH_CONTENT_TYPES", "list of str", frozenset(defaults.CONTENT_TYPES),
      "media types that are fingerprinted (parameters such as `charset` are ignored)",
      '["text/html"]', "core", _media_types, "content_types",
      default_doc='`["text/html", "application/xhtml+xml"]`'),
    S("SIMHASH_DISTINCT_SELECTORS", "list of CSS selectors (or a comma-separated string)", defaults.DISTINCT_SELECTORS,
      "protected text: two pages are near-duplicates only when these selectors also find the same text on both "
      '(`response.css` syntax; see [Protected text](../guides/how-it-works.md#protected-text-prices-skus-order-numbers)). An invalid selector is an error '
      "at start-up naming the setting. Keep it the same across the crawls of one store or Redis key",
      '[".price", ".sku", "[itemprop=sku]::attr(content)"]', "core", _selectors, "distinct_selectors",
      default_doc="`[]` (none)"),
    S("SIMHASH_IDENTITY_SIGNALS", "bool", defaults.IDENTITY_SIGNALS,
      "pages that declare different identities are never near-duplicates: schema.org `sku`, `gtin*`, `mpn`, "
      "`productID`, `price` or a product's `name` (JSON-LD, microdata, RDFa), `product:` meta, the page numbers "
      "of `rel=next`/`prev` links, a product option the URL's query names (`variant=`, `color=`, `colour=`, "
      "`size=`, `attribute_*=`) (two variants of one product, two pages of one listing). The digest of what "
      "a page declares joins its scope, as protected text does; a page declaring nothing keeps its plain "
      "scope, or takes the identity the pages of its address declared (a print view without its page's "
      "JSON-LD). `False` merges variants by their text alone. Keep it the same across the crawls of one store "
      "or Redis key",
      "False", "core", boolean, "identity_signals"),
    # ------------------------------------------------------------ the crawl (glue)
    S("SIMHASH_ACTION", _one_of(ACTIONS), defaults.ACTION,
      "what happens to a near-duplicate response (a dropped one is not counted by `CLOSESPIDER_PAGECOUNT`)",
      '"flag"', "glue", choice(ACTIONS), "action"),
    S("SIMHASH_SCOPE", _one_of(SCOPES), defaults.SCOPE, "one index per spider, or one per host name",
      '"domain"', "glue", choice(SCOPES), "scope"),
    S("SIMHASH_UNCHANGED", _one_of(UNCHANGED_ACTIONS), defaults.UNCHANGED,
      "a re-crawled canonical page whose text is the same as its last recorded version's (same content digest, or "
      'a 304 answer): goes on (links followed; `meta["simhash_unchanged"] = True`), goes on but its items are '
      "dropped (only what changed is emitted, as with scrapy-deltafetch), or is dropped (`UnchangedPage`, an "
      "`IgnoreRequest`)",
      '"drop_items"', "glue", choice(UNCHANGED_ACTIONS), "unchanged"),
    S("SIMHASH_EDITED", _one_of(UNCHANGED_ACTIONS), defaults.EDITED,
      "the same choices for an *edited* page: other text than its last version, but its simhash within k of it "
      '(`meta["simhash_edited"] = True`; dropped as `EditedPage`)',
      '"drop_items"', "glue", choice(UNCHANGED_ACTIONS), "edited"),
    S("SIMHASH_CONDITIONAL", "bool", defaults.CONDITIONAL,
      "with a store (`SIMHASH_DIR`, `JOBDIR`, Redis), send a page's recorded `ETag` / `Last-Modified` as "
      "`If-None-Match` / `If-Modified-Since` when it is fetched again; a 304 is `unchanged` with no body downloaded "
      '(see [Conditional re-crawls](../guides/recurring.md#conditional-re-crawls-a-304-instead-of-the-page)). Off per request with `meta["simhash_conditional"] = False`',
      "False", "glue", boolean, "conditional"),
    S("SIMHASH_REPLAY", "bool", defaults.REPLAY,
      "a page answered 304 (`SIMHASH_CONDITIONAL`) has no body and no links: schedule again the requests its "
      "callback yielded when it was last downloaded (kept in `<store>.replay` beside the store, or in Redis), so a "
      "re-crawl reaches every page the last one reached. A 304 whose requests were not kept (or could not be: a "
      "callback that is not a spider method) is requested again without validators. `False`: a 304 ends that branch "
      "of the crawl, as before this setting existed. A spider that needs every page's body sets `meta[\"simhash_conditional\"] = False` "
      "(per request) or `SIMHASH_CONDITIONAL = False`",
      "False", "glue", boolean, "replay"),
    S("SIMHASH_TEMPLATES", "bool", defaults.TEMPLATES,
      "learn, per host and port, the text lines that came back in different articles of that host (pages more "
      "than 12 bits apart) and also match a page by the simhash of its text without them (clustering step 5). "
      "The page's own fingerprint never changes. Every backend: saved with a store "
      "(`SIMHASH_DIR`, `JOBDIR`), shared by Redis workers ([Redis](../guides/redis.md)), at most 200,000 lines (a full learner forgets its least recently useful hosts) and 64 "
      "articles a host. Chosen on the real-web tuning half",
      "False", "core", boolean, "templates"),
    S("SIMHASH_SECOND_SIMHASH", "bool", defaults.SECOND_SIMHASH,
      "give pages of 64 tokens or more a second, independent simhash: with nothing within k, a page joins a "
      "canonical page whose second simhash is within k and whose simhash is within 2k (clustering step 6; lifts "
      "1-3%-edit recall). Every backend (Redis: shared by its workers). Chosen on the tuning halves",
      "False", "core", boolean, "second_simhash"),
    S("SIMHASH_CONTAINMENT", "bool", defaults.CONTAINMENT,
      "give pages a sketch of their sentences (8 words or more): a page nothing else matched joins a canonical "
      "page whose sentences hold at least 95% of its own (or the other way round), the smaller having at least "
      "half the larger's sentences (two thirds when they are of different hosts; a twentieth when they are of one address, "
      "the query aside) (clustering step 7; print views, syndicated copies in another site's template). Every backend: saved "
      "with a store, shared by Redis workers, at most "
      "100,000 canonical pages a scope. Chosen on the tuning halves",
      "False", "core", boolean, "containment"),
    S("SIMHASH_KEEP_PER_CLUSTER", "int >= 1", defaults.KEEP_PER_CLUSTER,
      "the first N members of each cluster pass (the anchor is the first); later ones are dropped or flagged "
      '([The representative](../guides/how-it-works.md#the-representative-the-page-a-person-would-keep))',
      "2", "glue", integer(1), "keep_per_cluster"),
    S("SIMHASH_DEBUG", "bool", False, "log every near-duplicate, not only the first", "True", "glue", boolean, "debug"),
    S("SIMHASH_LOG_LEVEL", "level name or number", log_level("SIMHASH_LOG_LEVEL", defaults.LOG_LEVEL),
      "level of the near-duplicate log lines and of dropped items' log lines",
      '"INFO"', "glue", log_level, "log_level", default_doc=f'`"{defaults.LOG_LEVEL}"`'),
    S("SIMHASH_BACKEND", "str", defaults.BACKEND,
      'where the index lives: `"memory"` (this process), `"redis"` (shared, see [Distributed crawls with Redis](../guides/redis.md)), '
      '`"redis-global"` (one index sharded over a Redis Cluster, see [A global index over a Redis Cluster](#redis-global)) or the import '
      "path of a `simhash_scrapy.backends.DedupBackend` subclass",
      '"redis"', "glue", _backend, "backend"),
    S("SIMHASH_THREADS", "bool", defaults.THREADS,
      "parse and fingerprint pages over 1 MB, and pages whose analysis may take long (over 20,000 tags, or nested "
      "64 levels deep), in worker threads, so no page blocks the event loop for long (see [One parse per page, and "
      'threads](../guides/how-it-works.md#one-parse-per-page-and-threads))',
      "False", "glue", boolean, "threads"),
    # ------------------------------------------------------------ items (pipeline)
    S("SIMHASH_ITEM_FIELD", "str or `None`", None, "pipeline: the item field holding the text or HTML to fingerprint",
      '"body"', "pipeline", optional_text, "item_field"),
    S("SIMHASH_ITEM_FORMAT", _one_of(ITEM_FORMATS), defaults.ITEM_FORMAT,
      "pipeline: how to read that field (`auto`: HTML if it is bytes or starts with `<`)",
      '"text"', "pipeline", choice(ITEM_FORMATS), "item_format"),
    S("SIMHASH_ITEM_URL_FIELD", "str", defaults.ITEM_URL_FIELD,
      "pipeline: the item field with the page URL (names the item in reports and links it to its page)",
      '"link"', "pipeline", _item_url_field, "item_url_field"),
    S("SIMHASH_ITEM_ACTION", _one_of(ACTIONS), defaults.ACTION, "pipeline: what happens to a near-duplicate item",
      '"drop"', "pipeline", choice(ACTIONS), "item_action", default_doc="`SIMHASH_ACTION`", fallback="SIMHASH_ACTION"),
    # ------------------------------------------------------------ reports
    S("SIMHASH_REPORT_URI", "str or `None`", None,
      "where the cluster report is written when the spider closes (local path or `file://` URI)",
      '"reports/%(name)s-%(time)s.jsonl"', "report", _report_uri, "report_uri", default_doc="`None` (no report)"),
    S("SIMHASH_REPORT_FORMAT", _one_of(REPORT_FORMATS), None, "report format",
      '"csv"', "report", _report_format, "report_format",
      default_doc=f"from the URI's extension ({_EXTENSIONS_DOC}), else `\"jsonl\"`"),
    S("SIMHASH_REPRESENTATIVE", _one_of(REPRESENTATIVES), defaults.REPRESENTATIVE,
      "which member represents a cluster in reports and meta: the best URL (rel=canonical target, no query, not a "
      'copy by its canonical tag or URL, first crawled) or the first page crawled ([The representative](../guides/how-it-works.md#the-representative-the-page-a-person-would-keep))',
      '"first"', "report", choice(REPRESENTATIVES), "representative"),
    # ------------------------------------------------------------ persistence (store)
    S("SIMHASH_DIR", "str (folder) or bool", None,
      "folder for one store per spider, kept across crawls, so the next crawl knows this one's pages: relative "
      "paths are inside the project's `.scrapy` folder (`scrapy.utils.project.data_path`), absolute paths are used "
      'as they are; `True` means `"simhash"`. Wins over `JOBDIR` when both are set (see [Recurring crawls](../guides/recurring.md) '
      'for the store)',
      '"simhash"', "store", folder(defaults.STORE_DIR), "store_dir", default_doc="`None` (off)"),
    S("JOBDIR", "str (path)", None, "Scrapy's job folder; simhash-scrapy keeps `simhash.store` in it",
      '"crawls/myspider-1"', "store", optional_text, "jobdir"),
    S("SIMHASH_RESET", "bool", False,
      "start the `SIMHASH_DIR`/`JOBDIR` store afresh (also `-a simhash_reset=1`)",
      "True", "store", boolean, "reset"),
    S("SIMHASH_FLUSH_INTERVAL", "float (seconds) >= 0", defaults.FLUSH_INTERVAL,
      "how often the pages checked since the last commit are committed to the store, in one transaction; `0` "
      "commits every page. A `kill -9` loses at most the pages of one interval",
      "0.2", "store", number(0.0), "flush_interval"),
    # ------------------------------------------------------------ Redis
    S("SIMHASH_REDIS_URL", "str", None, "Redis for simhash only, when it is not scrapy-redis' server",
      '"redis://:secret@redis.internal:6379/2"', "redis", _redis_url, "redis.url",
      default_doc="`None` (use `REDIS_URL`)", fallback="REDIS_URL"),
    S("REDIS_URL", "str", None,
      "scrapy-redis' setting, used when `SIMHASH_REDIS_URL` is not set; wins over host/port",
      '"redis://redis.internal:6379/0"', "redis", _redis_url),
    S("REDIS_HOST", "str", defaults.REDIS_HOST, "scrapy-redis' setting, used when no URL is set",
      '"10.0.0.5"', "redis", _host, "redis.host"),
    S("REDIS_PORT", "int", defaults.REDIS_PORT, "scrapy-redis' setting, used when no URL is set",
      "6380", "redis", _port, "redis.port"),
    S("REDIS_PARAMS", "dict", {},
      "extra `redis.asyncio.Redis` arguments, as in scrapy-redis. simhash-scrapy's defaults: `socket_timeout` "
      "10 s, `socket_connect_timeout` 5 s. It drops `redis_cls` (a synchronous class cannot serve the event loop) "
      "and `retry_on_timeout` (deprecated by redis-py 6), and never retries a check (a retried check would find its "
      "own page)",
      '{"password": "secret", "socket_timeout": 10}', "redis", _params, "redis.params"),
    S("SIMHASH_REDIS_KEY", "str", defaults.REDIS_KEY,
      "key prefix; `%(spider)s` is the spider name (scrapy-redis style). With braces (a hash tag, "
      '`"{%(spider)s}:simhash"`) every key of the spider goes to one Redis Cluster slot',
      '"crawls:%(spider)s:simhash"', "redis", _key_template, "redis.key_template"),
    S("SIMHASH_REDIS_PERSIST", "bool", False,
      "keep the index and records when the crawl ends. `False`: the last worker to close deletes them (after "
      "writing its report). `SIMHASH_BACKEND = \"redis-global\"` always keeps them (no worker registry tells the "
      "last one out; said at open): `SIMHASH_REDIS_FLUSH_ON_START` deletes them",
      "True", "redis", boolean, "redis.persist", default_doc="`SCHEDULER_PERSIST` (`False`)",
      fallback="SCHEDULER_PERSIST"),
    S("SCHEDULER_PERSIST", "bool", False,
      "scrapy-redis' setting (keep the queue when the crawl ends): the default of `SIMHASH_REDIS_PERSIST`",
      "True", "redis", boolean),
    S("SIMHASH_REDIS_FLUSH_ON_START", "bool", False,
      "delete the index and records when a worker starts, unless another worker is running",
      "True", "redis", boolean, "redis.flush_on_start", default_doc="`SCHEDULER_FLUSH_ON_START` (`False`)",
      fallback="SCHEDULER_FLUSH_ON_START"),
    S("SCHEDULER_FLUSH_ON_START", "bool", False,
      "scrapy-redis' setting (empty the queue when a crawl starts): the default of `SIMHASH_REDIS_FLUSH_ON_START`",
      "True", "redis", boolean),
    S("SIMHASH_REDIS_TTL", "float (seconds) >= 0", defaults.REDIS_TTL,
      "every write sets this expiry on the keys it touches, so an abandoned index disappears that long after its "
      "last page. Not with `SIMHASH_BACKEND = \"redis-global\"` (an error: its keys stay until "
      "`SIMHASH_REDIS_FLUSH_ON_START`)",
      "604800", "redis", _ttl, "redis.ttl", default_doc="`0` (no expiry)"),
    S("SIMHASH_REDIS_FAIL_OPEN", "bool", defaults.REDIS_FAIL_OPEN,
      "when Redis fails mid-crawl: `True` lets the page through unchecked and goes on; `False` (fail-closed) closes "
      "the spider",
      "False", "redis", boolean, "redis.fail_open"),
    S("SIMHASH_REDIS_CLUSTER", "bool", False, "connect with `redis.asyncio.cluster.RedisCluster`",
      "True", "redis", boolean, "redis.cluster"),
    S("SIMHASH_REDIS_HEARTBEAT", "float (seconds, 0.05..60)", defaults.REDIS_HEARTBEAT,
      "a worker's heartbeat (registration); after an outage, checks resume at most this long after Redis answers "
      "again",
      "0.5", "redis", _heartbeat, "redis.heartbeat"),
    S("SIMHASH_REDIS_SHARDS", "int (1..1024)", defaults.REDIS_SHARDS,
      "hash slots the identity records of one scope are spread over: 1 keeps them in the scope's slot beside its "
      "log; more let a Redis Cluster spread one scope over its nodes, at about 2.4x the CPU per check "
      "(`benchmarks/redis_shards.py`). Every worker and the report must use the same value (the report reads it "
      "from Redis)",
      "6", "redis", integer(1, 1024), "redis.shards"),
    S("SIMHASH_REDIS_CAPACITY", "int >= 1 (pages per scope)", defaults.REDIS_CAPACITY,
      "what the identity records are sized for: about 64 identities per hash bucket at this many pages (2^4..2^24 "
      "buckets). Far more pages than this cost memory (buckets leave Redis' compact encoding), never correctness "
      "or speed. Fixed by the first worker of a key",
      "200_000_000", "redis", integer(1), "redis.capacity"),
    S("SIMHASH_REDIS_TABLE_BLOCKS", "int (0, or k + 1..16)", defaults.REDIS_TABLE_BLOCKS,
      '`SIMHASH_BACKEND = "redis-global"` only: blocks of the tables sharded over the cluster, C(blocks, k) tables '
      "(0: k + 1, four tables at k = 3; k + 2 gives more, longer keys, for billions of pages). Every worker must "
      "use the same value (recorded in Redis)",
      "5", "redis", integer(0, 16), "redis.table_blocks"),
    S("SIMHASH_REDIS_BUCKET_BITS", "int (8..32)", defaults.REDIS_BUCKET_BITS,
      '`SIMHASH_BACKEND = "redis-global"` only: key bits of a table bucket (one Redis key, in a hash slot of its '
      "own), at most a table key's bits; a check reads one bucket per table, about canonical pages / 2^bits entries "
      "each. Every worker must use the same value (recorded in Redis)",
      "20", "redis", integer(8, 32), "redis.bucket_bits"),
    S("SIMHASH_REDIS_GLOBAL_CACHE", "int >= 0 (entries)", defaults.REDIS_GLOBAL_CACHE,
      '`SIMHASH_BACKEND = "redis-global"` only: where canonical pages\' records are, kept by each worker (LRU, about '
      "150 bytes an entry: 150 MB at the default); a hit saves one read before a verdict names its canonical page",
      "100_000", "redis", integer(0), "redis.global_cache"),
    S("SIMHASH_REDIS_BUCKET_CACHE", "int >= 0 (MB)", defaults.REDIS_BUCKET_CACHE,
      '`SIMHASH_BACKEND = "redis-global"` only: MB of table buckets each worker keeps (LRU; 0: none). A bucket kept '
      "is read again as its new entries only (a removal makes it read whole): the same verdicts, ~30x fewer bytes "
      "from Redis a check at 10 million pages, but ~20% more worker CPU on loopback: for workers whose network to "
      "Redis is the limit. The whole tables at k = 4 take ~40 bytes a canonical page",
      "512", "redis", integer(0), "redis.bucket_cache"),
    S("SIMHASH_REDIS_MODULE", '"auto" or bool', defaults.REDIS_MODULE,
      '`SIMHASH_BACKEND = "redis-global"` only: scan the table buckets and append to them in Redis, with the '
      "package's Redis module (`redis-server --loadmodule \"$(python -m simhash_scrapy.backends.redis.module)\"`), "
      "not with `GET` and a script: the same verdicts for a fraction of the CPU and bytes a check. `auto`: where "
      "every primary has it (checked at open); `True`: an error at open where one has not",
      "True", "redis", boolean_or_auto, "redis.module"),
    # ------------------------------------------------------------ URL rules
    S("SIMHASH_URL_RULES", _one_of(URL_RULES_MODES), defaults.URL_RULES,
      "learn URL rules from the duplicates found (`learn`: report them; `skip`: also skip predicted duplicates "
      "before download)",
      '"skip"', "url rules", choice(URL_RULES_MODES), "url_rules"),
    S("SIMHASH_URL_RULES_MIN_SUPPORT", "int >= 1", defaults.URL_RULES_MIN_SUPPORT,
      "confirmations a rule needs before it is trusted", "5", "url rules", integer(1), "url_rules_min_support"),
    S("SIMHASH_URL_RULES_MIN_PRECISION", "float 0..1", defaults.URL_RULES_MIN_PRECISION,
      "the 95% Wilson lower bound on a rule's precision must reach this (with no counter-evidence: 7 confirmations "
      "give 0.72); a trusted rule keeps its trust until the bound falls 0.05 below",
      "0.8", "url rules", fraction, "url_rules_min_precision"),
    S("SIMHASH_URL_RULES_EXPLORE", "float 0..1", defaults.URL_RULES_EXPLORE,
      "share of predicted duplicates downloaded anyway to verify the rules, per rule and kind of page, after the "
      "first two of each kind (`0`: no exploration at all)",
      "0", "url rules", fraction, "url_rules_explore"),
    S("SIMHASH_URL_RULES_CANONICAL", "bool", defaults.URL_RULES_CANONICAL,
      'learn from `<link rel="canonical">` declarations too', "False", "url rules", boolean, "url_rules_canonical"),
)
del S

_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
_BY_FIELD: dict[str, Setting] = {s.field: s for s in SETTINGS if s.field is not None}
#: The fields of ``FeatureConfig.signature()`` ("w1-c0-log-j2"), in its order.
_FEATURE_FIELDS = ("word_ngram", "char_ngram", "weighting", "cjk_ngram")
#: The settings of the parts of ``FeatureConfig.signature()``, in its order.
FEATURE_SETTINGS: tuple[str, ...] = tuple(_BY_FIELD[f].name for f in _FEATURE_FIELDS)
#: Every ``SIMHASH_*`` name simhash-scrapy reads (the did-you-mean of unknown names compares against it).
NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.ours)


def setting(name: str) -> Setting:
    """The table's row of ``name`` (``KeyError`` when simhash-scrapy reads no such setting)."""
    return _BY_NAME[name]


def setting_of(field: str) -> Setting:
    """The setting that fills a typed config's ``field`` (``"max_distance"``, ``"redis.shards"``)."""
    return _BY_FIELD[field]


def setting_names(field: str) -> str:
    """The setting name(s) of a config field, for messages; ``"features"`` (the feature signature)
    names its four settings."""
    if field == "features":
        return " / ".join(FEATURE_SETTINGS)
    return setting_of(field).name


def unknown_settings(names: Iterable[Any]) -> list[tuple[str, str | None]]:
    """The ``SIMHASH_*`` names among ``names`` that simhash-scrapy does not read, each with the closest
    known one (``core.settings.didyoumean``: transpositions count as one edit; ``None`` when none is close), sorted by name.

    A typo is otherwise silently ignored (Scrapy keeps any setting name).  A warning, not an
    error: Scrapy itself accepts unknown names, and another plugin may use the prefix too.
    """
    prefix = "SIMHASH_"
    known = [s[len(prefix):] for s in NAMES]
    unknown = []
    for name in sorted({n for n in names if isinstance(n, str) and n.startswith(prefix)}):
        if name not in _BY_NAME:
            # Compared without the prefix every name shares (it would make any two names look close).
            close = closest(name[len(prefix):], known)
            unknown.append((name, prefix + close if close else None))
    return unknown
