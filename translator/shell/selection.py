"""Which files a batch translates, and the relative path each one's output mirrors.

Every argument has a base: a directory is its own base, a file's base is its folder, a glob's
is its folder before the first wildcard. The relative path of an input is taken from the
common parent of all the bases, so `a/run.jsonl b/run.jsonl` write `a/run…` and `b/run…`,
while one directory (or one file) keeps its names as they are under it. Two inputs that would
still write the same output are refused before anything is written; a file reached by more
than one name (a link to it) is translated once.

The listing is held on disk as it is found (scratch.py; ~0.3 KB a file as Python objects), and
the inputs are read back from there in order, one at a time.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from translator.encoders.formats import FORMATS
from translator.exits import EX_NOINPUT, EX_USAGE
from translator.shell.scratch import BATCH, database, got, put

SUFFIXES = (".ndjson", ".jsonl")
WILDCARD = re.compile(r"[*?[]")


class SelectionError(Exception):
    """A one-line user error and its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)  # (slots: a listing holds one a file, ~0.1 KB less each)
class Found:
    path: str  # the store's own path (absolute, no protocol)
    size: int
    mtime: float
    identity: tuple[int, int] | None = None  # the real file (st_dev, st_ino), where the store knows it
    link: bool = False  # found through a symbolic link


@dataclass(frozen=True, slots=True)
class Input:
    path: str
    relative: str
    size: int
    mtime: float


class Lister(Protocol):
    """What selection needs of a store: local disk or fsspec."""

    def absolute(self, name: str) -> str: ...
    def kind(self, path: str) -> str | None:
        """"dir", "file" or None (nothing there)."""
        ...
    def files_under(self, path: str) -> Iterable[Found]: ...
    def glob(self, pattern: str) -> Iterable[Found]: ...
    def stat(self, path: str) -> Found: ...


def is_log(name: str) -> bool:
    bare = name.removesuffix(".gz")
    return bare.endswith(SUFFIXES) and not any(bare.endswith(f".{fmt}.jsonl") for fmt in FORMATS)


def target_name(relative: str, fmt: str) -> str:
    stem = relative.removesuffix(".gz")
    for suffix in SUFFIXES:
        stem = stem.removesuffix(suffix)
    return f"{stem}.{fmt}.jsonl"


# Each real file once (by a name that is no link, if it has one: the first in order), then each
# path once (the first name's), in the order of the names given, each one's files by path.
CHOSEN = """
SELECT path, relative, size, mtime FROM (
  SELECT path, relative, size, mtime, n, ROW_NUMBER() OVER (PARTITION BY path ORDER BY n) AS first FROM (
    SELECT path, relative, size, mtime, n, CASE WHEN dev IS NULL THEN 1
      ELSE ROW_NUMBER() OVER (PARTITION BY dev, ino ORDER BY link, n, path) END AS real FROM found)
  WHERE real = 1)
WHERE first = 1 ORDER BY n, path"""


class Selection:
    """The inputs found, on disk, read back in their stable order (each time it is iterated)."""

    def __init__(self) -> None:
        self.db = database()
        self.db.execute("CREATE TABLE found (n INTEGER, path BLOB, relative BLOB, size INTEGER, mtime REAL, "
                        "dev INTEGER, ino INTEGER, link INTEGER)")
        self.count = 0
        self._chosen = False

    def add(self, n: int, root: str, found: Iterable[Found], named: bool = False) -> None:
        """The files of the `n`th name, each with its path relative to `root`: its logs, or
        (`named`: a file named itself) whatever it is."""
        rows: list[tuple[object, ...]] = []
        prefix = root.rstrip("/") + "/"
        for f in found:
            if not named and not is_log(posixpath.basename(f.path)):
                continue
            dev, ino = f.identity if f.identity is not None else (None, None)
            rows.append((n, put(f.path), put(_relative(f.path, root, prefix)), f.size, f.mtime, dev, ino, f.link))
            if len(rows) >= BATCH:
                self._insert(rows)
        self._insert(rows)

    def _insert(self, rows: list[tuple[object, ...]]) -> None:
        self.db.executemany("INSERT INTO found VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self.count += len(rows)
        rows.clear()

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self) -> Iterator[Input]:
        """The inputs chosen (sorted once, into a table of their own: read twice, by the check
        of their outputs and by the batch)."""
        if not self._chosen:
            self.db.execute(f"CREATE TABLE chosen AS {CHOSEN}")
            self._chosen = True
        for path, relative, size, mtime in self.db.execute("SELECT * FROM chosen ORDER BY rowid"):
            yield Input(got(path), got(relative), size, mtime)


def _relative(path: str, root: str, prefix: str) -> str:
    """posixpath.relpath(path, root), cut from the path where it is plainly under `root` (a
    third of the listing's time at a million files)."""
    rest = path[len(prefix):]
    if path.startswith(prefix) and rest and "//" not in rest and "/." not in rest and not rest.startswith("."):
        return rest
    return posixpath.relpath(path, root)


def select(names: list[str], lister: Lister) -> Selection:
    """The inputs under `names`, in a stable order, each with its relative path."""
    bases: list[tuple[str, str, str]] = []  # (its base, what it is, its path)
    for name in names:
        if name == "-":
            raise SelectionError("-: standard input cannot be batch-translated; name files or directories", EX_USAGE)
        path = lister.absolute(name)
        kind = lister.kind(path)
        if kind == "dir":
            bases.append((path, kind, path))
        elif kind == "file":
            bases.append((posixpath.dirname(path), kind, path))
        elif WILDCARD.search(name):
            bases.append((WILDCARD.split(path, maxsplit=1)[0].rpartition("/")[0] or "/", "glob", path))
        else:
            raise SelectionError(f"{name}: No such file or directory", EX_NOINPUT)
    picked = Selection()
    if not bases:
        return picked
    root = posixpath.commonpath([base for base, _, _ in bases])
    for n, (_, kind, path) in enumerate(bases):
        if kind == "dir":
            picked.add(n, root, lister.files_under(path))
        elif kind == "file":
            picked.add(n, root, [lister.stat(path)], named=True)
        else:
            picked.add(n, root, lister.glob(path))
    return picked


def check_distinct(inputs: Iterable[Input], fmt: str) -> None:
    """Never two inputs to one output (`x.jsonl` and `x.ndjson.gz` side by side would be): their
    outputs' names put on disk (scratch.py) as they come, a batch at a time, and looked at
    together once (an index built by SQLite's sort: a row a lookup cost more than the rest)."""
    db = database()
    try:
        db.execute("CREATE TABLE owners (target BLOB, path BLOB)")
        rows: list[tuple[bytes, bytes]] = []
        for item in inputs:
            rows.append((put(target_name(item.relative, fmt)), put(item.path)))
            if len(rows) >= BATCH:
                db.executemany("INSERT INTO owners VALUES (?, ?)", rows)
                rows.clear()
        db.executemany("INSERT INTO owners VALUES (?, ?)", rows)
        db.execute("CREATE INDEX owners_target ON owners (target)")
        clashing = ("SELECT target, path FROM owners WHERE target IN "
                    "(SELECT target FROM owners GROUP BY target HAVING count(*) > 1) ORDER BY rowid")
        owners: dict[bytes, bytes] = {}
        for target, path in db.execute(clashing):
            if target in owners:  # the first input, in order, whose output another one's is
                raise SelectionError(f"{got(owners[target])} and {got(path)} would both be written to {got(target)}",
                                     EX_USAGE)
            owners[target] = path
    finally:
        db.close()
