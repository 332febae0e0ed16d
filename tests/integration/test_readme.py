"""The README's Python examples run as tests, so they cannot rot.

* Blocks of settings (only ``UPPER_CASE = value`` lines) are executed and fed
  to ``SimhashConfig.from_settings``: every documented settings example is a
  valid configuration.
* Other blocks run as they are; the one that reads a shared Redis record runs
  against a real ``redis-server`` holding such a record.
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

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
_SETTING_LINE = re.compile(r"^\s*(#.*)?$|^[A-Z][A-Z0-9_]* = ")


def is_settings(code: str) -> bool:
    return all(_SETTING_LINE.match(line) for line in code.splitlines())


def test_readme_has_examples() -> None:
    assert sum(not is_settings(b) for b in BLOCKS) >= 3 and sum(is_settings(b) for b in BLOCKS) >= 3


@pytest.mark.parametrize("code", [b for b in BLOCKS if is_settings(b)])
def test_readme_settings_are_valid(code: str) -> None:
    values: dict[str, Any] = {}
    exec(compile(code, str(README), "exec"), {}, values)
    config = SimhashConfig.from_settings(Settings(values))
    for name, value in values.items():
        if name == "SIMHASH_MAX_DISTANCE":
            assert config.max_distance == value


@pytest.mark.parametrize("code", [b for b in BLOCKS if not is_settings(b) and "read_members" not in b])
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
    (code,) = [b for b in BLOCKS if "read_members" in b]
    url = re.search(r'"(redis://[^"]+)"', code).group(1)
    result = subprocess.run(
        [sys.executable, "-c", _REDIS_SCRIPT, redis_server.url, code.replace(url, redis_server.url)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[2]"
