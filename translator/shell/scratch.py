"""A batch's per-file state off the heap: a private SQLite database on disk (sqlite3, the
standard library's), deleted when it is closed, its pages cached up to CACHE_KIB.

A fleet's listing, its output directory's records and outputs, and its jobs to do were Python
objects, ~1.2 KB a file: a GB at a million sessions. Held here, a run's memory is the cache's,
whatever the fleet's size; a lookup costs a few microseconds. Text is stored as UTF-8 with
`surrogatepass` (a name that is not UTF-8 holds surrogate escapes), which keeps Python's order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator

CACHE_KIB = 4096  # each database's page cache; what is past it is on disk (a sort spills there too)
BATCH = 4096  # rows inserted at a time


def database() -> sqlite3.Connection:
    """A new private database on disk (SQLite's "" name: its own temporary file, gone at close)."""
    db = sqlite3.connect("", check_same_thread=False)
    for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{CACHE_KIB}", "temp_store=FILE"):
        db.execute(f"PRAGMA {pragma}")
    return db


def put(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def got(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


class Names:
    """A set of strings on disk (the output files of a directory, the logs whose rows a table
    replaces): added a batch at a time, looked up one at a time."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.db = database()
        self.db.execute("CREATE TABLE names (name BLOB PRIMARY KEY) WITHOUT ROWID")
        self._pending: list[tuple[bytes]] = []
        for name in names:
            self.add(name)

    def add(self, name: str) -> None:
        self._pending.append((put(name),))
        if len(self._pending) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self.db.executemany("INSERT OR IGNORE INTO names VALUES (?)", self._pending)
            self._pending = []

    def discard(self, name: str) -> None:
        self._flush()
        self.db.execute("DELETE FROM names WHERE name = ?", (put(name),))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        self._flush()
        return self.db.execute("SELECT 1 FROM names WHERE name = ?", (put(name),)).fetchone() is not None

    def __len__(self) -> int:
        self._flush()
        return int(self.db.execute("SELECT count(*) FROM names").fetchone()[0])

    def __bool__(self) -> bool:
        self._flush()
        return self.db.execute("SELECT 1 FROM names LIMIT 1").fetchone() is not None

    def __iter__(self) -> Iterator[str]:
        self._flush()
        for (name,) in self.db.execute("SELECT name FROM names"):
            yield got(name)

    def clear(self) -> None:
        self._pending = []
        self.db.execute("DELETE FROM names")

    def close(self) -> None:
        self._pending = []
        self.db.close()
