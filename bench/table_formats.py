"""The results table's workload on Delta Lake (the table's own writer, translator.table.delta)
and on Apache Iceberg (pyiceberg, a SQL catalog in SQLite): seconds, peak RSS and files written.

    python bench/table_formats.py [--sessions 100000] [--formats delta,iceberg]

Needs pyiceberg (`pip install 'pyiceberg[sql-sqlite]'`: not a dependency of the translator,
only of this measurement). A fleet of `--sessions` logs of 1 to 12 runs each (~6.5; a fixed
seed, 30 days, a partition a day), each step in a process of its own (peak RSS: its
ru_maxrss):
  - batch: every log's rows into a new table (Delta: the table's merge, 65,536 rows a commit;
    Iceberg: one transaction of appends, 65,536 rows each);
  - touched: 1% of the logs' rows replaced (a run more or fewer each: rows updated, inserted and
    deleted; Delta: the MERGE on (source, run_index) with each log's mark; Iceberg: one
    transaction deleting those logs' rows and appending their new ones);
  - one log: one log's rows replaced, likewise;
  - two writers: two processes at once, each replacing another 1% of the logs (every row kept?);
  - report: the report's queries (translator.table.summary) in DuckDB over the table's current
    version (Delta: its Arrow dataset, as `translator report` reads it; Iceberg: an Arrow
    dataset of the files its scan plans: DuckDB's iceberg extension is not installable offline).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

MODELS = ["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5", "gpt-5", "gemini-2.5-pro"]
DAY_MS = 86_400_000
START_MS = 1_756_684_800_000  # 2025-09-01
PIECE = 65_536
SEED = 41


def runs_of(n: int, generation: int) -> int:
    """Log n's run count in the given generation of the fleet (each rewrite moves it by one)."""
    base = random.Random(n * 7919 + SEED).randint(1, 12)
    return max(1, base + (generation % 2) * (1 if n % 2 else -1))


def log_rows(n: int, generation: int) -> list[dict[str, Any]]:
    """Log n's rows as the batch stages them (table/rows.py's keys)."""
    rng = random.Random(n * 104729 + generation)
    day = random.Random(n).randrange(30)  # (not n % 30: the logs a step picks, n % 100, would fall on 3 days)
    source = f"s3://fleet/logs/host-{n % 50}/session-{n}/stdout.ndjson"
    rows = []
    for i in range(runs_of(n, generation)):
        first = START_MS + day * DAY_MS + rng.randrange(DAY_MS - 3_600_000)
        model = MODELS[rng.randrange(len(MODELS))]
        inputs, outputs, duration = rng.randrange(500, 60_000), rng.randrange(50, 4_000), rng.randrange(1_000, 900_000)
        failed = rng.random() < 0.04
        rows.append({
            "source": source, "run_index": i, "session_id": f"{n:08x}-0000-5000-8000-{n:012x}",
            "subtype": "error" if failed else "success", "is_error": failed, "num_turns": rng.randrange(1, 30),
            "input_tokens": inputs, "output_tokens": outputs, "cache_read_input_tokens": inputs // 2,
            "cache_creation_input_tokens": inputs // 10, "total_cost_usd": (inputs * 3 + outputs * 15) / 1e6,
            "duration_ms": duration, "duration_api_ms": duration * 8 // 10, "duration_source": "recorded",
            "model": model, "models": [model], "error": "rate limit exceeded" if failed else None,
            "tool_calls": rng.randrange(40), "first_ts_ms": first, "last_ts_ms": first + duration,
            "log_mtime_ms": first + duration + generation * 1000,
            "date": time.strftime("%Y-%m-%d", time.gmtime((START_MS + day * DAY_MS) / 1000)),
        })
    return rows


def chosen(step: str, sessions: int) -> tuple[list[int], int]:
    """The logs a step writes, and their generation."""
    if step == "batch":
        return list(range(sessions)), 0
    if step == "one":
        return [sessions // 2], 3
    part = {"touched": 0, "writer-a": 1, "writer-b": 2}[step]
    return [n for n in range(sessions) if n % 100 == part], 1


def expected(sessions: int) -> int:
    """The table's rows after every step (batch, touched, one, writer-a and writer-b)."""
    gen = {n: 0 for n in range(sessions)}
    for step in ("touched", "one", "writer-a", "writer-b"):
        logs, generation = chosen(step, sessions)
        gen.update(dict.fromkeys(logs, generation))
    return sum(runs_of(n, g) for n, g in gen.items())


# --- Delta Lake: the table's own writer ---------------------------------------------------------

def staged_rows(logs: list[int], generation: int) -> Any:
    """The logs' rows staged as a batch stages them (table/parquet.py: Parquet files a day), for
    either format's writer: the same input, the same cost before the table."""
    from translator.table.parquet import Staged

    staged = Staged()
    rows: list[dict[str, Any]] = []
    for n in logs:  # (a thousand logs an add: an add a log costs O(rows held), the bench's minutes, not the table's)
        rows += log_rows(n, generation)
        if len(rows) >= 6_500:
            staged.add(rows)
            rows = []
    staged.add(rows)
    return staged


def delta_write(path: str, staged: Any) -> int:
    from translator.table import delta

    delta.write(path, staged, ())
    return 1


def delta_source(path: str) -> Any:
    from translator.table.delta import location, opened

    uri, options = location(path)
    return opened(uri, options).to_pyarrow_dataset()


# --- Apache Iceberg: pyiceberg, a SQL catalog in SQLite -----------------------------------------

def iceberg_table(path: str) -> Any:
    """The table `runs` of the catalog in `path` (made, with the table's columns, if not there)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError

    os.makedirs(path, exist_ok=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{path}/catalog.db", warehouse=f"file://{path}/warehouse")
    with contextlib.suppress(NamespaceAlreadyExistsError):
        catalog.create_namespace("fleet")
    with contextlib.suppress(NoSuchTableError):
        return catalog.load_table("fleet.runs")
    try:
        table = catalog.create_table("fleet.runs", schema=arrowed_schema())
    except TableAlreadyExistsError:  # the other writer made it
        return catalog.load_table("fleet.runs")
    with table.update_spec() as spec:
        spec.add_identity("date")
    return table


def arrowed_schema() -> Any:
    import pyarrow as pa

    from translator.table.parquet import schema

    return pa.schema([f.with_type(pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f for f in schema()])


def iceberg_pieces(staged: Any) -> Iterator[Any]:
    """The staged rows with their day, in the Iceberg table's types, PIECE rows an append (an
    append a staged row group, a day's, wrote a manifest each: 64 files for 13,000 rows)."""
    import pyarrow as pa

    held: list[Any] = []
    rows = 0
    for date in staged.groups:
        for group in staged.pieces(date):
            held.append(group.append_column("date", pa.array([date] * group.num_rows, pa.string())).cast(arrowed_schema()))
            rows += group.num_rows
            if rows >= PIECE:
                yield pa.concat_tables(held)
                held, rows = [], 0
    if held:
        yield pa.concat_tables(held)


def iceberg_write(path: str, staged: Any, first: bool) -> int:
    """The staged rows written in one transaction; the tries it took. pyiceberg retries a commit
    another writer beat itself, but a delete whose files another writer's commit may have
    touched fails its serializable check (ValidationException): the whole transaction is done
    again on the new version, up to 8 times (as the Delta writer's merge is)."""
    import pyarrow.compute as pc
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.expressions import In

    marks = staged.marks(())
    sources: set[str] = set()
    for batch in marks.to_batches(max_chunksize=65_536):
        sources.update(pc.unique(batch["source"]).to_pylist())
    for attempt in range(1, 9):
        table = iceberg_table(path)
        try:
            with table.transaction() as txn:
                if not first:  # the logs' rows replaced: deleted, then their new ones appended, one commit
                    txn.delete(In("source", sources))
                for piece in iceberg_pieces(staged):
                    txn.append(piece)
            return attempt
        except (CommitFailedException, ValidationException):
            if attempt == 8:
                raise
    return 8


def iceberg_source(path: str) -> Any:
    import pyarrow.dataset as ds

    table = iceberg_table(path)
    files = [task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()]
    return ds.dataset(files, schema=arrowed_schema(), format="parquet")


# --- the steps -----------------------------------------------------------------------------------

def step(fmt: str, name: str, path: str, sessions: int) -> None:
    """One step, in this process (its peak RSS is the step's)."""
    if name == "report":
        import duckdb

        from translator.table.summary import MEMORY_LIMIT, Filters, _summarize

        db = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "threads": min(4, os.cpu_count() or 1)})
        db.register("runs_table", delta_source(path) if fmt == "delta" else iceberg_source(path))
        summary = _summarize(db, "runs_table", Filters(None, None, None))
        assert summary is not None
        print(summary.totals["runs"])
        return
    logs, generation = chosen(name, sessions)
    started = time.perf_counter()
    staged = staged_rows(logs, generation)
    staging = time.perf_counter() - started
    try:
        tries = delta_write(path, staged) if fmt == "delta" else iceberg_write(path, staged, first=name == "batch")
    finally:
        staged.close()
    print(f"{staging:.2f} {time.perf_counter() - started - staging:.2f} {tries}")


def child(fmt: str, name: str, path: str, sessions: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, "--step", name, "--format", fmt, "--path", path,
                             "--sessions", str(sessions)], stdout=subprocess.PIPE)


def waited(proc: subprocess.Popen[bytes]) -> tuple[float, str]:
    """(peak RSS in MiB, stdout) of a finished step."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = proc.stdout.read().decode() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"a step failed ({proc.args})")
    return usage.ru_maxrss / 1024, out


def files_of(path: str) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in Path(path).rglob("*") if p.is_file()}


def written(before: dict[str, float], path: str) -> str:
    after = files_of(path)
    new = [p for p, m in after.items() if before.get(p) != m]
    data = [p for p in new if p.endswith(".parquet")]
    return f"{len(data)} data files and {len(new) - len(data)} others written"


def rows_now(fmt: str, path: str) -> int:
    proc = child(fmt, "report", path, 0)
    return int(waited(proc)[1].split()[-1])


def measure(fmt: str, root: Path, sessions: int) -> None:
    path = str(root / fmt)
    for name in ("batch", "touched", "one"):
        before = files_of(path) if os.path.exists(path) else {}
        rss, out = waited(child(fmt, name, path, sessions))
        staging, took, _ = out.split()
        print(f"  {fmt:<8} {name:<9} {float(took):7.2f} s  peak RSS {rss:5.0f} MiB  {written(before, path)}  "
              f"(staging {float(staging):.1f} s before)  (load {os.getloadavg()[0]:.1f})", flush=True)
    writers = [child(fmt, name, path, sessions) for name in ("writer-a", "writer-b")]
    ends = [waited(w) for w in writers]
    peaks = [rss for rss, _ in ends]
    took = max(float(out.split()[1]) for _, out in ends)
    tries = [out.split()[-1] for _, out in ends]
    held, wanted = rows_now(fmt, path), expected(sessions)
    print(f"  {fmt:<8} 2 writers {took:7.2f} s  peak RSS {max(peaks):5.0f} MiB  rows {held:,} of {wanted:,}: "
          f"{'every row kept' if held == wanted else 'ROWS LOST OR DOUBLED'}"
          f"{'' if fmt == 'delta' else ', tries ' + ' and '.join(tries)}  (load {os.getloadavg()[0]:.1f})", flush=True)
    started = time.perf_counter()
    rss, _ = waited(child(fmt, "report", path, sessions))
    size = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    print(f"  {fmt:<8} report    {time.perf_counter() - started:7.2f} s  peak RSS {rss:5.0f} MiB  "
          f"(the table: {size / 1e6:.1f} MB in {sum(1 for _ in Path(path).rglob('*.parquet'))} Parquet files)  "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--formats", default="delta,iceberg")
    parser.add_argument("--step")
    parser.add_argument("--format")
    parser.add_argument("--path")
    args = parser.parse_args()
    if args.step:
        step(args.format, args.step, args.path, args.sessions)
        return 0
    root = Path(tempfile.mkdtemp(prefix="table-formats-"))
    try:
        print(f"{args.sessions:,} sessions, {expected(args.sessions):,} rows after every step; "
              f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}", flush=True)
        for fmt in args.formats.split(","):
            measure(fmt, root, args.sessions)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
