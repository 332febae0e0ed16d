"""Helpers of the crawl tests (any layer): drive an in-process backend's coroutine, page sequences with
planted near-duplicates, a local site of articles and their copies, ``scrapy crawl`` of
``tests/crawl_project`` in a subprocess and the stats of its log.

Test modules import these from here, never from another test module.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from scrapy.utils.test import get_crawler

from simhash_scrapy.backends import PageRecord, create_backend
from simhash_scrapy.config import SimhashConfig

from conftest import article_html  # noqa: E402  (tests/ is on sys.path)

T = TypeVar("T")
PROJECT = Path(__file__).parent / "crawl_project"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never waits (the in-process backends)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AssertionError("the coroutine waited for something")


def flip(fp: int, distance: int, rng: random.Random) -> int:
    for bit in rng.sample(range(64), distance):
        fp ^= 1 << bit
    return fp


def page_sequence(seed: int, count: int, scopes: tuple[str, ...] = ("spider",)) -> list[tuple[PageRecord, bool]]:
    """Pages with planted near-duplicates at distances 0..k+2, several scopes, some index=False."""
    rng = random.Random(seed)
    fps: list[int] = []
    out = []
    for i in range(count):
        fp = flip(rng.choice(fps), rng.randint(0, 5), rng) if fps and i % 2 else rng.getrandbits(64)
        fps.append(fp)
        record = PageRecord(
            url=f"https://example.com/{i}",
            fingerprint=fp,
            scope=rng.choice(scopes),
            referer=rng.choice([None, "https://example.com/"]),
            depth=rng.choice([None, 0, 3]),
            text=rng.choice([None, f"text of page {i}"]),
        )
        out.append((record, rng.random() > 0.05))
    return out


def backend_for(settings: dict[str, Any], config: SimhashConfig | None = None) -> Any:
    """The backend a crawl with ``settings`` gets; ``config`` overrides the detection settings."""
    crawler = get_crawler(settings_dict=settings)
    from_settings = SimhashConfig.from_settings(crawler.settings)
    if config is not None:
        from dataclasses import replace

        from_settings = replace(
            config, store_dir=from_settings.store_dir, jobdir=from_settings.jobdir, reset=from_settings.reset
        )
    return create_backend(crawler, from_settings)


# -------------------------------------------------------------- real crawls
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "be", "do", "fu", "gi", "ha", "jo", "pe", "qu"]


def distinct_words(seed: int, count: int = 300) -> list[str]:
    """Prose-like text whose words come from a large made-up vocabulary: pages of different seeds share little."""
    rng = random.Random(seed)
    return ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(count)]


def make_site(count: int = 24) -> dict[str, str]:
    """``/a<i>``: distinct articles; ``/b<i>``: a copy of ``/a<i>`` that differs in punctuation and markup.

    The copies are near-duplicates at distance 0 and two originals are 7 or more bits apart, with
    any feature setting and text mode (these tests are about where the index lives, not about
    how near a near-duplicate may be).
    """
    pages = {}
    for i in range(count):
        words = distinct_words(1000 + i)
        pages[f"/a{i}"] = article_html(f"Story {i}", words, extra="Published on Monday.")
        pages[f"/b{i}"] = article_html(f"Story {i}", words, extra="Published on Monday!").replace("<main>", "<main data-variant=\"print\">")
    return pages


def crawl_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "scrapy.cmdline", "crawl", "pages", *args]


def crawl_env(project: Path = PROJECT) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project), env.get("PYTHONPATH", "")]))
    return env


def run_crawl_cli(args: list[str], project: Path = PROJECT, timeout: float = 180) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(
        crawl_command(*args), cwd=project, env=crawl_env(project), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return parse_stats(proc.stderr), proc.stderr


_STAT = re.compile(r"^\s*'([^']+)': (\d+|'[^']*'|True|False),?$", re.MULTILINE)


def parse_stats(log: str) -> dict[str, Any]:
    """The integer and string stats of the 'Dumping Scrapy stats' block of a crawl log."""
    start = log.rfind("Dumping Scrapy stats")
    assert start >= 0, log[-3000:]
    stats: dict[str, Any] = {}
    for name, value in _STAT.findall(log[start:]):
        stats[name] = int(value) if value.isdigit() else value.strip("'")
    return stats


def reached(log: str) -> list[str]:
    return re.findall(r"Reached the spider: (\S+)", log)


def interrupt_after(command: list[str], project: Path, pages: int) -> str:
    """Run a crawl, press Ctrl-C (SIGINT: graceful shutdown) once ``pages`` reached the spider; its log."""
    proc = subprocess.Popen(
        command, cwd=project, env=crawl_env(project), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: list[str] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            lines.append(line)
            if len(reached("".join(lines))) >= pages:
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    log = "".join(lines) + rest
    assert proc.returncode == 0, log[-3000:]
    return log


def read_report(path: Path) -> list[dict[str, Any]]:
    """The clusters of a JSON Lines report (its "changed" and "url_rule" lines left out)."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in records if r.get("type", "cluster") == "cluster"]


