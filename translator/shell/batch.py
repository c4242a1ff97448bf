"""`--out-dir DIR`: batch replay of saved logs, one output per input, in parallel.

Inputs are files, directories searched for `*.ndjson` / `*.jsonl` (optionally gzipped), or
globs; each output mirrors its input's relative path (selection.py). Files are translated by
replay.py in a pool of worker processes (pool.py); object storage and a Dask cluster go
through fleet.py instead, with the same per-file work.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

from translator.diagnostics import stderr
from translator.exits import EX_CANTCREAT, EX_DATAERR, EX_IOERR, EX_OSERR
from translator.object_store import TIMEOUT, faults, filesystem
from translator.shell import ledger
from translator.shell.batch_listing import listed, ran
from translator.shell.batch_table import TableWriter
from translator.shell.ledger import Ledger
from translator.shell.local_disk import LocalStore, streamed, sweep_temporaries
from translator.shell.outcomes import Outcomes
from translator.shell.packing import Todo, size_of
from translator.shell.pool import run_local
from translator.shell.progress import Progress
from translator.shell.replay import Done, Job, shown
from translator.shell.selection import SelectionError, check_distinct, select, target_name
from translator.shell.sink import SCARCE
from translator.shell.stalls import TASK_TIMEOUT
from translator.stdio import stop_signals
from translator.table.delta import TableError


def planned(names: list[str], lister: Any, out_dir: str | None, template: Job,
            url: Callable[[str], str] = lambda p: p) -> Iterator[Job]:
    """One job per selected input, each made as it is taken (the listing raises SelectionError
    first; it is held on disk): no job is held per file (~0.5 KB each); `url` turns a store path
    into what the store opens."""
    picked = select(names, lister)
    check_distinct(picked, template.format)
    if not picked:
        stderr([f"translator: warning: no *.ndjson or *.jsonl files (optionally .gz) under {' '.join(names)}"])
    out = None if out_dir is None else out_dir.rstrip("/")

    def jobs() -> Iterator[Job]:
        for item in picked:
            yield template.of(url(item.path), item.relative, item.size, item.mtime,
                              None if out is None else f"{out}/{target_name(item.relative, template.format)}")

    return jobs()


def up_to_date(jobs: Iterable[Job], records: Ledger | None,
               done: Outcomes | None = None) -> tuple[Collection[Job], list[Done]]:
    """The jobs to do, and the files the output directory's records find up to date (done
    here: no worker reads anything for them; their rows stay in their records), or, given
    `done`, counted there as they are found (none held) and the jobs to do held on disk
    (packing.Todo). An output that is another log's (a same-named log under another root, by
    an earlier run) is never replaced: a SelectionError (73) before anything is written, even
    with --force."""
    todo: list[Job] | Todo = []
    skipped = []
    clashes = []
    for job in jobs:
        if done is not None and not isinstance(todo, Todo):
            todo = Todo(job)
        if records is None or job.target is None:
            todo.append(job)
            continue
        relative, source = shown(job.relative), shown(job.source)
        if (owner := records.owner(relative, job.target)) not in (None, source):
            clashes.append(f"{shown(job.target)} is the output of {owner}, not of {source}")
            continue
        if job.force or not records.recorded(relative, job.target, job.key):
            todo.append(job)
        else:
            file = Done(job.relative, job.size, skipped=True, source=source, tabled=records.in_table(relative))
            if done is None:
                skipped.append(file)
            else:
                done.add(file)
    if clashes:
        if isinstance(todo, Todo):
            todo.close()
        more = f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""
        raise SelectionError(f"--out-dir: {clashes[0]}: not overwritten{more}; give these logs another --out-dir", EX_CANTCREAT)
    return todo, skipped


def summary(done: Outcomes, elapsed: float, interrupted: bool = False, signum: int = signal.SIGINT) -> int:
    """Print the summary and failures; the exit status: 0, 65 a file's content failed, 74 a
    file could not be read or written, 128 + `signum` when interrupted."""
    failed = done.failed
    stderr(
        [f"translator: {done.translated} translated, {done.skipped} skipped (up to date), "
         f"{len(failed)} failed; {done.bytes / 1e6:.1f} MB in {elapsed:.2f} s" + (" (interrupted)" if interrupted else "")],
        "info",
    )
    stderr([f"translator: failed: {shown(d.relative)}: {d.error}" for d in failed])
    if interrupted:
        return 128 + signum
    if any(not d.data_error for d in failed):
        return EX_IOERR
    return EX_DATAERR if failed else 0


def table_name(results_table: str) -> str:
    """A results table's full path or URL: what its mark in an output directory names."""
    return results_table if "://" in results_table else os.path.abspath(results_table)


def tabled(folder: str, writer: TableWriter | None, timeout: float = TIMEOUT) -> bool | ledger.Tabled:
    """What the output directory's records folder (path or URL) knows of the table `writer`
    writes: False (no table this run), what its mark says, or True (a table, nothing known of it)."""
    if writer is None:
        return False
    name = table_name(writer.path)
    try:
        identity = writer.identity()
        data = _get(ledger.mark_name(folder, name), timeout)
    except OSError:  # none yet, or it cannot be read: nothing known, every row written again
        return True
    return ledger.tabled(data, name, identity) or True


def _mark(records: Ledger, results_table: str, identity: str | None, timeout: float) -> None:
    """The mark of the table just written (`identity`: its id, None if it was not): the rows of
    this run's records and of every record before it are there (not written, its next run
    writes them again: no harm)."""
    if identity is None:
        return
    name = table_name(results_table)
    with suppress(OSError):
        _put(ledger.mark_name(records.folder, name), ledger.mark(name, identity, records, time.time_ns()), timeout)


def _get(path: str, timeout: float) -> bytes:
    """A small file's bytes, on local disk or a store (OSError if it cannot be read)."""
    if "://" not in path:
        return Path(path).read_bytes()
    with faults(path, timeout):
        fs, bare = filesystem(path, timeout)
        return bytes(fs.cat_file(bare))


def _put(path: str, data: bytes, timeout: float) -> None:
    """A small file written whole or not at all: a store's one PUT, or LocalStore's temporary
    renamed over it once on disk."""
    if "://" not in path:
        with LocalStore().writer(path) as out:
            out.write(data)
        return
    with faults(path, timeout):
        fs, bare = filesystem(path, timeout)
        fs.pipe_file(bare, data)


def prepare_out_dir(out_dir: str, writer: TableWriter | None = None) -> Ledger:
    """Create the output directory (a user error, 73, if it cannot be) and clear the
    temporaries a killed run left (batch_listing: walked only then); what its records say (its dead records removed), and of
    what the table `writer` writes holds of them."""
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SelectionError(f"--out-dir {out_dir}: {exc.strerror}", EX_CANTCREAT) from exc
    outputs, paths = listed(out_dir)
    store = LocalStore()
    folder = f"{out_dir.rstrip('/')}/{ledger.FOLDER}"
    now = time.time_ns()
    table = tabled(folder, writer)
    try:
        found = ledger.read(folder, store.records(paths), now, os.getpid(), outputs, table)
    except OSError:  # a record that cannot be read: nothing is known, everything is made again
        return ledger.read(folder, {}, now, os.getpid(), outputs)
    store.remove(found.dead)
    return found


def run(names: list[str], out_dir: str | None, workers: int, template: Job, results_table: str | None = None,
        task_timeout: float = TASK_TIMEOUT) -> int:
    """Translate every local file under `names` as `template` says; the exit status."""
    try:
        return _run(names, out_dir, workers, template, results_table, task_timeout)
    finally:
        if out_dir is not None:
            ran(out_dir)


def _run(names: list[str], out_dir: str | None, workers: int, template: Job, results_table: str | None,
         task_timeout: float) -> int:
    done = Outcomes(None if results_table is None else TableWriter(results_table, TIMEOUT))
    try:
        records = None if out_dir is None else prepare_out_dir(out_dir, done.writer)
        todo, _ = up_to_date(planned(names, LocalStore(), out_dir, template), records, done)
    except SelectionError as exc:
        done.close()
        stderr([f"translator: {exc}"])
        return exc.status
    started = time.monotonic()
    came: list[int] = []
    try:
        size = size_of(todo)
        with stopping(came, raising=False), Progress(size, len(todo)) as bar:
            _, interrupted = run_local(todo, workers, bar, LocalStore(forget=streamed(size)), records, came, done,
                                       task_timeout)
    except OSError as exc:  # the pool's pipes or processes: the system's resources (ulimit)
        done.close()
        if exc.errno not in (*SCARCE, errno.EAGAIN):
            raise
        stderr([f"translator: cannot start the worker processes: {exc.strerror}"])
        return EX_OSERR
    if isinstance(todo, Todo):
        todo.close()
    if interrupted and out_dir is not None:  # the ended workers' temporaries
        sweep_temporaries(out_dir)[0].close()
    return finish(done, time.monotonic() - started, results_table, interrupted, came[0] if came else signal.SIGINT,
                  records=records)


@contextmanager
def stopping(came: list[int], raising: bool = True) -> Iterator[None]:
    """SIGTERM and SIGHUP (unless ignored) stop the batch as Ctrl-C does (KeyboardInterrupt):
    the files being translated are abandoned, the summary is printed, and the status is the
    signal's, which is put in `came`; before, they killed it unsaid, temporaries left behind.
    With `raising` False, Ctrl-C's too, a signal is only noted, for a loop that looks at `came`:
    an exception raised wherever the signal lands can be lost (in an at-fork hook, while the
    pool forks its workers: the batch ran on to its end, 0) or escape before the summary."""

    def stop(signum: int, frame: FrameType | None) -> None:
        came.append(signum)
        if raising:
            raise KeyboardInterrupt

    old = {signum: signal.signal(signum, stop) for signum in stop_signals() if not raising or signum != signal.SIGINT}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


def finish(done: Outcomes, elapsed: float, results_table: str | None, interrupted: bool = False,
           signum: int = signal.SIGINT, timeout: float = TIMEOUT, records: Ledger | None = None) -> int:
    """The summary, and the results table when asked for (the rows of the files up to date
    read from their records now, a record at a time); the exit status."""
    try:
        status = summary(done, elapsed, interrupted, signum)
        if results_table is None or interrupted:
            return status
        try:
            if records is not None and done.up_to_date:
                for rows in records.rows(done.up_to_date):
                    done.stage(rows)
                    if rows:  # (a file's rows, of its log: staged, it is not without rows)
                        done.replaced.discard(rows[0]["source"])
                done.up_to_date.clear()
            if records is not None:
                records.release()
            if not done.changes:  # every file up to date, its rows in the table: nothing written
                return status
            identity = done.write()
            if records is not None:
                _mark(records, results_table, identity, timeout)
        except OSError as exc:
            stderr([f"translator: --results-table {results_table}: {exc.strerror or exc}"])
            return EX_IOERR
        except TableError as exc:
            stderr([f"translator: --results-table {results_table}: {exc}"])
            return EX_DATAERR
        return status
    finally:
        done.close()
