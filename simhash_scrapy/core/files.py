"""One way to replace a file atomically: write a temporary file beside it, then rename it over it.

Readers (another process, a crash, a Ctrl-C halfway) see either the old file
or the whole new one, never a half-written one.  The report writer, the
index's ``save`` and the store's side files use it::

    with atomic_write(path) as handle:          # binary; "w" for text
        handle.write(data)

The temporary file is ``.<name>.<random>.tmp`` in the same folder (a rename
is atomic only within one file system), created with the ordinary mode
(0666 less the umask), flushed and ``fsync``-ed before the rename, and
removed if the body raises.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "write_atomic"]


@contextmanager
def atomic_write(
    path: str | os.PathLike[str],
    mode: str = "wb",
    *,
    encoding: str | None = None,
    newline: str | None = None,
    fsync: bool = True,
) -> Iterator[IO[Any]]:
    """Open a temporary file for writing; when the block ends without an error, it becomes ``path``.

    ``mode`` is ``"wb"`` or ``"w"`` (text: ``encoding`` defaults to UTF-8).
    The folder must exist.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    # O_EXCL: never reuse a name; 0o666: the umask applies, as for any new file.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        if mode == "w":
            handle: IO[Any] = os.fdopen(fd, "w", encoding=encoding or "utf-8", newline=newline)
        else:
            handle = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    try:
        with handle:
            yield handle
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, fsync: bool = True) -> Path:
    """Replace ``path`` with ``data`` (``str`` is written as UTF-8, newlines untouched) atomically."""
    if isinstance(data, str):
        with atomic_write(path, "w", newline="", fsync=fsync) as handle:
            handle.write(data)
    else:
        with atomic_write(path, "wb", fsync=fsync) as handle:
            handle.write(data)
    return Path(path)
