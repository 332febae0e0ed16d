"""One page in, one answer out: a simhash, an exact digest (short page), or why there is neither.

Every path that fingerprints a page calls this module: the crawl (from
Scrapy's own parse, ``analyse_tree``, or from the body, ``analyse_html``),
the item pipeline (``analyse_text``), the ``scrapy simhash`` commands and
the library's ``fingerprint_html``.  So the same page gets the same answer
on every path.

* No token at all: skipped as ``"empty"`` (binary bodies, script-only pages).
* Fewer than ``min_tokens`` tokens: a *short* page, compared exactly by
  ``exact_digest`` (see ``exact``): the simhash of a few words is unstable.
* A redirect stub (``boilerplate.redirect_target``: a ``<meta http-equiv="refresh">`` to
  another URL within a few seconds, on a page of fewer than ``REDIRECT_MAX_TOKENS`` tokens) is
  not content: it is compared exactly by its target (the digest of ``"redirect <target>"``),
  so the stubs of one target are duplicates of each other (tracking noise or not) and of no
  content page.
* Otherwise: the 64-bit simhash of the page's features; from
  ``ONE_EDIT_MIN_TOKENS`` (30) up to ``one_edit_below`` tokens also the
  page's one-edit keys (see ``edits``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lxml import etree

from . import deadline, defaults
from .extract import frame_digest
from .features.edits import edit_keys_of_tokens
from .extract.boilerplate import REDIRECT_MAX_TOKENS, redirect_target
from .features.exact import exact_digest, exact_digest_of_tokens
from .features.features import DEFAULT_FEATURES, FeatureConfig, feature_hashes, token_hashes
from .features.fingerprint import simhash_from_features
from .extract.decode import to_utf8
from .extract.shared_parse import deeper_than
from .extract.text import extract_text, extract_text_bytes, text_of_parsed
from .cluster.containment import Sketch, sketch_of
from .features.second import MIN_TOKENS as SECOND_MIN_TOKENS
from .features.second import second_simhash

__all__ = [
    "Analysis", "AnalysisOptions", "analyse_html", "analyse_tree", "analyse_text", "fingerprint_html",
    "may_take_long", "tree_may_take_long", "SLOW_MARKUP", "SLOW_DEPTH",
]  # fmt: skip

#: Analysis is linear in the page, but its cost per byte grows with the markup (every element is
#: visited, in Python for main content) and, in main-content mode, with the nesting depth (each
#: wrapper level measures the text below it).  Pages with more tags than this ("<" bytes) ...
SLOW_MARKUP = 20_000
#: ... or elements nested this deep may take long: the crawl analyses them off the event loop
#: (``benchmarks/hostile.py`` measures both on hostile pages).
SLOW_DEPTH = 64


def may_take_long(body: bytes) -> bool:
    """Whether analysing ``body`` may take long, judged from its bytes alone (one ``count``, in C)."""
    return body.count(b"<") > SLOW_MARKUP


def tree_may_take_long(root: Any) -> bool:
    """Whether analysing a page parsed as ``root`` may take long (elements ``SLOW_DEPTH`` deep)."""
    return root is not None and deeper_than(root, SLOW_DEPTH)


@dataclass(frozen=True)
class AnalysisOptions:
    """What a page is fingerprinted from (the crawl builds this from its settings)."""

    main_content: bool = defaults.MAIN_CONTENT
    features: FeatureConfig = field(default=DEFAULT_FEATURES)
    min_tokens: int = defaults.MIN_TOKENS
    #: Pages of ``min_tokens`` (at least ``ONE_EDIT_MIN_TOKENS``) up to this many tokens also get
    #: one-edit keys (0: none).
    one_edit_below: int = defaults.ONE_EDIT_BELOW
    #: Keep the extracted text in the answer (the HTML report shows diffs).
    keep_text: bool = False
    #: Keep the text a simhash was computed from in ``Analysis.source`` (template learning).
    keep_source: bool = False
    #: Give a simhash page its second simhash (``Analysis.second``, ``core.features.second``).
    second: bool = False
    #: Give a simhash page its sentence sketch (``Analysis.sketch``, ``core.cluster.containment``).
    sketch: bool = False
    #: Give a simhash page's content ``digest`` too (False: ``None``, for callers that only want the
    #: fingerprint; a short page's digest is its fingerprint and is always given).
    content_digest: bool = True


DEFAULT_OPTIONS = AnalysisOptions()


class Analysis(NamedTuple):
    """The answer for one page."""

    #: The simhash, or the exact digest when ``exact``; ``None`` when skipped.
    fingerprint: int | None
    #: ``True`` for a short page (``fingerprint`` is an exact digest).
    exact: bool
    #: Why the page has no fingerprint (``"empty"``), else ``None``.
    skip_reason: str | None
    #: The extracted text, with ``keep_text`` and a fingerprint only.
    text: str | None
    #: The one-edit keys (``edits.edit_keys``) of a simhash page of ``min_tokens`` (at least
    #: ``ONE_EDIT_MIN_TOKENS``) up to ``one_edit_below`` tokens, else empty.
    edit_keys: tuple[int, ...] = ()
    #: The content digest (``exact.exact_digest`` of the normalised token sequence; a short page's is
    #: its ``fingerprint``): a re-crawled page within k is ``unchanged`` when it is the same, else ``edited``.
    digest: int | None = None
    #: The text the simhash was computed from (``str`` or UTF-8 ``bytes``), with ``keep_source`` and
    #: a simhash only: ``core.cluster.sitetemplate`` learns the host's template from it.
    source: str | bytes | None = None
    #: The second, independent simhash of a simhash page (``core.features.second``), with ``second``.
    second: int | None = None
    #: The sentence sketch of a simhash page (``core.cluster.containment``), with ``sketch``; ``None`` when it has
    #: too few sentences.
    sketch: Sketch | None = None

    @property
    def kind(self) -> str:
        """``"exact"``, ``"simhash"`` or ``"skipped"`` (for stats and logs)."""
        if self.fingerprint is None:
            return "skipped"
        return "exact" if self.exact else "simhash"


def _answer(
    data: str | bytes, text: str | None, options: AnalysisOptions, html: Any = None, frame: list[str] | None = None
) -> Analysis:
    """The answer for the page text ``data``; ``html``: the page's bytes (or a callable giving them)
    when it is an HTML page, for the redirect rule; ``frame``: the sentences extraction cut from the
    article's edges (``frame_digest``), which the content digest covers too."""
    # The token hashes once, for the features, the digest and the one-edit keys alike.
    token_array = token_hashes(data, options.features.cjk_ngram)
    deadline.check()  # (a page past its CPU time is cut: core.deadline)
    hashes, weights, tokens = feature_hashes(data, options.features, with_token_count=True, hashes=token_array)
    if html is not None and tokens < REDIRECT_MAX_TOKENS:
        target = redirect_target(html() if callable(html) else html)
        if target is not None:
            stub = f"redirect {target}"
            stub_digest = exact_digest(stub, options.features.cjk_ngram)
            return Analysis(stub_digest, True, None, stub if text is not None else None, (), stub_digest)
    if tokens == 0:
        return Analysis(None, False, "empty", None)
    if tokens < options.min_tokens:
        short_digest = exact_digest_of_tokens(token_array)
        return Analysis(short_digest, True, None, text, (), short_digest)
    digest: int | None = exact_digest_of_tokens(token_array) if options.content_digest else None
    if digest is not None and frame:
        digest ^= exact_digest("\n".join(frame), options.features.cjk_ngram)
    with_keys = defaults.ONE_EDIT_MIN_TOKENS <= tokens < options.one_edit_below  # tokens >= min_tokens here
    keys = edit_keys_of_tokens(token_array) if with_keys else ()
    source = data if options.keep_source else None
    second = second_simhash(hashes, weights) if options.second and tokens >= SECOND_MIN_TOKENS else None
    deadline.check()
    sketch = sketch_of(data) if options.sketch else None
    return Analysis(simhash_from_features(hashes, weights), False, None, text, keys, digest, source, second, sketch)


def analyse_html(
    body: str | bytes, encoding: str | None = None, options: AnalysisOptions = DEFAULT_OPTIONS
) -> Analysis:
    """The answer for an HTML page (``str`` or ``bytes``; ``encoding`` as declared by HTTP)."""
    html = (lambda: to_utf8(body, encoding)) if isinstance(body, str) else body
    with frame_digest.collect() as frame:
        if options.keep_text:
            text = extract_text(body, encoding=encoding, main_content=options.main_content)
        else:
            data = extract_text_bytes(body, encoding=encoding, main_content=options.main_content)
    if options.keep_text:
        return _answer(text, text, options, html, frame)
    return _answer(data, None, options, html, frame)


def analyse_tree(root: Any, raw: bytes | None, options: AnalysisOptions = DEFAULT_OPTIONS) -> Analysis:
    """``analyse_html`` for a page already parsed by Scrapy (``response.selector.root``).

    The same answer as ``analyse_html`` on the page's body; the tree is left
    as it was (removals are undone), so the spider reuses the parse.
    """
    html = raw if raw is not None else (lambda: _serialised(root))
    with frame_digest.collect() as frame:
        found = text_of_parsed(root, raw, options.main_content, as_bytes=not options.keep_text)
    if options.keep_text:
        text: str = found  # type: ignore[assignment]
        return _answer(text, text, options, html, frame)
    return _answer(found, None, options, html, frame)


def _serialised(root: Any) -> bytes:
    """The page's markup as UTF-8 bytes, for a tree whose raw bytes are not ASCII-based (UTF-16)."""
    if root is None or not isinstance(getattr(root, "tag", None), str):
        return b""
    markup: bytes = etree.tostring(root.getroottree(), encoding="utf-8")
    return markup


def analyse_text(text: str, options: AnalysisOptions = DEFAULT_OPTIONS) -> Analysis:
    """The answer for plain text (an item's text field)."""
    return _answer(text, text if options.keep_text else None, options)


def fingerprint_html(
    html: str | bytes,
    encoding: str | None = None,
    main_content: bool = defaults.MAIN_CONTENT,
    features: FeatureConfig = DEFAULT_FEATURES,
    min_tokens: int = defaults.MIN_TOKENS,
) -> int | None:
    """The simhash of ``html``'s text (main content by default, as in a crawl).

    Returns ``None`` for a page with fewer than ``min_tokens`` tokens: such a
    page has no stable simhash.  ``analyse_html`` gives its exact digest.
    """
    # Keys and a simhash page's content digest: not returned.
    options = AnalysisOptions(main_content, features, min_tokens, one_edit_below=0, content_digest=False)
    answer = analyse_html(html, encoding, options)
    return None if answer.exact else answer.fingerprint
