"""`--out-dir DIR`: batch replay of saved logs, one output per input, in parallel.

Inputs are files, directories searched for `*.ndjson` / `*.jsonl` (optionally gzipped), or
globs; each output mirrors its input's relative path (selection.py). Files are translated by
replay.py in a pool of worker processes (one per core by default) that die with this process;
object storage and a Dask cluster go through fleet.py instead, with the same per-file work.
"""

from __future__ import annotations

import ctypes
import errno
import multiprocessing
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from tqdm import tqdm

from translator.diagnostics import formatted, stderr
from translator.exits import EX_CANTCREAT, EX_DATAERR, EX_IOERR, EX_OSERR
from translator.object_store import TIMEOUT
from translator.shell import ledger
from translator.shell.ledger import Ledger
from translator.shell.local_disk import LocalStore, sweep_temporaries
from translator.shell.outcomes import Outcomes
from translator.shell.packing import pack
from translator.shell.replay import Done, Job, Store, shown, translate_many
from translator.shell.selection import Input, SelectionError, check_distinct, select, target_name
from translator.shell.sink import SCARCE
from translator.stdio import stop_signals

PR_SET_PDEATHSIG = 1
WINDOW = 2  # chunks in flight per worker: one translating, one queued behind it


def plan(names: list[str], lister: Any, out_dir: str | None, template: Job,
         url: Callable[[str], str] = lambda p: p) -> list[Job]:
    """One job per selected input (raises SelectionError); `url` turns a store path into what
    the store opens."""
    picked: list[Input] = select(names, lister)
    check_distinct(picked, template.format)
    if not picked:
        stderr([f"translator: warning: no *.ndjson or *.jsonl files (optionally .gz) under {' '.join(names)}"])
    return [
        replace(template, source=url(item.path), relative=item.relative, size=item.size, mtime=item.mtime,
                target=None if out_dir is None else f"{out_dir.rstrip('/')}/{target_name(item.relative, template.format)}")
        for item in picked
    ]


def up_to_date(jobs: list[Job], records: Ledger | None) -> tuple[list[Job], list[Done]]:
    """The jobs to do, and the files the output directory's records find up to date (done
    here: no worker reads anything for them; their rows stay in their records). An output that is
    another log's (a same-named log under another root, by an earlier run) is never replaced:
    a SelectionError (73) before anything is written, even with --force."""
    if records is None:
        return jobs, []
    todo, skipped = [], []
    clashes = []
    for job in jobs:
        if job.target is None:
            todo.append(job)
            continue
        relative, source = shown(job.relative), shown(job.source)
        if (owner := records.owner(relative, job.target)) not in (None, source):
            clashes.append(f"{shown(job.target)} is the output of {owner}, not of {source}")
            continue
        if job.force or not records.recorded(relative, job.target, job.key):
            todo.append(job)
        else:
            skipped.append(Done(job.relative, job.size, skipped=True, source=source))
    if clashes:
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


def prepare_out_dir(out_dir: str) -> Ledger:
    """Create the output directory (a user error, 73, if it cannot be) and clear the
    temporaries a killed run left; what its records say (its dead records removed)."""
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SelectionError(f"--out-dir {out_dir}: {exc.strerror}", EX_CANTCREAT) from exc
    outputs, paths = sweep_temporaries(out_dir)
    store = LocalStore()
    folder = f"{out_dir.rstrip('/')}/{ledger.FOLDER}"
    now = time.time_ns()
    try:
        found = ledger.read(folder, store.records(paths), now, os.getpid(), outputs)
    except OSError:  # a record that cannot be read: nothing is known, everything is made again
        return ledger.read(folder, {}, now, os.getpid(), outputs)
    store.remove(found.dead)
    return found


_progress: Any = None  # a worker's shared byte counter (set by _worker_init)
_store: Store = LocalStore()  # where a worker reads and writes (set by _worker_init)


def _worker_init(counter: Any, parent: int, store: Store) -> None:
    """Die with the parent (Linux: the kernel sends SIGKILL when it goes), leave Ctrl-C to
    it, and report progress through the shared counter."""
    global _progress, _store
    _progress, _store = counter, store
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in stop_signals():  # SIGTERM, SIGHUP: the parent's handlers are not theirs
        if signum != signal.SIGINT:
            signal.signal(signum, signal.SIG_DFL)
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent went before prctl took effect
        os._exit(1)


def _advance(n: int) -> None:
    with _progress.get_lock():
        _progress.value += n


def _work(chunk: list[Job], record: str | None) -> list[Done]:
    return translate_many(chunk, _store, _advance, record)


def run_local(jobs: list[Job], workers: int, bar: tqdm, store: Store | None = None,
              records: Ledger | None = None, came: list[int] | None = None,
              done: Outcomes | None = None) -> tuple[Outcomes, bool]:
    """Translate `jobs` in a process pool, a chunk of files per task (packing.py); at most
    WINDOW chunks per worker are in flight, and each completion is taken as it comes (a queue
    fed by the futures' callbacks), so the cost of scheduling grows with the chunks, never with
    their square. The bar follows the bytes read inside each file. A stop signal comes as a
    KeyboardInterrupt, or (`came`, from stopping(came, raising=False)) noted, seen within 0.1 s."""
    context = multiprocessing.get_context("fork")
    counter = context.Value("q", 0)
    done = Outcomes() if done is None else done
    workers = max(1, min(workers, len(jobs) or 1))
    chunks = iter(enumerate(pack(jobs, workers)))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_worker_init, initargs=(counter, os.getpid(), store or LocalStore()))
    finished: queue.SimpleQueue[tuple[list[Job], Future[list[Done]]]] = queue.SimpleQueue()
    in_flight = 0

    def submit() -> bool:
        n, chunk = next(chunks, (0, None))
        if chunk is None:
            return False
        try:
            future = pool.submit(_work, chunk, None if records is None else records.path(n))
        except BrokenProcessPool:  # a worker died: what is left fails as the chunks in flight did
            future = Future()
            future.set_exception(BrokenProcessPool())
        future.add_done_callback(lambda f: finished.put((chunk, f)))
        return True

    try:
        while in_flight < WINDOW * workers and not came and submit():
            in_flight += 1
        while in_flight and not came:
            try:
                chunk, future = finished.get(timeout=0.1)
            except queue.Empty:
                bar.update(counter.value - bar.n)
                continue
            in_flight -= 1
            try:
                results = future.result()
            except BrokenProcessPool:
                results = [Done(job.relative, job.size, error="its worker process died") for job in chunk]
            for result in results:
                report_done(result, done, len(jobs), bar)
            bar.update(counter.value - bar.n)
            in_flight += submit()
        if came:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in multiprocessing.active_children():  # the files in hand abandoned: one stuck held the exit
            worker.kill()
            worker.join()
        return done, True
    pool.shutdown()
    return done, False


def drawn() -> bool:
    """Whether the progress bar is drawn: on a terminal; not without stderr (`2>&-`: Python has
    no sys.stderr, and the batch died of it, 70, unsaid)."""
    return sys.stderr is not None and sys.stderr.isatty()


def report_done(result: Done, done: Outcomes, total: int, bar: tqdm) -> None:
    """A file is done (on a local pool or a cluster): its reports, in the log format asked
    for, above the bar; then it counts."""
    if result.diagnostics and sys.stderr is not None:  # (None: started without stderr, `2>&-`)
        bar.write(formatted(result.diagnostics, "warning"), file=sys.stderr, end="")
    bar.set_description(f"{done.files - done.skipped + 1}/{total} files")
    done.add(result)


def run(names: list[str], out_dir: str | None, workers: int, template: Job, results_table: str | None = None) -> int:
    """Translate every local file under `names` as `template` says; the exit status."""
    try:
        records = None if out_dir is None else prepare_out_dir(out_dir)
        todo, skipped = up_to_date(plan(names, LocalStore(), out_dir, template), records)
    except SelectionError as exc:
        stderr([f"translator: {exc}"])
        return exc.status
    done = Outcomes(table=results_table is not None)
    for file in skipped:
        done.add(file)
    del skipped
    started = time.monotonic()
    came: list[int] = []
    try:
        with stopping(came, raising=False), tqdm(total=sum(job.size for job in todo), unit="B", unit_scale=True,
                                                 file=sys.stderr, disable=not drawn(), desc=f"0/{len(todo)} files") as bar:
            _, interrupted = run_local(todo, workers, bar, records=records, came=came, done=done)
    except OSError as exc:  # the pool's pipes or processes: the system's resources (ulimit)
        done.close()
        if exc.errno not in (*SCARCE, errno.EAGAIN):
            raise
        stderr([f"translator: cannot start the worker processes: {exc.strerror}"])
        return EX_OSERR
    if interrupted and out_dir is not None:  # the ended workers' temporaries
        sweep_temporaries(out_dir)
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
        from translator.table import parquet as table

        try:
            if records is not None and done.up_to_date:
                for rows in records.rows(done.up_to_date):
                    done.stage(rows)
                records.release()
                done.up_to_date.clear()
            table.write(results_table, done.staged(), done.replaced, timeout)
        except OSError as exc:
            stderr([f"translator: --results-table {results_table}: {exc.strerror or exc}"])
            return EX_IOERR
        return status
    finally:
        done.close()
