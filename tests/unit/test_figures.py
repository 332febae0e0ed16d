"""The figures README, the docs' front page and docs/quality.md quote are the measured ones (issue 39).

``docs/figures.csv`` is the one list of measured figures, each with the command that measured it (the
docs include it: docs/quality.md, "Measured figures").  Each place that quotes a figure is below, as
the text around it; the test fails when a quote and the list disagree, or a quote is gone.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Figure(float):
    """A measured value; ``{x:minutes}`` words seconds as the README does ("a minute", "4 minutes")."""

    def __format__(self, spec: str) -> str:
        if spec == "minutes":
            n = round(self / 60)
            return "a minute" if n == 1 else f"{n} minutes"
        return format(float(self), spec)


def figures() -> dict[str, Figure]:
    with (ROOT / "docs" / "figures.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert all(row["command"].strip() for row in rows)  # every figure says how it was measured
    return {row["figure"]: Figure(row["value"]) for row in rows}


#: (file, the quoting text with the figure as a format field).  White space is compared collapsed.
QUOTES = [
    ("README.md", "F1 {docs_f1:.3f} on real documentation pages in 13 site templates"),
    ("README.md", "{realweb_crawl_f1:.3f} on real news, blog, shop and government pages of 561 sites, through a real crawl"),
    ("README.md", "{docs_naive_f1:.2f} and {realweb_naive_f1:.2f} for naive whole-page simhash"),
    ("README.md", "The whole suite takes about {suite_seconds:minutes} on a 2-core machine with four workers"),
    ("README.md", 'runs the fast part in about {fast_suite_seconds:minutes}'),
    ("docs/index.md", "F1 {docs_f1:.3f} on real documentation pages in 13 site templates"),
    ("docs/index.md", "{realweb_crawl_f1:.3f} on real news, blog, shop and government pages of 561 sites, through a real crawl"),
    ("docs/index.md", "{docs_naive_f1:.2f} and {realweb_naive_f1:.2f} for naive whole-page simhash"),
    ("docs/quality.md", "naive P 1.000, R 0.522, F1 {docs_naive_f1:.3f}"),
    ("docs/quality.md", "--half test --families`): **F1 {docs_f1:.3f}**"),
    ("docs/quality.md", "--half test --mode e2e --genres`) **F1 {realweb_crawl_f1:.3f}**"),
    ("docs/quality.md", "the README's {realweb_naive_f1:.2f} is today's tree"),
    ("docs/quality.md", "the same run as its {realweb_crawl_f1:.3f}"),
    ("docs/quality.md", "| test: F1 (P / R) | 0.957 (1.000 / 0.918) | **{shop_crawl_f1:.3f}**"),
    ("docs/guides/how-it-works.md", "**366 of 370 ({representative_share:.1f} %)** of the test half"),
    ("CONTRIBUTING.md", "{suite_seconds:.0f} s with `-n 4` on a quiet machine"),
    ("CONTRIBUTING.md", "the fast set in about {fast_suite_seconds:.0f} s"),
    ("docs/guides/redis.md", "| 10,000,000 | 3 | **{redis_global_bytes_per_page_10m:.1f}** (72.6 / 30.8 / 12.0) | **{redis_global_checks_per_s_10m:,.0f}** |"),
    ("docs/guides/redis.md", "with hiredis' reader 204 (**{redis_global_worker_cpu_ratio:.2f}×**)"),
    ("README.md", "Redis Cluster, and {redis_global_module_checks_per_s_10m:,.0f} checks/s with 10 million stored pages"),
    ("docs/guides/redis.md", "| 14:24 | hiredis | **{redis_global_module_checks_per_s_10m:,.0f}** | 62 + 46 |"),
    ("docs/guides/redis.md", "a check costs a worker **{redis_steps_worker_cpu_us_1m:.0f} µs of CPU** on average "
     "(**{redis_steps_worker_cpu_ratio:.2f}×** main's, by the sums"),
    ("docs/guides/redis.md", "and Redis 42, **{redis_steps_checks_per_s_1m:,.0f} checks/s** on average"),
]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(("path", "quote"), QUOTES)
def test_each_quoted_figure_is_the_measured_one(path: str, quote: str) -> None:
    text = _flat((ROOT / path).read_text(encoding="utf-8"))
    expected = _flat(quote.format(**figures()))
    assert expected in text, f"{path} should say {expected!r} (docs/figures.csv); it says something else"


def test_every_figure_is_quoted_or_shown() -> None:
    quoted = {name for _, quote in QUOTES for name in re.findall(r"\{(\w+)", quote)}
    assert set(figures()) == quoted
    # ... and the docs show the whole list, commands included
    assert ":file: figures.csv" in (ROOT / "docs" / "quality.md").read_text(encoding="utf-8")


def test_the_minutes_wording() -> None:
    assert [format(Figure(s), "minutes") for s in (35, 89, 242, 330)] == ["a minute", "a minute", "4 minutes",
                                                                           "6 minutes"]
