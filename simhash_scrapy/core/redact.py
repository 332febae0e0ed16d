"""The one redaction of secrets: a password never reaches a log line, a stat, an error or a report.

``redact(value, secrets)`` masks a password in every form redis-py accepts,
wherever it appears in a text (a whole URL, or a URL or a dict echoed inside
an exception message):

* the URL's user information: ``redis://:pw@host``, ``redis://user:pw@host``,
  ``rediss://...``, ``unix://:pw@/path/redis.sock`` (any scheme; a password
  holding ``@`` unencoded too: the last ``@`` ends it, as ``urlsplit`` reads it);
* a ``password=`` query item (``redis://host/0?password=pw``,
  ``unix:///path?db=0&password=pw``) and any ``password=pw`` /
  ``password: pw`` / ``'password': 'pw'`` / ``"password": "pw"`` item, also
  ``ssl_password`` and other ``*password`` names (client parameters such as
  ``REDIS_PARAMS``, echoed as a dict or as JSON);
* and, given ``secrets`` (``secrets_in``: the passwords of the configured URL and
  parameters, as written and percent-decoded), every occurrence of those strings
  in any form of text, e.g. a decoded password a client echoes.

A mapping (``REDIS_PARAMS``) gives a copy with every ``*password`` value masked
and every text value redacted.  No Scrapy, no redis: usable from the core, the
backends and the glue.

The same rule keeps page URLs out of what is written: a page reached as
``https://user:pw@host/a`` is written ``https://user:***@host/a`` (the user
name kept, as for a Redis URL) in the reports (``core.report.report.shown``),
the command outputs and errors, the plugin's log lines (``LogRedaction``, a
filter on each of its loggers) and its exception messages.  Only what is
written is masked: the URL the crawl keys and compares pages by stays the
real one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["LOG_REDACTION", "MASK", "LogRedaction", "may_hold_password", "redact", "secrets_in"]

MASK = "***"
#: Literal secrets shorter than this are not replaced everywhere in a text (a one-letter password would
#: mask every such letter); their structural forms above are masked whatever their length.
MIN_SECRET = 4

# scheme://netloc: the netloc ends at the path, query, fragment, whitespace or a quote (text around a URL).
_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<netloc>[^/?#\s'\"<>]*)")
# A *password item: name, then = or :, then a quoted or bare value.
_ITEM = re.compile(
    r"""(?P<name>['"]?\b\w*password['"]?\s*(?:=|:(?!//))\s*)"""
    r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&;,)}\]'"<>]*)""",
    re.IGNORECASE,
)


def _mask_netloc(match: re.Match[str]) -> str:
    netloc = match.group("netloc")
    userinfo, at, host = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return match.group(0)
    user = userinfo.split(":", 1)[0]
    return f"{match.group('scheme')}{user}:{MASK}@{host}"


def _mask_item(match: re.Match[str]) -> str:
    value = match.group(0)[len(match.group("name")) :]
    if value[:1] in ("'", '"'):
        return f"{match.group('name')}{value[0]}{MASK}{value[0]}"
    return match.group("name") + (MASK if value else "")


def may_hold_password(text: str) -> bool:
    """Whether ``redact(text)`` (without ``secrets``) may change ``text``: only a text with an ``@`` (a URL's
    user information) or the word ``password`` in any case (an item; ``casefold`` as the rule's ``IGNORECASE``:
    U+017F is an ``s``) can hold a password in a form it masks.  A few milliseconds a megabyte."""
    return "@" in text or "password" in text.casefold()


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """``value`` (a text, or a mapping of client parameters) with every password masked as ``***``."""
    if isinstance(value, Mapping):
        return {
            key: MASK if isinstance(key, str) and key.lower().endswith("password") and item is not None
            else redact(item, secrets)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(redact(item, secrets) for item in value)
    if not isinstance(value, str):
        return value
    if not secrets and not may_hold_password(value):
        return value  # (neither rule can match: the common case, cheaply)
    text = _URL.sub(_mask_netloc, value)
    text = _ITEM.sub(_mask_item, text)
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _shown_arg(value: Any) -> Any:
    """A log line's argument as it is, unless its text holds a password: then that text, redacted."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return redact(value)
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - an argument that cannot be shown is left to logging
        return value
    shown = redact(text)
    return value if shown == text else shown


class LogRedaction(logging.Filter):
    """A logging filter that masks passwords (``redact``) in a record's message and arguments.

    Added to each logger of the plugin that may name a URL (a filter on a logger applies to the records
    of that logger only): a page reached as ``https://user:pw@host/`` is logged as ``https://user:***@host/``.
    Arguments without a password are left as they are (handlers that read them see the same objects).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        args = record.args
        if isinstance(args, Mapping):
            record.args = {key: _shown_arg(value) for key, value in args.items()}
        elif isinstance(args, tuple):
            record.args = tuple(_shown_arg(value) for value in args)
        return True


#: The one filter the plugin's loggers share (``logger.addFilter(LOG_REDACTION)``: added once however often).
LOG_REDACTION = LogRedaction()


def secrets_in(*values: Any) -> tuple[str, ...]:
    """The passwords in URLs and client parameter mappings, as written and percent-decoded (for ``redact``)."""
    found: list[str] = []
    for value in values:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and key.lower().endswith("password"):
                    _add_secret(found, item)
                elif isinstance(item, (str, Mapping)):
                    found.extend(secrets_in(item))
        elif isinstance(value, str):
            _secrets_of_text(found, value)
    return tuple(dict.fromkeys(found))


def _add_secret(found: list[str], secret: Any) -> None:
    """``secrets_in``: a password (text or bytes) as written and percent-decoded."""
    if isinstance(secret, (bytes, bytearray)):
        secret = bytes(secret).decode("utf-8", "replace")
    if isinstance(secret, str) and secret:
        found.extend((secret, unquote(secret), unquote(secret.replace("+", " "))))


def _secrets_of_text(found: list[str], value: str) -> None:
    """``secrets_in``: the passwords of a text: of the URL it is, of the URLs in it, of its query's
    ``...password=`` parameters."""
    try:
        _add_secret(found, urlsplit(value).password)  # the whole text is a URL (its password may hold a space)
    except ValueError:
        pass
    for match in _URL.finditer(value):
        userinfo, at, _ = match.group("netloc").rpartition("@")
        if at and ":" in userinfo:
            _add_secret(found, userinfo.split(":", 1)[1])
    try:
        query = urlsplit(value).query
    except ValueError:
        query = ""
    for name, item in parse_qsl(query, keep_blank_values=True):
        if name.lower().endswith("password"):
            _add_secret(found, item)
    for match in re.finditer(r"[?&;]\w*password=([^&#\s]*)", value, re.IGNORECASE):
        _add_secret(found, match.group(1))
