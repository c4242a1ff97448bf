"""What a results table says, computed by DuckDB over the table's current version (`translator report`).

DuckDB, not pyarrow's compute: one SQL pass per breakdown, reading only the columns it names
and only the partitions the date filters keep, with a memory limit it honours by spilling to
disk (pyarrow's group-by holds its whole input in memory; the limit's 64 MB and two threads kept
a million rows' report at ~215 MiB, 512 MB and four at 509 MiB), exact distinct counts and
mergeable approximate quantiles (t-digest: bounded at any table size); and it is the table's
documented query engine, so what the report says is what a query of docs/fleet.md says. No
row comes into Python: only the aggregates do.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

from translator.extras import need
from translator.model import PROVIDER_ERRORS
from translator.object_store import StoreError, configured_timeout, faults, filesystem
from translator.table import legacy
from translator.table.delta import READER_SPACE, location, opened, room, said

MEMORY_LIMIT = "64MB"  # DuckDB's own, spilled past into a temporary folder (its default: 80% of the machine's)
THREADS = 2  # each thread's buffers are outside the limit
TOP_ERRORS = 10


@dataclass(frozen=True)
class Filters:
    since: str | None = None  # first day kept, YYYY-MM-DD
    until: str | None = None  # last day kept
    model: str | None = None


@dataclass
class Summary:
    """The report's numbers, as plain values (JSON as it is)."""

    totals: dict[str, Any]
    by_model: list[dict[str, Any]]
    by_day: list[dict[str, Any]]
    by_day_and_model: list[dict[str, Any]]
    failures: dict[str, list[dict[str, Any]]]
    filters: dict[str, str | None] = field(default_factory=dict)


def reason(prefix: str) -> str:
    """A provider error's kind, named by its text's head: `server error (HTTP ` is `server error`."""
    return prefix.split(" (")[0].rstrip(": ").removesuffix(" for")


def _kind() -> str:
    """SQL for a failed run's reason: the provider error's kind (from its text, as the
    encoders read it), else `other`, or `(no error text)`."""
    cases = " ".join(f"when starts_with(error, '{prefix}') then '{reason(prefix)}'" for prefix, _ in PROVIDER_ERRORS)
    return f"case when error is null then '(no error text)' {cases} else 'other' end"


def connect(path: str, spill: str) -> tuple[Any, str | None]:
    """A DuckDB connection (memory-limited, spilling into `spill`, no extension fetched) and what
    the report reads from: the Delta table's current version, its files read by DuckDB where it
    can (plain_files), else as an Arrow dataset, or a Parquet dataset of the writer before, its
    files listed (legacy.py); None: there are none. A store's fault is a StoreError naming the table."""
    duckdb = need("duckdb", "report")
    db = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "threads": min(THREADS, os.cpu_count() or 1),
                                "temp_directory": spill, "preserve_insertion_order": False,
                                "autoinstall_known_extensions": False, "autoload_known_extensions": False})
    remote = "://" in path and not path.startswith("file://")
    if not remote and not os.path.isdir(path.removeprefix("file://")):
        raise FileNotFoundError(path)
    timeout = configured_timeout()
    uri, options = location(path, timeout)
    room(READER_SPACE, f"report {path}: the Delta reader")
    deltalake = need("deltalake", "report")
    try:
        table = opened(uri, options)
    except (OSError, deltalake.exceptions.DeltaError) as exc:
        raise said(path, uri, exc) from exc
    if table is not None:
        need("pyarrow", "report")
        files = None if remote else plain_files(table)
        if files is None:
            db.register("runs_table", table.to_pyarrow_dataset())
            return db, "runs_table"
        if not files:
            return db, None
        listed = "[" + ", ".join(_literal(p) for p in files) + "]"
        return db, f"read_parquet({listed}, hive_partitioning = true, hive_types = {{'date': varchar}})"
    parts = [part for part, _ in legacy.parts(path, timeout)]
    if not parts:
        return db, None
    if remote:
        with faults(path, timeout):
            fs, _ = filesystem(path, timeout)
        db.register_filesystem(fs)
        scheme = path.split("://", 1)[0]
        parts = [f"{scheme}://{p}" for p in parts]
    listed = "[" + ", ".join(_literal(p) for p in parts) + "]"
    return db, f"read_parquet({listed}, hive_partitioning = true, hive_types = {{'date': varchar}})"


def plain_files(table: Any) -> list[str] | None:
    """The local files of the table's current version, when DuckDB reads them as they are: no
    reader feature (deletion vectors, column mapping), each in its day's `date=` folder, no
    glob character in a path (DuckDB would expand it). The Arrow dataset (None) read the same
    rows with pyarrow's scanner, whose read-ahead is outside DuckDB's limit: 509 MiB at a
    million rows, against ~200 MiB."""
    from urllib.parse import unquote

    pa = need("pyarrow", "report")
    if table.protocol().min_reader_version > 1:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    days = actions.column("partition.date").to_pylist() if "partition.date" in actions.column_names else None
    if days is None:
        return None
    root = table.table_uri.removeprefix("file://").rstrip("/")
    files = []
    for name, day in zip(actions.column("path").to_pylist(), days, strict=True):
        file = f"{root}/{unquote(name)}"
        if day is None or file.rsplit("/", 2)[-2] != f"date={day}" or any(c in file for c in "*?[{"):
            return None
        files.append(file)
    return files


def summarize(path: str, filters: Filters) -> Summary | None:
    """The table's summary under `filters`; None when no run is kept. What DuckDB cannot read is
    a ValueError (a local file that is no Parquet) or a StoreError (the store failed mid-read),
    said in one line."""
    spill = tempfile.mkdtemp(prefix="translator-report-")
    try:
        return _summarized(path, filters, spill)
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _summarized(path: str, filters: Filters, spill: str) -> Summary | None:
    db, files = connect(path, spill)
    duckdb = need("duckdb", "report")
    try:
        return None if files is None else _summarize(db, files, filters)
    except duckdb.OutOfMemoryException as exc:  # (past its limit with no room to spill: the system's refusal)
        raise MemoryError(str(exc).splitlines()[0]) from exc
    except duckdb.Error as exc:  # (of a store: with fsspec's traceback in it, its last line says what failed)
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        if "://" not in path or path.startswith("file://"):
            raise ValueError(lines[0]) from exc
        raise StoreError(path, lines[-1]) from exc
    finally:
        db.close()


def _literal(text: str) -> str:
    """A SQL string literal of any text."""
    return "'" + text.replace("'", "''") + "'"


def _summarize(db: Any, files: str, filters: Filters) -> Summary | None:
    where = ["true"]  # (a view takes no prepared parameters: the values are quoted literals)
    for clause, value in (("date >=", filters.since), ("date <=", filters.until), ("model =", filters.model)):
        if value is not None:
            where.append(f"{clause} {_literal(value)}")
    try:
        db.execute(f"create temp view runs as select * from {files} where {' and '.join(where)}")
    except Exception as exc:  # no file at all matches: an empty table
        if "No files found" in str(exc):
            return None
        raise
    db.execute(f"create temp view runs_kept as select *, {_kind()} as reason from runs")

    def rows(sql: str) -> list[dict[str, Any]]:
        cursor = db.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]

    sums = ("count(*) as runs, coalesce(sum(is_error::int), 0) as failed, "
            "round(coalesce(sum(total_cost_usd), 0), 6) as total_cost_usd, "
            "coalesce(sum(input_tokens), 0) as input_tokens, coalesce(sum(output_tokens), 0) as output_tokens")
    totals = rows(f"select {sums}, count(distinct session_id) as sessions, count(distinct source) as logs, "
                  "coalesce(sum(cache_read_input_tokens), 0) as cache_read_input_tokens, "
                  "coalesce(sum(cache_creation_input_tokens), 0) as cache_creation_input_tokens, "
                  "min(date) as first_day, max(date) as last_day from runs_kept")[0]
    if not totals["runs"]:
        return None
    totals["failure_rate"] = round(totals["failed"] / totals["runs"], 6)
    quantiles = ("approx_quantile(duration_ms, 0.5)::bigint as p50_ms, approx_quantile(duration_ms, 0.95)::bigint as p95_ms")
    by_model = rows(f"select coalesce(model, '(none)') as model, {sums}, {quantiles} from runs_kept "
                    "group by all order by total_cost_usd desc, runs desc, model")
    by_day = rows(f"select date as day, {sums} from runs_kept group by all order by day")
    by_day_and_model = rows(f"select date as day, coalesce(model, '(none)') as model, {sums} from runs_kept "
                            "group by all order by day, model")
    failures = {
        "by_subtype": rows("select subtype, count(*) as runs from runs_kept where is_error group by all order by runs desc, subtype"),
        "by_reason": rows("select reason, count(*) as runs from runs_kept where is_error group by all order by runs desc, reason"),
        "top_errors": rows(f"select error, reason, count(*) as runs from runs_kept where is_error and error is not null "
                           f"group by all order by runs desc, error limit {TOP_ERRORS}"),
    }
    return Summary(totals, by_model, by_day, by_day_and_model, failures,
                   {"since": filters.since, "until": filters.until, "model": filters.model})
