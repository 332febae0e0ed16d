"""``scrapy simhash report --changes``: what changed since the last crawl, from a store or Redis.

Every page of the latest crawl, one line (JSON Lines) or row (CSV, ``core.report.changes.CHANGE_COLUMNS``) each:
``new``, ``changed``, ``edited``, ``unchanged`` or ``gone``, with its URL (``core.report.changes``), then a
``"type": "summary"`` line with the count of each.  The same lists as the crawl's own report.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ._common import CommandError

__all__ = ["write_changes"]


def write_changes(members: list[Any], found: dict[str, Any], fmt: str, output: str | None, stdout: Any) -> int:
    """Write the latest crawl's pages of ``members`` (``found["last_crawl_blob"]``: what the crawl left)."""
    from ..core.report.changes import LAST_CRAWL_EXTRA, build_page_changes, count_changes, decode_last_crawl
    from ..core.files import write_atomic
    from ..core.report.report import line_safe, page_change_lines, page_changes_csv

    if fmt not in ("jsonl", "csv"):
        raise CommandError(f"--changes writes JSON Lines or CSV, not {fmt}")
    blob = found.get("last_crawl_blob")
    if not blob:
        raise CommandError(
            f"{found['source']} holds no list of the latest crawl's pages ({LAST_CRAWL_EXTRA}): it is written "
            f"by a crawl of this version when it closes"
        )
    try:
        last = decode_last_crawl(blob)
    except ValueError as exc:
        raise CommandError(f"{found['source']}: {exc}") from None
    pages = build_page_changes(members, last)
    counts = count_changes(pages)
    if fmt == "jsonl":
        summary = {"type": "summary", "source": found["source"], "previous_crawl": last.previous_crawl, **counts}
        document = line_safe("".join(line + "\n" for line in page_change_lines(pages)) + json.dumps(summary) + "\n")
    else:
        document = page_changes_csv(pages)
    if output is None or output == "-":
        stdout.write(document)
        stdout.flush()
        where = "standard output"
    else:
        try:
            write_atomic(Path(output), document)
        except OSError as exc:
            raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
        where = output
    what = ", ".join(f"{counts[kind]:,} {kind}" for kind in counts) if last.previous_crawl else "a first crawl (no changes)"
    sys.stderr.write(f"report: the latest crawl of {found['source']}: {what}; {fmt} written to {where}\n")
    return 0
