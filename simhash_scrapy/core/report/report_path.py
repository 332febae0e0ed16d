"""Where a report goes: a feed-style path template, expanded, that never leaves its folder.

The report path is feed-style: ``%(name)s`` (spider name), ``%(time)s``
(UTC start time, ``:`` replaced by ``-``) and any other spider attribute
expand.  Expanded values cannot add folders (``/`` and ``\\`` become ``_``,
``.``/``..`` become ``_``), and the final path must lie inside the folder the
URI names before its first placeholder, so a report is never written
outside it.

Messages name the argument (``uri``); the Scrapy glue passes its setting name
(``name="SIMHASH_REPORT_URI"``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["expand_report_path", "report_params"]

# Printf-style placeholders as feed URIs use them (``%(name)s``); any other ``%`` is literal.
_PLACEHOLDER = re.compile(r"%\(([^)]+)\)[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[diouxXeEfFgGcrsa]")


def report_params(spider: Any, now: datetime | None = None) -> Callable[[str], Any]:
    """A lookup for feed-style placeholders: ``name``, ``time`` and the spider's attributes."""
    now = now or datetime.now(tz=timezone.utc)
    fixed = {
        "name": getattr(spider, "name", None),
        "time": now.replace(microsecond=0).isoformat().replace(":", "-"),
    }

    def lookup(key: str) -> Any:
        if key in fixed and fixed[key] is not None:
            return fixed[key]
        try:
            return getattr(spider, key)
        except AttributeError:
            raise KeyError(key) from None

    return lookup


def _safe_value(value: str) -> str:
    value = value.replace("\x00", "")
    for sep in {"/", "\\", os.sep, os.altsep or "/"}:
        value = value.replace(sep, "_")
    if value in ("", ".", ".."):
        value = "_"
    return value


def _template_path(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme.lower() == "file":
        # file:///abs/path or file://localhost/abs/path; percent-escapes are decoded
        # but a placeholder's "%(" is kept (unquote leaves "%(" alone).
        return unquote(parsed.path)
    return uri


def expand_report_path(
    uri: str,
    params: Callable[[str], Any] | Mapping[str, Any],
    cwd: str | os.PathLike[str] | None = None,
    *,
    name: str = "uri",
) -> Path:
    """The report file for ``uri`` (a path or ``file://`` URI), its placeholders expanded.

    Raises ``ValueError`` naming ``name`` (the plugin passes
    ``SIMHASH_REPORT_URI``) for an unknown placeholder or a path that would
    leave the folder the URI names.
    """
    lookup = params if callable(params) else params.__getitem__
    template = _template_path(uri)
    parts: list[str] = []
    last = 0
    first_placeholder: int | None = None
    for match in _PLACEHOLDER.finditer(template):
        if first_placeholder is None:
            first_placeholder = match.start()
        key = match.group(1)
        try:
            value = lookup(key)
        except KeyError:
            raise ValueError(
                f"{name}={uri!r} uses %({key})s, but the spider has no attribute {key!r} "
                f"(placeholders: %(name)s, %(time)s or a spider attribute)"
            ) from None
        try:
            text = match.group(0) % {key: value}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}={uri!r}: cannot format {match.group(0)} with {value!r}: {exc}") from None
        parts.append(template[last : match.start()])
        parts.append(_safe_value(text))
        last = match.end()
    parts.append(template[last:])
    expanded = "".join(parts)

    static = template if first_placeholder is None else template[:first_placeholder]
    cut = max(static.rfind("/"), static.rfind("\\"), static.rfind(os.sep))
    base_text = static[: cut + 1] if cut >= 0 else ""
    root = Path(cwd) if cwd is not None else Path.cwd()
    base = (root / base_text).resolve() if base_text else root.resolve()
    target = (root / expanded).resolve()
    if target == base or base not in target.parents:
        raise ValueError(
            f"{name}={uri!r} expands to {expanded!r}, which is not a file inside {str(base)!r}; "
            f"the report must stay in the folder the URI names"
        )
    return target
