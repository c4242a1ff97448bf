"""The batch's local engine: a pool of worker processes (one per core by default) that die with
this process, a chunk of files per task (packing.py), translated by replay.py.

A worker that stops (SIGSTOP, a hung disk, a read that never returns) would hold its chunk, and
the batch, for ever: each worker says in shared memory what it works on and when it last got on
with it (a file begun or done, bytes read), and one that got on with nothing for `--task-timeout`
is killed. Its chunk's files then run again each alone (a file alone that stops again fails:
`no result from a worker in S s`); the other chunks the pool lost with it run again as they were,
in a new pool. None of their outputs was committed (a chunk commits at its end), so none is
partial or doubled.
"""

from __future__ import annotations

import ctypes
import hashlib
import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Collection
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress
from typing import Any

from translator.shell.ledger import Ledger
from translator.shell.local_disk import LocalStore
from translator.shell.outcomes import Outcomes, report_done
from translator.shell.packing import pack
from translator.shell.progress import Progress
from translator.shell.replay import Done, Job, Store, translate_many
from translator.shell.stalls import TASK_TIMEOUT
from translator.stdio import stop_signals

PR_SET_PDEATHSIG = 1
WINDOW = 2  # chunks in flight per worker: one translating, one queued behind it
LOOK = 0.1  # seconds between two looks at the workers, the bar and the stop signals
GRACE = 10.0  # seconds the workers have to exit at the end (a stopped one, idle, never would)


class _Shared:
    """What the workers of one pool say in shared memory, a slot each: their pid, the task they
    work on (0: none) and when they last got on with it (time.monotonic, one clock for all)."""

    def __init__(self, context: Any, workers: int) -> None:
        self.taken = context.Value("i", 0)
        self.pids = context.Array("q", workers, lock=False)
        self.tasks = context.Array("q", workers, lock=False)
        self.beats = context.Array("d", workers, lock=False)

    def late(self, now: float, deadline: float) -> list[tuple[int, int]]:
        """(pid, task) of every worker past the deadline on its task, its slot cleared."""
        found = []
        for n in range(len(self.pids)):
            if self.tasks[n] and now - self.beats[n] >= deadline:
                found.append((self.pids[n], self.tasks[n]))
                self.tasks[n] = 0
        return found


_progress: Any = None  # a worker's shared byte counter (set by _worker_init)
_store: Store = LocalStore()  # where a worker reads and writes (set by _worker_init)
_shared: _Shared | None = None
_slot = 0


def _worker_init(counter: Any, parent: int, store: Store, shared: _Shared) -> None:
    """Die with the parent (Linux: the kernel sends SIGKILL when it goes), leave Ctrl-C to
    it, take a slot of the shared memory, and report progress through the shared counter."""
    global _progress, _store, _shared, _slot
    _progress, _store, _shared = counter, store, shared
    with shared.taken.get_lock():
        _slot = shared.taken.value
        shared.taken.value += 1
    shared.pids[_slot] = os.getpid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in stop_signals():  # SIGTERM, SIGHUP: the parent's handlers are not theirs
        if signum != signal.SIGINT:
            signal.signal(signum, signal.SIG_DFL)
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent went before prctl took effect
        os._exit(1)


def _advance(n: int) -> None:
    assert _shared is not None
    _shared.beats[_slot] = time.monotonic()
    with _progress.get_lock():
        _progress.value += n


def _work(chunk: list[Job], record: str | None, task: int) -> list[Done]:
    assert _shared is not None
    _shared.beats[_slot], _shared.tasks[_slot] = time.monotonic(), task
    try:
        return translate_many(chunk, _store, _advance, record)
    finally:
        _shared.tasks[_slot] = 0


def run_local(jobs: Collection[Job], workers: int, bar: Progress, store: Store | None = None,
              records: Ledger | None = None, came: list[int] | None = None,
              done: Outcomes | None = None, task_timeout: float = TASK_TIMEOUT) -> tuple[Outcomes, bool]:
    """Translate `jobs` in a process pool, a chunk of files per task (packing.py); at most
    WINDOW chunks per worker are in flight, and each completion is taken as it comes (a queue
    fed by the futures' callbacks), so the cost of scheduling grows with the chunks, never with
    their square. The bar follows the bytes read inside each file. A stop signal comes as a
    KeyboardInterrupt, or (`came`, from stopping(came, raising=False)) noted, seen within LOOK."""
    context = multiprocessing.get_context("fork")
    counter = context.Value("q", 0)
    done = Outcomes() if done is None else done
    workers = max(1, min(workers, len(jobs) or 1))
    chunks = iter(enumerate(pack(jobs, workers)))
    again: list[tuple[list[Job], str | int, bool]] = []  # (chunk, its record, alone after a stall) to run first
    finished: queue.SimpleQueue[tuple[Any, list[Job], Future[list[Done]], int, bool]] = queue.SimpleQueue()
    killed: set[int] = set()  # the tasks whose worker was killed past the deadline
    broken: set[ProcessPoolExecutor] = set()  # the pools that lost a worker so
    tasks = iter(range(1, 1 << 62))

    def start() -> tuple[ProcessPoolExecutor, _Shared]:
        shared = _Shared(context, workers)
        return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_init,
                                   initargs=(counter, os.getpid(), store or LocalStore(), shared)), shared

    pool, shared = start()
    in_flight = 0

    def submit() -> bool:
        chunk: list[Job] | None
        if again:
            chunk, name, alone = again.pop()
        else:
            name, chunk = next(chunks, (0, None))
            alone = False
        if chunk is None:
            return False
        task = next(tasks)
        try:
            future = pool.submit(_work, chunk, None if records is None else records.path(name), task)
        except BrokenProcessPool:  # a worker died: what is left fails as the chunks in flight did
            future = Future()
            future.set_exception(BrokenProcessPool())
        owner = pool

        def arrived(f: Future[list[Done]]) -> None:
            finished.put((owner, chunk, f, task, alone))

        future.add_done_callback(arrived)
        return True

    def stalled() -> None:
        """Every worker past the deadline killed (the pool is then broken: what it held is run again)."""
        for pid, task in shared.late(time.monotonic(), task_timeout):
            killed.add(task)
            broken.add(pool)
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    looked = time.monotonic()
    try:
        while in_flight < WINDOW * workers and not came and submit():
            in_flight += 1
        while in_flight and not came:
            try:
                owner, chunk, future, task, alone = finished.get(timeout=LOOK)
            except queue.Empty:
                owner = None
            if time.monotonic() - looked >= LOOK:
                looked = time.monotonic()
                bar.update(counter.value - bar.n)
                stalled()
            if owner is None:
                continue
            in_flight -= 1
            try:
                results = future.result()
            except BrokenProcessPool:
                if owner not in broken:
                    results = [Done(job.relative, job.size, error="its worker process died") for job in chunk]
                else:  # lost with a worker killed past the deadline: run again
                    results = _again(chunk, task in killed, alone, again, task_timeout)
                    if owner is pool:
                        pool.shutdown(wait=False, cancel_futures=True)
                        pool, shared = start()
            for result in results:
                report_done(result, done, bar)
            bar.update(counter.value - bar.n)
            while in_flight < WINDOW * workers and not came and submit():
                in_flight += 1
        if came:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in multiprocessing.active_children():  # the files in hand abandoned: one stuck held the exit
            worker.kill()
            worker.join()
        # The pool's thread ended here: CPython 3.11's exit hook (concurrent.futures.process._python_exit)
        # wakes it through a pipe that thread may be closing at that moment: EBADF, "Exception ignored" on stderr.
        pool.shutdown(wait=True)
        return done, True
    pool.shutdown(wait=False)
    ending = time.monotonic() + GRACE
    for worker in multiprocessing.active_children():  # every file's result is in: none is lost
        worker.join(max(0.0, ending - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()
    pool.shutdown(wait=True)  # the workers gone: waits for the pool's thread alone (as above)
    return done, False


def _again(chunk: list[Job], stuck: bool, alone: bool, again: list[tuple[list[Job], str | int, bool]],
           task_timeout: float) -> list[Done]:
    """A chunk a killed pool lost, put to be run again: as it was (another worker's), or its
    files each alone (the one that stalled); a file alone that stalled fails."""
    if stuck and alone:
        return [Done(job.relative, job.size, error=f"no result from a worker in {task_timeout:g} s (--task-timeout)")
                for job in chunk]
    for work in [[job] for job in chunk] if stuck else [chunk]:  # each run's record a name of its own
        digest = hashlib.sha1(f"{work[0].source}-{time.monotonic_ns()}".encode()).hexdigest()
        again.append((work, digest, stuck or alone))
    return []
