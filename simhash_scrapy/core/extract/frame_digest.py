"""The sentences main-content extraction cuts from the edges of an article, for the content digest only.

Main-content extraction removes the *frame* of an article (``boilerplate._trim_frame``): the headline, short
rows with a date or a time and link bars at both edges, so an article and its print view or copies keep the
same words and the same fingerprint.  But an editor's note right after the ``<h1>`` ("Editor's note, 3 March
2026: an earlier version of this article misnamed the mayor.") is such a row, and a re-crawl that compared
only the main text would call the page ``unchanged``.

So the frame rows that hold a sentence (``MIN_WORDS`` words or more once dates, times and numbers are left
out: a byline "Posted by Ann Lee on November 6, 2012 at 7:43 PM" keeps 6) are noted while the text is
extracted (``collect``: per thread), and the content digest (``analysis``: ``unchanged`` vs ``edited``) covers
them too.  The fingerprint, the main text and every near-duplicate decision stay as they are.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["MIN_WORDS", "collect", "note", "sentence_of"]

#: A frame row with at least this many words (dates, times and numbers left out) is a sentence.
MIN_WORDS = 8
_LOCAL = threading.local()
_DATE_WORDS = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|mon(?:day)?|tue(?:sday)?|wed(?:nesday)?|thu(?:rsday)?|"
    r"fri(?:day)?|sat(?:urday)?|sun(?:day)?|am|pm|utc|gmt)\b|\S*\d\S*",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")


def sentence_of(text: str) -> str | None:
    """The words of a frame row without dates, times and numbers, when it is a sentence; else ``None``."""
    words = _WORD.findall(_DATE_WORDS.sub(" ", text).lower())
    return " ".join(words) if len(words) >= MIN_WORDS else None


def note(element: Any) -> None:
    """Keep the sentence of a frame row being removed (when a ``collect`` is open in this thread)."""
    found = getattr(_LOCAL, "found", None)
    if found is not None:
        sentence = sentence_of(" ".join(element.itertext()))
        if sentence is not None:
            found.append(sentence)


@contextmanager
def collect() -> Iterator[list[str]]:
    """The sentences of the frame rows removed while the block runs (in this thread)."""
    outer = getattr(_LOCAL, "found", None)
    found: list[str] = []
    _LOCAL.found = found
    try:
        yield found
    finally:
        _LOCAL.found = outer
