"""A coroutine run to its end on an event loop of its own, from a test that is not async.

The test session's main thread runs Twisted's asyncio reactor (pytest-twisted), so ``asyncio.run`` cannot run
there: it runs in a thread of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any

__all__ = ["in_thread"]


def in_thread(coro: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run(coro)`` in a thread of its own: its result, or its exception."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
