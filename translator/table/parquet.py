"""`--results-table PATH`: every run's result as a row of a Parquet dataset (pyarrow).

The rows come from the pass that translates (rows.py); this only writes them. The dataset
is hive-partitioned by the log's day (`date=YYYY-MM-DD/part-0.parquet`: the first recorded
event's UTC day, else the file's modification day), so DuckDB, pandas or Spark read it as one
table and prune by date. Each write replaces the partitions it has rows for; a batch's rows
include those of up-to-date files (kept in their records), so a rerun rewrites the same table.

A partition's file is made whole beside its place (a `.part-0.parquet.<pid>.tmp` no reader
takes for a part) and renamed over it; on an object store it is one PUT, which replaces an
object whole. A kill at any moment leaves each partition as it was or as it is to be: before,
the old files were deleted first, and a kill while writing lost the partition.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from translator.extras import need
from translator.object_store import TIMEOUT, faults, filesystem

PART = "part-0.parquet"
ROW_GROUP = 128 * 1024  # runs per row group: one file per partition, read in few, large groups
NO_DATE = "__HIVE_DEFAULT_PARTITION__"  # what hive partitioning calls a null partition value

# Column, Arrow type, meaning. The schema table of docs/fleet.md is this list.
COLUMNS: list[tuple[str, str, str]] = [
    ("source", "string", "the log's path or URL"),
    ("run_index", "int32", "the run's place in its log, from 0"),
    ("session_id", "string", "as in the output (uuid5 of the log's relative path; headless input: the agent's own)"),
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
    """The rows as an Arrow table, sorted by (source, run_index) so a rerun writes the same."""
    pa = need("pyarrow")
    rows = sorted(rows, key=lambda r: (r["source"], r["run_index"]))
    columns = {name: [r.get(RENAMED.get(name, name)) for r in rows] for name, _, _ in COLUMNS}
    return pa.table(columns, schema=schema())


def write(path: str, rows: list[dict[str, Any]], timeout: float = TIMEOUT) -> None:
    """Write (or rewrite the touched partitions of) the dataset at `path`, local or a URL
    (through fsspec, configured as for the inputs: credentials, endpoint, --store-timeout)."""
    pa = need("pyarrow")
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    data = table(rows)
    local = path.removeprefix("file://")  # local disk by URL: written as a local path is (made, synced, renamed)
    put = _Local(local).put if "://" not in local else _Remote(path, timeout).put
    for date in sorted({d for d in data.column("date").to_pylist()}, key=lambda d: d or ""):
        mask = pc.is_null(data["date"]) if date is None else pc.equal(data["date"], date)
        sink = pa.BufferOutputStream()
        pq.write_table(data.filter(mask).drop_columns(["date"]), sink, row_group_size=ROW_GROUP)
        put(f"date={date or NO_DATE}", sink.getvalue().to_pybytes())


class _Local:
    """A dataset on local disk."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def put(self, partition: str, data: bytes) -> None:
        """The partition's new file, synced, renamed over the old; then its other parts (an
        older writer's) and the temporaries of writers that were killed are removed."""
        folder = self.root / partition
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob(f".{PART}.*.tmp"):
            if _gone(stale):
                stale.unlink(missing_ok=True)
        tmp = folder / f".{PART}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, folder / PART)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        for other in folder.glob("*.parquet"):
            if other.name != PART:
                other.unlink(missing_ok=True)


def _gone(tmp: Path) -> bool:
    """Whether the writer of a temporary (its pid is in its name) is no longer running."""
    try:
        os.kill(int(tmp.name.split(".")[-2]), 0)
    except ProcessLookupError:
        return True
    except (ValueError, OverflowError, OSError):  # not a pid (`.part-0.parquet.99999999999999999999.tmp`)
        return False
    return False


class _Remote:
    """A dataset on an object store: a partition's file is one PUT (the object is replaced
    whole, or not at all), then its other parts are deleted."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout
        with faults(url, timeout):
            self.fs, root = filesystem(url, timeout)
        self.root = str(root).rstrip("/")

    def put(self, partition: str, data: bytes) -> None:
        with faults(f"{self.url}/{partition}/{PART}", self.timeout):
            self.fs.pipe_file(f"{self.root}/{partition}/{PART}", data)
            others = [p for p in self.fs.find(f"{self.root}/{partition}")
                      if str(p).endswith(".parquet") and str(p).rsplit("/", 1)[-1] != PART]
            if others:
                self.fs.rm(others)
