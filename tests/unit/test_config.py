"""SimhashConfig: defaults, parsing of settings.py and command-line values, clear errors."""

from __future__ import annotations

import logging

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

import simhash_scrapy
from simhash_scrapy.config import DEFAULT_TEXT_MODE, SimhashConfig, from_settings


def config(**settings: object) -> SimhashConfig:
    """The crawl's config (the Scrapy adapter: ``SIMHASH_ENABLED`` is ``NotConfigured`` there)."""
    return from_settings(Settings({f"SIMHASH_{k}": v for k, v in settings.items()}))


def test_defaults() -> None:
    c = config()
    assert c.action == "drop"
    assert c.max_distance == 4
    assert c.blocks is None
    assert c.text_mode == DEFAULT_TEXT_MODE == "main"
    assert c.main_content is True
    assert (c.word_ngram, c.char_ngram, c.weighting, c.cjk_ngram) == (1, 0, "log", 2)
    assert c.features == simhash_scrapy.FeatureConfig()
    assert c.min_tokens == simhash_scrapy.MIN_TOKENS
    assert c.max_bytes == 10 * 1024 * 1024
    assert c.http_statuses == frozenset(range(200, 300))
    assert c.content_types == {"text/html", "application/xhtml+xml"}
    assert c.scope == "spider"
    assert c.report_uri is None and c.report_format is None
    assert c.debug is False
    assert c.log_level == logging.DEBUG
    assert c.item_field is None and c.item_url_field == "url" and c.item_format == "auto"
    assert c.item_action == "drop"
    assert c.backend == "memory"
    assert c.threads is True
    assert c.keep_text is False


def test_python_values() -> None:
    c = config(
        ACTION="flag",
        MAX_DISTANCE=5,
        BLOCKS=7,
        TEXT_MODE="visible",
        WORD_NGRAM=2,
        WEIGHTING="sublinear",
        MIN_TOKENS=20,
        MAX_BYTES=1000,
        HTTP_STATUSES=[200, 203],
        CONTENT_TYPES=["text/html"],
        SCOPE="domain",
        REPORT_URI="reports/%(name)s.html",
        DEBUG=True,
        LOG_LEVEL="INFO",
        ITEM_FIELD="body",
        BACKEND="redis",
    )
    assert (c.action, c.max_distance, c.blocks, c.text_mode) == ("flag", 5, 7, "visible")
    assert c.main_content is False
    assert c.features == simhash_scrapy.FeatureConfig(word_ngram=2, weighting="sublinear")
    assert c.http_statuses == {200, 203}
    assert c.content_types == {"text/html"}
    assert c.report_format == "html" and c.keep_text is True
    assert c.log_level == logging.INFO
    assert c.item_action == "flag", "SIMHASH_ITEM_ACTION defaults to SIMHASH_ACTION"
    assert c.backend == "redis"


def test_command_line_strings() -> None:
    # scrapy crawl -s SIMHASH_MAX_DISTANCE=4 ... gives strings
    c = config(
        ENABLED="true",
        MAX_DISTANCE="4",
        BLOCKS="None",
        HTTP_STATUSES="200,204",
        CONTENT_TYPES="text/html, application/xhtml+xml",
        DEBUG="1",
        LOG_LEVEL="20",
        THREADS="false",
    )
    assert c.max_distance == 4 and c.blocks is None
    assert c.http_statuses == {200, 204}
    assert c.content_types == {"text/html", "application/xhtml+xml"}
    assert c.debug is True and c.log_level == 20 and c.threads is False


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("out/%(name)s.jsonl", "jsonl"),
        ("out/%(name)s.jl", "jsonl"),
        ("out/%(name)s.CSV", "csv"),
        ("file:///tmp/%(name)s-%(time)s.html", "html"),
        ("out/report", "jsonl"),
    ],
)
def test_report_format_from_extension(uri: str, expected: str) -> None:
    assert config(REPORT_URI=uri).report_format == expected


def test_explicit_report_format_wins() -> None:
    assert config(REPORT_URI="out/x.txt", REPORT_FORMAT="csv").report_format == "csv"


def test_disabled_raises_not_configured() -> None:
    with pytest.raises(NotConfigured, match="SIMHASH_ENABLED"):
        config(ENABLED=False)
    with pytest.raises(NotConfigured):
        config(ENABLED="0")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ENABLED": "maybe"}, r"SIMHASH_ENABLED must be a boolean .* got 'maybe'"),
        ({"ACTION": "delete"}, r"SIMHASH_ACTION must be one of 'drop', 'flag', got 'delete'"),
        ({"MAX_DISTANCE": -1}, r"SIMHASH_MAX_DISTANCE must be an integer from 0 to 63, got -1"),
        ({"MAX_DISTANCE": "three"}, r"SIMHASH_MAX_DISTANCE must be an integer from 0 to 63, got 'three'"),
        ({"MAX_DISTANCE": 2.5}, r"SIMHASH_MAX_DISTANCE must be an integer"),
        ({"MAX_DISTANCE": True}, r"SIMHASH_MAX_DISTANCE must be an integer"),
        ({"BLOCKS": 1}, r"SIMHASH_BLOCKS=1 does not fit SIMHASH_MAX_DISTANCE=4.*from 5 to 64.*from 2 to 4"),
        ({"BLOCKS": 40, "MAX_DISTANCE": 10}, r"SIMHASH_BLOCKS=40 .*tables"),
        ({"TEXT_MODE": "all"}, r"SIMHASH_TEXT_MODE must be one of 'main', 'visible', got 'all'"),
        ({"WORD_NGRAM": 0}, r"SIMHASH_WORD_NGRAM must be an integer >= 1, got 0"),
        ({"CHAR_NGRAM": -2}, r"SIMHASH_CHAR_NGRAM must be an integer >= 0"),
        ({"WEIGHTING": "idf"}, r"SIMHASH_WEIGHTING must be one of 'log', 'sublinear', 'tf', 'binary', got 'idf'"),
        ({"MIN_TOKENS": 0}, r"SIMHASH_MIN_TOKENS must be an integer >= 1"),
        ({"ONE_EDIT_BELOW": 300}, r"SIMHASH_ONE_EDIT_BELOW must be an integer from 0 to 255, got 300"),
        ({"ONE_EDIT_BELOW": "many"}, r"SIMHASH_ONE_EDIT_BELOW must be an integer from 0 to 255"),
        ({"MAX_BYTES": "lots"}, r"SIMHASH_MAX_BYTES must be an integer >= 1, got 'lots'"),
        ({"HTTP_STATUSES": [200, 700]}, r"SIMHASH_HTTP_STATUSES .*from 100 to 599, got 700"),
        ({"HTTP_STATUSES": []}, r"SIMHASH_HTTP_STATUSES must list at least one"),
        ({"HTTP_STATUSES": 200}, r"SIMHASH_HTTP_STATUSES must be a list"),
        ({"CONTENT_TYPES": ["html"]}, r"SIMHASH_CONTENT_TYPES must list media types such as 'text/html', got 'html'"),
        ({"SCOPE": "site"}, r"SIMHASH_SCOPE must be one of 'spider', 'domain', got 'site'"),
        ({"REPORT_URI": "s3://bucket/x.jsonl"}, r"SIMHASH_REPORT_URI must be a local path or a file:// URI"),
        ({"REPORT_URI": 5}, r"SIMHASH_REPORT_URI must be a string"),
        # (issue 37: errors that named no setting, or values accepted)
        ({"REPORT_URI": "r\x00.jsonl"}, r"SIMHASH_REPORT_URI must be a path without NUL characters"),
        ({"REPORT_URI": "r" * 100_000}, r"SIMHASH_REPORT_URI is too long a path \(100,000 characters"),
        ({"DIR": "s\x00"}, r"SIMHASH_DIR must be a path without NUL characters"),
        ({"DIR": "s" * 100_000}, r"SIMHASH_DIR is too long a path"),
        ({"DIR": "a/" + "s" * 256}, r"SIMHASH_DIR is too long a path"),
        ({"REDIS_TTL": "inf"}, r"SIMHASH_REDIS_TTL must be a number of seconds >= 0"),
        ({"REDIS_TTL": 1e30}, r"SIMHASH_REDIS_TTL must be a number of seconds >= 0"),
        ({"FLUSH_INTERVAL": float("inf")}, r"SIMHASH_FLUSH_INTERVAL must be a finite number up to 1e\+09, got inf"),
        ({"FLUSH_INTERVAL": "1e30"}, r"SIMHASH_FLUSH_INTERVAL must be a finite number up to 1e\+09"),
        ({"FLUSH_INTERVAL": "nan"}, r"SIMHASH_FLUSH_INTERVAL must be a number >= 0"),
        ({"REPORT_FORMAT": "xml"}, r"SIMHASH_REPORT_FORMAT must be one of 'jsonl', 'csv', 'html', got 'xml'"),
        ({"LOG_LEVEL": "LOUD"}, r"SIMHASH_LOG_LEVEL must be a logging level"),
        ({"ITEM_FORMAT": "pdf"}, r"SIMHASH_ITEM_FORMAT must be one of 'auto', 'html', 'text'"),
        ({"ITEM_ACTION": "keep"}, r"SIMHASH_ITEM_ACTION must be one of 'drop', 'flag'"),
        ({"ITEM_URL_FIELD": " "}, r"SIMHASH_ITEM_URL_FIELD must name an item field"),
        ({"BACKEND": "mongo"}, r"SIMHASH_BACKEND must be 'memory', 'redis', 'redis-global' or a class path"),
        ({"BACKEND": 3}, r"SIMHASH_BACKEND must be 'memory', 'redis', 'redis-global' or a class path"),
        ({"THREADS": "sometimes"}, r"SIMHASH_THREADS must be a boolean"),
    ],
)
def test_bad_values_name_the_setting(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config(**settings)


def test_frozen() -> None:
    c = config()
    with pytest.raises(AttributeError):
        c.action = "flag"  # type: ignore[misc]


def test_plain_mapping_is_accepted() -> None:
    assert SimhashConfig.from_settings({"SIMHASH_ACTION": "flag"}).action == "flag"
