"""TEMPORARY ADAPTER (delete at merge): the settings records built from the README's old settings tables.

Until ``simhash_scrapy.core.settings`` (branch ``settings``) is merged, the settings reference is
generated from these records instead: the rows of the README's four settings tables as they were
(``legacy_settings_rows.txt``: the main table, the store's, Redis' and the URL rules', one row per
setting, the richer row kept where two tables had one), turned into records with the fields of
``simhash_scrapy.core.settings.Setting`` the docs read (``name, type, default, default_doc, doc,
example, layer``). ``simhash_docs.load_settings`` uses the real table whenever it can be imported;
once it is merged, delete this file and ``legacy_settings_rows.txt``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The layers, titled as in ``simhash_scrapy.core.settings.LAYERS`` (branch ``settings``).
LAYERS: dict[str, str] = {
    "core": "Detection: what is fingerprinted and how (the algorithm core)",
    "glue": "The crawl: what happens to near-duplicates, re-crawled pages, logs and threads",
    "pipeline": "Items: the item pipeline",
    "report": "Reports",
    "store": "Persistence: the store file kept across crawls",
    "redis": "The Redis backend (a crawl shared by several workers)",
    "url rules": "URL rules: duplicates skipped before download",
}


@dataclass(frozen=True)
class LegacySetting:
    name: str
    type: str
    default: Any
    doc: str
    example: str
    layer: str
    default_doc: str = ""


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` inside a cell is not a separator)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def _source(cell: str) -> str:
    """A cell that is one code span -> the Python source in it (the ``example`` field's form)."""
    match = re.fullmatch(r"`([^`]+)`", cell)
    return match.group(1) if match else cell


def settings() -> tuple[LegacySetting, ...]:
    records = []
    rows = Path(__file__).with_name("legacy_settings_rows.txt").read_text(encoding="utf-8")
    for line in rows.splitlines():
        layer, row = line.split("\t", 1)
        name, type_, default, example, doc = _cells(row)
        records.append(LegacySetting(_source(name), type_, None, doc, _source(example), layer, default_doc=default))
    return tuple(records)
