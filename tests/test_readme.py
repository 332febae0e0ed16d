"""The README's Python examples run as tests, so they cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code: str) -> None:
    if "settings.py" in code.splitlines()[0]:
        pytest.skip("a settings.py excerpt, checked by the settings tests")
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
