"""The crawl's report at close: stats counted from the record, this crawl's page changes, the report file.

``DedupState.spider_closed`` calls ``write_crawl_report`` once the state's close hooks ran (the URL rules
add their summary to ``state.report_extra`` there).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .core.records import is_item_scope
from .core.redact import LOG_REDACTION
from .core.report.changes import LAST_CRAWL_EXTRA, LastCrawl, build_page_changes, count_changes, encode_last_crawl
from .core.report.report import (
    build_changes,
    build_clusters,
    count_clusters,
    describe_report,
    report_summary,
    write_report,
)

if TYPE_CHECKING:
    from scrapy import Spider

    from .state import DedupState

__all__ = ["write_crawl_report"]

logger = logging.getLogger("simhash_scrapy.state")  # (the logger these lines always had)
logger.addFilter(LOG_REDACTION)  # no password of a page URL in a log line (core.redact)


def _identity_summary(stats: dict[str, Any]) -> dict[str, int]:
    """This crawl's ``simhash/identity/*`` counts for the report's summary (``identity_pages``,
    ``identity_kept_apart``, ``identity_kept_apart_<signal>``); empty when no page declared anything."""
    if not stats.get("simhash/identity/pages"):
        return {}
    return {
        name.replace("simhash/identity/", "identity_").replace("/", "_"): int(value)
        for name, value in sorted(stats.items())
        if name == "simhash/identity/pages" or name.startswith("simhash/identity/kept_apart")
    }


async def _page_changes(state: DedupState, members: list[Any]) -> list[dict[str, Any]]:
    """This crawl's pages, each new, changed, edited, unchanged or gone; kept with the backend
    (``LAST_CRAWL_EXTRA``) for ``scrapy simhash report --changes``."""
    last = LastCrawl(state.crawl_started, state.backend.initial > 0, state.gone)
    try:
        await state.backend.save_extra(LAST_CRAWL_EXTRA, encode_last_crawl(last))
    except Exception:
        logger.exception("simhash-scrapy: cannot keep the list of gone pages", extra={"spider": state.spider})
    pages = build_page_changes(members, last)
    if last.previous_crawl:
        state.stats.set_value("simhash/new", count_changes(pages)["new"])
    return pages


async def write_crawl_report(state: DedupState, spider: Spider, reason: str = "finished") -> None:
    """The stats counted from the record at close (``simhash/index_size``, ``pages``, ``clusters``, ``new``), the
    list of this crawl's pages kept with the backend, and the report (``SIMHASH_REPORT_URI``)."""
    state.stats.set_value("simhash/index_size", await state.backend.index_size())
    members = await state.backend.members()
    # Distinct pages in the record (a page fetched twice counts once, unlike simhash/fingerprinted):
    # the report's "pages".
    state.stats.set_value("simhash/pages", sum(1 for m in members if not is_item_scope(m.scope)))
    pages = await _page_changes(state, members)
    if state.report_path is None or state.config.report_format is None:
        state.stats.set_value("simhash/clusters", count_clusters(members))
        return
    clusters = build_clusters(
        members,
        include_text=state.config.keep_text,
        max_distance=state.config.max_distance,
        representative=state.config.representative,
    )
    state.stats.set_value("simhash/clusters", len(clusters))
    # Counted from the record, not this run's counters: after a resumed job
    # (JOBDIR, SIMHASH_DIR) or with several Redis workers the report covers more.
    summary = report_summary(
        members,
        clusters,
        title=f"Near-duplicate clusters: {spider.name}",
        max_distance=state.config.max_distance,
        source=f"spider {spider.name}",
        previous_crawl=state.backend.initial > 0,
    )
    summary.update(_identity_summary(state.stats.get_stats()))
    summary.update(state.report_extra)
    if state.backend.initial > 0:
        summary.update({kind: count_changes(pages)[kind] for kind in ("new", "gone")})
    try:
        path = write_report(
            state.report_path, clusters, state.config.report_format, summary, changes=build_changes(members),
            pages=pages,
        )
    except Exception:
        logger.exception(
            "simhash-scrapy: cannot write the cluster report to %(path)s",
            {"path": str(state.report_path)},
            extra={"spider": spider},
        )
        state.stats.set_value("simhash/report_error", True)
        return
    paused = ""
    if reason == "shutdown" and state.config.persistent:
        # Ctrl-C with JOBDIR/SIMHASH_DIR: the record is kept, so the resumed
        # crawl's report (same path) covers these pages too and replaces this one.
        paused = " (the crawl was stopped: a resumed crawl rewrites this report with every page)"
    logger.info(
        "Simhash: wrote the %(format)s report to %(path)s (%(what)s)%(paused)s",
        {"format": state.config.report_format, "path": str(path), "what": describe_report(summary), "paused": paused},
        extra={"spider": spider},
    )
