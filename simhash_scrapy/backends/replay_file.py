"""``<store>.replay``: the requests each page yielded when it was last downloaded, beside the store.

A conditional re-crawl (``SIMHASH_CONDITIONAL``) gets 304 answers with no body, so no links; with
``SIMHASH_REPLAY`` a 304 schedules again the requests its page yielded last time (``simhash_scrapy.replay``).
They are kept here, apart from the store (``core.store.store``), in a small file of their own:

* an SQLite 3 database (WAL journal): table ``replay (scope, identity, data, checksum)``, one row per page
  identity, ``data`` an opaque blob (``simhash_scrapy.replay``: zlib-compressed pickle of Scrapy's
  ``Request.to_dict`` dicts, as Scrapy's disk queues keep requests) and ``checksum`` a 64-bit BLAKE2b of
  scope, identity and data; table ``replay_meta (key, value)`` with ``format`` = ``simhash-replay`` and
  ``PRAGMA user_version`` = ``FORMAT_VERSION``;
* made by the first flush that has rows (a crawl that keeps none, against a server that sends no validators,
  leaves no file); written in one transaction per flush (the store's ``SIMHASH_FLUSH_INTERVAL``), so a ``kill -9`` loses at
  most the rows of one interval (their pages are then requested again without validators: nothing is lost);
* damage is detected and named, never repaired: a file of another format or version is refused at open
  (``ReplayFileError`` naming the file), a row whose checksum does not match reads as ``ReplayFileError``
  naming the file and the page's identity; the file is never truncated or rewritten to hide it.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

__all__ = ["FORMAT_VERSION", "ReplayFile", "ReplayFileError", "replay_path"]

#: ``PRAGMA user_version`` of the replay file.
FORMAT_VERSION = 1
_FORMAT = "simhash-replay"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS replay (scope TEXT NOT NULL, identity TEXT NOT NULL, data BLOB NOT NULL, "
    "checksum INTEGER NOT NULL, PRIMARY KEY (scope, identity)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS replay_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


class ReplayFileError(RuntimeError):
    """The replay file cannot be used (its message names the file and, for a damaged row, the page)."""


def replay_path(store: Path) -> Path:
    """The replay file of a store: ``<name>.store`` -> ``<name>.store.replay``."""
    return store.with_name(store.name + ".replay")


def _checksum(scope: str, identity: str, data: bytes) -> int:
    digest = hashlib.blake2b(digest_size=8)
    for part in (scope.encode("utf-8", "surrogatepass"), identity.encode("utf-8", "surrogatepass")):
        digest.update(len(part).to_bytes(4, "little"))
        digest.update(part)
    digest.update(data)
    return int.from_bytes(digest.digest(), "little", signed=True)


class ReplayFile:
    """One replay file: rows read on demand, writes staged and committed by ``flush``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        #: Staged rows (``None``: delete), committed by the next ``flush``.
        self._pending: dict[tuple[str, str], bytes | None] = {}

    def open(self, reset: bool = False) -> None:
        """Open the file, checked; ``reset`` keeps the old one as ``<name>.previous``.  A file that does not
        exist is made by the first ``flush`` with rows (a crawl that keeps none leaves no file)."""
        if reset and self.path.exists():
            self.path.replace(self.path.with_name(self.path.name + ".previous"))
            for suffix in ("-wal", "-shm"):
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
        if self.path.exists():
            self._connect()

    def _connect(self) -> None:
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise ReplayFileError(f"{self.path}: not a simhash replay file ({exc}); move it away") from None
        if tables and (version != FORMAT_VERSION or not {"replay", "replay_meta"} <= tables):
            db.close()
            raise ReplayFileError(
                f"{self.path}: not a simhash replay file of format {FORMAT_VERSION} (user_version {version}, "
                f"tables {sorted(tables)}); the file was not changed: move it away, or start afresh with "
                f"SIMHASH_RESET = True"
            )
        if tables:
            row = db.execute("SELECT value FROM replay_meta WHERE key = 'format'").fetchone()
            if row is None or row[0] != _FORMAT:
                db.close()
                raise ReplayFileError(f"{self.path}: damaged replay file (no format record); the file was not changed")
        else:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("BEGIN")
            for statement in _SCHEMA:
                db.execute(statement)
            db.execute("INSERT INTO replay_meta VALUES ('format', ?)", (_FORMAT,))
            db.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
            db.execute("COMMIT")
        db.execute("PRAGMA synchronous = NORMAL")
        self._db = db

    @property
    def pending(self) -> int:
        return len(self._pending)

    def get(self, scope: str, identity: str) -> bytes | None:
        """The blob kept for a page, or ``None``; ``ReplayFileError`` for a damaged row."""
        key = (scope, identity)
        if key in self._pending:
            return self._pending[key]
        if self._db is None:
            return None
        row = self._db.execute(
            "SELECT data, checksum FROM replay WHERE scope = ? AND identity = ?", key
        ).fetchone()
        if row is None:
            return None
        data = bytes(row[0])
        if _checksum(scope, identity, data) != row[1]:
            raise ReplayFileError(f"{self.path}: damaged row for page {identity!r} in scope {scope!r} (checksum mismatch)")
        return data

    def put(self, scope: str, identity: str, data: bytes | None) -> None:
        """Stage a page's blob (``None``: forget the page); written by the next ``flush``."""
        self._pending[(scope, identity)] = data

    def flush(self) -> None:
        """Commit the staged rows in one transaction (``sqlite3.Error`` / ``OSError`` leave them staged)."""
        if not self._pending:
            return
        if self._db is None:
            self._connect()
        db = self._db
        assert db is not None
        rows = list(self._pending.items())
        db.execute("BEGIN")
        try:
            db.executemany(
                "INSERT OR REPLACE INTO replay VALUES (?, ?, ?, ?)",
                [(s, i, d, _checksum(s, i, d)) for (s, i), d in rows if d is not None],
            )
            db.executemany("DELETE FROM replay WHERE scope = ? AND identity = ?", [k for k, d in rows if d is None])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        for key, data in rows:
            if self._pending.get(key, b"") is data:
                del self._pending[key]

    def count(self) -> int:
        return 0 if self._db is None else int(self._db.execute("SELECT count(*) FROM replay").fetchone()[0])

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._db is not None:
                self._db.close()
                self._db = None
