"""A CPU-time limit on one page's analysis, checked at points between its linear steps.

Analysis is linear in the page (``tests/integration/test_linear.py``), but a 10 MB page of
hostile markup still takes seconds.  Inside ``within(seconds)`` every ``check()`` raises
``TooSlow`` once the calling thread has used ``seconds`` of CPU time since the block began, so
the crawl counts the page as skipped (``simhash/skipped/too_slow``) instead of holding a worker
thread for minutes.  Thread CPU time, not wall time: a busy machine does not cut pages.
Outside a ``within`` block ``check()`` does nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["TooSlow", "within", "check"]

_local = threading.local()


class TooSlow(Exception):
    """The analysis of one page used up its CPU time (``within``)."""


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """``check()`` raises ``TooSlow`` in this block once this thread used ``seconds`` of CPU."""
    outer = getattr(_local, "deadline", None)
    _local.deadline = time.thread_time() + seconds
    try:
        yield
    finally:
        _local.deadline = outer


def check() -> None:
    """Raise ``TooSlow`` when the current ``within`` block is past its time."""
    deadline = getattr(_local, "deadline", None)
    if deadline is not None and time.thread_time() > deadline:
        raise TooSlow
