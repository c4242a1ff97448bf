"""`--results-table PATH`: every run's result as a row of a Parquet dataset (pyarrow).

The rows come from the pass that translates (rows.py); this only writes them. The dataset
is hive-partitioned by the log's day (`date=YYYY-MM-DD/part-0.parquet`: the first recorded
event's UTC day, else the file's modification day), so DuckDB, pandas or Spark read it as one
table and prune by date. Each write replaces the partitions it has rows for; a batch's rows
include those of up-to-date files (kept in their markers), so a rerun rewrites the same table.
"""

from __future__ import annotations

from typing import Any

from translator.extras import need

# Column, Arrow type, meaning. The README's schema table is this list.
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


def table(rows: list[dict[str, Any]]) -> Any:
    """The rows as an Arrow table, sorted by (source, run_index) so a rerun writes the same."""
    pa = need("pyarrow")
    rows = sorted(rows, key=lambda r: (r["source"], r["run_index"]))
    renamed = {"first_ts": "first_ts_ms", "last_ts": "last_ts_ms", "log_mtime": "log_mtime_ms"}
    columns = {name: [r.get(renamed.get(name, name)) for r in rows] for name, _, _ in COLUMNS}
    return pa.table(columns, schema=schema())


def write(path: str, rows: list[dict[str, Any]]) -> None:
    """Write (or rewrite the touched partitions of) the dataset at `path`, local or a URL."""
    pa = need("pyarrow")
    import pyarrow.dataset as ds
    from pyarrow import fs as pafs

    if "://" in path:  # through fsspec, configured as for the inputs (credentials, endpoint)
        filesystem, root = need("fsspec").core.url_to_fs(path)
        filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
    else:
        filesystem, root = pafs.LocalFileSystem(), path
    ds.write_dataset(
        table(rows), root, filesystem=filesystem, format="parquet",
        partitioning=ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive"),
        basename_template="part-{i}.parquet", existing_data_behavior="delete_matching",
    )
