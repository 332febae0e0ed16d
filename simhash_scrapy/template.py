"""Cross-page template learning: text lines that recur on many pages of one host are template.

No Scrapy import here: this module is part of the algorithm core.

A single-page extractor (``boilerplate.py``) cannot know that an unnamed
"Trending now" widget, a byline or a newsletter blurb is the same on every
page of a site; a crawler that sees many pages of the host can.  The learner
keeps, per host, how many pages each text line (one block of the extracted
text, normalised and hashed with a stable 64-bit hash) occurred on.  A line
seen on at least ``max(min_pages, share * pages_seen)`` earlier pages of the
same host is template and is removed before fingerprinting.

Guards:

* **Copies are not template.** The same article served under many URLs
  (session ids, tracking parameters) would make every one of its lines
  "recurring".  ``observe`` is told whether the page was a near-duplicate of
  an earlier page; such pages do not count.  A page is counted when it is not
  a duplicate, so the lines of a cluster of copies count once.
* **A page made only of template lines is empty.** What is left after the
  learned template is removed is what gets fingerprinted; when that is too
  little (the caller's ``min_tokens``), the page is skipped, never matched.
* **Bounded memory.** At most ``max_lines`` line counts per host (lines seen
  on a single page are forgotten first) and ``max_hosts`` hosts (least
  recently used first).

Early pages are fingerprinted before much is learned.  ``min_pages`` keeps
that window short (the default 4 means the 5th page of a host is the first to
be cleaned), and ``refit`` gives the fingerprints of a host's first pages
again once its template is known (the caller re-indexes them), so that later
pages are compared with cleaned fingerprints.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["TemplateLearner", "host_of"]


def host_of(url: str) -> str:
    """The host (with port) that pages are grouped by."""
    try:
        return urlsplit(url).netloc.lower() or url
    except ValueError:
        return url


def _line_key(line: str) -> bytes:
    return hashlib.blake2b(line.casefold().encode("utf-8", "replace"), digest_size=8).digest()


@dataclass
class _Host:
    pages: int = 0
    counts: dict[bytes, int] = field(default_factory=dict)
    # lines of the first pages (for refit), key -> lines
    early: dict[object, list[str]] = field(default_factory=dict)
    template_size: int = 0


class TemplateLearner:
    """Learns, per host, which text lines are template.  Not thread-safe (use one per thread or a lock)."""

    def __init__(
        self,
        min_pages: int = 4,
        share: float = 0.1,
        max_lines: int = 200_000,
        max_hosts: int = 10_000,
        early_pages: int = 32,
    ) -> None:
        if not isinstance(min_pages, int) or min_pages < 2:
            raise ValueError(f"min_pages must be an integer >= 2, got {min_pages!r}")
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"share must be between 0 and 1, got {share!r}")
        self.min_pages = min_pages
        self.share = share
        self.max_lines = max_lines
        self.max_hosts = max_hosts
        self.early_pages = early_pages
        self._hosts: OrderedDict[str, _Host] = OrderedDict()

    # ------------------------------------------------------------------ state

    def _host(self, host: str) -> _Host:
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
            if len(self._hosts) > self.max_hosts:
                self._hosts.popitem(last=False)
        else:
            self._hosts.move_to_end(host)
        return state

    def threshold(self, host: str) -> int:
        """Pages a line must have been seen on (on this host) to count as template."""
        state = self._hosts.get(host)
        pages = state.pages if state else 0
        return max(self.min_pages, int(self.share * pages + 0.999999))

    def pages(self, host: str) -> int:
        state = self._hosts.get(host)
        return state.pages if state else 0

    # ------------------------------------------------------------------ use

    def is_template(self, host: str, line: str) -> bool:
        state = self._hosts.get(host)
        if state is None:
            return False
        return state.counts.get(_line_key(line), 0) >= self.threshold(host)

    def clean(self, host: str, text: str) -> str:
        """``text`` without its template lines (lines separated by "\\n")."""
        state = self._hosts.get(host)
        if state is None or state.pages < self.min_pages:
            return text
        limit = self.threshold(host)
        counts = state.counts
        lines = text.split("\n")
        kept = [line for line in lines if counts.get(_line_key(line), 0) < limit]
        if len(kept) == len(lines):
            return text
        return "\n".join(kept)

    def observe(self, host: str, text: str, duplicate: bool = False, key: object = None) -> None:
        """Count the lines of one page of ``host`` (not if it was a near-duplicate of an earlier page)."""
        if duplicate:
            return
        state = self._host(host)
        state.pages += 1
        counts = state.counts
        lines = set(text.split("\n"))
        for line in lines:
            if line:
                k = _line_key(line)
                counts[k] = counts.get(k, 0) + 1
        if len(counts) > self.max_lines:
            for k in [k for k, c in counts.items() if c <= 1]:
                del counts[k]
            if len(counts) > self.max_lines:  # still too many: keep the most frequent half
                keep = sorted(counts.items(), key=lambda kv: kv[1], reverse=True)[: self.max_lines // 2]
                state.counts = dict(keep)
        if key is not None and len(state.early) < self.early_pages:
            state.early[key] = text.split("\n")

    def process(self, host: str, text: str) -> str:
        """``clean`` then ``observe`` (for callers that do not know duplicate verdicts)."""
        cleaned = self.clean(host, text)
        self.observe(host, text)
        return cleaned

    def refit(self, host: str) -> list[tuple[object, str]]:
        """The host's first pages (``key`` given to ``observe``) cleaned with today's template.

        The caller re-fingerprints them and updates its index, so that pages
        seen before the template was learned are compared cleaned from now on.
        Returns ``[]`` until ``min_pages`` pages were seen.
        """
        state = self._hosts.get(host)
        if state is None or state.pages < self.min_pages:
            return []
        return [(key, self.clean(host, "\n".join(lines))) for key, lines in state.early.items()]

    def forget_early(self, host: str) -> None:
        state = self._hosts.get(host)
        if state is not None:
            state.early.clear()
