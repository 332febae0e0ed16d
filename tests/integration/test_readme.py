"""The Python examples of the README and of the docs pages (``docs/**/*.md``) run as tests, so they cannot rot.

Every fenced block marked ```` ```python ```` is run:

* Blocks of settings (only ``UPPER_CASE = value`` lines) are executed and fed
  to ``SimhashConfig.from_settings``: every documented settings example is a
  valid configuration.
* Other blocks run as they are; the one that reads a shared Redis record runs
  against a real ``redis-server`` holding such a record.

A block that must not run (a sketch with placeholders) is marked ```` ```py ```` or
```` ```text ```` instead; ``tests/e2e/test_first_run.py`` runs the CI recipe (a ```` ```py ````
block of ``docs/getting-started.md``) in a real Scrapy project.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from simhash_scrapy.config import SimhashConfig

pytest_plugins = ["conftest_redis"]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The README, then every page of the docs site (its build folder left out).
SOURCES = [README] + sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)


def python_blocks(path: Path) -> list[tuple[str, str]]:
    """``(id, code)`` of every ```` ```python ```` block of a Markdown file; the id is ``file:line``."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        line = text.count("\n", 0, match.start()) + 1
        blocks.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


BLOCKS = [block for path in SOURCES for block in python_blocks(path)]
_SETTING_LINE = re.compile(r"^\s*(#.*)?$|^[A-Z][A-Z0-9_]* = ")


def is_settings(code: str) -> bool:
    return all(_SETTING_LINE.match(line) for line in code.splitlines())


def test_readme_and_docs_have_examples() -> None:
    assert sum(not is_settings(b) for _, b in BLOCKS) >= 3 and sum(is_settings(b) for _, b in BLOCKS) >= 3
    # The README's own activation block is one of them, and every docs page with examples is read.
    assert any(is_settings(b) and "simhash_scrapy.Addon" in b for _, b in python_blocks(README))
    files = {where.split(":")[0] for where, _ in BLOCKS}
    assert {"docs/guides/library.md", "docs/guides/redis.md", "docs/reference/report-formats.md"} <= files


@pytest.mark.parametrize("code", [b for _, b in BLOCKS if is_settings(b)], ids=[w for w, b in BLOCKS if is_settings(b)])
def test_readme_settings_are_valid(code: str) -> None:
    values: dict[str, Any] = {}
    exec(compile(code, str(README), "exec"), {}, values)
    config = SimhashConfig.from_settings(Settings(values))
    for name, value in values.items():
        if name == "SIMHASH_MAX_DISTANCE":
            assert config.max_distance == value


_RUNNABLE = [(w, b) for w, b in BLOCKS if not is_settings(b) and "read_members" not in b]


@pytest.mark.parametrize("code", [b for _, b in _RUNNABLE], ids=[w for w, _ in _RUNNABLE])
def test_readme_example_runs(code: str) -> None:
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})


_REDIS_SCRIPT = """
import asyncio, sys
from scrapy.settings import Settings
from simhash_scrapy.backends import PageRecord
from simhash_scrapy.backends.redis import RedisBackend, RedisSettings
from simhash_scrapy.config import SimhashConfig

async def record():
    settings = Settings({"SIMHASH_REDIS_URL": sys.argv[1], "SCHEDULER_PERSIST": True})
    backend = RedisBackend(SimhashConfig.from_settings(settings), RedisSettings(settings))
    await backend.open("myspider")
    await backend.check(PageRecord("https://example.com/a", 0xABCDEF, "myspider"))
    await backend.check(PageRecord("https://example.com/b", 0xABCDEF ^ 1, "myspider"))
    await backend.close()

asyncio.run(record())
namespace = {"__name__": "readme_example"}
exec(sys.argv[2], namespace)
print([len(c["members"]) for c in namespace["clusters"]])
"""


def test_readme_redis_example_runs(redis_server: Any) -> None:
    # A script of its own: asyncio.run() cannot run inside the test's reactor loop.
    (code,) = [b for _, b in BLOCKS if "read_members" in b]
    url = re.search(r'"(redis://[^"]+)"', code).group(1)
    result = subprocess.run(
        [sys.executable, "-c", _REDIS_SCRIPT, redis_server.url, code.replace(url, redis_server.url)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[2]"
