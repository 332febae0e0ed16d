"""Which pages are not fingerprinted at all, and why: the rules the crawl and ``compare`` share.

Reasons are the names of the ``simhash/skipped/<reason>`` stats.  ``empty``
(no token at all) is decided by ``analysis`` after extraction; the rules
here only need the response's status, media type and body.
"""

from __future__ import annotations

from collections.abc import Container

__all__ = ["skip_reason", "item_is_html"]


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
    if len(body) > max_bytes:
        return "too_large"
    if not body or body.isspace():
        return "empty"
    return None


def item_is_html(value: str | bytes, item_format: str) -> bool:
    """Whether an item's text field is HTML (``SIMHASH_ITEM_FORMAT``: ``auto``, ``html``, ``text``)."""
    if item_format != "auto":
        return item_format == "html"
    return isinstance(value, bytes) or value.lstrip().startswith("<")
