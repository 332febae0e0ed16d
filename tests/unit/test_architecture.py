"""The layers are enforced: import-linter's contracts, and the core imported where Scrapy cannot be.

The static checks CI runs first (``.ci/run``: ``ruff check``, ``mypy``, ``lint-imports``) pass on
this tree, and each fails on a planted violation.
"""

from __future__ import annotations

import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
RUFF = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))

if sys.version_info >= (3, 11):
    import tomllib
else:  # import-linter needs tomli on Python 3.10
    import tomli as tomllib

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
    features = copy / "simhash_scrapy" / "core" / "features" / "features.py"
    features.write_text(features.read_text(encoding="utf-8") + "\nimport scrapy  # deliberately wrong\n", encoding="utf-8")
    proc = subprocess.run(
        [LINT, "--no-cache"], cwd=copy, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(copy), "PATH": str(Path(sys.executable).parent)},
    )  # fmt: skip
    assert proc.returncode != 0
    assert "simhash_scrapy.core.features.features -> scrapy" in proc.stdout


#: Imported first, each in a process without Scrapy (see below).
WITHOUT_SCRAPY = ["simhash_scrapy.core.analysis", "simhash_scrapy.core.cluster.clustering",
                  "simhash_scrapy.core.report.report", "simhash_scrapy.core.store.store",
                  "simhash_scrapy.backends.memory", "simhash_scrapy"]  # fmt: skip


def test_core_and_backends_import_without_scrapy() -> None:
    # One process (a Python start-up each cost 0.2 s of CPU): each module is imported first, with every
    # simhash_scrapy module forgotten before it, so an import cycle that only shows from it still shows.
    code = BLOCK_SCRAPY + f"""
import importlib
for module in {WITHOUT_SCRAPY!r}:
    for name in [m for m in sys.modules if m == "simhash_scrapy" or m.startswith("simhash_scrapy.")]:
        del sys.modules[name]
    importlib.import_module(module)
    print(module, "ok")
"""
    proc = run_python(code)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [f"{module} ok" for module in WITHOUT_SCRAPY]


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


# ------------------------------------------------------------------ every module in a layer
def _contracts() -> list[dict[str, object]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        contracts: list[dict[str, object]] = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    return contracts


def _layered(containers: list[str] | None) -> set[str]:
    """The modules the layers contract with these ``containers`` names (full names)."""
    (layers,) = [c for c in _contracts() if c["type"] == "layers" and c.get("containers") == containers]
    named = {m.strip() for layer in layers["layers"] for m in str(layer).strip("()").split("|")}  # type: ignore[attr-defined]
    prefix = f"{containers[0]}." if containers else ""
    return {prefix + m for m in named}


def test_every_top_level_module_is_in_the_layers_contract() -> None:
    """A new module of ``simhash_scrapy`` must be placed in a layer, or nothing checks its imports."""
    named = _layered(None)
    modules = {f"simhash_scrapy.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "simhash_scrapy")])}
    assert "simhash_scrapy.core" in modules and "simhash_scrapy.state" in modules
    assert sorted(modules - named) == [], "add these modules to a layer in pyproject.toml [tool.importlinter]"
    assert sorted(named - modules) == [], "the layers contract names modules that do not exist"


def test_every_module_and_package_of_the_core_is_in_the_core_layers_contract() -> None:
    """Inside the core too: a new package or module of ``core/`` is placed in a layer, and at most
    12 modules stay directly in ``core/`` (the rest are in the packages that follow a page's path)."""
    named = _layered(["simhash_scrapy.core"])
    core = ROOT / "simhash_scrapy" / "core"
    # Python modules and packages (the compiled _speedups is imported by _native only)
    children = {f"simhash_scrapy.core.{m.name}" for m in pkgutil.iter_modules([str(core)])
                if m.ispkg or (core / f"{m.name}.py").exists()}
    assert "simhash_scrapy.core.extract" in children and "simhash_scrapy.core.analysis" in children
    assert sorted(children - named) == [], "add these to the core's layers contract in pyproject.toml"
    assert sorted(named - children) == [], "the core's layers contract names modules that do not exist"
    assert len(list(core.glob("*.py"))) <= 12, sorted(p.name for p in core.glob("*.py"))


def _copy_repo(tmp_path: Path) -> Path:
    """The package and pyproject.toml, without built files (the checks read sources only)."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copytree(ROOT / "simhash_scrapy", copy / "simhash_scrapy", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return copy


def test_an_upward_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    """_compat sits below the Scrapy glue: importing the crawl state from it is upward."""
    copy = _copy_repo(tmp_path)
    compat = copy / "simhash_scrapy" / "_compat.py"
    compat.write_text(compat.read_text(encoding="utf-8") + "\nfrom . import state  # deliberately wrong\n", encoding="utf-8")
    proc = subprocess.run(
        [LINT, "--no-cache"], cwd=copy, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(copy), "PATH": str(Path(sys.executable).parent)},
    )
    assert proc.returncode != 0
    assert "simhash_scrapy._compat -> simhash_scrapy.state" in proc.stdout


# ------------------------------------------------------------------ ruff
def ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RUFF, "check", "--no-cache", *args], cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=300)


def test_ruff_passes() -> None:
    proc = ruff()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_ruff_fails_on_a_planted_violation() -> None:
    """The repository's configuration (rules, per-file ignores) applied to a planted core module."""
    planted = "import os\n\n\ndef first(items=[]):\n    return items[0]\n"
    proc = ruff("--stdin-filename", "simhash_scrapy/core/_planted.py", "-", stdin=planted)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "F401" in proc.stdout and "B006" in proc.stdout  # unused import, mutable default
    proc = ruff("--stdin-filename", "simhash_scrapy/core/_planted.py", "-", stdin="import os\n\nprint(os.sep)\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_limits_a_functions_complexity_to_15() -> None:
    """C90 at 15 (pyproject): a function of 16 branches fails, one of 15 passes."""
    def planted(branches: int) -> str:
        body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(branches - 1))
        return f"def choose(x: int) -> int:\n{body}    return -1\n"

    proc = ruff("--stdin-filename", "simhash_scrapy/core/_planted.py", "-", stdin=planted(16))
    assert proc.returncode == 1 and "C901" in proc.stdout and "(16 > 15)" in proc.stdout, proc.stdout + proc.stderr
    proc = ruff("--stdin-filename", "simhash_scrapy/core/_planted.py", "-", stdin=planted(15))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ mypy
@pytest.mark.slow  # one mypy run over the package: seconds with the cache CI's static checks leave, else ~40 s
def test_mypy_is_clean_and_strict_on_the_core(tmp_path: Path) -> None:
    """One run over the real tree with an untyped function (an error only under ``--strict``) planted
    in a core module and in a glue module (``--shadow-file``: mypy reads the planted copies in their
    place, the tree is not touched): the planted core function is the only error, so the rest of
    the tree is clean, the core is strict and the glue is not.  The run uses the tree's own mypy
    cache (``.mypy_cache``, as ``mypy`` on the command line), so only the two files are checked anew
    when it is warm."""
    untyped = "\n\ndef double(x):\n    return x * 2\n"
    shadows = []
    planted_line = 0
    for relative in ("simhash_scrapy/core/files.py", "simhash_scrapy/_compat.py"):
        source = (ROOT / relative).read_text(encoding="utf-8")
        shadow = tmp_path / relative.replace("/", "_")
        shadow.write_text(source + untyped, encoding="utf-8")
        shadows += ["--shadow-file", relative, str(shadow)]
        if relative.startswith("simhash_scrapy/core/"):
            planted_line = len((source + untyped).splitlines()) - 1
    proc = subprocess.run([sys.executable, "-m", "mypy", *shadows], cwd=ROOT, capture_output=True, text=True, timeout=600)
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    import scrapy
    from packaging.version import Version

    if Version(scrapy.__version__) < Version("2.19"):
        # mypy reads the installed Scrapy's annotations: the glue is typed against the newest
        # supported Scrapy (CI's static checks run there, .ci/run); an older one annotates some
        # attributes differently (Crawler.stats as Optional, engine methods it lacks). The core
        # imports no Scrapy, so its errors are the same on every version: checked here.
        errors = [line for line in errors if line.startswith("simhash_scrapy/core/")]
    assert errors == [
        f"simhash_scrapy/core/files.py:{planted_line}: error: Function is missing a type annotation  [no-untyped-def]"
    ], proc.stdout[-3000:]


def undocumented_modules(package: Path, architecture: str) -> tuple[set[str], set[str]]:
    """``(modules missing from ARCHITECTURE.md's module table, table entries with no module)``.

    Modules are every ``.py`` file under ``package``, as paths relative to it (``core/extract/text.py``); the
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


# ------------------------------------------------------------------ test helpers
def test_no_unit_or_integration_test_imports_from_an_e2e_test_module() -> None:
    """Shared helpers live in helper modules (tests/crawl_helpers.py, tests/command_helpers.py...):
    a faster layer never loads a slower layer's test module (and its fixtures) to reach one."""
    tests = ROOT / "tests"
    e2e = {path.stem for path in (tests / "e2e").glob("test_*.py")}
    found = []
    for layer in ("unit", "integration"):
        for path in sorted((tests / layer).glob("*.py")):
            for name in re.findall(r"^\s*(?:from|import)\s+(test_\w+)", path.read_text(encoding="utf-8"), re.M):
                if name in e2e:
                    found.append(f"{layer}/{path.name} imports {name}")
    assert e2e and found == []
