"""A new user's first runs, through real ``scrapy crawl`` / ``scrapy simhash`` processes.

* a re-crawl's report lists the pages that changed (JSON Lines, CSV beside it,
  HTML section) and the log line counts them;
* a wrong ``SIMHASH_*`` setting is one log line naming it, not a traceback,
  and the spider closes with ``finish_reason`` ``simhash_error`` (what CI reads);
* a project that sets ``SIMHASH_*`` values but whose ``ADDONS`` line was
  replaced by ``startproject``'s ``ADDONS = {}`` is told so by ``scrapy simhash``.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Page, article_html, article_words  # noqa: E402  (tests/ is on sys.path)
from simhash_scrapy.core.defaults import MAX_DISTANCE

PROJECT = Path(__file__).parents[1] / "crawl_project"


def crawl(project: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env_path = [str(project), str(Path(__file__).resolve().parents[2])]
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy.cmdline", "crawl", "pages", *args],
        cwd=project, capture_output=True, text=True, timeout=300,
        env={**_env(), "PYTHONPATH": ":".join(env_path + [_env().get("PYTHONPATH", "")])},
    )  # fmt: skip
    if check:
        assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    return env


def stats_of(log: str) -> dict[str, Any]:
    start = log.rfind("Dumping Scrapy stats")
    assert start >= 0, log[-3000:]
    found = re.findall(r"^\s*'([^']+)': (\d+|'[^']*'),?$", log[start:], re.MULTILINE)
    return {name: int(value) if value.isdigit() else value.strip("'") for name, value in found}


def copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__", ".scrapy"))
    return project


# --------------------------------------------------------------- changed pages
class Versions(dict):  # type: ignore[type-arg]
    """The test site's pages, each fetch of a path serving its next version (the last one stays)."""

    def __init__(self, versions: dict[str, list[str]]) -> None:
        super().__init__()
        self.versions = versions
        self.fetched: dict[str, int] = {}

    def get(self, path: str, default: Any = None) -> Any:
        if path not in self.versions:
            return default
        n = self.fetched[path] = self.fetched.get(path, 0) + 1
        return Page(self.versions[path][min(n, len(self.versions[path])) - 1])


@pytest.mark.slow  # 11 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "html"])
def test_a_page_fetched_again_with_new_text_is_listed_as_changed(serve: Any, tmp_path: Path, fmt: str) -> None:
    """One crawl (memory backend) fetches each page twice; /p1 and /p3 have new text the second time."""
    versions = {f"/p{i}": [article_html(f"Story {i}", article_words(500 + i, 300))] for i in range(4)}
    for i in (1, 3):
        versions[f"/p{i}"].append(article_html(f"Story {i}", article_words(900 + i, 300)))
    site = serve({})
    site.handler.pages = Versions(versions)
    report = tmp_path / f"report.{fmt}"
    proc = crawl(
        PROJECT, "-a", f"base={site.base}", "-a", "paths=" + ",".join(list(versions) * 2),
        "-s", "DUPEFILTER_CLASS=scrapy.dupefilters.BaseDupeFilter", "-s", f"SIMHASH_REPORT_URI={report}",
    )  # fmt: skip
    stats = stats_of(proc.stderr)
    assert (stats["simhash/unique"], stats["simhash/changed"], stats["simhash/unchanged"]) == (4, 2, 2), stats
    assert (
        f"Simhash: wrote the {fmt} report to {report} (4 pages: 4 unique, 0 near-duplicates in 0 clusters; "
        "fetched again in this crawl: 2 changed, 2 unchanged)"  # one crawl, no store: no "last crawl"
    ) in proc.stderr
    expected = [site.url("/p1"), site.url("/p3")]
    if fmt == "jsonl":
        records = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
        summary = records.pop()
        assert summary["type"] == "summary" and summary["previous_crawl"] is False
        assert (summary["pages"], summary["changed"], summary["unchanged"]) == (4, 2, 2)
        assert [(r["type"], r["url"]) for r in records] == [("changed", url) for url in expected]
        for record in records:
            old, new = int(record["previous_fingerprint"], 16), int(record["fingerprint"], 16)
            assert record["distance"] == bin(old ^ new).count("1") > MAX_DISTANCE
    elif fmt == "csv":
        with (tmp_path / "report.changed.csv").open(newline="", encoding="utf-8") as fh:
            assert [row["url"] for row in csv.DictReader(fh)] == expected
        assert report.read_text(encoding="utf-8").count("\n") == 1  # the header: no cluster
    else:
        page = report.read_text(encoding="utf-8")
        assert '<dd data-stat="unchanged">2</dd>' in page and '<dd data-stat="changed">2</dd>' in page
        assert "Fetched again, unchanged" in page and "since last crawl" not in page
        assert re.findall(r'<tr class="changed-page"><td class="url"><a href="([^"]+)"', page) == expected


@pytest.mark.slow  # 14 s measured (--durations, -n 2, loaded 2-core machine)
def test_a_recrawl_with_simhash_dir_lists_the_changed_pages(serve: Any, tmp_path: Path) -> None:
    pages = {f"/p{i}": article_html(f"Story {i}", article_words(500 + i, 300)) for i in range(6)}
    site = serve(pages)
    project = copy_project(tmp_path)
    common = ["-a", f"base={site.base}", "-a", "paths=" + ",".join(pages), "-s", "SIMHASH_DIR=simhash"]
    crawl(project, *common)
    for i in (1, 4):  # next week two pages are rewritten
        site.handler.pages[f"/p{i}"] = Page(article_html(f"Story {i}", article_words(900 + i, 300)))
    proc = crawl(project, *common, "-s", f"SIMHASH_REPORT_URI={tmp_path / 'week2.jsonl'}")
    assert "6 pages: 6 unique, 0 near-duplicates in 0 clusters; since the last crawl: 2 changed, 4 unchanged" in proc.stderr
    records = [json.loads(line) for line in (tmp_path / "week2.jsonl").read_text().splitlines()]
    assert records.pop()["type"] == "summary"
    # The changed pages, then every other page of the re-crawl by kind (issue 35: here the 4 unchanged ones).
    assert [(r["type"], r["url"]) for r in records if r["type"] == "changed"] == [
        ("changed", site.url("/p1")), ("changed", site.url("/p4"))
    ]  # fmt: skip
    others = sorted((r["type"], r["url"]) for r in records if r["type"] != "changed")
    assert others == [("unchanged", site.url(f"/p{i}")) for i in (0, 2, 3, 5)]
    # `scrapy simhash report` on the store says and writes the same, without crawling.
    report = subprocess.run(
        [sys.executable, "-m", "scrapy.cmdline", "simhash", "report", "--spider", "pages", "-s", "SIMHASH_DIR=simhash"],
        cwd=project, capture_output=True, text=True, timeout=300,
        env={**_env(), "PYTHONPATH": ":".join([str(project), str(Path(__file__).resolve().parents[2]), _env().get("PYTHONPATH", "")])},
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert "has 6 pages: 6 unique, 0 near-duplicates in 0 clusters; since the last crawl: 2 changed, 4 unchanged" in report.stderr
    written = [json.loads(line) for line in report.stdout.splitlines()]
    assert written.pop()["type"] == "summary"  # its own source and time
    # The store's report has the changed pages; the list of every page by kind is `report --changes`'s.
    assert written == [r for r in records if r["type"] == "changed"]


# ------------------------------------------------------------ a wrong setting
@pytest.mark.slow  # 3 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("SIMHASH_MAX_DISTANCE=abc", "SIMHASH_MAX_DISTANCE must be an integer from 0 to 63, got 'abc'"),
        # (issue 37: these three ended in a traceback, exit 1, no finish reason; inf was accepted)
        ("SIMHASH_URL_RULES=nonsense", "SIMHASH_URL_RULES must be one of 'off', 'learn', 'skip', got 'nonsense'"),
        ("SIMHASH_BACKEND=../x", "SIMHASH_BACKEND='../x': cannot load '../x'"),
        ("SIMHASH_FLUSH_INTERVAL=inf", "SIMHASH_FLUSH_INTERVAL must be a finite number up to 1e+09, got 'inf'"),
    ],
)
def test_a_wrong_setting_is_one_line_not_a_traceback(serve: Any, tmp_path: Path, value: str, message: str) -> None:
    site = serve({"/a": article_html("A", article_words(1))})
    proc = crawl(PROJECT, "-a", f"base={site.base}", "-a", "paths=/a", "-s", value)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and errors == [
        errors[0][: errors[0].index("[")]
        + "[simhash_scrapy.state] ERROR: simhash-scrapy cannot start, closing the spider: "
        + errors[0][errors[0].index(": ", errors[0].index("closing")) + 2 :]
    ]
    assert message in errors[0]
    stats = stats_of(proc.stderr)
    assert stats["finish_reason"] == "simhash_error"
    # (pprint quotes and wraps a long message: its start is enough)
    assert re.search(r"""'simhash/error': \(?["']""" + re.escape(value.split("=")[0]), proc.stderr)


#: The CI recipe of the docs (docs/getting-started.md, "When it cannot start, and CI"), run as it is printed there.
CI_SCRIPT = next(
    block
    for block in re.findall(r"```py\n(.*?)```", (Path(__file__).parents[2] / "docs" / "getting-started.md").read_text(encoding="utf-8"), re.DOTALL)
    if "finish_reason" in block
)


@pytest.mark.slow  # 7 s measured (--durations, -n 2, loaded 2-core machine)
def test_the_ci_recipe_fails_on_a_simhash_error(serve: Any, tmp_path: Path) -> None:
    site = serve({"/a": article_html("A", article_words(1))})
    project = copy_project(tmp_path)
    script = project / "ci_crawl.py"
    script.write_text(CI_SCRIPT, encoding="utf-8")
    env = {**_env(), "PYTHONPATH": ":".join([str(project), str(Path(__file__).resolve().parents[2]), _env().get("PYTHONPATH", "")])}
    args = [sys.executable, str(script), "pages", f"base={site.base}", "paths=/a"]
    good = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert good.returncode == 0, good.stderr[-3000:]
    settings = project / "crawl_project" / "settings.py"
    settings.write_text(settings.read_text() + '\nSIMHASH_ACTION = "delete"\n', encoding="utf-8")
    bad = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1
    assert bad.stderr.splitlines()[-1].startswith("crawl closed: simhash_error SIMHASH_ACTION")
    # The docs' other recipe greps the stats dump for this line.
    assert "'finish_reason': 'finished'" in good.stderr and "'finish_reason': 'finished'" not in bad.stderr


# ------------------------------------------------------- half-configured project
@pytest.mark.slow  # 4 s measured (--durations, -n 2, loaded 2-core machine)
def test_scrapy_simhash_says_when_the_addon_line_was_replaced(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    settings = project / "crawl_project" / "settings.py"
    # What a new user does: the activation line above startproject's own ADDONS = {}.
    text = settings.read_text().replace('ADDONS = {"simhash_scrapy.Addon": 0}', 'ADDONS = {"simhash_scrapy.Addon": 0}\nSIMHASH_MAX_DISTANCE = 4\nADDONS = {}')
    settings.write_text(text, encoding="utf-8")
    (project / "site").mkdir()
    (project / "site" / "a.html").write_text(article_html("A", article_words(3)), encoding="utf-8")
    env = {**_env(), "PYTHONPATH": ":".join([str(project), str(Path(__file__).resolve().parents[2]), _env().get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "scrapy.cmdline", "simhash", "dedup", "site", "-o", "out.jsonl"]
    proc = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0].startswith(
        "scrapy simhash dedup: warning: this project's settings set SIMHASH_MAX_DISTANCE but do not enable simhash-scrapy"
    )
    assert 'put "simhash_scrapy.Addon": 0 into the ADDONS dict' in proc.stderr
    # Fixed (the add-on in the one ADDONS dict): no warning.
    settings.write_text(text.replace("ADDONS = {}", 'ADDONS = {"simhash_scrapy.Addon": 0}'), encoding="utf-8")
    proc = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


def test_activation_problem_cases() -> None:
    from scrapy.settings import Settings

    from simhash_scrapy.commands._common import activation_problem

    def problem(values: dict[str, Any]) -> str | None:
        return activation_problem(Settings(values, priority="project"))

    assert problem({}) is None  # not configured at all: nothing to say
    assert problem({"SIMHASH_MAX_DISTANCE": 4}) is not None
    assert problem({"SIMHASH_MAX_DISTANCE": 4, "SIMHASH_ENABLED": False}) is None  # off on purpose
    assert problem({"SIMHASH_MAX_DISTANCE": 4, "ADDONS": {"simhash_scrapy.Addon": 0}}) is None
    assert problem({"SIMHASH_MAX_DISTANCE": 4, "ADDONS": {"simhash_scrapy.addon.Addon": None}}) is not None  # disabled
    assert problem({"SIMHASH_REPORT_URI": "r.jsonl", "DOWNLOADER_MIDDLEWARES": {"simhash_scrapy.SimhashMiddleware": 540}}) is None
    assert problem({"SIMHASH_ITEM_FIELD": "html", "ITEM_PIPELINES": {"simhash_scrapy.pipeline.SimhashPipeline": 200}}) is None
    # -s on the command line of `scrapy simhash` is not the project's configuration.
    settings = Settings({"SIMHASH_MAX_DISTANCE": 4}, priority="cmdline")
    assert activation_problem(settings) is None
