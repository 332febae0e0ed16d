"""Which pages are not fingerprinted at all, and why: the rules the crawl and ``compare`` share.

Reasons are the names of the ``simhash/skipped/<reason>`` stats.  ``empty``
(no token at all) is decided by ``analysis`` after extraction; the rules
here only need the response's status, media type and body.
"""

from __future__ import annotations

from collections.abc import Container

__all__ = ["skip_reason", "too_large", "media_type", "item_is_html"]


def skip_reason(
    status: int | None,
    media_type: str | None,
    body: bytes,
    http_statuses: Container[int],
    content_types: Container[str],
    max_bytes: int,
    html_class: bool = True,
) -> str | None:
    """Why a response is not fingerprinted (``status``, ``content_type``, ``too_large``, ``empty``), or ``None``.

    ``media_type`` is the Content-Type without parameters, lower case, or
    ``None`` when the response had none; then ``html_class`` (the response
    was recognised as HTML some other way) decides.
    """
    if status is not None and status not in http_statuses:
        return "status"
    if media_type is None:
        if not html_class:
            return "content_type"
    elif media_type not in content_types:
        return "content_type"
    if too_large(len(body), max_bytes):
        return "too_large"
    if not body or body.isspace():
        return "empty"
    return None


def too_large(size: int, max_bytes: int) -> bool:
    """Whether a body (or an item's text) of ``size`` bytes (characters for text) is over ``SIMHASH_MAX_BYTES``."""
    return size > max_bytes


def media_type(content_type: str | bytes | None) -> str | None:
    """The media type of a ``Content-Type`` header value (bytes are read as Latin-1): without parameters, lower
    case; ``None`` when there is no value."""
    if not content_type:
        return None
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    return content_type.split(";", 1)[0].strip().lower()


def item_is_html(value: str | bytes, item_format: str) -> bool:
    """Whether an item's text field is HTML (``SIMHASH_ITEM_FORMAT``: ``auto``, ``html``, ``text``)."""
    if item_format != "auto":
        return item_format == "html"
    return isinstance(value, bytes) or value.lstrip().startswith("<")
