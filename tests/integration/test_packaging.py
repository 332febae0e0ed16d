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


_PAGE = b"<html><body><nav>menu</nav><main><p>" + b" ".join(b"word%d" % i for i in range(80)) + b"</p></main></body></html>"


#: The compiled modules' places under simhash_scrapy.core.
_MODULES = {"_speedups": "_speedups", "_walker": "extract._walker"}


def _import_without(hidden: tuple[str, ...]) -> str:
    """Code for a fresh interpreter in which the compiled modules ``hidden`` cannot be found, as after an
    install without a C compiler (setup.py marks both extensions optional) or one that built only one."""
    return (
        "import importlib.abc, logging, sys\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name in {[f'simhash_scrapy.core.{_MODULES[h]}' for h in hidden]!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Hide())\n"
        "logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format='%(levelname)s %(name)s %(message)s')\n"
        "import simhash_scrapy\n"
        "from simhash_scrapy.core import _native\n"
        "print(_native.speedups_enabled(), _native.speedups is not None, _native.walker is not None)\n"
        "print(simhash_scrapy.fingerprint('the same words give the same fingerprint on both paths'))\n"
        f"print(simhash_scrapy.fingerprint_html({_PAGE!r}))\n"
    )


def _run(code: str, pure: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True, text=True, check=True, env={**os.environ, "SIMHASH_SCRAPY_PURE_PYTHON": pure},
    )  # fmt: skip


def _expected_fingerprints() -> list[int]:
    with _native.switched(False):
        return [
            simhash_scrapy.fingerprint("the same words give the same fingerprint on both paths"),
            simhash_scrapy.fingerprint_html(_PAGE),
        ]


def test_without_the_built_c_helpers_the_pure_path_runs_with_one_clear_message() -> None:
    code = _import_without(("_speedups", "_walker"))
    out = _run(code, "")
    enabled, speedups, walker, *fps = out.stdout.split()
    assert (enabled, speedups, walker) == ("False", "False", "False")
    assert list(map(int, fps)) == _expected_fingerprints()
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


def test_each_c_extension_falls_back_on_its_own_with_its_own_message() -> None:
    # One extension built, the other not (e.g. no lxml headers at build time): the built one stays on.
    for hidden, on, role in (("_walker", "speedups", _native.WALKER_ROLE), ("_speedups", "walker", _native.SPEEDUPS_ROLE)):
        out = _run(_import_without((hidden,)), "")
        enabled, speedups, walker, *fps = out.stdout.split()
        assert enabled == "False"
        assert {"speedups": speedups, "walker": walker} == {on: "True", hidden.lstrip("_"): "False"}
        assert list(map(int, fps)) == _expected_fingerprints()
        messages = [line for line in out.stderr.splitlines() if line.strip()]
        assert messages == [f"WARNING simhash_scrapy.core._native {_native.not_built([role])}"]
        assert f"C helpers for the {role} are not built" in messages[0]
