"""An added sentence is never ``unchanged``: the content digest covers the frame rows extraction cuts (issue 35)."""

from __future__ import annotations

import random

import pytest

from simhash_scrapy.core.analysis import analyse_html
from simhash_scrapy.core.extract.frame_digest import sentence_of

_VOCABULARY = ("river stone garden window silver morning letter market yellow forest engine candle harbor "
               "velvet planet ladder copper meadow winter signal pocket thunder marble violet orchard").split()  # fmt: skip
_RNG = random.Random(7)
PARAGRAPHS = "".join("<p>" + " ".join(_RNG.choice(_VOCABULARY) for _ in range(60)) + ".</p>" for _ in range(6))
NOTE = "Editor's note, 3 March 2026: an earlier version misnamed the mayor of the town."


def page(after_h1: str = "", last: str = "", caption: str = "") -> str:
    figure = f"<figure><img src=a.png><figcaption>{caption}</figcaption></figure>" if caption else ""
    return (f"<html><body><nav><a href=/>Home</a> <a href=/news>News</a></nav><article><h1>The council meets</h1>"
            f"{after_h1}<p>By Ann Lee, November 6, 2012 at 7:43 PM</p>{PARAGRAPHS}{figure}{last}</article>"
            f"<footer>Copyright Example</footer></body></html>")  # fmt: skip


BEFORE = analyse_html(page())


@pytest.mark.parametrize("edited", [
    page(after_h1=f"<p>{NOTE}</p>"),  # cut from the main text by the frame rule: the digest still sees it
    page(last=f"<p>{NOTE}</p>"),
    page(last="<p>A reader wrote to us on Tuesday and we corrected the story since then.</p>"),
    page(caption="The mayor of the town opens the new bridge over the river on Monday."),
])  # fmt: skip
def test_a_sentence_added_anywhere_makes_another_digest(edited: str) -> None:
    after = analyse_html(edited)
    assert after.digest != BEFORE.digest


def test_the_frame_note_leaves_the_fingerprint_and_dates_are_ignored() -> None:
    assert analyse_html(page(after_h1=f"<p>{NOTE}</p>")).fingerprint == BEFORE.fingerprint
    # A time and date row is not a sentence: another date there changes nothing.
    assert analyse_html(page(after_h1="<p>Updated 3 March 2026 at 10:42</p>")).digest == BEFORE.digest
    assert sentence_of("By Ann Lee, November 6, 2012 at 7:43 PM") is None
    assert sentence_of(NOTE) == "editor s note an earlier version misnamed the mayor of the town"
