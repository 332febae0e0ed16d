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

import logging
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from scrapy.exceptions import NotConfigured

from . import MIN_TOKENS
from .backends import BACKENDS
from .features import DEFAULT_FEATURES, FeatureConfig
from .index import MAX_TABLES, BlockPermutedIndex

__all__ = [
    "SimhashConfig",
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

#: Default of ``SIMHASH_TEXT_MODE``: ``"main"`` fingerprints the main content
#: (boilerplate such as navigation, headers and footers removed), ``"visible"``
#: all visible text.  The one place this default is defined.
DEFAULT_TEXT_MODE = "main"
TEXT_MODES = ("main", "visible")
ACTIONS = ("drop", "flag")
SCOPES = ("spider", "domain")
REPORT_FORMATS = ("jsonl", "csv", "html")
ITEM_FORMATS = ("auto", "html", "text")
WEIGHTINGS = ("tf", "sublinear", "binary")
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_CONTENT_TYPES = ("text/html", "application/xhtml+xml")
DEFAULT_HTTP_STATUSES = tuple(range(200, 300))
# Report file extension -> format, used when SIMHASH_REPORT_FORMAT is not set.
_EXTENSION_FORMATS = {".jsonl": "jsonl", ".jl": "jsonl", ".json": "jsonl", ".csv": "csv", ".html": "html", ".htm": "html"}
_LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{name} must be a boolean (True/False, 1/0, 'true'/'false'), got {value!r}")


def _int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        number = int(value.strip())
    if number is not None and (minimum is None or number >= minimum) and (maximum is None or number <= maximum):
        return number
    if minimum is not None and maximum is not None:
        accepted = f"an integer from {minimum} to {maximum}"
    elif minimum is not None:
        accepted = f"an integer >= {minimum}"
    else:
        accepted = "an integer"
    raise ValueError(f"{name} must be {accepted}, got {value!r}")


def _choice(name: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")


def _list(name: str, value: Any) -> list[Any]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple, set, frozenset, range)):
        return list(value)
    raise ValueError(f"{name} must be a list (or a comma-separated string), got {value!r}")


def _optional_str(name: str, value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value.strip()
    raise ValueError(f"{name} must be a string or None, got {value!r}")


def _log_level(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        text = value.strip().upper()
        if text in _LOG_LEVELS:
            return int(getattr(logging, text))
        if text.isdigit():
            return int(text)
    raise ValueError(f"{name} must be a logging level ({', '.join(_LOG_LEVELS)} or a number), got {value!r}")


def report_format_for(uri: str) -> str:
    """The report format implied by ``uri``'s extension (``jsonl`` when there is none we know)."""
    path = urlparse(uri).path if "://" in uri else uri
    ext = posixpath.splitext(path.replace("\\", "/"))[1].lower()
    return _EXTENSION_FORMATS.get(ext, "jsonl")


@dataclass(frozen=True)
class SimhashConfig:
    """The validated ``SIMHASH_*`` settings of one crawler (see ``docs/readme/plugin.md``)."""

    action: str = "drop"
    max_distance: int = 4
    blocks: int | None = None
    text_mode: str = DEFAULT_TEXT_MODE
    word_ngram: int = DEFAULT_FEATURES.word_ngram
    char_ngram: int = DEFAULT_FEATURES.char_ngram
    weighting: str = DEFAULT_FEATURES.weighting
    cjk_ngram: int = DEFAULT_FEATURES.cjk_ngram
    min_tokens: int = MIN_TOKENS
    max_bytes: int = DEFAULT_MAX_BYTES
    http_statuses: frozenset[int] = frozenset(DEFAULT_HTTP_STATUSES)
    content_types: frozenset[str] = frozenset(DEFAULT_CONTENT_TYPES)
    scope: str = "spider"
    report_uri: str | None = None
    report_format: str | None = None
    debug: bool = False
    log_level: int = logging.DEBUG
    item_field: str | None = None
    item_url_field: str = "url"
    item_format: str = "auto"
    item_action: str = "drop"
    backend: str = "memory"
    threads: bool = True
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
    def main_content(self) -> bool:
        """``True`` when only the main content is fingerprinted (``SIMHASH_TEXT_MODE = "main"``)."""
        return self.text_mode == "main"

    @property
    def keep_text(self) -> bool:
        """Whether page texts are kept for the report (the HTML report shows diffs)."""
        return self.report_format == "html"

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

        if not _bool("SIMHASH_ENABLED", get("SIMHASH_ENABLED", True)):
            raise NotConfigured("simhash-scrapy is disabled (SIMHASH_ENABLED = False)")

        action = _choice("SIMHASH_ACTION", get("SIMHASH_ACTION", "drop"), ACTIONS)
        max_distance = _int("SIMHASH_MAX_DISTANCE", get("SIMHASH_MAX_DISTANCE", 4), 0, 63)
        raw_blocks = settings.get("SIMHASH_BLOCKS")
        blocks = None if raw_blocks in (None, "", "None", "none") else _int("SIMHASH_BLOCKS", raw_blocks, 1, 64)
        try:
            BlockPermutedIndex(max_distance, blocks)
        except ValueError as exc:
            raise ValueError(
                f"SIMHASH_BLOCKS={blocks!r} does not fit SIMHASH_MAX_DISTANCE={max_distance}: {exc} "
                f"(accepted: None for SIMHASH_MAX_DISTANCE + 1, or an integer from "
                f"{max_distance + 1} to 64 with C(blocks, max_distance) <= {MAX_TABLES} tables)"
            ) from None

        text_mode = _choice("SIMHASH_TEXT_MODE", get("SIMHASH_TEXT_MODE", DEFAULT_TEXT_MODE), TEXT_MODES)
        word_ngram = _int("SIMHASH_WORD_NGRAM", get("SIMHASH_WORD_NGRAM", DEFAULT_FEATURES.word_ngram), 1)
        char_ngram = _int("SIMHASH_CHAR_NGRAM", get("SIMHASH_CHAR_NGRAM", DEFAULT_FEATURES.char_ngram), 0)
        weighting = _choice("SIMHASH_WEIGHTING", get("SIMHASH_WEIGHTING", DEFAULT_FEATURES.weighting), WEIGHTINGS)
        cjk_ngram = _int("SIMHASH_CJK_NGRAM", get("SIMHASH_CJK_NGRAM", DEFAULT_FEATURES.cjk_ngram), 1)
        min_tokens = _int("SIMHASH_MIN_TOKENS", get("SIMHASH_MIN_TOKENS", MIN_TOKENS), 1)
        max_bytes = _int("SIMHASH_MAX_BYTES", get("SIMHASH_MAX_BYTES", DEFAULT_MAX_BYTES), 1)

        statuses = _list("SIMHASH_HTTP_STATUSES", get("SIMHASH_HTTP_STATUSES", DEFAULT_HTTP_STATUSES))
        http_statuses = frozenset(_int("SIMHASH_HTTP_STATUSES (each status)", s, 100, 599) for s in statuses)
        if not http_statuses:
            raise ValueError("SIMHASH_HTTP_STATUSES must list at least one HTTP status (100..599), got an empty list")

        types = _list("SIMHASH_CONTENT_TYPES", get("SIMHASH_CONTENT_TYPES", DEFAULT_CONTENT_TYPES))
        content_types = set()
        for value in types:
            if not isinstance(value, str) or value.count("/") != 1 or not all(value.split("/")):
                raise ValueError(
                    f"SIMHASH_CONTENT_TYPES must list media types such as 'text/html', got {value!r} in {types!r}"
                )
            content_types.add(value.strip().lower())
        if not content_types:
            raise ValueError("SIMHASH_CONTENT_TYPES must list at least one media type, e.g. ['text/html']")

        scope = _choice("SIMHASH_SCOPE", get("SIMHASH_SCOPE", "spider"), SCOPES)

        report_uri = _optional_str("SIMHASH_REPORT_URI", settings.get("SIMHASH_REPORT_URI"))
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
            report_format = _choice("SIMHASH_REPORT_FORMAT", raw_format, REPORT_FORMATS)

        debug = _bool("SIMHASH_DEBUG", get("SIMHASH_DEBUG", False))
        log_level = _log_level("SIMHASH_LOG_LEVEL", get("SIMHASH_LOG_LEVEL", "DEBUG"))

        item_field = _optional_str("SIMHASH_ITEM_FIELD", settings.get("SIMHASH_ITEM_FIELD"))
        item_url_field = _optional_str("SIMHASH_ITEM_URL_FIELD", get("SIMHASH_ITEM_URL_FIELD", "url"))
        if item_url_field is None:
            raise ValueError("SIMHASH_ITEM_URL_FIELD must name an item field (default 'url'), got an empty value")
        item_format = _choice("SIMHASH_ITEM_FORMAT", get("SIMHASH_ITEM_FORMAT", "auto"), ITEM_FORMATS)
        item_action = _choice("SIMHASH_ITEM_ACTION", get("SIMHASH_ITEM_ACTION", action), ACTIONS)

        backend = get("SIMHASH_BACKEND", "memory")
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
        threads = _bool("SIMHASH_THREADS", get("SIMHASH_THREADS", True))

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
            )
        except ValueError as exc:  # FeatureConfig: already checked above, kept as a safety net
            raise ValueError(f"SIMHASH feature settings (WORD_NGRAM, CHAR_NGRAM, WEIGHTING, CJK_NGRAM): {exc}") from None
