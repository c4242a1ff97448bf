"""`--results-table PATH`: every run's result as a row of a Delta Lake table (deltalake: delta-rs,
its Rust core in a wheel, no JVM).

A batch is a MERGE a day: its staged rows (parquet.Staged) merged on the row's key (the log's
full path or URL, and its run index) into that day's partition alone (delta-rs prunes the files
it reads by the partition's condition: a merge over every day read the whole table, ~500 MiB at
a million rows). A row of a log the batch translated is updated where it differs and inserted
where new; the table's rows of those logs that no new row replaces in its own day (a run the log
no longer has, a run now of another day) are found first, by the logs' keys alone, and deleted,
a merge a day. Every other row is kept. Each commit is the Delta log's next
version, put only if no other writer put it first (a rename that never replaces, on local
disk; a conditional PUT, `If-None-Match`, on S3): a writer that loses retries against what won,
so two batches at once keep every row, on local disk as on S3. Readers take the table's current
version from its log (DuckDB, Polars, pyarrow, Spark): a file replaced by a commit stays until
a vacuum (the default 7 days: older versions stay readable), so a glob of the Parquet files
would count a replaced row twice. The writer runs in a process of its own (writer.py).

A table of another schema is evolved (the missing columns added), a Parquet dataset of the
writer before (`date=.../part-0.parquet`) is converted once (legacy.py), and a file the table
cannot read is named in one line: never an internal error.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator
from typing import Any

from translator.extras import MissingExtra, need
from translator.object_store import TIMEOUT, StoreError
from translator.table import legacy
from translator.table.parquet import COLUMNS, KEYED, Marks, Staged, arrow, schema

PARTITION = "date"
# The address space delta-rs maps (its runtime's threads, each with its allocator's arena), by
# measure: under a smaller `ulimit -v` it aborts the process (Rust's allocation failure), or hangs.
WRITER_SPACE, READER_SPACE, PER_CORE = 3 << 30, 2 << 30, 128 << 20
TRIES = 8  # merges attempted against a table other writers are committing to
TRIES_STORE = 3  # attempts at one request to a store, as object_store.TRIES
STORE_WORDS = ("Generic S3 error", "Error performing", "error sending request", "Server returned", "Object Store error",
               "connection", "timed out", "Timeout")
PIECE = 16_384  # source rows in one merge (and commit): a day of a million sessions is ~35,000
ROW_GROUP = 8_192  # rows the writer buffers per row group (its default, 1M, buffered a partition's file whole)
# delta-rs allocates with jemalloc, which keeps freed pages for 10 s by default: each merge of a
# batch kept its ~70 MB (350 MiB at 100,000 sessions). Read by jemalloc when the library loads.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")


class TableError(ValueError):
    """The table cannot be written as it is (a damaged file, a column of another type): str()
    is the user's one line."""


def location(path: str, timeout: float = TIMEOUT) -> tuple[str, dict[str, str]]:
    """The table's URI as delta-rs takes it and its storage options: an S3 endpoint, keys and
    region as fsspec is configured for the inputs (FSSPEC_S3), else the AWS_* environment."""
    if "://" not in path or path.startswith("file://"):
        return os.path.abspath(path.removeprefix("file://")), {}
    seconds = max(1, int(timeout))
    options = {"timeout": f"{seconds}s", "connect_timeout": f"{seconds}s", "max_retries": str(TRIES_STORE - 1),
               "retry_timeout": f"{seconds * TRIES_STORE}s"}  # (its default: 10 tries in 180 s)
    if path.split("://", 1)[0] in ("s3", "s3a"):
        try:
            conf = need("fsspec").config.conf.get("s3", {})
        except MissingExtra:  # (fsspec is wanted for its configuration only: without it, the environment's)
            conf = {}
        for ours, theirs in (("endpoint_url", "AWS_ENDPOINT_URL"), ("key", "AWS_ACCESS_KEY_ID"),
                             ("secret", "AWS_SECRET_ACCESS_KEY"), ("token", "AWS_SESSION_TOKEN")):
            if isinstance(conf.get(ours), str):
                options[theirs] = conf[ours]
        region = (conf.get("client_kwargs") or {}).get("region_name") or os.environ.get("AWS_REGION") \
            or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            options["AWS_REGION"] = region
        if options.get("AWS_ENDPOINT_URL", os.environ.get("AWS_ENDPOINT_URL", "")).startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
        return "s3://" + path.split("://", 1)[1].rstrip("/"), options
    return path.rstrip("/"), options


def opened(uri: str, options: dict[str, str]) -> Any | None:
    """The Delta table at `uri`, or None when there is none yet."""
    deltalake = need("deltalake", "table")
    try:
        return deltalake.DeltaTable(uri, storage_options=options)
    except deltalake.exceptions.TableNotFoundError:
        return None


def room(base: int, what: str) -> None:
    """MemoryError (71, one line) when the process may map less address space than delta-rs
    does (`base` and PER_CORE a core): said before it starts, where it would abort or hang."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    wanted = base + PER_CORE * (os.cpu_count() or 1)
    if limit != resource.RLIM_INFINITY and limit < wanted:
        raise MemoryError(f"{what} (delta-rs) maps ~{wanted >> 20:,} MiB of address space, the limit is "
                          f"{limit >> 20:,} MiB (ulimit -v)")


def identity(path: str, timeout: float = TIMEOUT) -> str | None:
    """The table's identity: its Delta metadata's id, made with the table (None: no Delta table
    there), so that what a batch knows it wrote into a table is known of that table only
    (ledger.Tabled). OSError if the store cannot say; MemoryError short of room."""
    room(READER_SPACE, f"--results-table {path}: the Delta reader")
    deltalake = need("deltalake", "table")
    uri, options = location(path, timeout)
    try:
        found = opened(uri, options)
    except (deltalake.exceptions.DeltaError, OSError) as exc:
        raise OSError(str(said(path, uri, exc))) from exc
    return None if found is None else str(found.metadata().id)


def write(path: str, staged: Staged, unstaged: Collection[str], timeout: float = TIMEOUT) -> str | None:
    """The staged rows merged into the table at `path` (made if there is none; a Parquet
    dataset of the writer before converted first), every row of the logs of `unstaged` (none
    staged) deleted: a commit a day of new rows (and one per PIECE rows of a day past that),
    and one a day of rows deleted, each merge reading that day's partition only; the table's
    identity (as identity(), from the table this opened: not opened again for it). Nothing
    staged and nothing unstaged: no commit, None. TableError or StoreError (an OSError) when
    it cannot be written; MemoryError short of room."""
    room(WRITER_SPACE, f"--results-table {path}: the Delta writer")
    pa = arrow()
    deltalake = need("deltalake", "table")
    uri, options = location(path, timeout)
    marks = staged.marks(unstaged)
    if not staged.groups and not marks.num_rows:
        return None
    try:
        table = opened(uri, options)
        if table is None:
            legacy.convert(path, uri, options, timeout)
            table = _create(uri, options)
        _evolve(table)
        if table.file_uris():  # (none: no row to delete, no target to read: a million sessions' replay)
            deletes = _gone(table, staged, marks)
            pa.default_memory_pool().release_unused()  # (the scan's freed heap returned before the merges)
            for date, keys in deletes.items():
                _commit(table, lambda: _merge(table, date, keys, delete=True))  # noqa: B023 (called here, in this iteration)
        for date, piece in _sources(staged):
            _commit(table, lambda: _merge(table, date, piece, delete=False))  # noqa: B023
        return str(table.metadata().id)
    except deltalake.exceptions.CommitFailedError as exc:
        raise TableError(f"another writer kept committing first ({TRIES} tries): {_first(exc)}") from exc
    except pa.ArrowException as exc:  # (its files read for the logs' keys: _gone)
        raise TableError(_first(exc)) from exc
    except (deltalake.exceptions.DeltaError, deltalake.exceptions.DeltaProtocolError,
            deltalake.exceptions.SchemaMismatchError, OSError) as exc:
        raise said(path, uri, exc) from exc


def _commit(table: Any, merge: Callable[[], None]) -> None:
    """One merge committed, tried again against what another writer committed first."""
    deltalake = need("deltalake", "table")
    for attempt in range(1, TRIES + 1):
        try:
            aside(merge)
            return
        except deltalake.exceptions.CommitFailedError:
            if attempt == TRIES:
                raise
            table.update_incremental()


def aside(work: Callable[[], None]) -> None:
    """`work` (a call into delta-rs) on a thread of its own, stderr held meanwhile: the main
    thread waits in Python, so a stop signal is taken at once (a call into Rust takes none
    until it returns: a hung PUT held the batch its timeout), and delta-rs's own panic
    reports ("thread 'tokio-rt-worker' panicked at ...: Already shut down", after a store's
    error) are not printed; the error is said as ours, in one line."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # (a Rust panic is no Exception)
            failed.append(exc)

    with tempfile.TemporaryFile() as held:
        saved = os.dup(2)
        os.dup2(held.fileno(), 2)
        try:
            thread = threading.Thread(target=run, name="delta-rs", daemon=True)
            thread.start()
            while thread.is_alive():
                thread.join(0.1)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    if failed:
        raise failed[0]


def _create(uri: str, options: dict[str, str]) -> Any:
    """A new, empty table of our columns, partitioned by day (two writers making it at once:
    one makes it, the other opens it)."""
    deltalake = need("deltalake", "table")
    try:
        return deltalake.DeltaTable.create(uri, schema=schema(), partition_by=[PARTITION], mode="ignore",
                                           storage_options=options)
    except (deltalake.exceptions.CommitFailedError, deltalake.exceptions.DeltaError):
        found = opened(uri, options)
        if found is None:
            raise
        return found


def _evolve(table: Any) -> None:
    """The columns the table lacks (an older writer's schema) added, null in its rows (one commit,
    once); a column of ours it holds with another type is a TableError."""
    pa = arrow()
    held = {f.name: f.type for f in pa.schema(table.schema().to_arrow())}
    missing = [f for f in schema() if f.name not in held]
    if missing:
        deltalake = need("deltalake", "table")
        table.alter.add_columns([deltalake.Field.from_arrow(f) for f in missing])
    for f in schema():
        if f.name in held and not _compatible(held[f.name], f.type):
            raise TableError(f"its column {f.name} is {held[f.name]}, not {f.type}: write another table")


def _compatible(held: Any, ours: Any) -> bool:
    pa = arrow()
    if pa.types.is_timestamp(held) and pa.types.is_timestamp(ours):
        return True
    if pa.types.is_list(held) or pa.types.is_large_list(held):
        return bool(pa.types.is_list(ours))
    if pa.types.is_string(held) or pa.types.is_large_string(held) or pa.types.is_string_view(held):
        return bool(pa.types.is_string(ours))
    return bool(held == ours)


def _day(date: str | None) -> str:
    """The SQL condition that keeps the target's rows of one partition (what delta-rs prunes by)."""
    return f"t.{PARTITION} IS NULL" if date is None else f"t.{PARTITION} = '{date}'"


def _merge(table: Any, date: str | None, source: list[Any], delete: bool) -> None:
    """A MERGE into one day's partition: a target row matched by its own new row is updated where
    any column differs (or, with `delete`, a row gone from that day is deleted); a new row
    matched by none is inserted; a row of any other log or day is not read, and kept."""
    names = [name for name, _, _ in COLUMNS]
    data = [n for n in names if n not in KEYED]
    changed = " OR ".join(f"(t.{n} IS DISTINCT FROM s.{n})" for n in data)  # (parenthesized: its parser binds OR first)
    merger = table.merge(
        source=pa_reader(source), predicate=f"{_day(date)} AND t.source = s.source AND t.run_index = s.run_index",
        source_alias="s", target_alias="t", streamed_exec=False, error_on_type_mismatch=True,
        writer_properties=need("deltalake").WriterProperties(max_row_group_size=ROW_GROUP),
    )
    if delete:
        merger.when_matched_delete().execute()
        return
    (merger.when_matched_update(updates={n: f"s.{n}" for n in data}, predicate=changed)
     .when_not_matched_insert(updates={n: f"s.{n}" for n in names})
     .execute())


def _sources(staged: Staged) -> Iterator[tuple[str | None, list[Any]]]:
    """The merge's source a day at a time, in pieces of up to PIECE rows, each a merge and a
    commit of its own that reads that day's partition only: delta-rs holds a merge's whole
    source (its join's build side: ~1.1 KB a log) and the target files it reads (a merge of a
    million sessions' rows took a GB; one of 65,536 rows over every day, ~500 MiB)."""
    pa = arrow()
    full = schema()
    for date in staged.groups:
        piece: list[Any] = []
        held = 0
        for group in staged.pieces(date):
            days = pa.array([date] * group.num_rows, pa.string())
            piece += group.append_column(PARTITION, days).select(full.names).cast(full).to_batches()
            held += group.num_rows
            if held >= PIECE:
                yield date, piece
                piece, held = [], 0
        if piece:
            yield date, piece


def _gone(table: Any, staged: Staged, marks: Marks) -> dict[str | None, list[Any]]:
    """The table's rows of the batch's logs that no new row replaces in its own day (a run
    the log no longer has, or a run now of another day: its new row goes to that day), by day:
    each day's keys the source of a merge that deletes them. The table is read for the logs'
    keys only (three columns), PIECE logs at a time; the new rows' keys of the logs found there."""
    pa = arrow()
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    target = table.to_pyarrow_dataset()
    keys = ["source", "run_index", PARTITION]
    gone: dict[str | None, list[Any]] = {}
    staged_schema = schema().remove(schema().get_field_index(PARTITION))
    for chunk in _chunks(marks.to_batches(max_chunksize=Staged.GROUP), PIECE):
        logs = pa.concat_arrays([b["source"] for b in chunk])
        old = pa.Table.from_batches(_of(target, keys, logs), pa.schema([schema().field(k) for k in keys]))
        if not old.num_rows:
            continue
        found = pc.unique(old["source"])
        new = []
        for date, files in staged.files().items():
            part = ds.dataset(files, schema=staged_schema).to_table(columns=keys[:2], filter=pc.field("source").isin(found))
            new.append(part.append_column(PARTITION, pa.array([date] * part.num_rows, pa.string())))
        kept = old.join(pa.concat_tables(new), keys=keys, join_type="left anti") if new else old
        for date in pc.unique(kept[PARTITION]).to_pylist():
            day = kept.filter(pc.is_null(kept[PARTITION]) if date is None else pc.equal(kept[PARTITION], date))
            gone.setdefault(date, []).extend(day.select(keys).to_batches())
    return gone


def _of(target: Any, keys: list[str], logs: Any) -> Iterator[Any]:
    """The target's `keys` of the rows of `logs`, a batch at a time, filtered as read (a filter
    given to the scan fails: pyarrow compares the files' string statistics with delta-rs's
    string_view columns); a file at a time, on this thread (the scan's threads and read-ahead
    over a million rows' files held ~50 MiB more)."""
    pa = arrow()
    import pyarrow.compute as pc

    ours = pa.schema([schema().field(k) for k in keys])
    batches = (batch for piece in target.get_fragments()
               for batch in piece.to_batches(schema=target.schema, columns=keys, batch_size=Staged.GROUP, use_threads=False))
    for batch in batches:
        batch = pa.record_batch([batch[k].cast(ours.field(k).type) for k in keys], schema=ours)
        kept = batch.filter(pc.is_in(batch["source"], value_set=logs))
        if kept.num_rows:
            yield kept


def _chunks(batches: Iterator[Any], rows: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    held = 0
    for batch in batches:
        chunk.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def pa_reader(batches: list[Any]) -> Any:
    pa = arrow()
    return pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))


def _first(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def said(path: str, uri: str, exc: BaseException) -> Exception:
    """delta-rs's error in one line: a store's fault (a table on a URL) is a StoreError (74),
    with the request and the answer, not the retries' arithmetic; else a TableError (65),
    naming the file it could not read when it says one."""
    parts = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split("\u21b3")  # (its causes, one a line, each after an arrow)
    text = ": ".join(" ".join(p.split()) for p in parts if p.strip()) or type(exc).__name__
    if "://" in uri and any(w in text for w in STORE_WORDS):
        text = text.split(" <?xml", 1)[0].split(": <?xml", 1)[0]
        text = re.sub(r" in [\d.]+m?s, after \d+ retries.*?retry_timeout: \d+s[\s:-]*", ": ", text)
        at = text.find("Error performing")
        return StoreError(path, text[at:] if at >= 0 else text)
    return TableError(_first(exc))
