"""Helpers of the command tests (any layer): ``scrapy simhash ...`` in a subprocess, its one-line
errors, its JSON Lines reports.

Test modules import these from here, never from another test module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).parent / "crawl_project"


# ----------------------------------------------------------------- helpers
def env(project: bool = False) -> dict[str, str]:
    variables = dict(os.environ)
    variables.pop("SCRAPY_SETTINGS_MODULE", None)
    if project:
        variables["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), variables.get("PYTHONPATH", "")]))
    return variables


def scrapy(*args: str, cwd: Path, timeout: float = 300, project: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy.cmdline", *args],
        cwd=cwd, env=env(project), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def simhash(*args: str, cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return scrapy("simhash", *args, cwd=cwd, **kwargs)


def assert_user_error(proc: subprocess.CompletedProcess[str], code: int, command: str, words: str) -> None:
    """Exit ``code``, one error line naming the problem, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, proc.stderr
    if code == 1:
        assert errors[0].startswith(f"scrapy simhash {command}: error: "), errors
    assert words.lower() in errors[0].lower(), errors


def read_jsonl(text: str) -> list[dict[str, Any]]:
    """The records of a JSON Lines report but its summary line (last; its time and source are the writer's own)."""
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    if records and records[-1].get("type") == "summary":
        records.pop()
    return records


def groups(clusters: list[dict[str, Any]], strip: str = "") -> list[list[str]]:
    """Each cluster as its member URLs (canonical first), URL prefix ``strip`` removed."""
    return [[m["url"].replace(strip, "") for m in c["members"]] for c in clusters]


