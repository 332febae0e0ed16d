"""Shared pieces of the ``scrapy simhash`` sub-commands: errors, settings, output, progress."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ..config import REPORT_FORMATS, SimhashConfig, from_settings, report_format_for

__all__ = [
    "EXIT_OK",
    "EXIT_INPUT",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "CommandError",
    "load_config",
    "output_format",
    "write_clusters",
    "activation_problem",
    "Progress",
]

#: Exit codes scripts can rely on.
EXIT_OK = 0
EXIT_INPUT = 1  # bad or unreadable input, nothing usable found, a fetch failed
EXIT_USAGE = 2  # bad option, argument or setting value
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """A user error: printed as one line (``scrapy simhash <cmd>: error: ...``), never as a traceback."""

    def __init__(self, message: str, exitcode: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.exitcode = exitcode


class _Enabled(Mapping[str, Any]):
    """The project's settings, with ``SIMHASH_ENABLED`` forced on: the tools work in a project that turned the plugin off."""

    def __init__(self, settings: Any) -> None:
        self._settings = settings

    def get(self, name: str, default: Any = None) -> Any:
        if name == "SIMHASH_ENABLED":
            return True
        value = self._settings.get(name)
        return default if value is None else value

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __iter__(self) -> Any:
        return iter(self._settings)

    def __len__(self) -> int:
        return len(list(iter(self._settings)))


def load_config(settings: Any) -> SimhashConfig:
    """``SimhashConfig`` from the project's settings; a bad value is a usage error naming the setting."""
    try:
        return from_settings(_Enabled(settings))
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None


def output_format(explicit: str | None, output: str | None, default: str = "jsonl") -> str:
    """The report format: ``--format``, else the output file's extension, else ``default``."""
    if explicit:
        fmt = explicit.lower()
        if fmt not in REPORT_FORMATS:
            raise CommandError(f"--format must be one of {', '.join(REPORT_FORMATS)}, got {explicit!r}", EXIT_USAGE)
        return fmt
    if output and output != "-":
        try:
            return report_format_for(output, "--output")
        except ValueError as exc:
            raise CommandError(str(exc).replace("SIMHASH_REPORT_FORMAT", "--format"), EXIT_USAGE) from None
    return default


def write_clusters(
    clusters: list[dict[str, Any]],
    fmt: str,
    output: str | None,
    summary: Mapping[str, Any],
    stdout: TextIO,
    changes: list[dict[str, Any]] | None = None,
) -> str:
    """Write the report (``-`` or ``None``: standard output); returns where it went.

    A CSV report's changed pages go to ``<name>.changed.csv`` beside it; on
    standard output a CSV holds the clusters only (the return value says so).
    """
    from ..core.report.report import changes_path, render_report, write_report

    changes = changes or []
    if output is None or output == "-":
        stdout.write(render_report(clusters, fmt, summary, changes=changes))
        stdout.flush()
        if fmt == "csv" and changes:
            return "standard output (clusters only: the changed pages need --output FILE.csv or --format jsonl)"
        return "standard output"
    target = Path(output)
    if target.is_dir():
        raise CommandError(f"--output {output} is a folder; give a file name such as {output}/clusters.{fmt}")
    try:
        written = write_report(target, clusters, fmt, summary, changes=changes)
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
    if fmt == "csv" and changes:
        return f"{written} (changed pages: {changes_path(written)})"
    return str(written)


def _enabled_components(settings: Any, name: str) -> set[type]:
    """The classes a component dict setting (``ADDONS``, ``DOWNLOADER_MIDDLEWARES``, ...) enables."""
    from scrapy.utils.misc import load_object

    try:
        components = settings.getwithbase(name) if name != "ADDONS" else settings.getdict("ADDONS")
    except (AttributeError, TypeError, ValueError):
        return set()
    enabled = set()
    for key, priority in dict(components).items():
        if priority is None or (isinstance(key, str) and key.startswith("scrapy.")):
            continue  # disabled, or one of Scrapy's own (not imported for nothing)
        try:
            enabled.add(key if isinstance(key, type) else load_object(key))
        except (ImportError, NameError, ValueError, AttributeError):
            continue
    return enabled


def activation_problem(settings: Any) -> str | None:
    """Why ``scrapy crawl`` in this project runs without simhash-scrapy although settings.py configures it.

    A project whose settings.py sets ``SIMHASH_*`` values but enables neither
    the add-on nor the middleware or pipeline is half-configured: Scrapy then
    loads nothing of ours during a crawl, so only these commands can say so.
    The usual cause: a line ``ADDONS = {"simhash_scrapy.Addon": 0}`` added
    *above* the ``ADDONS = {}`` that ``scrapy startproject`` writes, which
    replaces it.  ``None`` when the plugin is enabled, turned off on purpose
    (``SIMHASH_ENABLED = False``) or not configured at all.
    """
    from scrapy.settings import SETTINGS_PRIORITIES

    from ..addon import Addon
    from ..middleware import SimhashMiddleware
    from ..pipeline import SimhashPipeline

    project = SETTINGS_PRIORITIES["project"]
    try:
        configured = sorted(n for n in settings if n.startswith("SIMHASH_") and settings.getpriority(n) == project)
    except (AttributeError, TypeError):
        return None  # not a Scrapy Settings object
    if not configured or not settings.getbool("SIMHASH_ENABLED", True):
        return None
    if Addon in _enabled_components(settings, "ADDONS"):
        return None
    if SimhashMiddleware in _enabled_components(settings, "DOWNLOADER_MIDDLEWARES"):
        return None
    if SimhashPipeline in _enabled_components(settings, "ITEM_PIPELINES"):
        return None
    shown = ", ".join(configured[:3]) + (", ..." if len(configured) > 3 else "")
    return (
        f"this project's settings set {shown} but do not enable simhash-scrapy, so `scrapy crawl` runs without it: "
        'put "simhash_scrapy.Addon": 0 into the ADDONS dict of settings.py (scrapy startproject writes '
        "ADDONS = {} there; a second ADDONS line replaces the first)"
    )


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """A one-line progress bar on standard error, redrawn at most 5 times a second.

    On a terminal it redraws in place; elsewhere (``--progress`` into a log) it
    prints a plain line every 10 seconds.  ``total`` may be 0 (unknown).
    """

    def __init__(self, label: str, total: int, unit: str, enabled: bool, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._width = 0

    def update(self, done: int, force: bool = False) -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < (0.2 if self.tty else 10.0):
            return
        self._last = now
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        if self.total:
            share = min(1.0, done / self.total)
            filled = int(share * 24)
            bar = "#" * filled + "-" * (24 - filled)
            eta = f" ETA {_duration((self.total - done) / rate)}" if rate > 0 and done < self.total else ""
            line = f"{self.label} [{bar}] {100 * share:5.1f}% {done:,}/{self.total:,} {self.unit} {rate:,.0f}/s{eta}"
        else:
            line = f"{self.label} {done:,} {self.unit} {rate:,.0f}/s"
        if self.tty:
            pad = max(0, self._width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.update(self.done, force=True)
            if self.tty:
                self.stream.write("\n")
                self.stream.flush()


def progress_wanted(option: bool | None) -> bool:
    """``--progress``/``--no-progress``, else on when standard error is a terminal."""
    if option is not None:
        return option
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
