"""The layers are enforced: import-linter's contracts, and the core imported where Scrapy cannot be."""

from __future__ import annotations

import re
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


def undocumented_modules(package: Path, architecture: str) -> tuple[set[str], set[str]]:
    """``(modules missing from ARCHITECTURE.md's module table, table entries with no module)``.

    Modules are every ``.py`` file under ``package``, as paths relative to it (``core/text.py``); the
    table is the one under "Each module's one job", whose first cells name them in backquotes.
    """
    section = architecture.split("## Each module's one job", 1)[1].split("\n## ", 1)[0]
    listed: set[str] = set()
    for line in section.splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 2:
            listed.update(name for name in re.findall(r"`([^`]+)`", cells[1]) if name.endswith(".py"))
    modules = {path.relative_to(package).as_posix() for path in package.rglob("*.py")}
    return modules - listed, listed - modules


def test_every_module_is_in_the_architecture_table() -> None:
    missing, gone = undocumented_modules(ROOT / "simhash_scrapy", (ROOT / "docs" / "ARCHITECTURE.md").read_text("utf-8"))
    assert not missing, f"modules missing from docs/ARCHITECTURE.md's module table: {sorted(missing)}"
    assert not gone, f"docs/ARCHITECTURE.md lists modules that do not exist: {sorted(gone)}"


def test_a_new_module_missing_from_the_table_is_found(tmp_path: Path) -> None:
    """The check is not decoration: a module added without a row is named (and a row without a module)."""
    package = tmp_path / "simhash_scrapy"
    shutil.copytree(ROOT / "simhash_scrapy", package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    (package / "core" / "brand_new.py").write_text('"""A module nobody documented."""\n', encoding="utf-8")
    (package / "core" / "files.py").unlink()
    architecture = (ROOT / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    assert undocumented_modules(package, architecture) == ({"core/brand_new.py"}, {"core/files.py"})
