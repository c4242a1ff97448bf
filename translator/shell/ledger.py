"""The up-to-date records of an output directory: one record file per chunk of outputs, in a
hidden folder of it, not a marker file beside each output (creating a file costs more than
translating a small log; on object storage each is a PUT).

A chunk's record is written in two steps around the commit of its outputs:
  1. before any of them is committed, a head naming the chunk's files (on local disk it reaches
     the disk with the chunk's one sync, before the renames);
  2. after, one line per output committed: the key it was made under and its results rows.
Records are read in the order their chunks were committed (their names: the generation at the
commit, then the process and chunk), and a file's latest record decides: an entry whose key is this run's, with
its output there, is up to date; a head with no entry after it (a run stopped between its
commit and its entries, or whose entries were lost in a crash) means the output may be anything
and is redone. A record that is no file's latest is dead, and removed.

Beside the records, a results table's mark (`table-<digest>`, one per table written from this
folder: `tabled`) says which records' rows that table holds: every record before the generation
of the run that last wrote it, and that run's own. Those files are up to date in the table too:
their rows are neither read again nor written again (an unchanged rerun writes no table file),
and are not checked against the table's columns (they were when they got there).

What the records say is held on disk (scratch.py: a file's latest entry, ~0.6 KB a file as
Python objects), so that a run's memory does not grow with its output directory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from translator.shell import scratch
from translator.table.parquet import fits

FOLDER = ".translator.done"
# generation (20 digits, or more: ordered as a number, so a record dated past 2286, or by a clock
# far ahead, still has records after it), pid, chunk
NAME = re.compile(r"^(\d{20,})-(\d+)-([0-9a-z]+)\.done$")


@dataclass(frozen=True, slots=True)
class Entry:
    """A committed output: the key it was made under, the log it was made from (None in an
    earlier version's record), and the record that holds its results rows (read again only
    when a results table asks for them: a ledger holds no rows)."""

    key: str
    source: str | None
    record: str


@dataclass(frozen=True)
class Tabled:
    """What a table's mark says: it holds the rows of every record before `before` and of the
    records of process `pid` up to `until` (the run that wrote it: its start and its mark; a
    later run of the same pid, as in a container, commits after)."""

    before: int
    pid: int
    until: int

    def holds(self, record: str) -> bool:
        generation, pid, _ = _order(record)
        return generation < self.before or (pid == self.pid and generation <= self.until)


@dataclass
class Ledger:
    """What an output directory's records say, and where this run writes its own."""

    folder: str  # <out>/.translator.done, as the store names it
    generation: int  # this run's: after every record found
    pid: int
    latest: Mapping[str, Entry | None] = field(default_factory=dict)  # file (shown relative path) -> its latest record
    outputs: Container[str] | None = None  # the output files there are (None: not listed, taken as there)
    dead: list[str] = field(default_factory=list)  # record files that are no file's latest
    records: Mapping[str, bytes] = field(default_factory=dict)  # the record files (read when looked up)
    tabled: Tabled | None = None  # which records' rows the results table of this run holds

    def in_table(self, relative: str) -> bool:
        """Whether the results table holds the rows of the file's latest entry already."""
        entry = self.latest.get(relative)
        return entry is not None and self.tabled is not None and self.tabled.holds(entry.record)

    def path(self, chunk: int | str) -> str:
        """The record file of one chunk (an int) or of a file retried alone (a hex digest,
        after the chunks of the same run in the reading order)."""
        name = f"{chunk:06d}" if isinstance(chunk, int) else f"z{chunk}"
        return f"{self.folder}/{self.generation:020d}-{self.pid}-{name}.done"

    def recorded(self, relative: str, target: str, key: Callable[[], str]) -> bool:
        """Whether the output was made under `key()` and is still there (the key is computed
        only for a file with an entry)."""
        entry = self.latest.get(relative)
        return not (entry is None or (self.outputs is not None and target not in self.outputs) or entry.key != key())

    def rows(self, files: Iterable[str] | Container[str]) -> Iterator[list[dict[str, Any]]]:
        """The recorded results rows of `files` (iterable, and asked for membership), a record at
        a time (each record read again; OSError if one cannot be)."""
        assert isinstance(files, Iterable) and isinstance(files, Container)
        needed = {entry.record for name in files if (entry := self.latest.get(name)) is not None}
        for record in sorted(needed, key=_order):
            for line in self.records[record].split(b"\n")[1:]:
                found = _entry(line, checked=True)
                if found is not None and found[0] in files and (entry := self.latest.get(found[0])) is not None \
                        and entry.record == record:
                    yield found[2]

    def release(self) -> None:
        """What it holds given back, once the results table has the rows it needs: a fleet's
        ledger's disk (a key, a source, a name, the output listing), and the table is written
        after."""
        for held in (self.latest, self.outputs):
            if isinstance(held, Latest | scratch.Names):
                held.close()
        self.latest, self.outputs, self.records = {}, set(), {}

    def owner(self, relative: str, target: str) -> str | None:
        """The log whose output `target` (still there) is, by its latest record (None: unknown)."""
        entry = self.latest.get(relative)
        if entry is None or (self.outputs is not None and target not in self.outputs):
            return None
        return entry.source


class Latest(Mapping[str, Entry | None]):
    """Each file's latest entry (None: a head with no entry after it), on disk (scratch.py);
    the last one looked up is kept, as the up-to-date check asks of one file three times.

    The entries are appended as the records are read (in commit order, not the files' order)
    and indexed once, when the first is looked up: SQLite's sort builds the index in order.
    Kept in a keyed table as they came, each insert landed on a random page of a tree past the
    page cache, written out again: 4 GB written for a million files' rerun."""

    def __init__(self) -> None:
        self.db = scratch.database()
        self.db.execute("CREATE TABLE latest (file BLOB, record INTEGER, key TEXT, source BLOB)")
        self.records: list[str] = []  # a record's number -> its path
        self._last: tuple[str, Entry | None] | None = None
        self._indexed = False

    def put(self, record: str, entries: dict[str, tuple[str, str | None] | None]) -> None:
        """A record's files, each with its (key, source), or None, now their latest."""
        assert not self._indexed, "entries are all put before the first is looked up"
        self.records.append(record)
        n = len(self.records) - 1
        self.db.executemany("INSERT INTO latest VALUES (?, ?, ?, ?)", [
            (scratch.put(name), n, None if e is None else e[0], None if e is None or e[1] is None else scratch.put(e[1]))
            for name, e in entries.items()])

    def _index(self) -> None:
        if not self._indexed:
            self.db.execute("CREATE INDEX latest_file ON latest (file, record)")
            self._indexed = True

    def live(self) -> set[str]:
        """The records that are some file's latest."""
        self._index()
        return {self.records[n] for (n,) in self.db.execute("SELECT DISTINCT max(record) FROM latest GROUP BY file")}

    def __getitem__(self, name: str) -> Entry | None:
        if self._last is not None and self._last[0] == name:
            return self._last[1]
        self._index()
        found = self.db.execute("SELECT record, key, source FROM latest WHERE file = ? ORDER BY record DESC LIMIT 1",
                                (scratch.put(name),)).fetchone()
        if found is None:
            raise KeyError(name)
        n, key, source = found
        entry = None if key is None else Entry(key, None if source is None else scratch.got(source), self.records[n])
        self._last = (name, entry)
        return entry

    def __iter__(self) -> Iterator[str]:
        self._index()
        for (name,) in self.db.execute("SELECT DISTINCT file FROM latest ORDER BY file"):
            yield scratch.got(name)

    def __len__(self) -> int:
        self._index()
        return int(self.db.execute("SELECT count(DISTINCT file) FROM latest").fetchone()[0])

    def close(self) -> None:
        self.db.close()


class Lazy(Mapping[str, bytes]):
    """Record files (path -> bytes) read when looked up, `batch` at a time in the reading order
    (an object store answers a batch in one concurrent `cat`), only the last batch held (a
    record of 64 files of 8 runs is ~300 KB)."""

    def __init__(self, paths: list[str], fetch: Callable[[list[str]], dict[str, bytes]], batch: int = 64) -> None:
        self.paths = sorted(paths, key=_order)
        self.batch = batch
        self.place = {path: n for n, path in enumerate(self.paths)}
        self.fetch = fetch
        self.held: dict[str, bytes] = {}

    def __getitem__(self, path: str) -> bytes:
        if path not in self.held:
            n = self.place[path]
            self.held = self.fetch(self.paths[n: n + self.batch])
        return self.held[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self.paths)


def head(files: list[str]) -> bytes:
    """A record's first line: the files of its chunk, written before any of them is committed."""
    return orjson.dumps({"files": files}) + b"\n"


def entries(made: Iterable[tuple[str, str, str, list[dict[str, Any]]]]) -> bytes:
    """A record's other lines, one per output committed: (file, key, source, results) each."""
    return b"".join(orjson.dumps({"file": file, "key": key, "source": source, "results": rows}) + b"\n"
                    for file, key, source, rows in made)


def _order(name: str) -> tuple[int, int, str]:
    match = NAME.match(name.rpartition("/")[2])
    assert match is not None
    return int(match.group(1)), int(match.group(2)), match.group(3)


def restamp(record: str, now_ns: int, last: int = 0) -> str:
    """The record's path under the generation it is committed at: `now_ns`, or after `last` (the
    latest given in its folder) and the run's own (its name's) if the clock is behind them. Taken
    at commit, not at the run's start: a run that started first and commits last has the latest
    record (two runs on one folder, `--results-only` and not, had a rerun find the first one's
    entry for the other one's output, "up to date", for ever)."""
    folder, _, name = record.rpartition("/")
    generation, rest = name.split("-", 1)
    return f"{folder}/{max(now_ns, last + 1, int(generation)):020d}-{rest}"


def is_record(name: str) -> bool:
    return NAME.match(name.rpartition("/")[2]) is not None


def mark_name(folder: str, table: str) -> str:
    """Where the mark of the results table `table` (its full path or URL) is kept."""
    return f"{folder}/table-{hashlib.sha256(table.encode()).hexdigest()[:24]}"


def mark(table: str, identity: str, ledger: Ledger, now_ns: int) -> bytes:
    """The mark of a table just written (at `now_ns`) by the run of `ledger`."""
    return orjson.dumps({"table": table, "id": identity, "before": ledger.generation, "pid": ledger.pid,
                         "until": now_ns}) + b"\n"


def tabled(data: bytes | None, table: str, identity: str | None) -> Tabled | None:
    """What a mark says of `table`, as it is now (`identity`: None, no table there); None when
    nothing is known: no mark, another table's, or a table made anew since (deleted, replaced)."""
    try:
        value = orjson.loads(data or b"")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or identity is None or value.get("table") != table or value.get("id") != identity:
        return None
    before, pid, until = value.get("before"), value.get("pid"), value.get("until")
    return Tabled(before, pid, until) if type(before) is int and type(pid) is int and type(until) is int else None


def read(folder: str, records: Mapping[str, bytes], now_ns: int, pid: int, outputs: Container[str] | None,
         table: bool | Tabled = False) -> Ledger:
    """The ledger of the record files found (path -> bytes, each read when looked up: one at a
    time, never all at once), for a run starting at `now_ns` (its generation: that, or after
    the latest found if the clock went back). With a results table (`table`: True, or what its
    mark says), the rows of the records it does not hold are checked against its columns: an
    entry whose rows it cannot take is no entry (its file is made again); without one, no row
    is looked at."""
    latest = Latest()
    last = 0
    for path in sorted(records, key=_order):
        last = max(last, _order(path)[0])
        lines = records[path].split(b"\n")
        try:
            listed = orjson.loads(lines[0])["files"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            listed = []  # a head cut short was never synced, so none of its outputs were committed
        files: dict[str, tuple[str, str | None] | None] = \
            dict.fromkeys(name for name in listed if isinstance(name, str)) if isinstance(listed, list) else {}
        checked = table is False or (isinstance(table, Tabled) and table.holds(path))
        for line in lines[1:]:
            found = _entry(line, checked)
            if found is not None and found[0] in files:
                files[found[0]] = (found[1], found[3])
        latest.put(path, files)
    live = latest.live()
    return Ledger(folder, max(now_ns, last + 1), pid, latest, outputs,
                  [path for path in records if path not in live], records, table if isinstance(table, Tabled) else None)


def _entry(line: bytes, checked: bool = False) -> tuple[str, str, list[dict[str, Any]], str | None] | None:
    """A well-formed entry line; None for anything else (a line cut short by a crash, rows the
    results table cannot hold): its file is made again. `checked`: its rows were checked when
    the record was first read."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    file, key, results, source = value.get("file"), value.get("key"), value.get("results"), value.get("source")
    if isinstance(file, str) and isinstance(key, str) and isinstance(results, list) and (checked or all(map(fits, results))):
        return file, key, results, source if isinstance(source, str) else None
    return None
