"""`--results-table PATH`: every run's result as a row of a Parquet dataset (pyarrow).

The rows come from the pass that translates (rows.py); this only writes them. The dataset
is hive-partitioned by the log's day (`date=YYYY-MM-DD/part-0.parquet`: the first recorded
event's UTC day, else the file's modification day), so DuckDB, pandas or Spark read it as one
table and prune by date. A row is keyed by its log (the full path or URL) and its run index:
a write replaces every row of the logs it translated, wherever they were, and keeps every
other row, so runs over other logs accumulate and a rerun of the same logs doubles nothing.
The new rows are staged as they come (Staged: a temporary Parquet file, a row group per day
per batch), so the writer holds one partition at a time, never the fleet.

A partition's file is made whole beside its place (a `.part-0.parquet.<pid>.tmp` no reader
takes for a part) and renamed over it; on an object store it is one PUT, which replaces an
object whole. A kill at any moment leaves each partition as it was or as it is to be. Two
writers of one local table take turns (an flock on its `.translator.lock`): the second waits,
then merges its rows into what the first left; on an object store there is no lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

from translator.diagnostics import stderr
from translator.extras import need
from translator.object_store import TIMEOUT, faults, filesystem

PART = "part-0.parquet"
STAGING = "translator-table-"  # the staging folders' prefix, then the writer's pid
LOCK = ".translator.lock"  # flock'd by the writer of a local table (dot: no reader takes it for a part)
IDENTITY = ".translator.id"  # the table's identity, made with it (identity())
ROW_GROUP = 128 * 1024  # runs per row group: one file per partition, read in few, large groups
NO_DATE = "__HIVE_DEFAULT_PARTITION__"  # what hive partitioning calls a null partition value

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


class Staged:
    """The new rows as they come, in temporary Parquet files, one per day (another when more
    days are open than OPEN): a day's rows are held in Arrow until GROUP of them (or HELD rows
    in all, the largest day's written first) and written as one row group, so that the staging
    has few row groups (a row group per batch and day made thousands: their metadata, held by
    the writer to its end, was ~100 MB at 650,000 runs)."""

    GROUP = 16_384
    HELD = 32_768
    OPEN = 32

    def __init__(self) -> None:
        _sweep_stale()
        self.folder = tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-")
        self.groups: dict[str | None, list[str]] = {}  # day -> its files
        self._held: dict[str | None, list[Any]] = {}
        self._writers: dict[str | None, Any] = {}  # the open ones, least recently written first
        self._count = 0

    def add(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        arrow()
        import pyarrow.compute as pc

        data = table(rows)
        for date in {r["date"] for r in rows}:
            self._held.setdefault(date, []).append(
                data.filter(pc.is_null(data["date"]) if date is None else pc.equal(data["date"], date)).drop_columns(["date"]))
            self.groups.setdefault(date, [])
            if sum(t.num_rows for t in self._held[date]) >= self.GROUP:
                self._write(date)
        while sum(t.num_rows for held in self._held.values() for t in held) > self.HELD:
            self._write(max(self._held, key=lambda d: sum(t.num_rows for t in self._held[d])))

    def _write(self, date: str | None) -> None:
        pa = arrow()
        import pyarrow.parquet as pq

        data = pa.concat_tables(self._held.pop(date))
        writer = self._writers.pop(date, None)
        if writer is None:
            if len(self._writers) >= self.OPEN:
                self._writers.pop(next(iter(self._writers))).close()
            self.groups[date].append(os.path.join(self.folder, f"{self._count}.parquet"))
            self._count += 1
            writer = pq.ParquetWriter(self.groups[date][-1], data.schema)
        writer.write_table(data, row_group_size=data.num_rows)
        self._writers[date] = writer

    def pieces(self, date: str | None) -> Iterator[Any]:
        """The new rows of one day, a row group at a time, without the partition column."""
        need("pyarrow")
        import pyarrow.parquet as pq

        for held in list(self._held):
            self._write(held)
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        for path in self.groups.get(date, []):
            staged = pq.ParquetFile(path)
            for group in range(staged.num_row_groups):
                yield staged.read_row_group(group)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


def write(path: str, staged: Staged, replaced: Iterable[str], timeout: float = TIMEOUT) -> None:
    """Write the staged rows into the dataset at `path`, local or a URL (through fsspec,
    configured as for the inputs: credentials, endpoint, --store-timeout): every partition
    with new rows, or with rows of a log in `replaced` (the logs translated), is rewritten
    without those logs' old rows and with their new ones; one left with no rows is removed.
    A partition streams through, a row group at a time (its kept rows, then the new): the
    writer holds ROW_GROUP runs at most, whatever the day's count. Each row group is sorted by
    (source, run_index), so a partition of one row group is the same bytes on a rerun."""
    pa = arrow()

    local = path.removeprefix("file://")  # local disk by URL: written as a local path is (made, synced, renamed)
    dest: _Local | _Remote = _Local(local) if "://" not in local else _Remote(path, timeout)
    gone = pa.array(sorted(set(replaced)), pa.string())
    new = {_partition(date): date for date in staged.groups}
    with dest.locked():
        dest.identity(make=True)
        for name in sorted(set(dest.partitions()) | set(new)):
            if name in new or _touched(dest, name, gone):
                pieces = _pieces(dest, name, gone, staged.pieces(new[name]) if name in new else iter(()))
                dest.replace(name, partial(_fill, pieces=pieces))


def identity(path: str, timeout: float = TIMEOUT) -> str | None:
    """The table's identity: made with its first write, new when the table is made anew (None:
    no table there, or one written before identities), so that what a batch knows it wrote into
    a table is known of that table only (ledger.Tabled). OSError if the store cannot say."""
    local = path.removeprefix("file://")
    return (_Local(local) if "://" not in local else _Remote(path, timeout)).identity()


def _groups(dest: _Local | _Remote, name: str, columns: list[str] | None = None) -> Iterator[Any]:
    """A partition's rows as they are, a row group at a time."""
    import pyarrow.parquet as pq

    for part in dest.parts(name):
        with dest.open(part) as f:
            found = pq.ParquetFile(f)
            for group in range(found.num_row_groups):
                yield found.read_row_group(group, columns=columns)


def _touched(dest: _Local | _Remote, name: str, gone: Any) -> bool:
    """Whether a partition holds a row of a log in `gone` (its source column read alone)."""
    import pyarrow.compute as pc

    return any(pc.any(pc.is_in(g["source"], value_set=gone)).as_py() for g in _groups(dest, name, ["source"]))


def _pieces(dest: _Local | _Remote, name: str, gone: Any, fresh: Iterator[Any]) -> Iterator[Any]:
    """A partition's rows to be: those it keeps, then the new ones of its day (`fresh`)."""
    import pyarrow.compute as pc

    bare = schema().remove(len(COLUMNS) - 1)
    for group in _groups(dest, name):
        yield group.filter(pc.invert(pc.is_in(group["source"], value_set=gone))).select(bare.names).cast(bare)
    yield from fresh


def _fill(sink: str, pieces: Iterator[Any]) -> int:
    """The pieces written to the Parquet file `sink` in row groups of ROW_GROUP runs, each sorted
    by (source, run_index); the runs written."""
    pa = need("pyarrow")
    import pyarrow.parquet as pq

    bare = schema().remove(len(COLUMNS) - 1)
    held: list[Any] = []
    count = written = 0
    with pq.ParquetWriter(sink, bare) as writer:

        def flush() -> None:
            data = pa.concat_tables(held).sort_by([("source", "ascending"), ("run_index", "ascending")])
            writer.write_table(data, row_group_size=ROW_GROUP)
            held.clear()

        for piece in pieces:
            while piece.num_rows:
                take = piece.slice(0, ROW_GROUP - count)
                held.append(take)
                count += take.num_rows
                written += take.num_rows
                piece = piece.slice(take.num_rows)
                if count == ROW_GROUP:
                    flush()
                    count = 0
        if held:
            flush()
    return written


def _partition(date: str | None) -> str:
    return f"date={date or NO_DATE}"


class _Local:
    """A dataset on local disk."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The table to this writer alone: another waits (said once), then goes on from
        what this one left. The lock goes with the process, however it ends."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                stderr([f"translator: --results-table {self.root}: waiting for another writer ({lock.read().strip() or 'a process'})"],
                       "info")
                fcntl.flock(lock, fcntl.LOCK_EX)
            lock.truncate(0)
            lock.write(f"pid {os.getpid()}\n")
            lock.flush()
            yield

    def identity(self, make: bool = False) -> str | None:
        try:
            return (self.root / IDENTITY).read_text().strip() or None
        except FileNotFoundError:
            if not make:
                return None
        made = uuid.uuid4().hex
        tmp = self.root / f".{IDENTITY}.{os.getpid()}.tmp"
        tmp.write_text(made + "\n")
        os.replace(tmp, self.root / IDENTITY)
        return made

    def partitions(self) -> list[str]:
        with suppress(FileNotFoundError):
            return [e.name for e in os.scandir(self.root) if e.name.startswith("date=") and e.is_dir()]
        return []

    def parts(self, partition: str) -> list[str]:
        return sorted(str(p) for p in (self.root / partition).glob("*.parquet") if not p.name.startswith("."))

    def open(self, part: str) -> Any:
        return open(part, "rb")

    def remove(self, partition: str) -> None:
        for part in self.parts(partition):
            Path(part).unlink(missing_ok=True)
        with suppress(OSError):
            (self.root / partition).rmdir()

    def replace(self, partition: str, fill: Callable[[str], int]) -> None:
        """The partition's new file made by `fill` beside it, synced, renamed over the old (or,
        with no rows, the partition removed); then its other parts (an older writer's) and the
        temporaries of writers that were killed are removed."""
        folder = self.root / partition
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob(f".{PART}.*.tmp"):
            if _gone(stale):
                stale.unlink(missing_ok=True)
        tmp = folder / f".{PART}.{os.getpid()}.tmp"
        try:
            if not fill(str(tmp)):
                tmp.unlink(missing_ok=True)
                self.remove(partition)
                return
            with open(tmp, "rb+") as out:
                os.fsync(out.fileno())
            os.replace(tmp, folder / PART)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        for other in self.parts(partition):
            if Path(other).name != PART:
                Path(other).unlink(missing_ok=True)


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


def _gone(tmp: Path) -> bool:
    """Whether the writer of a temporary (its pid is in its name) is no longer running."""
    pid = tmp.name.split(".")[-2]
    return pid.isascii() and pid.isdigit() and _gone_pid(int(pid))  # (not a pid: `.part-0.parquet.x.tmp` is left alone)


class _Remote:
    """A dataset on an object store: a partition's file is one PUT (the object is replaced
    whole, or not at all), then its other parts are deleted."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout
        with faults(url, timeout):
            self.fs, root = filesystem(url, timeout)
        self.root = str(root).rstrip("/")

    @contextmanager
    def locked(self) -> Iterator[None]:
        """No lock on an object store: two writers at once each replace partitions whole, and
        where both touch one, the later write's rows are what it holds."""
        yield

    def identity(self, make: bool = False) -> str | None:
        with faults(f"{self.url}/{IDENTITY}", self.timeout):
            try:
                return bytes(self.fs.cat_file(f"{self.root}/{IDENTITY}")).decode(errors="replace").strip() or None
            except FileNotFoundError:
                if not make:
                    return None
            made = uuid.uuid4().hex
            self.fs.pipe_file(f"{self.root}/{IDENTITY}", f"{made}\n".encode())
        return made

    def partitions(self) -> list[str]:
        with faults(self.url, self.timeout):
            try:
                found = self.fs.ls(self.root, detail=False)
            except FileNotFoundError:
                return []
        return [name for name in (str(p).rstrip("/").rsplit("/", 1)[-1] for p in found) if name.startswith("date=")]

    def parts(self, partition: str) -> list[str]:
        with faults(f"{self.url}/{partition}", self.timeout):
            try:
                found = self.fs.find(f"{self.root}/{partition}")
            except FileNotFoundError:
                return []
        return sorted(str(p) for p in found if str(p).endswith(".parquet") and not str(p).rsplit("/", 1)[-1].startswith("."))

    def open(self, part: str) -> Any:
        with faults(f"{self.url}/{part}", self.timeout):
            return self.fs.open(part, "rb")

    def remove(self, partition: str) -> None:
        parts = self.parts(partition)
        if parts:
            with faults(f"{self.url}/{partition}", self.timeout):
                self.fs.rm(parts)

    def replace(self, partition: str, fill: Callable[[str], int]) -> None:
        """The partition's new file made by `fill` in a local temporary, then one upload (a PUT,
        or a multipart upload completed at its end: the object is replaced whole, or not at
        all); then its other parts are deleted. With no rows, the partition is removed."""
        with tempfile.TemporaryDirectory(prefix=f"{STAGING}{os.getpid()}-") as folder:
            local = os.path.join(folder, PART)
            if not fill(local):
                self.remove(partition)
                return
            with faults(f"{self.url}/{partition}/{PART}", self.timeout):
                self.fs.put_file(local, f"{self.root}/{partition}/{PART}")
        others = [p for p in self.parts(partition) if p.rsplit("/", 1)[-1] != PART]
        if others:
            with faults(f"{self.url}/{partition}", self.timeout):
                self.fs.rm(others)
