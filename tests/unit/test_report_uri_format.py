"""A report URI whose extension names no report format is an error naming the setting (issue 39)."""

from __future__ import annotations

import pytest

from simhash_scrapy.commands._common import CommandError, output_format
from simhash_scrapy.core.settings.config import SimhashConfig, report_format_for


@pytest.mark.parametrize(
    ("uri", "fmt"),
    [
        ("reports/r.jsonl", "jsonl"), ("r.JL", "jsonl"), ("r.json", "jsonl"), ("out/r.csv", "csv"),
        ("r.htm", "html"), ("s3://bucket/r.html", "html"), ("reports/clusters", "jsonl"),
        ("reports/%(name)s-%(time)s", "jsonl"), ("reports/v1.2/clusters", "jsonl"), ("r.2026-05-01T10.30", "jsonl"),
    ],
)  # fmt: skip
def test_known_extensions_and_names_without_one(uri: str, fmt: str) -> None:
    assert report_format_for(uri) == fmt


@pytest.mark.parametrize("uri", ["reports/r.pdf", "r.txt", "file:///tmp/r.xlsx", "r.xml"])
def test_another_file_type_is_an_error_naming_the_setting(uri: str) -> None:
    with pytest.raises(ValueError, match=r"^SIMHASH_REPORT_URI: .* ends in \.[a-z]+, which is no report format"):
        report_format_for(uri)
    with pytest.raises(ValueError, match=r"^SIMHASH_REPORT_URI: ") as info:
        SimhashConfig.from_settings({"SIMHASH_REPORT_URI": uri})
    assert "SIMHASH_REPORT_FORMAT" in str(info.value)
    # the format named: the user's choice, written where asked
    assert SimhashConfig.from_settings({"SIMHASH_REPORT_URI": uri, "SIMHASH_REPORT_FORMAT": "csv"}).report_format == "csv"


def test_the_commands_output_option() -> None:
    with pytest.raises(CommandError, match=r"^--output: 'r\.pdf' ends in \.pdf.* --format"):
        output_format(None, "r.pdf")
    assert output_format("html", "r.pdf") == "html" and output_format(None, "r.csv") == "csv"
