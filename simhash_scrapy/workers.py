"""The worker threads that analyse pages off the event loop (``SIMHASH_THREADS``).

Daemon threads: a crawl that stops (Ctrl-C, an error) never waits at exit for the page a worker
is analysing (``concurrent.futures.ThreadPoolExecutor`` joins its threads at exit, and a crawl
stopped by Ctrl-C waited minutes for one page).  Each page's analysis has at most
``ANALYSIS_MAX_SECONDS`` of CPU time (``core.deadline``): past it the page is cut, a counted skip
(``simhash/skipped/too_slow``), and the thread is free for the next page.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from .core import deadline

__all__ = ["DaemonExecutor", "ANALYSIS_MAX_SECONDS", "cut_at_deadline"]

#: CPU seconds one page's analysis may take in a worker thread.  Analysis is linear in the page: the
#: largest page (``SIMHASH_MAX_BYTES``, 10 MB) of the most costly hostile markup takes under 4 s in
#: pure Python, under 2 s with the C helpers (``tests/integration/test_linear.py``).
ANALYSIS_MAX_SECONDS = 15.0


def cut_at_deadline(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` under ``core.deadline.within(ANALYSIS_MAX_SECONDS)`` (raises ``TooSlow``)."""
    with deadline.within(ANALYSIS_MAX_SECONDS):
        return func(*args)


class DaemonExecutor(Executor):
    """A fixed pool of daemon threads (``loop.run_in_executor`` takes any ``Executor``)."""

    def __init__(self, workers: int, name: str) -> None:
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(workers)
        ]
        self._shutdown = False
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: Future[Any] = Future()
        self._tasks.put((future, functools.partial(fn, **kwargs) if kwargs else fn, args))
        return future

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            future, fn, args = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the awaiting coroutine, as ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True
        for _ in self._threads:
            self._tasks.put(None)
        if wait:
            for thread in self._threads:
                thread.join()
