"""The settings table (``core.settings.settings.SETTINGS``): complete, the one source of defaults, names and errors.

* every ``SIMHASH_*`` name the package's code quotes is a row, and every field of the typed configs has one;
* each row's default is what the typed config gets from empty settings (and the dataclass's own default);
* a bad value of each setting is a ``ValueError`` whose first line names that setting;
* each documented example is a value the setting accepts;
* the store header and the Redis layout name the table's settings; the adapter reads ``-a simhash_reset``;
* backends build their configs without ``simhash_scrapy.config`` (which imports Scrapy).
"""

from __future__ import annotations

import ast
import logging
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from simhash_scrapy import config as adapter
from simhash_scrapy.backends.redis.layout import layout_mismatch
from simhash_scrapy.core.settings.config import RedisConfig, SimhashConfig
from simhash_scrapy.core.settings.settings import (
    FEATURE_SETTINGS,
    LAYERS,
    NAMES,
    SETTINGS,
    Setting,
    setting,
    setting_of,
    unknown_settings,
)
from simhash_scrapy.core.store.store import StoreConfig, StoreConfigError, check_config

ROOT = Path(__file__).resolve().parents[2]
#: Names in the code that are no settings: an environment variable and a Redis script's error tag.
NOT_SETTINGS = {"SIMHASH_SCRAPY_PURE_PYTHON", "SIMHASH_LAYOUT"}
ROWS = [pytest.param(row, id=row.name) for row in SETTINGS]


def value_of(config: SimhashConfig, field: str) -> Any:
    obj: Any = config
    for part in field.split("."):
        obj = getattr(obj, part)
    return obj


# ------------------------------------------------------------------ complete
def test_every_setting_the_code_quotes_is_a_row() -> None:
    quoted: set[str] = set()
    for path in (ROOT / "simhash_scrapy").rglob("*.py"):
        if path.name == "settings.py" and path.parent.name == "settings" and path.parent.parent.name == "core":
            continue  # the table itself
        quoted |= set(re.findall(r"""["'`](SIMHASH_[A-Z0-9_]*[A-Z0-9])\b""", path.read_text(encoding="utf-8")))
    quoted -= NOT_SETTINGS
    assert quoted, "the scan found no names: the pattern is wrong"
    assert sorted(quoted - set(NAMES)) == []
    names = [row.name for row in SETTINGS]
    assert len(names) == len(set(names))
    assert unknown_settings(names) == []


def test_every_config_field_has_one_row_and_every_row_a_real_field() -> None:
    simhash = {f.name for f in fields(SimhashConfig) if f.init} - {"redis"}
    redis = {f"redis.{f.name}" for f in fields(RedisConfig) if f.init}
    rows = [row.field for row in SETTINGS if row.field is not None]
    assert len(rows) == len(set(rows))
    assert set(rows) == simhash | redis
    # A row without a field is read by the adapter (SIMHASH_ENABLED) or is another row's fallback.
    fallbacks = {row.fallback for row in SETTINGS if row.fallback and setting(row.fallback).field is None}
    assert {row.name for row in SETTINGS if row.field is None} == {"SIMHASH_ENABLED"} | fallbacks
    assert fallbacks == {"REDIS_URL", "SCHEDULER_PERSIST", "SCHEDULER_FLUSH_ON_START"}
    assert FEATURE_SETTINGS == ("SIMHASH_WORD_NGRAM", "SIMHASH_CHAR_NGRAM", "SIMHASH_WEIGHTING", "SIMHASH_CJK_NGRAM")


@pytest.mark.parametrize("row", ROWS)
def test_each_row_is_documented(row: Setting) -> None:
    assert row.layer in LAYERS
    assert row.type and row.doc and row.example and row.default_text
    assert "\n" not in row.doc


# ------------------------------------------------------------------ defaults
@pytest.mark.parametrize("row", [pytest.param(row, id=row.name) for row in SETTINGS if row.default_doc.startswith("`")])
def test_a_written_default_is_the_default(row: Setting) -> None:
    # ``default_doc`` writes the default by hand ("`30` (`simhash_scrapy.MIN_TOKENS`)"): when it starts with a
    # value, that value is the row's default (a changed default cannot leave the reference behind).
    source = row.default_doc[1:row.default_doc.index("`", 1)]
    try:
        value = ast.literal_eval(source)
    except (ValueError, SyntaxError):
        assert source in {s.name for s in SETTINGS}  # another setting, e.g. `SIMHASH_ACTION`
        return
    assert (row.default is None) if value is None else row.parse(row.name, value) == row.default


@pytest.mark.parametrize("row", ROWS)
def test_the_default_is_what_empty_settings_give(row: Setting) -> None:
    assert row.read({}) == row.default
    assert row.read(Settings()) == row.default
    if row.field is None:
        return
    from_empty = adapter.from_settings(Settings())
    assert value_of(from_empty, row.field) == row.default
    assert value_of(SimhashConfig.from_settings({}), row.field) == row.default
    assert value_of(SimhashConfig(), row.field) == row.default  # the dataclass's own default


def test_a_fallback_is_the_default_when_the_setting_is_unset() -> None:
    assert SimhashConfig.from_settings({"SIMHASH_ACTION": "flag"}).item_action == "flag"
    assert SimhashConfig.from_settings({"SIMHASH_ACTION": "flag", "SIMHASH_ITEM_ACTION": "drop"}).item_action == "drop"
    assert RedisConfig.from_settings({"SCHEDULER_PERSIST": "1"}).persist is True
    assert RedisConfig.from_settings({"SCHEDULER_PERSIST": "1", "SIMHASH_REDIS_PERSIST": "0"}).persist is False
    assert RedisConfig.from_settings({"REDIS_URL": "redis://a:1/0", "SIMHASH_REDIS_URL": ""}).url == "redis://a:1/0"
    assert SimhashConfig.from_settings({"SIMHASH_LOG_LEVEL": "INFO"}).log_level == logging.INFO


# ------------------------------------------------------------------ errors
def build(values: dict[str, Any]) -> SimhashConfig:
    return adapter.from_settings(Settings(values))


@pytest.mark.parametrize("row", ROWS)
def test_a_value_of_no_accepted_type_is_an_error_naming_the_setting(row: Setting) -> None:
    class Strange:
        def __repr__(self) -> str:
            return "<strange>"

    with pytest.raises(ValueError) as info:
        build({row.name: Strange()})
    assert str(info.value).splitlines()[0].startswith(row.name)


#: A command-line string (``-s NAME=...``) each of these settings refuses.
BAD_STRINGS = {
    "SIMHASH_ENABLED": "maybe", "SIMHASH_MAX_DISTANCE": "64", "SIMHASH_BLOCKS": "65", "SIMHASH_TEXT_MODE": "all",
    "SIMHASH_WORD_NGRAM": "0", "SIMHASH_CHAR_NGRAM": "-1", "SIMHASH_WEIGHTING": "idf", "SIMHASH_CJK_NGRAM": "0",
    "SIMHASH_MIN_TOKENS": "0", "SIMHASH_ONE_EDIT_BELOW": "256", "SIMHASH_MAX_BYTES": "0",
    "SIMHASH_HTTP_STATUSES": "200,99", "SIMHASH_CONTENT_TYPES": "html", "SIMHASH_DISTINCT_SELECTORS": "..price",
    "SIMHASH_ACTION": "delete", "SIMHASH_SCOPE": "site", "SIMHASH_UNCHANGED": "keep", "SIMHASH_EDITED": "keep",
    "SIMHASH_CONDITIONAL": "sometimes", "SIMHASH_REPLAY": "again", "SIMHASH_TEMPLATES": "learned", "SIMHASH_SECOND_SIMHASH": "twice",
    "SIMHASH_CONTAINMENT": "contained",
    "SIMHASH_IDENTITY_SIGNALS": "declared",
    "SIMHASH_KEEP_PER_CLUSTER": "0", "SIMHASH_DEBUG": "loud",
    "SIMHASH_LOG_LEVEL": "LOUD", "SIMHASH_BACKEND": "mongo", "SIMHASH_THREADS": "2", "SIMHASH_ITEM_FORMAT": "pdf",
    "SIMHASH_ITEM_URL_FIELD": " ", "SIMHASH_ITEM_ACTION": "keep", "SIMHASH_REPORT_URI": "s3://bucket/x.jsonl",
    "SIMHASH_REPORT_FORMAT": "xml", "SIMHASH_REPRESENTATIVE": "last", "SIMHASH_RESET": "later",
    "SIMHASH_FLUSH_INTERVAL": "-1",
    "SIMHASH_REDIS_URL": "http://redis:6379", "REDIS_URL": "localhost:6379", "REDIS_PORT": "http",
    "REDIS_PARAMS": "[1]", "SIMHASH_REDIS_KEY": "%(nope)s", "SIMHASH_REDIS_PERSIST": "perhaps",
    "SCHEDULER_PERSIST": "perhaps", "SIMHASH_REDIS_FLUSH_ON_START": "perhaps", "SCHEDULER_FLUSH_ON_START": "perhaps",
    "SIMHASH_REDIS_TTL": "soon", "SIMHASH_REDIS_FAIL_OPEN": "maybe", "SIMHASH_REDIS_CLUSTER": "maybe",
    "SIMHASH_REDIS_HEARTBEAT": "61", "SIMHASH_REDIS_SHARDS": "1025", "SIMHASH_REDIS_CAPACITY": "0",
    "SIMHASH_REDIS_TABLE_BLOCKS": "17", "SIMHASH_REDIS_BUCKET_BITS": "7", "SIMHASH_REDIS_GLOBAL_CACHE": "-1",
    "SIMHASH_REDIS_BUCKET_CACHE": "lots", "SIMHASH_REDIS_MODULE": "sometimes",
    "SIMHASH_URL_RULES": "on", "SIMHASH_URL_RULES_MIN_SUPPORT": "0", "SIMHASH_URL_RULES_MIN_PRECISION": "1.5",
    "SIMHASH_URL_RULES_EXPLORE": "-0.1", "SIMHASH_URL_RULES_CANONICAL": "maybe",
}  # fmt: skip
#: Settings whose every string is a value (a name, a path): no bad command-line string exists.
ANY_STRING = {"SIMHASH_ITEM_FIELD", "SIMHASH_DIR", "JOBDIR", "REDIS_HOST"}


def test_every_setting_has_a_bad_string_or_takes_any_string() -> None:
    assert set(BAD_STRINGS) | ANY_STRING == {row.name for row in SETTINGS}
    assert not set(BAD_STRINGS) & ANY_STRING


@pytest.mark.parametrize(("name", "value"), sorted(BAD_STRINGS.items()))
def test_a_bad_command_line_string_is_an_error_naming_the_setting(name: str, value: str) -> None:
    with pytest.raises(ValueError) as info:
        build({name: value})
    assert str(info.value).splitlines()[0].startswith(name)


@pytest.mark.parametrize("row", ROWS)
def test_the_documented_example_is_accepted(row: Setting) -> None:
    value = ast.literal_eval(row.example)
    parsed = row.parse(row.name, value)
    if row.name == "SIMHASH_ENABLED":  # its example turns the plugin off
        assert parsed is False
        return
    config = build({row.name: value})
    if row.field == "store_dir":  # relative: under the project's .scrapy folder (the adapter)
        assert Path(config.store_dir or "").name == parsed == "simhash"
    elif row.field is not None:
        assert value_of(config, row.field) == parsed


def test_disabled_is_not_configured_in_the_adapter_only() -> None:
    with pytest.raises(NotConfigured, match="SIMHASH_ENABLED"):
        build({"SIMHASH_ENABLED": "false"})
    # The core's typed config is not the crawl: it has no such notion.
    assert SimhashConfig.from_settings({"SIMHASH_ENABLED": False}) == SimhashConfig()


# ------------------------------------------------------------------ names used elsewhere
def test_the_store_header_and_the_redis_layout_name_the_tables_settings(tmp_path: Path) -> None:
    wanted = StoreConfig(4, 3, "w1-c0-log-j2", "main")
    cases = [
        (StoreConfig(3, 3, "w1-c0-log-j2", "main"), setting_of("max_distance").name),
        (StoreConfig(4, 5, "w1-c0-log-j2", "main"), setting_of("blocks").name),
        (StoreConfig(4, 3, "w1-c0-tf-j2", "main"), setting_of("weighting").name),
        (StoreConfig(4, 3, "w1-c0-log-j2", "visible"), setting_of("text_mode").name),
    ]
    for found, name in cases:
        with pytest.raises(StoreConfigError) as info:
            check_config(found, wanted, tmp_path / "x.store")
        assert info.value.setting == name
    layout = "v=4 k=4 features=w1-c0-log-j2 text=main"
    assert "(SIMHASH_REDIS_SHARDS)" in layout_mismatch(layout + " shards=4", layout, "k")
    assert "(SIMHASH_MAX_DISTANCE)" in layout_mismatch(layout.replace("k=4", "k=3"), layout, "k")
    assert "(SIMHASH_CJK_NGRAM)" in layout_mismatch(layout.replace("j2", "j3"), layout, "k")
    assert "(the simhash-scrapy version (key layout))" in layout_mismatch(layout.replace("v=4", "v=3"), layout, "k")


def test_the_adapter_reads_the_reset_spider_argument() -> None:
    def crawler(**spider: Any) -> Any:
        return SimpleNamespace(settings=Settings(), spider=SimpleNamespace(**spider))

    assert adapter.from_crawler(crawler()).reset is False
    assert adapter.from_crawler(crawler(simhash_reset="1")).reset is True
    assert adapter.from_crawler(crawler(simhash_reset="0")).reset is False
    assert adapter.from_crawler(SimpleNamespace(settings=Settings(), spider=None)).reset is False
    with pytest.raises(ValueError, match=r"^-a simhash_reset must be a boolean"):
        adapter.from_crawler(crawler(simhash_reset="later"))


def test_setting_lookups() -> None:
    assert setting("SIMHASH_MAX_DISTANCE").field == "max_distance"
    assert setting_of("redis.shards").name == "SIMHASH_REDIS_SHARDS"
    with pytest.raises(KeyError):
        setting("SIMHASH_NO_SUCH_THING")
    assert adapter.SETTINGS == NAMES


def test_backends_build_their_configs_without_the_scrapy_adapter(tmp_path: Path) -> None:
    code = f"""
import sys
from importlib.abc import MetaPathFinder
class NoScrapy(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("scrapy", "twisted"):
            raise ImportError(f"{{name}} is not installed here")
sys.meta_path.insert(0, NoScrapy())
import asyncio
from simhash_scrapy.backends.persistent import PersistentBackend
from simhash_scrapy.core.settings.config import RedisConfig, SimhashConfig
config = SimhashConfig.from_settings({{"SIMHASH_DIR": {str(tmp_path)!r}, "SIMHASH_MAX_DISTANCE": "3"}})
backend = PersistentBackend(config)
asyncio.run(backend.open("spider"))
asyncio.run(backend.close())
redis = RedisConfig.from_settings({{"REDIS_URL": "redis://u:pw@h:1/0", "SIMHASH_REDIS_SHARDS": "2"}})
print(backend.path.name, redis.describe(), redis.shards, "simhash_scrapy.config" in sys.modules)
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["spider.store", "redis://u:***@h:1/0", "2", "False"]
