"""The results table's rows (the pass that translates notes them: rows.py): its columns, the
check a recorded row is held to, and the staging of a batch's new rows on their way to the
table (delta.py writes them).

The new rows are staged as they come (Staged: temporary Parquet files, a file per day), so the
writer holds a row group's worth at a time, never the fleet; with them, a mark per log (its
new run count), by which the table's rows past a log's new runs are deleted.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import suppress
from typing import Any

import orjson

from translator.extras import need

STAGING = "translator-table-"  # the staging folders' prefix, then the writer's pid
SAVED = "staged.json"  # a saved staging's list of its files (Staged.save)

# Column, Arrow type, meaning. The schema table of docs/fleet.md is this list.
COLUMNS: list[tuple[str, str, str]] = [
    ("source", "string", "the log's path or URL"),
    ("run_index", "int32", "the run's place in its log, from 0"),
    ("session_id", "string", "as in the output (uuid5 of the log's full path or URL; headless input: the agent's own)"),
    ("subtype", "string", "success, error, max_turns, cancelled, max_tokens, budget_exceeded"),
    ("is_error", "bool", "every subtype but success"),
    ("num_turns", "int64", ""),
    ("input_tokens", "int64", "the agent's semantics: includes both cache counters"),
    ("output_tokens", "int64", ""),
    ("cache_read_input_tokens", "int64", "null when the agent did not report it"),
    ("cache_creation_input_tokens", "int64", "null when the agent did not report it"),
    ("total_cost_usd", "float64", "priced by the rate card in force"),
    ("duration_ms", "int64", ""),
    ("duration_api_ms", "int64", ""),
    ("duration_source", "string", "recorded, estimated or wall"),
    ("model", "string", "the run's first model (of headless input: its `init`'s, without the `provider/` prefix), whatever `--format`"),
    ("models", "list<string>", "every model the run used, in order"),
    ("error", "string", "the result's error text, if any"),
    ("tool_calls", "int64", "tool calls finished"),
    ("first_ts", "timestamp[ms, UTC]", "the run's first event time, when the events are stamped"),
    ("last_ts", "timestamp[ms, UTC]", "its last, when stamped"),
    ("log_mtime", "timestamp[ms, UTC]", "the log's modification time"),
    ("date", "string", "partition: first_ts's UTC day, else log_mtime's"),
]


def schema() -> Any:
    pa = need("pyarrow")
    types = {
        "string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "bool": pa.bool_(),
        "float64": pa.float64(), "list<string>": pa.list_(pa.string()),
        "timestamp[ms, UTC]": pa.timestamp("ms", tz="UTC"),
    }
    return pa.schema([(name, types[kind]) for name, kind, _ in COLUMNS])


RENAMED = {"first_ts": "first_ts_ms", "last_ts": "last_ts_ms", "log_mtime": "log_mtime_ms"}  # column -> row key
KEYED = ("source", "run_index")  # a row's order: never null


def _integer(bound: int) -> Callable[[object], bool]:
    return lambda v: type(v) is int and -bound <= v < bound


_KINDS: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str), "bool": lambda v: isinstance(v, bool),
    "int32": _integer(1 << 31), "int64": _integer(1 << 63), "timestamp[ms, UTC]": _integer(1 << 63),
    "float64": lambda v: type(v) in (int, float),
    "list<string>": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}
_CHECKS = [(RENAMED.get(name, name), name in KEYED, _KINDS[kind]) for name, kind, _ in COLUMNS]


def fits(row: object) -> bool:
    """Whether `row` is one the table can hold, column by column (a record's rows are read back
    from disk: anything else, e.g. a cost as text, failed the whole table, 70, on every rerun)."""
    if not isinstance(row, dict):
        return False
    for key, keyed, kind in _CHECKS:
        value = row.get(key)
        if (keyed or value is not None) and not kind(value):
            return False
    return True


def table(rows: list[dict[str, Any]]) -> Any:
    """The rows as an Arrow table."""
    pa = need("pyarrow")
    columns = {name: [r.get(RENAMED.get(name, name)) for r in rows] for name, _, _ in COLUMNS}
    return pa.table(columns, schema=schema())


def arrow() -> Any:
    """pyarrow, allocating from the system's allocator: its default here, mimalloc, kept ~45 MB
    of freed staging buffers mapped (peak RSS 238 -> 195 MiB, the rerun of 20,000 sessions)."""
    pa = need("pyarrow")
    pa.set_memory_pool(pa.system_memory_pool())
    return pa


class Marks:
    """Each log's new run count, (source, runs) batches: the staged logs' from their file, then
    a 0 for each log with none (not held whole: a million sessions' marks are ~50 MB in Arrow)."""

    def __init__(self, path: str | None, unstaged: Collection[str]) -> None:
        import pyarrow.parquet as pq

        self.path, self.unstaged = path, unstaged
        self.num_rows = len(unstaged) + (0 if path is None else pq.ParquetFile(path).metadata.num_rows)

    def to_batches(self, max_chunksize: int) -> Iterator[Any]:
        pa = arrow()
        import pyarrow.parquet as pq

        if self.path is not None:
            yield from pq.ParquetFile(self.path).iter_batches(batch_size=max_chunksize)
        names = iter(self.unstaged)
        while chunk := list(itertools.islice(names, max_chunksize)):
            yield pa.record_batch({"source": pa.array(chunk, pa.string()), "runs": pa.array([0] * len(chunk), pa.int32())})


class Staged:
    """The new rows as they come, in temporary Parquet files, one per day (another when more
    days are open than OPEN): a day's rows are held in Arrow until GROUP of them (or HELD rows
    in all, the largest day's written first) and written as one row group, so that the staging
    has few row groups (a row group per batch and day made thousands: their metadata, held by
    the writer to its end, was ~100 MB at 650,000 runs)."""

    GROUP = 8_192
    HELD = 16_384
    OPEN = 32

    def __init__(self, folder: str | None = None) -> None:
        """A new staging, or (`folder`) one saved there by `save`, whose days are then set."""
        if folder is None:
            _sweep_stale()
        self.folder = folder or tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-")
        self.groups: dict[str | None, list[str]] = {}  # day -> its files
        self._held: dict[str | None, list[Any]] = {}
        self._counts: dict[str | None, int] = {}  # the rows held of each day (summed per add: O(tables held))
        self._writers: dict[str | None, Any] = {}  # the open ones, least recently written first
        self._count = 0
        self._marks: list[Any] = []  # (source, runs) tables of the logs staged, held until GROUP
        self._marked: Any = None  # their file's writer

    def _mark(self, rows: list[dict[str, Any]]) -> None:
        """Each log's new run count (a log's rows come in one `add`: a file's, or its record's)."""
        pa = arrow()
        counts = Counter(r["source"] for r in rows)
        self._marks.append(pa.table({"source": pa.array(list(counts), pa.string()),
                                     "runs": pa.array(list(counts.values()), pa.int32())}))
        if sum(t.num_rows for t in self._marks) >= self.GROUP:
            self._flush_marks()

    def _flush_marks(self) -> None:
        pa = arrow()
        import pyarrow.parquet as pq

        if not self._marks:
            return
        data = pa.concat_tables(self._marks)
        self._marks = []
        if self._marked is None:
            self._marked = pq.ParquetWriter(os.path.join(self.folder, "marks.parquet"), data.schema)
        self._marked.write_table(data, row_group_size=data.num_rows)

    def marks(self, unstaged: Collection[str]) -> Marks:
        """Every staged log's mark, and one of 0 runs for each log of `unstaged` (logs with no
        row now: all of their rows in the table are deleted), read a batch at a time."""
        self._flush_marks()
        if self._marked is not None:
            self._marked.close()
            self._marked = None
        path = os.path.join(self.folder, "marks.parquet")
        return Marks(path if os.path.exists(path) else None, unstaged)

    def add(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        arrow()
        import pyarrow.compute as pc

        self._mark(rows)
        data = table(rows)
        for date in {r["date"] for r in rows}:
            day = data.filter(pc.is_null(data["date"]) if date is None else pc.equal(data["date"], date))
            self._held.setdefault(date, []).append(day.drop_columns(["date"]))
            self._counts[date] = self._counts.get(date, 0) + day.num_rows
            self.groups.setdefault(date, [])
            if self._counts[date] >= self.GROUP:
                self._write(date)
        while sum(self._counts.values()) > self.HELD:
            self._write(max(self._counts, key=self._counts.__getitem__))

    def _write(self, date: str | None) -> None:
        pa = arrow()
        import pyarrow.parquet as pq

        data = pa.concat_tables(self._held.pop(date))
        del self._counts[date]
        writer = self._writers.pop(date, None)
        if writer is None:
            if len(self._writers) >= self.OPEN:
                self._writers.pop(next(iter(self._writers))).close()
            self.groups[date].append(os.path.join(self.folder, f"{self._count}.parquet"))
            self._count += 1
            writer = pq.ParquetWriter(self.groups[date][-1], data.schema)
        writer.write_table(data, row_group_size=data.num_rows)
        self._writers[date] = writer

    def files(self) -> dict[str | None, list[str]]:
        """Each day's files, every row held written to them first (and them closed)."""
        for held in list(self._held):
            self._write(held)
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        return self.groups

    def pieces(self, date: str | None) -> Iterator[Any]:
        """The new rows of one day, a row group at a time, without the partition column."""
        need("pyarrow")
        import pyarrow.parquet as pq

        for path in self.files().get(date, []):
            staged = pq.ParquetFile(path)
            for group in range(staged.num_row_groups):
                yield staged.read_row_group(group)

    def save(self, unstaged: list[str]) -> str:
        """Every row written to the staging's files, the marks' file closed, and the list of both
        (with `unstaged`) saved beside them: its folder, for a process started on it (reopened)."""
        self.marks(unstaged)
        with open(os.path.join(self.folder, SAVED), "wb") as f:
            f.write(orjson.dumps({"days": list(self.files().items()), "unstaged": unstaged}))
        return self.folder

    @classmethod
    def reopened(cls, folder: str) -> tuple[Staged, list[str]]:
        """The staging `save` left in `folder`, and its unstaged logs."""
        with open(os.path.join(folder, SAVED), "rb") as f:
            saved = orjson.loads(f.read())
        staged = cls(folder)
        staged.groups = dict((day, files) for day, files in saved["days"])
        return staged, list(saved["unstaged"])

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        if self._marked is not None:
            self._marked.close()
            self._marked = None
        shutil.rmtree(self.folder, ignore_errors=True)


def _sweep_stale() -> None:
    """Remove the staging folders of writers that were killed (`kill -9` leaves them in the
    temporary directory; their pid is in their name)."""
    with suppress(OSError):
        for entry in os.scandir(tempfile.gettempdir()):
            pid = entry.name.removeprefix(STAGING).split("-", 1)[0]
            if entry.name.startswith(STAGING) and pid.isascii() and pid.isdigit() and _gone_pid(int(pid)):
                shutil.rmtree(entry.path, ignore_errors=True)


def _gone_pid(pid: int) -> bool:
    """Whether process `pid` is no longer running (one beyond any pid, `99999999999999999999`, is not known gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False
