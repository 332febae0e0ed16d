"""The did-you-mean of a misspelt setting name (``core.settings.didyoumean``, ``core.settings.settings.unknown_settings``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from simhash_scrapy.core.settings.didyoumean import DOCS_URL, SETTINGS_REFERENCE_URL, closest, edit_distance
from simhash_scrapy.core.settings.settings import NAMES, unknown_settings

ROOT = Path(__file__).resolve().parents[2]


def typos(name: str) -> set[str]:
    """Every one-edit typo of ``name``: two neighbours swapped, a letter left out, doubled or replaced."""
    out = set()
    for i in range(len(name)):
        out.add(name[:i] + name[i + 1 :])
        out.add(name[:i] + name[i] + name[i:])
        out.add(name[:i] + ("X" if name[i] != "X" else "Q") + name[i + 1 :])
        if i + 1 < len(name):
            out.add(name[:i] + name[i + 1] + name[i] + name[i + 2 :])
    out.discard(name)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_one_edit_typo_of_every_setting_names_it(name: str) -> None:
    suffix = name[len("SIMHASH_") :]
    for typo in typos(suffix):
        if "SIMHASH_" + typo in NAMES:
            continue  # a typo that is another setting is that setting
        assert unknown_settings(["SIMHASH_" + typo]) == [("SIMHASH_" + typo, name)], typo


def test_transpositions_and_other_tools_words() -> None:
    assert edit_distance("TRESHOLD", "THRESHOLD") == 1  # a transposition is one edit (difflib missed it)
    assert edit_distance("AB", "BA") == 1 and edit_distance("ABC", "CBA") == 2 and edit_distance("", "ABC") == 3
    assert edit_distance("KITTEN", "SITTING") == 3 and edit_distance("KITTEN", "SITTING", limit=1) == 2
    assert unknown_settings(["SIMHASH_TRESHOLD", "SIMHASH_THRESHOLD", "SIMHASH_DISTANCE", "SIMHASH_REPORT"]) == [
        ("SIMHASH_DISTANCE", "SIMHASH_MAX_DISTANCE"), ("SIMHASH_REPORT", "SIMHASH_REPORT_URI"),
        ("SIMHASH_THRESHOLD", "SIMHASH_MAX_DISTANCE"), ("SIMHASH_TRESHOLD", "SIMHASH_MAX_DISTANCE"),
    ]  # fmt: skip
    assert unknown_settings(["SIMHASH_NO_SUCH_THING", "SIMHASH_X"]) == [("SIMHASH_NO_SUCH_THING", None),
                                                                      ("SIMHASH_X", None)]
    assert closest("ZZZZZZZZ", ["MAX_DISTANCE"]) is None


def test_the_settings_reference_url_is_the_published_docs() -> None:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert urls["Documentation"] == DOCS_URL
    assert SETTINGS_REFERENCE_URL.startswith(DOCS_URL)
    # the page the URL names is the one the docs site builds (docs/reference/settings.md -> .html)
    page = SETTINGS_REFERENCE_URL[len(DOCS_URL) :]
    assert re.fullmatch(r"[a-z/]+\.html", page) and (ROOT / "docs" / page.replace(".html", ".md")).is_file()
