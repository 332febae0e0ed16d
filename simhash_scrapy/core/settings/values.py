"""Parsers for setting values, shared by every setting (the table, ``core.settings.settings``) and by spider arguments.

Values may come from ``settings.py`` (Python objects) or from the command line
(``-s SIMHASH_MAX_DISTANCE=4``: strings), so numbers, booleans and lists are
accepted in both forms.  Every error names the setting and is readable as
one line.  No Scrapy import: the backends use these too.

The ``parse_*`` functions take the setting's name and value; the factories at
the end (``boolean``, ``integer``, ``choice``...) make the ``parse`` of a table
row: a function of ``(name, value)`` for a value that is set (not ``None``),
which may answer ``UNSET`` ("use the default") for a blank value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Final

_LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "", "none")


def parse_bool(name: str, value: Any, default: bool = False) -> bool:
    """The one boolean parser of every setting: Python values and command-line strings."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{name} must be a boolean (True/False, 1/0, 'true'/'false'), got {value!r}")


#: The largest number a setting takes (its numbers are seconds: about 31 years).  Infinity and larger
#: numbers overflow what keeps them (a Redis expiry) or switch the setting off unseen (a flush interval).
MAX_NUMBER = 1e9


def parse_number(name: str, value: Any, default: float, minimum: float = 0.0) -> float:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return default
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = float("nan")
    if isinstance(value, bool) or not number >= minimum:
        raise ValueError(f"{name} must be a number >= {minimum:g}, got {value!r}")
    if not number <= MAX_NUMBER:
        raise ValueError(f"{name} must be a finite number up to {MAX_NUMBER:g}, got {value!r}")
    return number


def parse_fraction(name: str, value: Any, default: float) -> float:
    """A number from 0 to 1 (a share or a probability)."""
    number = parse_number(name, value, default)
    if number > 1:
        raise ValueError(f"{name} must be a number from 0 to 1, got {value!r}")
    return number


#: The longest path a setting takes, and the longest part of one (the limits of common file systems).
MAX_PATH = 4096
MAX_PATH_PART = 255


def check_path(name: str, path: str) -> str:
    """``path``, or a ``ValueError`` naming the setting when no file system could open it (a NUL, too long):
    else the crawl would fail later, with the operating system's error and not the setting's name."""
    if "\x00" in path:
        raise ValueError(f"{name} must be a path without NUL characters, got {path[:80]!r}")
    longest = max((len(part.encode("utf-8", "surrogatepass")) for part in path.replace("\\", "/").split("/")), default=0)
    if len(path) > MAX_PATH or longest > MAX_PATH_PART:
        raise ValueError(
            f"{name} is too long a path ({len(path):,} characters; at most {MAX_PATH} and {MAX_PATH_PART} bytes a "
            f"part), got {path[:80]!r}..."
        )
    return path


def parse_folder(name: str, value: Any, default: str) -> str | None:
    """A folder setting that may also be a boolean (``True``: ``default``; false/empty: off)."""
    if value is None or value is False:
        return None
    if value is True:
        return default
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a folder name or path (e.g. {default!r}), got {value!r}")
    text = value.strip()
    if text.lower() in _FALSE:
        return None
    return default if text.lower() in _TRUE else check_path(name, text)


def parse_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        number = int(value.strip())
    if number is not None and (minimum is None or number >= minimum) and (maximum is None or number <= maximum):
        return number
    if minimum is not None and maximum is not None:
        accepted = f"an integer from {minimum} to {maximum}"
    elif minimum is not None:
        accepted = f"an integer >= {minimum}"
    else:
        accepted = "an integer"
    raise ValueError(f"{name} must be {accepted}, got {value!r}")


def parse_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")


def parse_list(name: str, value: Any) -> list[Any]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple, set, frozenset, range)):
        return list(value)
    raise ValueError(f"{name} must be a list (or a comma-separated string), got {value!r}")


def parse_optional_str(name: str, value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value.strip()
    raise ValueError(f"{name} must be a string or None, got {value!r}")


def parse_log_level(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        text = value.strip().upper()
        if text in _LOG_LEVELS:
            return int(getattr(logging, text))
        if text.isdigit():
            return int(text)
    raise ValueError(f"{name} must be a logging level ({', '.join(_LOG_LEVELS)} or a number), got {value!r}")


# ------------------------------------------------------------ table parsers
class _Unset:
    """``UNSET``: a parser's answer for a blank value (the setting's default, or its fallback, applies)."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()
#: The ``parse`` of a table row: ``(setting name, value that is not None) -> typed value or UNSET``.
Parser = Callable[[str, Any], Any]


def is_blank(value: Any) -> bool:
    """An empty (or all-space) string, or ``"none"``: a command-line value meaning "not set"."""
    return isinstance(value, str) and value.strip().lower() in ("", "none")


def boolean(name: str, value: Any) -> bool:
    return parse_bool(name, value)


def boolean_or_auto(name: str, value: Any) -> bool | str:
    """True, False, or ``"auto"`` (decided when it is used)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        return parse_bool(name, value)
    except ValueError:
        raise ValueError(f"{name} must be 'auto' or a boolean (True/False, 1/0, 'true'/'false'), got {value!r}") from None


def integer(minimum: int | None = None, maximum: int | None = None) -> Parser:
    return lambda name, value: parse_int(name, value, minimum, maximum)


def number(minimum: float = 0.0) -> Parser:
    """A float ``>= minimum`` (a blank string: ``UNSET``)."""
    return lambda name, value: UNSET if is_blank(value) else parse_number(name, value, 0.0, minimum)


def fraction(name: str, value: Any) -> Any:
    """A number from 0 to 1 (a blank string: ``UNSET``)."""
    return UNSET if is_blank(value) else parse_fraction(name, value, 0.0)


def choice(choices: Iterable[str]) -> Parser:
    options = tuple(choices)
    return lambda name, value: parse_choice(name, value, options)


def optional_text(name: str, value: Any) -> str | None:
    """A string, stripped; a blank one is ``None``."""
    return parse_optional_str(name, value)


def folder(default: str) -> Parser:
    """``parse_folder``: a folder, or a boolean (``True``: ``default``; false or empty: ``None``)."""
    return lambda name, value: parse_folder(name, value, default)


def log_level(name: str, value: Any) -> int:
    return parse_log_level(name, value)
