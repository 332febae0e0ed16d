"""Tree edits that can be undone (``core/extract/dom``): batches of removals, their text and their undo."""

from __future__ import annotations

import random

import pytest
from lxml import etree

from simhash_scrapy.core.extract.dom import _UNCHANGED, NotUndoable, UndoableDrops, drop_element, drop_elements


def _tree(seed: int) -> etree._Element:
    """A random page: nested elements, comments, text and tails (some empty)."""
    rng = random.Random(seed)
    parts = ["<html><body>"]
    depth = 0
    for i in range(rng.randrange(5, 60)):
        roll = rng.random()
        if roll < 0.35 or depth == 0:
            parts.append(f"<div id='e{i}'>" + rng.choice(["", f"t{i} "]))
            depth += 1
        elif roll < 0.5:
            parts.append(f"<!--c{i}-->" + rng.choice(["", f"after{i} "]))
        elif roll < 0.6:
            parts.append(f"<script>s{i}</script>" + rng.choice(["", f"tail{i} "]))
        else:
            parts.append("</div>" + rng.choice(["", f"tail{i} "]))
            depth -= 1
    parts.append("</div>" * depth + "</body></html>")
    return etree.fromstring("".join(parts), etree.HTMLParser())


def _pick(root: etree._Element, seed: int) -> list[etree._Element]:
    rng = random.Random(seed)
    elements = [e for e in root.iter() if e.getparent() is not None and e.tag not in ("body",)]
    chosen = [e for e in elements if rng.random() < 0.4]
    if seed % 3 == 0:
        rng.shuffle(chosen)  # not in document order; nested ones included
    return chosen


@pytest.mark.parametrize("seed", range(200))
def test_a_batch_gives_the_tree_of_one_by_one_removals_and_undo_restores_it(seed: int) -> None:
    one_by_one, batched = _tree(seed), _tree(seed)
    before = etree.tostring(batched)
    for element in _pick(one_by_one, seed):
        drop_element(element)
    with UndoableDrops() as drops:
        drop_elements(_pick(batched, seed))
        drop_elements(_pick(batched, seed + 1000))  # a second batch on the edited tree
        assert etree.tostring(batched).count(b"<") <= before.count(b"<")
    expected = _tree(seed)
    drop_elements(_pick(expected, seed))
    for element in _pick(expected, seed + 1000):
        drop_element(element)
    assert etree.tostring(batched) == etree.tostring(expected)
    assert etree.tostring(_first(seed)) == etree.tostring(one_by_one)
    drops.undo()
    assert etree.tostring(batched) == before


def _first(seed: int) -> etree._Element:
    root = _tree(seed)
    drop_elements(_pick(root, seed))
    return root


def test_many_removed_siblings_move_their_tails_in_linear_time_and_memory() -> None:
    # 100,000 scripts each followed by text: one join, and the journal keeps one copy of the text.
    page = "<html><body><p>x</p>" + "<script>s</script>tail words " * 100_000 + "</body></html>"
    root = etree.fromstring(page, etree.HTMLParser(huge_tree=True))
    before = etree.tostring(root)
    with UndoableDrops() as drops:
        drop_elements(list(root.iter("script")))
        assert root.find("body/p").tail == "tail words " * 100_000
        saved = [entry for entry in drops.journal.entries if entry[3] is not _UNCHANGED]
        assert len(saved) == 1  # the paragraph's tail, as it was (None)
    drops.undo()
    assert etree.tostring(root) == before


def test_control_characters_beside_a_removal_are_not_undoable() -> None:
    root = etree.fromstring("<html><body><p>a</p>b\x01c<script>s</script>tail</body></html>", etree.HTMLParser())
    with UndoableDrops(), pytest.raises(NotUndoable):
        drop_elements(list(root.iter("script")))
