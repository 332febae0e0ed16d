"""Packaging: the version is defined once, and an install without the C helpers says so once.

The no-compiler install itself (``CC=/bin/false pip install`` of the sdist) and the built wheel's
example crawl run in ``.ci/run``; here only what is cheap to check in-process or in one subprocess.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import simhash_scrapy
from simhash_scrapy.core import _native

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_metadata_carries_the_package_version() -> None:
    # pyproject's version is dynamic, read from simhash_scrapy.__version__ at build time.
    assert importlib.metadata.version("simhash-scrapy") == simhash_scrapy.__version__


def test_the_version_is_written_in_one_place() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^dynamic = \[.*"version".*\]', pyproject, re.M)
    assert 'version = { attr = "simhash_scrapy.__version__" }' in pyproject
    literal = re.escape(simhash_scrapy.__version__)
    places = []
    for path in [ROOT / "setup.py", ROOT / "pyproject.toml", *sorted((ROOT / "simhash_scrapy").rglob("*.py"))]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.search(rf"""["']{literal}["']""", line):
                places.append((path.relative_to(ROOT).as_posix(), line.strip()))
    assert places == [("simhash_scrapy/__init__.py", f'__version__ = "{simhash_scrapy.__version__}"')]


def test_without_the_built_c_helpers_the_pure_path_runs_with_one_clear_message() -> None:
    # A fresh interpreter in which the compiled module cannot be found, as after an install
    # without a C compiler (setup.py marks the extension optional).
    code = (
        "import importlib.abc, logging, sys\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'simhash_scrapy.core._speedups':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Hide())\n"
        "logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format='%(levelname)s %(name)s %(message)s')\n"
        "import simhash_scrapy\n"
        "from simhash_scrapy.core import _native\n"
        "print(_native.speedups_enabled())\n"
        "print(simhash_scrapy.fingerprint('the same words give the same fingerprint on both paths'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True, text=True, check=True, env={**os.environ, "SIMHASH_SCRAPY_PURE_PYTHON": ""},
    )
    enabled, fp = out.stdout.split()
    assert enabled == "False"
    with _native.switched(False):
        assert int(fp) == simhash_scrapy.fingerprint("the same words give the same fingerprint on both paths")
    messages = [line for line in out.stderr.splitlines() if line.strip()]
    assert messages == [f"WARNING simhash_scrapy.core._native {_native.NOT_BUILT}"]
    assert "not built" in _native.NOT_BUILT and "pure-Python path" in _native.NOT_BUILT

    # Chosen on purpose: the pure path without the message.
    quiet = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True, text=True, check=True, env={**os.environ, "SIMHASH_SCRAPY_PURE_PYTHON": "1"},
    )
    assert quiet.stdout.split()[0] == "False"
    assert quiet.stderr.strip() == ""

