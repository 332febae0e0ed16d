"""The "did you mean" of a misspelt setting name (``core.settings.settings.unknown_settings``).  Pure Python, no Scrapy.

``closest(name, known)`` compares the name with every known one by the
optimal string alignment distance (``edit_distance``: insertions, deletions,
substitutions and *transpositions* of two neighbouring letters each cost one;
``difflib``'s ratio misses ``TRESHOLD`` -> ``THRESHOLD``), and with the words
people bring from other tools (``ALIASES``: ``THRESHOLD`` is what
simhash-scrapy calls ``MAX_DISTANCE``).  A name is close when at most a
quarter of its letters (at least one, at most three; none for a name of
fewer than four letters) need an edit; ties go
to the first known name; ``difflib`` answers when nothing is that close (a
word left out: ``DISTANCE`` -> ``MAX_DISTANCE``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

__all__ = ["edit_distance", "closest", "ALIASES", "DOCS_URL", "SETTINGS_REFERENCE_URL"]

#: The documentation site (``pyproject.toml``'s ``[project.urls] Documentation``; a test keeps them equal).
DOCS_URL = "https://simhash-scrapy.readthedocs.io/en/latest/"
#: Where a user who installed the package (no checkout, no ``docs/`` folder) finds every setting.
SETTINGS_REFERENCE_URL = DOCS_URL + "reference/settings.html"

#: Words of other tools (and of the papers) -> the setting, without its ``SIMHASH_`` prefix.
ALIASES: Mapping[str, str] = {
    "THRESHOLD": "MAX_DISTANCE",
    "HAMMING_DISTANCE": "MAX_DISTANCE",
    "MAX_HAMMING_DISTANCE": "MAX_DISTANCE",
    "K": "MAX_DISTANCE",
    "ENABLE": "ENABLED",
    "REPORT": "REPORT_URI",
    "REPORT_FILE": "REPORT_URI",
    "REPORT_PATH": "REPORT_URI",
    "STORE": "DIR",
    "STORE_DIR": "DIR",
    "DIRECTORY": "DIR",
}


def edit_distance(a: str, b: str, limit: int | None = None) -> int:
    """The optimal string alignment distance of ``a`` and ``b``; with ``limit``, any value above it may
    be returned as ``limit + 1`` (the rows are cut short)."""
    if a == b:
        return 0
    if limit is not None and abs(len(a) - len(b)) > limit:
        return limit + 1  # (each edit changes the length by one at most)
    previous: list[int] | None = None
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            value = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if previous is not None and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                value = min(value, previous[j - 2] + 1)
            current[j] = value
        previous, row = row, current
        if limit is not None and min(row) > limit:
            return limit + 1
    return row[-1]


def _budget(name: str) -> int:
    """The edits a name of this length may need: none below four letters (``X`` is not ``K``), then a quarter."""
    return 0 if len(name) < 4 else max(1, min(3, len(name) // 4))


def closest(name: str, known: Sequence[str]) -> str | None:
    """The known name ``name`` most likely misspells (``known`` and ``name`` without the common prefix)."""
    budget = _budget(name)
    best: tuple[int, int] | None = None  # (distance, position in the candidates)
    candidates = [(k, k) for k in known] + [(alias, target) for alias, target in ALIASES.items() if target in known]
    for position, (spelling, _) in enumerate(candidates):
        d = edit_distance(name, spelling, budget)
        if d <= budget and (best is None or d < best[0]):
            best = (d, position)
    if best is not None:
        return candidates[best[1]][1]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return close[0] if close else None
