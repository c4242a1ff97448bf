"""The results table as the writer before the Delta table left it: a Parquet dataset,
hive-partitioned by day (`PATH/date=YYYY-MM-DD/part-0.parquet`), with no log of its own.

`translator report` reads one as it is; the first write converts it, once: its rows (of any
schema the writer had: a missing column is null) become the Delta table's first version, then
its files are removed. A file that is no Parquet is named and left where it was (the Delta
table does not read it). Its files are listed, never globbed: a path with `[...]` is a path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

from translator.diagnostics import stderr
from translator.extras import need
from translator.object_store import faults, filesystem
from translator.table.parquet import arrow, schema

NO_DATE = "__HIVE_DEFAULT_PARTITION__"  # what hive partitioning calls a null partition value


def parts(path: str, timeout: float) -> list[tuple[str, str | None]]:
    """The dataset's part files (local paths, or paths on the URL's filesystem) with their day;
    none when `path` holds no such dataset."""
    found: list[str] = []
    if "://" not in path or path.startswith("file://"):
        root = path.removeprefix("file://")
        with suppress(OSError):
            for day in os.scandir(root):
                if day.name.startswith("date=") and day.is_dir():
                    found += [e.path for e in os.scandir(day.path) if e.name.endswith(".parquet") and not e.name.startswith(".")]
    else:
        with faults(path, timeout):
            fs, root = filesystem(path, timeout)
            with suppress(FileNotFoundError):
                found = [str(p) for p in fs.find(root) if str(p).endswith(".parquet")
                         and str(p).rsplit("/", 2)[-2].startswith("date=") and not str(p).rsplit("/", 1)[-1].startswith(".")]
    return sorted((p, _day(p)) for p in found)


def _day(part: str) -> str | None:
    day = part.rsplit("/", 2)[-2].removeprefix("date=")
    return None if day == NO_DATE else day


def _open(path: str, part: str, timeout: float) -> Any:
    if "://" not in path or path.startswith("file://"):
        return open(part, "rb")
    with faults(path, timeout):
        return filesystem(path, timeout)[0].open(part, "rb")


def read(path: str, part: str, day: str | None, timeout: float) -> Iterator[Any]:
    """A part's rows in today's schema, a row group at a time (a column it lacks is null, one
    it has beyond ours is dropped); ValueError when it is no Parquet file."""
    pa = arrow()
    import pyarrow.parquet as pq

    ours = schema()
    with _open(path, part, timeout) as f:
        try:
            found = pq.ParquetFile(f)
        except pa.ArrowException as exc:
            raise ValueError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
        for group in range(found.num_row_groups):
            data = found.read_row_group(group)
            n = data.num_rows
            columns = [data[f.name].cast(f.type) if f.name in data.column_names else pa.nulls(n, f.type) for f in ours]
            columns[ours.get_field_index("date")] = pa.array([day] * n, pa.string())
            yield pa.table(columns, schema=ours)


def convert(path: str, uri: str, options: dict[str, str], timeout: float) -> None:
    """The dataset at `path`, if there is one, made the Delta table's first version (said in one
    line); then its files removed. Another writer converting it at once: its version is kept."""
    found = parts(path, timeout)
    if not found:
        return
    pa = arrow()
    deltalake = need("deltalake", "table")
    unread: list[str] = []
    runs = [0]

    def batches() -> Iterator[Any]:
        for part, day in found:
            try:
                for data in read(path, part, day, timeout):
                    runs[0] += data.num_rows
                    yield from data.to_batches()
            except (ValueError, pa.ArrowException) as exc:
                unread.append(f"{part} ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")

    try:
        deltalake.write_deltalake(uri, pa.RecordBatchReader.from_batches(schema(), batches()), partition_by=["date"],
                                  mode="error", storage_options=options)
    except (deltalake.exceptions.DeltaError, deltalake.exceptions.CommitFailedError):
        if deltalake.DeltaTable.is_deltatable(uri, storage_options=options):
            return  # another writer converted it first
        raise
    kept = {p.split(" (", 1)[0] for p in unread}
    _remove(path, [p for p, _ in found if p not in kept], timeout)
    said = f"translator: --results-table {path}: the Parquet dataset of {len(found) - len(unread):,} files and {runs[0]:,} runs " \
           "converted to a Delta table (its files removed)"
    if unread:
        said += f"; {len(unread)} not Parquet, left where they were, unread: " + ", ".join(unread)
    stderr([said], "info")


def _remove(path: str, done: list[str], timeout: float) -> None:
    if "://" not in path or path.startswith("file://"):
        for part in done:
            with suppress(FileNotFoundError):
                os.unlink(part)
        return
    if done:
        with faults(path, timeout):
            filesystem(path, timeout)[0].rm(done)
