"""The layers are enforced: import-linter's contracts, and the core imported where Scrapy cannot be."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))

BLOCK_SCRAPY = """
import sys
from importlib.abc import MetaPathFinder
class NoScrapy(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("scrapy", "twisted", "redis", "itemadapter"):
            raise ImportError(f"{name} is not installed here")
sys.meta_path.insert(0, NoScrapy())
"""


def run_python(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT, "--no-cache"], cwd=root, capture_output=True, text=True, timeout=300)


def test_import_contracts_hold() -> None:
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "0 broken" in proc.stdout


def test_a_core_import_of_scrapy_breaks_the_contract(tmp_path: Path) -> None:
    """The contract is not decoration: a core module that imports Scrapy fails it."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copytree(ROOT / "simhash_scrapy", copy / "simhash_scrapy", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    features = copy / "simhash_scrapy" / "core" / "features.py"
    features.write_text(features.read_text(encoding="utf-8") + "\nimport scrapy  # deliberately wrong\n", encoding="utf-8")
    proc = subprocess.run(
        [LINT, "--no-cache"], cwd=copy, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(copy), "PATH": str(Path(sys.executable).parent)},
    )  # fmt: skip
    assert proc.returncode != 0
    assert "simhash_scrapy.core.features -> scrapy" in proc.stdout


@pytest.mark.parametrize(
    "module",
    ["simhash_scrapy.core.analysis", "simhash_scrapy.core.clustering", "simhash_scrapy.core.report",
     "simhash_scrapy.core.store", "simhash_scrapy.backends.memory", "simhash_scrapy"],
)  # fmt: skip
def test_core_and_backends_import_without_scrapy(module: str) -> None:
    code = BLOCK_SCRAPY + f"import importlib; importlib.import_module({module!r}); print('ok')"
    proc = run_python(code)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_the_library_fingerprints_and_clusters_without_scrapy() -> None:
    code = BLOCK_SCRAPY + """
from simhash_scrapy import fingerprint_html, BlockPermutedIndex, analyse_html
from simhash_scrapy.backends.memory import MemoryBackend
page = "<html><body><main>" + " ".join(f"word{i}" for i in range(80)) + "</main></body></html>"
fp = fingerprint_html(page)
index = BlockPermutedIndex()
index.add("a", fp)
print(fp is not None, [m.key for m in index.query(fp)], analyse_html("<p>Not found</p>").exact)
"""
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "True ['a'] True"
