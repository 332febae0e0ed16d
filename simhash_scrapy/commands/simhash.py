"""``scrapy simhash <compare|report|dedup>``: the command Scrapy finds through the ``scrapy.commands`` entry point.

Exit codes: 0 done, 1 bad or unusable input (one line on standard error
says why), 2 bad usage (unknown option, missing argument, bad setting
value), 130 interrupted.  A user error never prints a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from ._common import EXIT_INTERRUPTED, EXIT_USAGE, CommandError, activation_problem

__all__ = ["Command"]

_COMPARE_HELP = """\
Fingerprint two or more pages (URLs or local HTML files) with this project's
SIMHASH_* settings and show what a crawl would decide: each fingerprint, the
distance matrix, the similarity (1 - d/64), the text that differs, and the
features that weigh most in the differing bits. URLs are fetched with Scrapy
and the project's settings (user agent, proxies, robots.txt, ...).
"""
_COMPARE_EXAMPLES = """\
examples:
  scrapy simhash compare page-a.html page-b.html
  scrapy simhash compare https://example.com/a https://example.com/a?sessionid=42
  scrapy simhash compare a.html b.html c.html -s SIMHASH_TEXT_MODE=visible
  scrapy simhash compare a.html b.html --json > comparison.json
"""
_REPORT_HELP = """\
Export the clusters of a saved crawl without crawling: from a store written
with JOBDIR or SIMHASH_DIR (give the folder or the store file), or from a
Redis key (--redis). Formats: JSON Lines (default), CSV, HTML.
"""
_REPORT_EXAMPLES = """\
examples:
  scrapy simhash report crawls/job1 -o clusters.jsonl
  scrapy simhash report --spider myspider -o clusters.html     (in a project with SIMHASH_DIR)
  scrapy simhash report .scrapy/simhash/myspider.store -o clusters.html
  scrapy simhash report crawls/job1 --format csv > clusters.csv
  scrapy simhash report --spider myspider --changes     (what changed since the last crawl)
  scrapy simhash report --redis redis://localhost:6379/0 --key myspider:simhash -o clusters.html
  scrapy simhash report --redis --spider myspider -o clusters.jsonl     (REDIS_URL from the project)
"""
_DEDUP_HELP = """\
Find near-duplicates among pages already on disk, without crawling: a folder
of HTML files, or a JSON Lines file of crawled items (Scrapy feed export
output, optionally gzipped) with the page's HTML or text in one field. One
batch all-pairs search with the block-permuted index; clusters follow the
crawl's rule (a page joins the nearest earlier canonical page) and are written
in the report formats (JSON Lines, CSV, HTML). A summary goes to standard
error; a progress bar too when it is a terminal.
"""
_DEDUP_EXAMPLES = """\
examples:
  scrapy simhash dedup mirror/ -o clusters.html
  scrapy simhash dedup items.jsonl --field body -o clusters.jsonl
  scrapy simhash dedup items.jsonl.gz --field text --field-format text --format csv > clusters.csv
  scrapy simhash dedup mirror/ --base-url https://example.com/ -s SIMHASH_MAX_DISTANCE=4 -o clusters.jsonl
"""
#: The operands of each sub-command as its usage line names them: the same names as its positional arguments.
_OPERANDS = {"compare": "PAGE PAGE [PAGE ...]", "report": "[STORE]", "dedup": "INPUT"}
_EXIT_CODES = """
exit codes: 0 done, 1 bad or unusable input, 2 bad usage or setting value, 130 interrupted.
Settings come from the project (settings.py) and -s NAME=VALUE, e.g. -s SIMHASH_MAX_DISTANCE=4.
"""


def _add_settings_options(parser: argparse.ArgumentParser) -> None:
    """Scrapy's global options, accepted after the sub-command too (without overriding ones given before it)."""
    group = parser.add_argument_group("global options (also accepted before the sub-command)")
    group.add_argument(
        "-s", "--set", dest="simhash_set", action="append", default=argparse.SUPPRESS, metavar="NAME=VALUE",
        help="set/override a setting, e.g. -s SIMHASH_MAX_DISTANCE=4 (may be repeated)",
    )  # fmt: skip
    group.add_argument("-L", "--loglevel", metavar="LEVEL", default=argparse.SUPPRESS, help="log level")
    group.add_argument("--logfile", metavar="FILE", default=argparse.SUPPRESS, help="log file")
    group.add_argument("--nolog", action="store_true", default=argparse.SUPPRESS, help="disable logging")


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o", "--output", metavar="FILE",
        help="write the report to FILE (default: standard output); its extension picks the format",
    )  # fmt: skip
    parser.add_argument(
        "--format", choices=("jsonl", "csv", "html"), help="report format (default: from --output, else jsonl)"
    )


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False  # compare starts one itself when it has URLs to fetch

    def syntax(self) -> str:
        return "<compare|report|dedup> [options] ..."

    def short_desc(self) -> str:
        return "Near-duplicate tools: compare pages, export cluster reports, dedup pages offline"

    def long_desc(self) -> str:
        return (
            "simhash-scrapy tools. compare: why are these pages (not) near-duplicates? "
            "report: export the clusters of a saved crawl (JOBDIR, SIMHASH_DIR, Redis) to JSON Lines, CSV or HTML. "
            "dedup: near-duplicates among HTML files or crawled items on disk, without crawling. "
            "Run 'scrapy simhash <sub-command> -h' for each one's options and examples. "
            "Exit codes: 0 done, 1 bad input, 2 bad usage, 130 interrupted."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        subparsers = parser.add_subparsers(dest="simhash_command", metavar="<compare|report|dedup>")

        def sub(name: str, help_text: str, description: str, examples: str) -> argparse.ArgumentParser:
            return subparsers.add_parser(
                name,
                help=help_text,
                description=description,
                epilog=examples + _EXIT_CODES,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                usage=f"scrapy simhash {name} [options] " + _OPERANDS[name],
            )

        compare = sub("compare", "compare pages and explain their distance", _COMPARE_HELP, _COMPARE_EXAMPLES)
        compare.add_argument("pages", nargs="*", metavar="PAGE", help="a URL (http, https) or a local HTML file")
        compare.add_argument("--json", action="store_true", help="print the comparison as JSON (for scripts)")
        compare.add_argument(
            "--features", type=int, default=10, metavar="N", help="features to list per compared pair (default 10)"
        )
        compare.add_argument(
            "--diff-lines", type=int, default=40, metavar="N", help="lines of text diff to print per pair (default 40)"
        )
        _add_settings_options(compare)

        report = sub("report", "export clusters from a saved store or Redis", _REPORT_HELP, _REPORT_EXAMPLES)
        report.add_argument(
            "input", nargs="?", metavar="STORE",
            help="JOBDIR or SIMHASH_DIR folder, or a store file (default: the project's JOBDIR or SIMHASH_DIR)",
        )  # fmt: skip
        report.add_argument(
            "--redis", metavar="URL", nargs="?", const="",
            help="read from Redis instead (redis://host:port/db; without URL: the project's SIMHASH_REDIS_URL/REDIS_URL)",
        )  # fmt: skip
        report.add_argument(
            "--key", metavar="PREFIX", help="the Redis key prefix the crawl used, e.g. myspider:simhash (with --redis)"
        )
        report.add_argument(
            "--spider", metavar="NAME",
            help="the spider whose store (SIMHASH_DIR keeps one per spider) or Redis key (SIMHASH_REDIS_KEY) to read",
        )  # fmt: skip
        report.add_argument("--no-texts", action="store_true", help="HTML report without the page texts (smaller)")
        report.add_argument(
            "--changes", action="store_true",
            help="what changed since the last crawl: every page of the latest crawl, new, changed, edited, unchanged "
            "or gone, with its URL (JSON Lines or CSV)",
        )  # fmt: skip
        _add_output_options(report)
        _add_settings_options(report)

        dedup = sub("dedup", "near-duplicates among HTML files or crawled items on disk", _DEDUP_HELP, _DEDUP_EXAMPLES)
        dedup.add_argument(
            "input", nargs="?", metavar="INPUT", help="a folder of HTML files, or a JSON Lines (.jsonl, .jl, .gz) feed"
        )
        _add_output_options(dedup)
        dedup.add_argument(
            "--field", metavar="NAME",
            help="item field with the page's HTML or text (default: SIMHASH_ITEM_FIELD, else the first of "
            "html, body, text, content)",
        )  # fmt: skip
        dedup.add_argument(
            "--field-format", choices=("auto", "html", "text"),
            help="what the field holds (default: SIMHASH_ITEM_FORMAT, auto: HTML when it starts with '<')",
        )  # fmt: skip
        dedup.add_argument("--url-field", metavar="NAME", help="item field with the URL (default: SIMHASH_ITEM_URL_FIELD, url)")
        dedup.add_argument(
            "--suffix", action="append", metavar=".EXT",
            help="file suffixes read in a folder (default: .html .htm .xhtml .shtml; may be repeated)",
        )  # fmt: skip
        dedup.add_argument(
            "--base-url", metavar="URL", help="report folder files as URL + relative path instead of file:// URIs"
        )
        dedup.add_argument("-j", "--jobs", type=int, metavar="N", help="worker processes (default: one per CPU)")
        dedup.add_argument("--no-texts", action="store_true", help="HTML report without the page texts (smaller)")
        progress = dedup.add_mutually_exclusive_group()
        progress.add_argument(
            "--progress", dest="progress", action="store_true", default=None, help="show progress even when not a terminal"
        )
        progress.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
        dedup.add_argument("-q", "--quiet", action="store_true", help="no summary on standard error")
        _add_settings_options(dedup)

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        opts.set = list(opts.set or []) + list(getattr(opts, "simhash_set", None) or [])
        super().process_options(args, opts)
        assert self.settings is not None
        if not opts.loglevel and not getattr(opts, "logfile", None):
            # These are not crawls: Scrapy's start-up log (which Scrapy < 2.14 prints for every command)
            # and compare's fetch log are noise; our own warnings still show.  -L brings them back.
            quiet = "CRITICAL" if getattr(opts, "simhash_command", None) == "compare" else "WARNING"
            self.settings.set("LOG_LEVEL", quiet, priority="cmdline")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        name = getattr(opts, "simhash_command", None)
        if not name:
            raise UsageError("choose a sub-command: compare, report or dedup (scrapy simhash <sub-command> -h)")
        if args:
            raise UsageError(f"{name}: unrecognized arguments: {' '.join(args)}", print_help=False)
        problem = activation_problem(self.settings)
        if problem:
            sys.stderr.write(f"scrapy simhash {name}: warning: {problem}\n")
        try:
            self.exitcode = self._dispatch(name, opts)
        except CommandError as exc:
            self._fail(name, str(exc), exc.exitcode)
        except KeyboardInterrupt:
            self._fail(name, "interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader of our output went away (| head): not an error of ours.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            self.exitcode = 0

    def _fail(self, name: str, message: str, code: int) -> None:
        from ..core.redact import redact

        # (a URL's password is masked here, whatever raised the error: core.redact)
        sys.stderr.write(f"scrapy simhash {name}: error: {redact(message)}\n")
        sys.stderr.flush()
        self.exitcode = code

    def _dispatch(self, name: str, opts: argparse.Namespace) -> int:
        assert self.settings is not None
        if name == "compare":
            from .compare import run_compare

            if len(opts.pages) < 2:
                raise CommandError("compare needs at least two pages (URLs or HTML files)", EXIT_USAGE)
            return run_compare(opts, self.settings, process=self.crawler_process)
        if name == "report":
            from .report import run_report

            return run_report(opts, self.settings)
        from .dedup import run_dedup

        if not opts.input:
            raise CommandError("dedup needs an INPUT: a folder of HTML files or a JSON Lines file", EXIT_USAGE)
        return run_dedup(opts, self.settings)
